"""benchmarks/quality/seed_table.py: the seed article's table, measured. Its quick mode runs here (toy sizes, a few
seconds a row) and the results file it writes must have every row, every column and the machine."""
from __future__ import annotations

import importlib
import json
import subprocess
import sys
from pathlib import Path
from types import SimpleNamespace

import pytest

ROOT = Path(__file__).resolve().parents[2]


def seed_table():
    sys.path.insert(0, str(ROOT / "benchmarks" / "quality"))
    try:
        return importlib.import_module("seed_table")
    finally:
        sys.path.remove(str(ROOT / "benchmarks" / "quality"))


@pytest.fixture(scope="module")
def quick_table(tmp_path_factory) -> tuple[dict, Path]:
    """One quick run of the whole table, with a small corpus folder standing in for small_parallel_enja."""
    from minitransformer.data.run_data import load_data
    from minitransformer.presets import PRESETS

    folder = tmp_path_factory.mktemp("seed-table")
    corpus = load_data(None, "en-ja", PRESETS["toy"]["corpus"], limit=30)
    enja = folder / "enja"
    enja.mkdir()
    for split in ("train", "dev", "test"):
        (enja / f"{split}.tsv").write_text("".join(f"{en}\t{ja}\n" for en, ja in corpus.pairs(split, "en-ja")),
                                           encoding="utf-8")
    committed = ROOT / "benchmarks" / "quality" / "results" / "seed_table.json"
    before = committed.stat().st_mtime_ns if committed.exists() else None
    results = folder / "out" / "seed_table.json"
    done = subprocess.run([sys.executable, str(ROOT / "benchmarks" / "quality" / "seed_table.py"), "--quick", "--results",
                           str(results), "--enja-data", str(enja)], capture_output=True, text=True, timeout=900)
    assert done.returncode == 0, done.stderr[-3000:]
    assert (committed.stat().st_mtime_ns if committed.exists() else None) == before   # the lead's file, untouched
    return json.loads(results.read_text(encoding="utf-8")), folder / "out"


@pytest.mark.slow
def test_the_quick_table_has_every_row_and_column_for_both_corpora(quick_table):
    table, out = quick_table
    module = seed_table()
    assert table["quick"] is True and set(table["corpora"]) == {"builtin", "small_parallel_enja"}
    buckets = table["settings"]["buckets"]
    assert buckets == ["1-6", "7-9", "10-12", "13+"]
    for name, corpus in table["corpora"].items():
        assert list(corpus["rows"]) == list(module.ROWS)
        vocabularies = set()
        for row, entry in corpus["rows"].items():
            (run,) = entry["runs"]
            assert run["steps"] == 3 and run["parameters"] > 0 and run["test_sentences"] > 0
            assert set(run["bleu_by_source_words"]) == set(buckets)
            assert sum(b["sentences"] for b in run["bleu_by_source_words"].values()) == run["test_sentences"]
            for key in ("test_bleu", "test_bleu_greedy", "train_target_tokens_per_s", "greedy_tokens_per_s",
                        "beam4_tokens_per_s", "step_added_mib", "cpu_minutes"):
                assert isinstance(run[key], (int, float)) and run[key] >= 0, (name, row, key)
            assert run["train_target_tokens_per_s"] > 0 and run["step_peak_mib"] > 0
            assert ("long_sentences_bleu" in run) == (name == "builtin")
            assert ("--model lstm" in run["command"]) == (row == "lstm")
            assert ("--attention-window 4" in run["command"]) == (row == "local")
            assert entry["mean"]["test_bleu"] == run["test_bleu"] and entry["mean"]["seeds"] == 1
            vocabularies.add((out / "runs" / name / f"{row}-seed0" / "tokenizer.json").read_text(encoding="utf-8"))
        assert len(vocabularies) == 1                  # one corpus, one tokenizer for every row
    cpu = table["machine"]["cpu"]
    assert cpu["model"] and "simd" in cpu and len(table["machine"]["load_average"]) == 3
    assert "openblas_kernel" in table["library"]
    assert table["seed_article"]["rows"]["lstm"]["bleu"] == 25.0


