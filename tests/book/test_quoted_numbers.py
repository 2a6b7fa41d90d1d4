"""Every figure quoted in README.md, chapters/ and benchmarks/ (its write-ups) matches the results file that
its marker names (tools/quoted_numbers.py), and the check really fails when a quoted figure is edited."""
from __future__ import annotations

import json
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2]
sys.path.insert(0, str(ROOT / "tools"))
import quoted_numbers  # noqa: E402


def test_every_quoted_figure_matches_its_results_file():
    assert quoted_numbers.check() == []


def test_the_documents_quote_figures_from_several_results_files():
    quoted = {q.file for path in quoted_numbers.documents() for q in quoted_numbers.quotes_in(path)}
    assert {"default_run.json", "overhead.json", "small_parallel_enja_en-ja.json", "chapter_figures.json"} <= quoted


def test_each_results_file_name_is_held_by_one_group_only():
    """A marker names a results file by its name alone, so no two question groups of benchmarks/ may keep
    results files of the same name (the one the resolver would find would depend on nothing the reader sees)."""
    by_name: dict[str, list[str]] = {}
    for path in sorted((ROOT / "benchmarks").glob("*/results/*.json")):
        by_name.setdefault(path.name, []).append(path.parent.parent.name)
    assert len(by_name) > 40, "the results files moved: benchmarks/GROUP/results/NAME.json is the layout"
    assert {name: groups for name, groups in by_name.items() if len(groups) > 1} == {}
    assert not (ROOT / "benchmarks" / "results").exists(), "results files live beside their scripts' group"


def test_a_results_file_is_found_in_any_groups_folder_and_a_name_in_two_groups_is_refused(tmp_path):
    for group, value in (("speed", 1), ("quality", 2)):
        (tmp_path / group / "results").mkdir(parents=True)
        (tmp_path / group / "results" / f"{group}.json").write_text(json.dumps({"x": value}))
    assert quoted_numbers.lookup("speed.json", "x", tmp_path) == 1
    assert quoted_numbers.lookup("quality.json", "x", tmp_path) == 2
    (tmp_path / "quality" / "results" / "speed.json").write_text(json.dumps({"x": 3}))
    with pytest.raises(quoted_numbers.FigureError, match="more than one results file of that name"):
        quoted_numbers.lookup("speed.json", "x", tmp_path)


@pytest.fixture
def book(tmp_path):
    """A small copy of the repository layout: one README with markers and one results file."""
    (tmp_path / "benchmarks" / "quality" / "results").mkdir(parents=True)
    (tmp_path / "chapters").mkdir()
    (tmp_path / "benchmarks" / "quality" / "results" / "run.json").write_text(json.dumps(
        {"bleu": 96.16, "exact": 0.924, "steps": 1400, "history": [{"bleu": 58.8}, {"bleu": 93.4}]}))
    (tmp_path / "README.md").write_text(
        "BLEU **96.16**<!-- fig run.json:bleu -->, 92.4<!-- fig run.json:exact x100 --> % exact,\n"
        "1,400<!-- fig run.json:steps --> steps, last dev 93.4<!-- fig run.json:history.1.bleu -->.\n"
        "```\nin code 12.0<!-- fig run.json:nothing --> is not checked\n```\n"
        "nor in `5<!-- fig run.json:nothing -->` inline code\n\n    or 6<!-- fig run.json:nothing --> indented\n")
    return tmp_path


def test_a_faithful_copy_passes(book):
    assert quoted_numbers.check(book, book / "benchmarks") == []


@pytest.mark.parametrize("edited, original", [("96.17", "96.16"), ("92.5", "92.4"), ("1,401", "1,400"),
                                              ("93.5", "93.4")])
def test_editing_a_quoted_figure_fails_the_check(book, edited, original):
    readme = book / "README.md"
    readme.write_text(readme.read_text().replace(original, edited, 1))
    problems = quoted_numbers.check(book, book / "benchmarks")
    assert len(problems) == 1 and f"quotes {edited}" in problems[0] and f"says {original}" in problems[0]


