"""benchmarks/quality/small_parallel_enja.py: the real-corpus recipe, one run per seed. What the chapters may
claim rests on the spread between seeds, so the summary (mean, sample sd, n) is checked against statistics,
--continue must keep what a results file holds and refuse one of another recipe, and a toy series (later) runs
the whole pipeline on a corpus folder made from the built-in grammar."""
from __future__ import annotations

import importlib
import json
import statistics
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2]


def recipe():
    sys.path.insert(0, str(ROOT / "benchmarks" / "quality"))
    try:
        return importlib.import_module("small_parallel_enja")
    finally:
        sys.path.remove(str(ROOT / "benchmarks" / "quality"))


def test_summary_is_mean_sample_sd_and_count():
    runs = [{"seed": s, "steps": steps, "test_bleu": bleu, "test_bleu_greedy": bleu - 1}
            for s, steps, bleu in ((0, 7000, 37.22), (1, 7100, 36.10), (2, 6900, 38.01))]
    summary = recipe().summarize(runs)
    assert summary["n"] == 3 and summary["seeds"] == [0, 1, 2]
    bleus = [37.22, 36.10, 38.01]
    assert summary["test_bleu"]["mean"] == round(statistics.fmean(bleus), 2)
    assert summary["test_bleu"]["sd"] == round(statistics.stdev(bleus), 2)
    assert (summary["test_bleu"]["min"], summary["test_bleu"]["max"]) == (36.10, 38.01)
    assert summary["steps"]["sd"] == round(statistics.stdev([7000, 7100, 6900]), 2)
    assert "alpha" not in summary            # a figure no run has is left out, not reported as 0


def test_one_run_has_no_spread():
    summary = recipe().summarize([{"seed": 0, "steps": 10, "test_bleu": 30.0}])
    assert summary["test_bleu"] == {"mean": 30.0, "sd": None, "n": 1, "min": 30.0, "max": 30.0}


def _fresh(module, **changes) -> dict:
    table = {"command": "c", "preset": "medium", "direction": "en-ja", "minutes": 60.0, "data": "small_parallel_enja",
             "extra": [], "machine": {"cpu": {"model": "X", "simd": ["avx2"]}}, "runs": []}
    table.update(changes)
    return table


def test_continue_keeps_the_runs_it_holds(tmp_path):
    module = recipe()
    path = tmp_path / "spe.json"
    path.write_text(json.dumps(_fresh(module, runs=[{"seed": 0, "test_bleu": 37.0}])), encoding="utf-8")
    table = module.continued(_fresh(module, command="again"), path)
    assert table["runs"] == [{"seed": 0, "test_bleu": 37.0}]
    assert table["continued"][0]["command"] == "again"
    assert module.continued(_fresh(module), tmp_path / "none.json")["runs"] == []


@pytest.mark.parametrize("change, named", [({"minutes": 30.0}, "minutes"), ({"direction": "ja-en"}, "direction"),
                                           ({"machine": {"cpu": {"model": "Y", "simd": ["avx2"]}}}, "CPU")])
def test_continue_refuses_another_recipe_or_cpu(tmp_path, change, named):
    module = recipe()
    path = tmp_path / "spe.json"
    path.write_text(json.dumps(_fresh(module, runs=[{"seed": 0}])), encoding="utf-8")
    with pytest.raises(SystemExit, match=named):
        module.continued(_fresh(module, **change), path)


def test_bad_seeds_are_refused(capsys):
    with pytest.raises(SystemExit):
        recipe().main(["--seeds", "a,b"])
    assert "--seeds" in capsys.readouterr().err


@pytest.mark.later
def test_a_toy_series_keeps_every_seed(tmp_path):
    """Two seeds of a toy recipe on a corpus folder from the built-in grammar, then --continue with a third
    that is already there: nothing is trained again, and the file holds each run with its signature."""
    from minitransformer.data.run_data import load_data
    from minitransformer.presets import PRESETS

    corpus = load_data(None, "en-ja", PRESETS["toy"]["corpus"], limit=40)
    data = tmp_path / "corpus"
    data.mkdir()
    for split in ("train", "dev", "test"):
        (data / f"{split}.tsv").write_text("".join(f"{en}\t{ja}\n" for en, ja in corpus.pairs(split, "en-ja")),
                                           encoding="utf-8")
    module = recipe()
    results = tmp_path / "spe.json"
    common = ["--data", str(data), "--runs", str(tmp_path / "runs"), "--results", str(results), "--preset", "toy",
              "--minutes", "5", "--extra", "--steps", "3"]
    assert module.main(["--seeds", "0,1", *common]) == 0
    table = json.loads(results.read_text(encoding="utf-8"))
    assert [run["seed"] for run in table["runs"]] == [0, 1]
    assert all(run["recipe"]["seed"] == run["seed"] for run in table["runs"])
    assert all(run["bleu_signature"].startswith("nrefs:1|") for run in table["runs"])
    assert table["summary"]["n"] == 2 and table["summary"]["test_bleu"]["sd"] is not None
    assert module.main(["--seeds", "1", "--continue", *common]) == 0
    assert json.loads(results.read_text(encoding="utf-8"))["runs"] == table["runs"]