@pytest.mark.slow
@pytest.mark.parametrize("language", ["en", "ja"])
def test_every_figure_of_the_rendered_tables_is_its_results_files(quick_table, tmp_path, language):
    """The chapter's tables quote the results file through markers that tools/quoted_numbers.py checks."""
    sys.path.insert(0, str(ROOT / "tools"))
    try:
        figures = importlib.import_module("quoted_numbers")
    finally:
        sys.path.remove(str(ROOT / "tools"))
    table, out = quick_table
    document = tmp_path / "section.md"
    document.write_text(seed_table().render_markdown(table, language), encoding="utf-8")
    quotes = figures.quotes_in(document)
    # 5 rows × 12 figures on the built-in corpus (8 of quality, 4 of cost), 5 × 12 of the real corpus; the seed: 4 × 3
    assert len(quotes) == 5 * 12 + 5 * 12 + 4 * 3
    for quote in quotes:
        assert figures.render(figures.lookup(quote.file, quote.key, out), quote.text, quote.scale) == quote.text
    header = seed_table().HEADERS[language]["real"][0]
    assert header in document.read_text(encoding="utf-8")
    without = {**table, "corpora": {**table["corpora"], "small_parallel_enja": {"skipped": "not run"}}}
    rendered = seed_table().render_markdown(without, language)     # a column not measured: no table of its own
    assert header not in rendered and rendered.count(seed_table().HEADERS[language]["skipped"]) == 5


def test_a_missing_small_parallel_enja_is_skipped_with_a_note(tmp_path):
    args = SimpleNamespace(preset="small", minutes=1.0, seeds=[0], long_count=60, enja_data=str(tmp_path / "none"),
                           enja_preset="medium", enja_minutes=1.0, enja_seeds=[0])
    builtin, enja = seed_table().corpora(args)
    assert builtin["name"] == "builtin" and builtin["data"] is None
    assert enja["name"] == "small_parallel_enja" and "no such folder" in enja["skipped"]
    args.enja_data = str(tmp_path)
    assert seed_table().corpora(args)[1]["data"] == str(tmp_path.resolve())
    args.enja_minutes = 0                       # the built-in corpus only, though the folder is there
    assert "--enja-minutes 0" in seed_table().corpora(args)[1]["skipped"]


def test_the_mean_over_seeds():
    runs = [{"seed": 0, "test_bleu": 10.0, "steps": 100, "bleu_by_source_words": {"1-6": {"sentences": 3, "bleu": 4.0}},
             "final_model": "last checkpoint"},
            {"seed": 1, "test_bleu": 20.0, "steps": 120, "bleu_by_source_words": {"1-6": {"sentences": 3, "bleu": 8.0}},
             "final_model": "last checkpoint"}]
    assert seed_table().summarize(runs) == {"test_bleu": 15.0, "steps": 110.0, "bleu_by_source_words": {"1-6": 6.0},
                                            "test_bleu_sd": 7.07, "steps_sd": 14.14,
                                            "test_bleu_min": 10.0, "test_bleu_max": 20.0, "seeds": 2}


def test_two_seeds_render_mean_sd_and_n():
    """With two seeds or more a BLEU cell reads mean ± sd (n), each figure with its marker; one seed reads the mean."""
    module = seed_table()
    mean = {"test_bleu": 15.0, "test_bleu_sd": 7.07, "seeds": 2}
    results = {"settings": {"window": 4, "buckets": ["1-6"]},
               "corpora": {"builtin": {"rows": {"softmax": {"mean": mean}}}}}
    text = module.render_markdown(results)
    assert ("15.00<!-- fig seed_table.json:corpora.builtin.rows.softmax.mean.test_bleu --> ± "
            "7.07<!-- fig seed_table.json:corpora.builtin.rows.softmax.mean.test_bleu_sd --> (n = 2)") in text
    one = {"settings": {"window": 4, "buckets": ["1-6"]},
           "corpora": {"builtin": {"rows": {"softmax": {"mean": {"test_bleu": 15.0, "seeds": 1}}}}}}
    assert "±" not in module.render_markdown(one)


def test_each_row_trains_its_own_model():
    module = seed_table()
    assert module.row_flags("lstm", 4) == ["--model", "lstm"]
    assert module.row_flags("local", 3) == ["--attention", "local", "--attention-window", "3"]
    assert module.row_flags("flash", 3) == ["--attention", "flash"]
    assert set(module.SEED_ARTICLE["rows"]) <= set(module.ROWS)


def test_a_failed_run_is_kept_out_of_the_mean_and_named():
    runs = [{"seed": 0, "failed": "training failed: ..."},
            {"seed": 1, "test_bleu": 20.0, "bleu_by_source_words": {"1-6": {"sentences": 3, "bleu": 8.0}}}]
    assert seed_table().summarize(runs) == {"test_bleu": 20.0, "bleu_by_source_words": {"1-6": 8.0},
                                            "test_bleu_min": 20.0, "test_bleu_max": 20.0, "seeds": 1, "failed": 1}
    assert seed_table().summarize(runs[:1]) == {"seeds": 0, "failed": 1}