def test_a_marker_naming_a_missing_key_or_file_fails(book):
    readme = book / "README.md"
    readme.write_text(readme.read_text() + "7<!-- fig run.json:nope --> and 8<!-- fig gone.json:x -->\n")
    problems = quoted_numbers.check(book, book / "benchmarks")
    assert any("no key 'nope'" in p for p in problems) and any("gone.json: no such results file" in p for p in problems)


def test_a_marker_that_follows_no_number_fails(book):
    readme = book / "README.md"
    readme.write_text(readme.read_text() + "about ten <!-- fig run.json:steps -->\n")
    assert any("malformed" in p for p in quoted_numbers.check(book, book / "benchmarks"))


def test_update_rewrites_a_changed_result_in_the_quoted_format(book):
    results = book / "benchmarks" / "quality" / "results" / "run.json"
    data = json.loads(results.read_text())
    data.update(bleu=95.5, exact=0.9, steps=12345)
    results.write_text(json.dumps(data))
    changed = quoted_numbers.update(book, book / "benchmarks")
    text = (book / "README.md").read_text()
    assert len(changed) == 3
    assert "**95.50**<!-- fig run.json:bleu -->" in text and "90.0<!-- fig run.json:exact x100 -->" in text
    assert "12,345<!-- fig run.json:steps -->" in text
    assert quoted_numbers.check(book, book / "benchmarks") == []


def test_record_run_copies_the_quoted_fields_of_a_run(tmp_path):
    run = tmp_path / "runs" / "enja"
    run.mkdir(parents=True)
    (run / "results.json").write_text(json.dumps(
        {"steps": 1400, "epochs": 5.28, "train_seconds": 98.0, "wall_seconds": 104.2, "test_bleu": 96.3,
         "test_exact_match": 0.93, "test_heldout_bleu": 96.7, "test_heldout_exact_match": 0.9,
         "final_model": "last checkpoint", "losses": [1.0],
         "history": [{"epoch": 1, "step": 265, "train_loss": 1.9, "dev_loss": 0.6, "dev_bleu_greedy": 58.81}]}))
    record = quoted_numbers.record_run(run, tmp_path)
    saved = json.loads((tmp_path / "default_run.json").read_text())
    assert saved == record
    assert record["test_bleu"] == 96.3 and record["step_seconds"] == 0.07 and record["epochs"] == 5.3
    assert record["history"] == [{"epoch": 1, "step": 265, "dev_bleu_greedy": 58.8}] and "losses" not in record
    assert {"cpu", "openblas_kernel", "load_average"} <= set(record["machine"])   # what the README's prose names


def test_record_run_refuses_a_folder_without_results(tmp_path):
    with pytest.raises(quoted_numbers.FigureError, match="no results.json"):
        quoted_numbers.record_run(tmp_path, tmp_path)


@pytest.mark.parametrize("value, written", [(4.1e-11, "4e-11"), (0.00513, "5.1e-3"), (8028520999891.967, "8.03·10¹²"),
                                            (3.3e18, "3.3·10¹⁸"), (2.5e-4, "2.5·10⁻⁴")])
def test_scientific_forms_are_quoted_and_compared(book, value, written):
    results = book / "benchmarks" / "quality" / "results" / "run.json"
    results.write_text(json.dumps({**json.loads(results.read_text()), "x": value}))
    readme = book / "README.md"
    readme.write_text(readme.read_text() + f"measured {written}<!-- fig run.json:x -->\n")
    assert quoted_numbers.check(book, book / "benchmarks") == []
    results.write_text(json.dumps({**json.loads(results.read_text()), "x": value * 3}))
    problems = quoted_numbers.check(book, book / "benchmarks")
    assert len(problems) == 1 and f"quotes {written}" in problems[0]


def test_a_digest_is_quoted_as_written(book):
    results = book / "benchmarks" / "quality" / "results" / "run.json"
    results.write_text(json.dumps({**json.loads(results.read_text()), "weights": "3f0a9c1b2d4e"}))
    readme = book / "README.md"
    readme.write_text(readme.read_text() + "weights 3f0a9c1b2d4e<!-- fig run.json:weights -->\n")
    assert quoted_numbers.check(book, book / "benchmarks") == []
    readme.write_text(readme.read_text().replace("3f0a9c1b2d4e", "3f0a9c1b2d4f"))
    assert "says 3f0a9c1b2d4e" in quoted_numbers.check(book, book / "benchmarks")[0]


