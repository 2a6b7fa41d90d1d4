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