@pytest.mark.slow
def test_what_no_run_measured_reads_not_measured(quick_table):
    import copy

    table = copy.deepcopy(quick_table[0])
    table["corpora"]["builtin"]["rows"]["lstm"] = {"runs": [{"seed": 0, "failed": "x"}],
                                                   "mean": {"seeds": 0, "failed": 1}}
    table["corpora"]["small_parallel_enja"] = {"skipped": "no such folder"}
    rendered = seed_table().render_markdown(table)
    quality, cost = (line for line in rendered.splitlines() if line.startswith("| LSTM"))
    assert "<!-- fig" not in quality + cost
    assert (quality.count("not measured"), cost.count("not measured")) == (8, 4)
    assert "small_parallel_enja.rows" not in rendered and "rows.softmax.mean.test_bleu" in rendered


def test_continue_keeps_the_measured_runs_and_trains_only_the_missing_ones(tmp_path, monkeypatch):
    """The full table takes hours: --continue adds rows and seeds to a results file a few at a time, and
    refuses one that was measured with other settings or on another machine."""
    module = seed_table()
    trained = []

    def measured_run(args, corpus, row, seed, out):
        trained.append((corpus["name"], row, seed))
        return {"seed": seed, "test_bleu": 10.0 + seed, "steps": 5, "library": {"numpy": "x"},
                "bleu_by_source_words": {"1-6": {"sentences": 2, "bleu": 1.0}}}

    monkeypatch.setattr(module, "measured_run", measured_run)
    monkeypatch.setattr(module, "machine_record", lambda: {"cpu": {"model": "A", "simd": ["avx2"], "cores": 2},
                                                           "openblas_kernel": "Haswell", "load_average": [0.1]})
    results = tmp_path / "seed_table.json"

    def invoke(rows, seeds, continue_=True, minutes=1.0):
        args = SimpleNamespace(runs=str(tmp_path / "runs"), quick=False, threads=2, window=4, steps=None,
                               limit=None, warmup_steps=3, timed_steps=40, rows=rows, preset="small",
                               minutes=minutes, seeds=seeds, long_count=60, enja_data=str(tmp_path / "none"),
                               enja_preset="medium", enja_minutes=0, enja_seeds=[0], continue_=continue_)
        return module.run_table(args, results)

    invoke("softmax", [0, 1], continue_=False)
    assert trained == [("builtin", "softmax", 0), ("builtin", "softmax", 1)]
    trained.clear()
    table = invoke("lstm,softmax", [0, 1, 2])
    assert trained == [("builtin", "lstm", 0), ("builtin", "lstm", 1), ("builtin", "lstm", 2),
                       ("builtin", "softmax", 2)]                       # softmax's seeds 0 and 1 were kept
    written = json.loads(results.read_text(encoding="utf-8"))
    assert written["corpora"]["builtin"] == table["corpora"]["builtin"] and len(written["continued"]) == 1
    builtin = written["corpora"]["builtin"]
    assert list(builtin["rows"]) == ["lstm", "softmax"] and builtin["seeds"] == [0, 1, 2]   # the table's order
    assert [run["seed"] for run in builtin["rows"]["softmax"]["runs"]] == [0, 1, 2]
    assert builtin["rows"]["softmax"]["mean"]["test_bleu"] == 11.0 and written["library"] == {"numpy": "x"}
    trained.clear()
    invoke("lstm,softmax", [0, 1, 2])
    assert trained == []                                                # nothing left to measure
    before = results.read_text(encoding="utf-8")

    with pytest.raises(SystemExit, match=r"1.0 minutes.*not of small, 2.0 minutes"):
        invoke("lstm", [0], minutes=2.0)                                # another recipe: refused
    monkeypatch.setattr(module, "machine_record", lambda: {"cpu": {"model": "B", "simd": ["avx2"], "cores": 2},
                                                           "openblas_kernel": "Haswell", "load_average": [0.1]})
    with pytest.raises(SystemExit, match=r"machine cpu: .*'A'.* there, .*'B'.* now"):
        invoke("lstm", [0])                                             # another machine: refused
    assert trained == [] and results.read_text(encoding="utf-8") == before   # and the file untouched
