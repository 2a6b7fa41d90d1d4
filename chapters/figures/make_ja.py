"""Draw the Japanese edition's figures: chapters/figures/ja/NAME.png for every chapters/figures/NAME.png.

    python chapters/figures/make_ja.py [--run RUN_DIR] [--only NAME ...] [--workers N]

Each figure is drawn by the same code as the English one (the make_*.py scripts here, the chapter
notebooks with MT_SAVE_FIGURES=1, benchmarks/sequence_length/long_sequences.py and benchmarks/sequence_length/table1.py from their
results files); only the save is redirected, with the labels translated (minitransformer/figure_language.py).
The figures of chapters 11 and 12 need the run that heads.json records (RUN_DIR, default runs/enja:
`python benchmarks/quality/heads.py --train --run runs/enja --history runs/enja-history`); the scripts refuse
another. Timing figures are drawn from results files, never measured here, so both editions show the
same curves; the notebooks draw only seeded computations.
"""
from __future__ import annotations

import argparse
import json
import os
import runpy
import subprocess
import sys
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path

HERE = Path(__file__).resolve().parent
ROOT = HERE.parents[1]
sys.path.insert(0, str(ROOT))

from minitransformer.figure_language import saving_chapter_figures  # noqa: E402

LANGUAGE = "ja"


def scripts(run: Path) -> dict[str, list[str]]:
    """Script -> its arguments; a script that needs a finished run is left out without one."""
    found = {"make_02.py": [], "make_04_05.py": [], "make_measured.py": []}
    if (run / "results.json").is_file():
        found["make_10_11.py"] = [str(run)]
        found["make_12.py"] = [str(run)]
    else:
        found["make_10_11.py"] = [str(run)]            # draws 10-noam-schedule and says it skipped the rest
        print(f"{run}: no finished run, skipping the figures of chapters 11 and 12")
    return found


def run_script(name: str, arguments: list[str]) -> None:
    saved = sys.argv
    sys.argv = [str(HERE / name), *arguments]
    try:
        with saving_chapter_figures(LANGUAGE):
            runpy.run_path(str(HERE / name), run_name="__main__")
    finally:
        sys.argv = saved
    print(f"drew {name}'s figures in {LANGUAGE}", flush=True)


def long_sequences_figures() -> None:
    """13-memory-time.png, 13-table1.png and 13-attention-rank.png, from the results files of the scripts that measured them."""
    sys.path.insert(0, str(ROOT / "benchmarks" / "sequence_length"))
    import attention_rank  # noqa: PLC0415
    import long_sequences  # noqa: PLC0415
    import table1  # noqa: PLC0415

    long_sequences.draw(json.loads(long_sequences.RESULTS.read_text(encoding="utf-8")), long_sequences.FIGURE, LANGUAGE)
    table1.draw(json.loads(table1.RESULTS.read_text(encoding="utf-8")), table1.FIGURE, LANGUAGE)
    attention_rank.render(json.loads(attention_rank.RESULTS.read_text(encoding="utf-8")), attention_rank.FIGURE, LANGUAGE)
    print("drew 13-memory-time.png, 13-table1.png and 13-attention-rank.png from their results files", flush=True)


def notebooks_with_figures() -> list[Path]:
    return [p for p in sorted((ROOT / "notebooks" / "src").glob("*.py"))
            if any(s in p.read_text(encoding="utf-8") for s in ("../chapters/figures/", "save_figure("))]


NOTEBOOK_RUNNER = """\
import json, sys
import nbclient, nbformat
sys.path.insert(0, {tools!r})
from build_notebooks import exercise_needs, parse_cells, split_languages, to_notebook, with_setup
source = {source!r}
cells = split_languages(parse_cells(open(source, encoding="utf-8").read()), source)["en"]
text = json.dumps(to_notebook(with_setup(cells, {stem!r}, None, {language!r})))
notebook = nbformat.reads(text, as_version=4)
nbclient.NotebookClient(notebook, timeout=3000, kernel_name="python3",
                        resources={{"metadata": {{"path": {cwd!r}}}}}).execute()
"""


def run_notebook(source: Path) -> str:
    """Execute a notebook's code (full mode) with a Japanese setup cell: its chapter figures go to ja/."""
    environment = dict(os.environ, MT_SAVE_FIGURES="1", MPLBACKEND="Agg", OPENBLAS_NUM_THREADS="1",
                       PYTHONPATH=str(ROOT) + os.pathsep + os.environ.get("PYTHONPATH", ""))
    environment.pop("MT_QUICK", None)
    code = NOTEBOOK_RUNNER.format(tools=str(ROOT / "tools"), source=str(source), stem=source.stem,
                                  language=LANGUAGE, cwd=str(ROOT / "notebooks"))
    result = subprocess.run([sys.executable, "-c", code], env=environment, capture_output=True, text=True)
    if result.returncode:
        return f"{source.name}: FAILED\n{result.stderr[-3000:]}"
    return f"drew {source.name}'s figures in {LANGUAGE}"


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--run", type=Path, default=ROOT / "runs" / "enja", help="the default run (chapters 11, 12)")
    parser.add_argument("--only", nargs="*", help="make_*.py scripts, notebook sources (NN-name) or long_sequences")
    parser.add_argument("--workers", type=int, default=1, help="notebooks run side by side")
    args = parser.parse_args()
    wanted = (lambda name: args.only is None or name in args.only)
    for name, arguments in scripts(args.run).items():
        if wanted(name):
            run_script(name, arguments)
    if wanted("long_sequences"):
        long_sequences_figures()
    sources = [s for s in notebooks_with_figures() if wanted(s.stem)]
    with ThreadPoolExecutor(max(1, args.workers)) as pool:
        outcomes = list(pool.map(run_notebook, sources))
    for outcome in outcomes:
        print(outcome)
    english = {p.name for p in HERE.glob("*.png")}
    translated = {p.name for p in (HERE / LANGUAGE).glob("*.png")}
    if english - translated:
        print(f"no {LANGUAGE} version yet: {', '.join(sorted(english - translated))}")
    return 1 if any("FAILED" in o for o in outcomes) or english - translated else 0


if __name__ == "__main__":
    raise SystemExit(main())
