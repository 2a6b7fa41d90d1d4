"""Every picture from the run it names (tools/captions.py): each figure has its script and its sources in
chapters/figures/sources.json, and each caption names the run or the results file it shows; a caption
whose run is gone, or that names no run, fails."""
from __future__ import annotations

import json
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2]
sys.path.insert(0, str(ROOT / "tools"))
import captions  # noqa: E402
import quoted_numbers  # noqa: E402


def test_every_figure_names_its_script_its_sources_and_its_run():
    problems = captions.check()
    assert not problems, "\n  ".join(problems)


def test_every_figure_of_a_trained_run_is_captioned_with_that_run_in_both_languages():
    sources = json.loads((ROOT / "chapters" / "figures" / "sources.json").read_text(encoding="utf-8"))
    of_a_run = {name for name, entry in sources.items() if entry.get("run")}
    assert {"11-attention.png", "12-cross-heads.png", "12-alignment-over-training.png"} <= of_a_run
    for folder in (ROOT / "chapters", ROOT / "chapters" / "ja"):
        shown = {name for path in folder.glob("*.md")
                 for _, name, caption in captions.captions(path.read_text(encoding="utf-8")) if caption}
        assert of_a_run <= shown


@pytest.fixture
def book(tmp_path):
    """A chapter with one figure of a trained run, its Japanese twin, the registry and the results file."""
    figures_dir = tmp_path / "chapters" / "figures"
    (figures_dir / "ja").mkdir(parents=True)
    (tmp_path / "chapters" / "ja").mkdir()
    (figures_dir / "make_x.py").write_text("# draws 11-x.png from heads.json\n")
    for folder in (figures_dir, figures_dir / "ja"):
        (folder / "11-x.png").write_bytes(b"png")
    (figures_dir / "sources.json").write_text(json.dumps(
        {"11-x.png": {"drawn_by": "chapters/figures/make_x.py", "from": ["heads.json"], "run": "heads.json"}}))
    results = tmp_path / "results"
    results.mkdir()
    (results / "heads.json").write_text(json.dumps({"run": {"steps": 2400, "weights": "3f0a9c1b2d4e"}}))
    caption = ("*The run of `python -m minitransformer train` (preset small, 2,400<!-- fig heads.json:run.steps --> "
               "steps, weights 3f0a9c1b2d4e<!-- fig heads.json:run.weights -->).*")
    (tmp_path / "chapters" / "11-x.md").write_text(f"# 11\n\n![heads](figures/11-x.png)\n\n{caption}\n")
    (tmp_path / "chapters" / "ja" / "11-x.md").write_text(f"# 11\n\n![ヘッド](../figures/ja/11-x.png)\n\n{caption}\n", encoding="utf-8")
    return tmp_path, results


def test_a_captioned_figure_of_a_recorded_run_passes(book):
    root, results = book
    assert captions.check(root, results) == []
    assert quoted_numbers.check(root, results) == []


def test_a_caption_naming_a_run_that_disagrees_with_its_results_fails(book):
    root, results = book
    (results / "heads.json").write_text(json.dumps({"run": {"steps": 1400, "weights": "77aa00bb11cc"}}))
    problems = quoted_numbers.check(root, results)
    assert len(problems) == 4 and any("says 1,400" in p for p in problems) and any("77aa00bb11cc" in p for p in problems)


def test_a_caption_naming_a_run_whose_results_are_gone_fails(book):
    root, results = book
    (results / "heads.json").unlink()
    problems = captions.check(root, results)
    assert any("heads.json: no such results file" in p for p in problems)
    assert any("no such results file" in p for p in quoted_numbers.check(root, results))


@pytest.mark.parametrize("caption, expected", [
    ("*Every head of the default model.*", "does not name its run"),
    ("", "has no caption"),
    ("Every head of the default model.", "has no caption"),            # not in italics: not a caption
])
def test_a_caption_that_names_no_run_fails(book, caption, expected):
    root, results = book
    chapter = root / "chapters" / "ja" / "11-x.md"
    chapter.write_text(f"# 11\n\n![ヘッド](../figures/ja/11-x.png)\n\n{caption}\n", encoding="utf-8")
    problems = captions.check(root, results)
    assert problems and all("chapters/ja/11-x.md:3" in p for p in problems) and any(expected in p for p in problems)


def test_a_figure_missing_from_the_registry_or_not_drawn_by_its_script_fails(book):
    root, results = book
    (root / "chapters" / "figures" / "12-y.png").write_bytes(b"png")
    (root / "chapters" / "figures" / "make_x.py").write_text("# draws nothing\n")
    problems = captions.check(root, results)
    assert any("12-y.png: not in chapters/figures/sources.json" in p for p in problems)
    assert any("does not draw it" in p for p in problems) and any("does not read heads.json" in p for p in problems)


def test_a_computed_figure_says_why_and_a_vague_caption_of_it_fails(book):
    root, results = book
    registry = root / "chapters" / "figures" / "sources.json"
    registry.write_text(json.dumps({"11-x.png": {"drawn_by": "chapters/figures/make_x.py", "from": "computed"}}))
    chapter = root / "chapters" / "11-x.md"
    chapter.write_text("# 11\n\n![x](figures/11-x.png)\n\n*The default run's heads.*\n")
    problems = captions.check(root, results)
    assert any("says why" in p for p in problems) and any("names no run" in p for p in problems)