def test_a_results_file_is_found_by_its_name_below_the_results_folder(tmp_path):
    (tmp_path / "a" / "b").mkdir(parents=True)
    (tmp_path / "a" / "b" / "heads.json").write_text('{"x": 1}')
    assert quoted_numbers.results_path("heads.json", tmp_path) == tmp_path / "a" / "b" / "heads.json"
    assert quoted_numbers.lookup("heads.json", "x", tmp_path) == 1
    (tmp_path / "a" / "heads.json").write_text('{"x": 2}')
    with pytest.raises(quoted_numbers.FigureError, match="more than one"):
        quoted_numbers.results_path("heads.json", tmp_path)
    with pytest.raises(quoted_numbers.FigureError, match="no such results file"):
        quoted_numbers.results_path("gone.json", tmp_path)


def test_a_count_is_quoted_in_millions_or_in_ten_thousands(book):
    results = book / "benchmarks" / "quality" / "results" / "run.json"
    results.write_text(json.dumps({**json.loads(results.read_text()), "parameters": 1053696}))
    readme = book / "README.md"
    readme.write_text(readme.read_text() + "a 1.05<!-- fig run.json:parameters x1e-6 --> M model, "
                                           "105<!-- fig run.json:parameters x1e-4 --> 万\n")
    assert quoted_numbers.check(book, book / "benchmarks") == []
    readme.write_text(readme.read_text().replace("1.05<", "1.06<"))
    assert "says 1.05" in quoted_numbers.check(book, book / "benchmarks")[0]


def test_a_count_of_bytes_is_quoted_in_mib(book):
    results = book / "benchmarks" / "quality" / "results" / "run.json"
    results.write_text(json.dumps({**json.loads(results.read_text()), "cache_bytes": 33554432}))
    readme = book / "README.md"
    readme.write_text(readme.read_text() + "a cache of 32<!-- fig run.json:cache_bytes xMiB --> MiB\n")
    assert quoted_numbers.check(book, book / "benchmarks") == []
    readme.write_text(readme.read_text().replace("32<", "33<"))
    assert "quotes 33, run.json:cache_bytes says 32" in quoted_numbers.check(book, book / "benchmarks")[0]


def test_a_key_that_holds_a_dot_is_found_before_a_shorter_one(tmp_path):
    """dev_bleu_by_alpha maps "0", "0.6" and "1" to scores: the marker's "0.6" is the key "0.6", not "0" then "6"."""
    (tmp_path / "r").mkdir()
    (tmp_path / "r" / "alpha.json").write_text(json.dumps(
        {"by_alpha": {"0": 1.0, "0.6": 2.0, "1": 3.0}, "curve": [{"x": 4.0}, {"x": 5.0}]}))
    assert quoted_numbers.lookup("alpha.json", "by_alpha.0.6", tmp_path) == 2.0
    assert quoted_numbers.lookup("alpha.json", "by_alpha.0", tmp_path) == 1.0
    assert quoted_numbers.lookup("alpha.json", "curve.1.x", tmp_path) == 5.0
    with pytest.raises(quoted_numbers.FigureError, match="no key 'by_alpha.0.7'"):
        quoted_numbers.lookup("alpha.json", "by_alpha.0.7", tmp_path)


def test_a_ratio_of_two_values_is_quoted_and_refused_for_a_string_or_a_zero(book):
    results = book / "benchmarks" / "quality" / "results" / "run.json"
    results.write_text(json.dumps({**json.loads(results.read_text()), "ours": 0.30, "theirs": 0.25, "zero": 0,
                                   "name": "EPYC"}))
    readme = book / "README.md"
    readme.write_text(readme.read_text() + "ours / theirs 1.20<!-- fig run.json:ours/theirs -->×\n")
    assert quoted_numbers.check(book, book / "benchmarks") == []
    results.write_text(json.dumps({**json.loads(results.read_text()), "ours": 0.33}))
    problems = quoted_numbers.check(book, book / "benchmarks")
    assert len(problems) == 1 and "quotes 1.20" in problems[0] and "says 1.32" in problems[0]
    assert quoted_numbers.update(book, book / "benchmarks") and "1.32<!-- fig" in readme.read_text()
    with pytest.raises(quoted_numbers.FigureError, match="needs two numbers"):
        quoted_numbers.lookup("run.json", "ours/name", book / "benchmarks")
    with pytest.raises(quoted_numbers.FigureError, match="denominator is 0"):
        quoted_numbers.lookup("run.json", "ours/zero", book / "benchmarks")


