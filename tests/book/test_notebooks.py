"""Every chapter notebook runs, top to bottom, in quick mode (MT_QUICK=1): the English ones in notebooks/
and the Japanese ones in notebooks/ja/.

Quick mode shrinks data and step counts so that the whole suite stays within
CI's budget; the notebooks' own gradient checks and assertions still run. A
Japanese notebook has the English one's code cells (tools/build_notebooks.py
--check proves it), so running it proves what the English run cannot: that
its setup cell finds the repository and the notebooks/ folder from
notebooks/ja/, where Jupyter starts its kernel.
"""
from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2]
NOTEBOOKS = sorted((ROOT / "notebooks").glob("*.ipynb")) + sorted((ROOT / "notebooks" / "ja").glob("*.ipynb"))
IDS = [p.relative_to(ROOT / "notebooks").with_suffix("").as_posix() for p in NOTEBOOKS]


def test_notebooks_match_their_sources():   # the build tool needs only the standard library: never skipped
    result = subprocess.run([sys.executable, str(ROOT / "tools" / "build_notebooks.py"), "--check"],
                            capture_output=True, text=True)
    assert result.returncode == 0, result.stdout + result.stderr


# Cells over the length limit written before the check existed: a notebook may have at most this many, and the
# count must fall as they are split (a notebook that improves fails until its entry is lowered).
KNOWN_LONG_CELLS = {"07-multi-head": 1, "08-positional-encoding": 1, "14-distributed": 1}


def _tools():
    sys.path.insert(0, str(ROOT / "tools"))
    import build_notebooks

    return build_notebooks


@pytest.mark.parametrize("source", sorted((ROOT / "notebooks" / "src").glob("*.py")), ids=lambda p: p.stem)
def test_every_cell_teaches_one_step(source):
    """No code cell over ~30 lines, no cell that only configures (tools/build_notebooks.py: cell_problems)."""
    tools = _tools()
    problems = tools.cell_problems(tools.parse_cells(source.read_text(encoding="utf-8")), source.name)
    configuring = [p for p in problems if "only configures" in p]
    long_cells = [p for p in problems if "only configures" not in p]
    assert not configuring, "\n".join(configuring)
    allowed = KNOWN_LONG_CELLS.get(source.stem, 0)
    assert len(long_cells) <= allowed, "\n".join(long_cells)
    assert len(long_cells) == allowed, f"{source.stem} now has {len(long_cells)} long cells: lower KNOWN_LONG_CELLS"


@pytest.mark.parametrize("cell, problem", [
    ("import os\nimport numpy as np\n\nos.environ.setdefault('OPENBLAS_NUM_THREADS', '1')", "only configures"),
    ("import os\nQUICK = os.environ.get('MT_QUICK') == '1'\nSAVE = os.getenv('MT_SAVE_FIGURES')", "only configures"),
    ("steps = 300 if QUICK else 1500\nd_model, n = (128, 64) if QUICK else (256, 128)", "only configures"),
    ("import warnings\nwarnings.filterwarnings('ignore')", "only configures"),
    ("\n".join(f"x{i} = f({i})" for i in range(31)), "a code cell of 31 lines"),
])
def test_the_cell_check_catches_infrastructure(cell, problem):    # planted failures: the check can fail
    tools = _tools()
    problems = tools.cell_problems(tools.parse_cells("# %%\n" + cell + "\n"), "planted.py")
    assert len(problems) == 1 and problem in problems[0], problems


@pytest.mark.parametrize("cell", [
    "import numpy as np\n\nimport minitransformer as mt\nfrom minitransformer.notebook_support import QUICK",
    "steps = 300 if QUICK else 1500\nlosses = train(steps)",
    "\n".join(f"x{i} = f({i})" for i in range(30)),
])
def test_the_cell_check_passes_a_lesson(cell):
    tools = _tools()
    assert tools.cell_problems(tools.parse_cells("# %%\n" + cell + "\n"), "fine.py") == []


def _execute(notebook, folder: Path, monkeypatch) -> None:
    nbclient = pytest.importorskip("nbclient")
    monkeypatch.setenv("MT_QUICK", "1")
    monkeypatch.setenv("MPLBACKEND", "Agg")
    monkeypatch.setenv("PYTHONPATH", str(ROOT) + os.pathsep + os.environ.get("PYTHONPATH", ""))
    monkeypatch.delenv("MT_SAVE_FIGURES", raising=False)
    client = nbclient.NotebookClient(notebook, timeout=600, kernel_name="python3",
                                     resources={"metadata": {"path": str(folder)}})
    client.execute()


@pytest.mark.notebook
@pytest.mark.parametrize("path", NOTEBOOKS, ids=IDS)
def test_notebook_runs(path, monkeypatch, tmp_path):
    nbformat = pytest.importorskip("nbformat")    # listed in requirements.txt; only running needs them
    _execute(nbformat.read(path, as_version=4), path.parent, monkeypatch)