@pytest.fixture
def strings(book):
    """The book of `book`, with a one-line string and a sample of two lines quoted from its results file."""
    results = book / "benchmarks" / "quality" / "results" / "run.json"
    results.write_text(json.dumps({**json.loads(results.read_text()), "kind": "AVX-512 CPU; kernel SkylakeX",
                                   "samples": [{"text": "私は学生です。\n彼は先生です。"}]}, ensure_ascii=False))
    readme = book / "README.md"
    readme.write_text(readme.read_text() + "On an <!-- quote run.json:kind -->AVX-512 CPU; kernel SkylakeX"
                      "<!-- end quote --> machine:\n\n<!-- quote run.json:samples.0.text -->\n```text\n"
                      "私は学生です。\n彼は先生です。\n```\n<!-- end quote -->\n", encoding="utf-8")
    return book, results, readme


def test_a_string_is_quoted_on_one_line_or_as_a_fenced_block(strings):
    book, _, readme = strings
    assert quoted_numbers.check(book, book / "benchmarks") == []
    quotes = quoted_numbers.string_quotes_in(readme)
    assert [(q.key, q.text) for q in quotes] == [("kind", "AVX-512 CPU; kernel SkylakeX"),
                                                  ("samples.0.text", "私は学生です。\n彼は先生です。")]


@pytest.mark.parametrize("edited, original", [("kernel Haswell", "kernel SkylakeX"), ("彼は医者です。", "彼は先生です。")])
def test_editing_a_quoted_string_fails_the_check_and_update_restores_it(strings, edited, original):
    book, _, readme = strings
    faithful = readme.read_text(encoding="utf-8")
    readme.write_text(faithful.replace(original, edited), encoding="utf-8")
    problems = quoted_numbers.check(book, book / "benchmarks")
    assert len(problems) == 1 and edited in problems[0] and original in problems[0]
    assert len(quoted_numbers.update(book, book / "benchmarks")) == 1
    assert readme.read_text(encoding="utf-8") == faithful


def test_update_rewrites_a_quoted_sample_of_another_length(strings):
    book, results, readme = strings
    data = json.loads(results.read_text(encoding="utf-8"))
    data["samples"][0]["text"] = "猫が来た。\n犬も来た。\n鳥は来ない。"
    results.write_text(json.dumps(data, ensure_ascii=False), encoding="utf-8")
    assert len(quoted_numbers.check(book, book / "benchmarks")) == 1
    quoted_numbers.update(book, book / "benchmarks")
    assert "```text\n猫が来た。\n犬も来た。\n鳥は来ない。\n```\n<!-- end quote -->" in readme.read_text(encoding="utf-8")
    assert quoted_numbers.check(book, book / "benchmarks") == []


@pytest.mark.parametrize("broken, message", [
    ("<!-- quote run.json:samples.0.text -->\n私は学生です。\n<!-- end quote -->\n", "must be one fenced block"),
    ("<!-- quote run.json:kind -->AVX-512 CPU\n", "without its `<!-- end quote -->`"),
    ("<!-- quote run.json:steps -->1400<!-- end quote -->\n", "not a string"),
    ("<!-- quote run.json:nope -->x<!-- end quote -->\n", "no key 'nope'"),
])
def test_a_broken_string_quote_is_reported(strings, broken, message):
    book, _, readme = strings
    readme.write_text(readme.read_text(encoding="utf-8") + broken, encoding="utf-8")
    problems = quoted_numbers.check(book, book / "benchmarks")
    assert len(problems) == 1 and message in problems[0], problems