@pytest.mark.notebook
def test_a_japanese_notebook_runs_its_code_from_notebooks_ja(monkeypatch, tmp_path):
    """A made-up source with twins: its Japanese notebook, started in notebooks/ja/, imports this
    repository's package and reads files relative to notebooks/ as the English code expects."""
    nbformat = pytest.importorskip("nbformat")
    sys.path.insert(0, str(ROOT / "tools"))
    from build_notebooks import render

    source = tmp_path / "99-check.py"
    source.write_text("# %% [markdown]\n# # Check\n# %% [markdown] ja\n# # 確認\n\n# %%\nimport os, pathlib\n"
                      "import minitransformer\n"
                      "print(pathlib.Path(minitransformer.__file__).resolve().parent.parent)\n"
                      "print(pathlib.Path.cwd())\n"
                      "assert pathlib.Path('../benchmarks/common.py').is_file()\n", encoding="utf-8")
    notebook = nbformat.reads(render(source, needs={}, language="ja"), as_version=4)
    assert notebook.cells[0].source == "# 確認"
    (ROOT / "notebooks" / "ja").mkdir(exist_ok=True)     # before the first translation is built
    _execute(notebook, ROOT / "notebooks" / "ja", monkeypatch)
    printed = "".join(output.get("text", "") for output in notebook.cells[-1].outputs).split("\n")
    assert printed[:2] == [str(ROOT), str(ROOT / "notebooks")], printed


# -- one list of exercises: the chapter's, copied into its notebook by tools/build_notebooks.py -------------
CHECKED_CHAPTERS = ("01-autograd", "05-layers", "06-attention", "10-training")   # every exercise says how to check it


@pytest.mark.parametrize("source", sorted((ROOT / "notebooks" / "src").glob("*.py")), ids=lambda p: p.stem)
def test_a_notebook_lists_its_chapters_exercises(source):
    """A notebook writes no exercise list of its own: its exercise cell is the chapter's section, in each language."""
    tools = _tools()
    text = source.read_text(encoding="utf-8")
    assert "# ## Exercises" not in text or tools.EXERCISES in text.split("# ## Exercises", 1)[1].split("# %%", 1)[0], \
        f"{source.name}: its exercise cell must hold the line {tools.EXERCISES} (the chapter's list), not a list of its own"
    for language, cells in tools.split_languages(tools.parse_cells(text), source.name).items():
        built = tools.with_exercises(cells, source.stem, language)
        chapter = tools.chapter_of(source.stem, language)
        if any(tools.EXERCISES in cell["source"] for cell in cells):
            numbered = [line for line in tools.chapter_exercises(source.stem, language).split("\n")
                        if line[:1].isdigit()]
            shown = "\n".join(cell["source"] for cell in built)
            assert numbered and all(line in shown for line in numbered), f"{chapter.name}'s exercises are not in {source.name}"


def test_the_exercise_list_follows_an_edited_chapter(tmp_path):
    """Planted: a chapter whose list changes changes the notebook built from the placeholder."""
    tools = _tools()
    cells = [{"cell_type": "markdown", "source": "## Exercises\n\n" + tools.EXERCISES, "line": 1}]
    built = tools.with_exercises(cells, "01-autograd", "en")[0]["source"]
    assert tools.EXERCISES not in built and "1. Extend the twenty-line `Scalar`" in built
    with pytest.raises(tools.SourceError, match="no `## Exercises` section"):
        tools.with_exercises(cells, "99-no-such-chapter", "en")


@pytest.mark.parametrize("stem", CHECKED_CHAPTERS)
@pytest.mark.parametrize("language, check", [("en", "*Check:*"), ("ja", "*確かめ方：*")])
def test_every_exercise_says_how_to_check_it(stem, language, check):
    tools = _tools()
    section = tools.chapter_exercises(stem, language).split("\n### ", 1)[0]
    items = [item for item in __import__("re").split(r"\n(?=\d+\. )", "\n" + section) if item.strip()]
    assert items, f"{stem} ({language}): no numbered exercises"
    missing = [item.strip().split("\n")[0][:60] for item in items if check not in item]
    assert not missing, f"{stem} ({language}): exercises without '{check}': {missing}"


def test_save_figure_writes_the_books_figure_only_when_asked(tmp_path, monkeypatch):
    """notebook_support.save_figure: nothing without MT_SAVE_FIGURES=1, chapters/figures/NAME with it."""
    matplotlib = pytest.importorskip("matplotlib")
    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    from minitransformer import notebook_support

    monkeypatch.setattr(notebook_support, "FIGURES", tmp_path)
    fig, ax = plt.subplots()
    ax.plot([0, 1], [1, 0])
    monkeypatch.setattr(notebook_support, "SAVE_FIGURES", False)
    assert notebook_support.save_figure(fig, "99-check.png") is None and not list(tmp_path.iterdir())
    monkeypatch.setattr(notebook_support, "SAVE_FIGURES", True)
    assert notebook_support.save_figure(fig, "99-check.png", dpi=20) == tmp_path / "99-check.png"
    assert (tmp_path / "99-check.png").read_bytes()[:8] == b"\x89PNG\r\n\x1a\n"
    plt.close(fig)
