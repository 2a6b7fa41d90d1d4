"""One command regenerates every results file and figure the book quotes (tools/regenerate.py): every
quoted results file has a step that writes it, or is a record of an earlier run kept as measured; every
step has a quick variant or says why not; and the quick run goes through end to end, writing nothing in
the repository (`later`: CI runs it after the README's test command)."""
from __future__ import annotations

import fnmatch
import subprocess
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2]
sys.path.insert(0, str(ROOT / "tools"))
import quoted_numbers  # noqa: E402
import regenerate  # noqa: E402


def quoted_files() -> set[str]:
    return {q.file for path in quoted_numbers.documents() for q in quoted_numbers.quotes_in(path)}


def written_by_a_step(name: str) -> bool:
    for step in regenerate.STEPS:
        text = step.writes + " " + step.command
        if name in text or any(fnmatch.fnmatch(name, word.strip(",()")) for word in text.split() if "*" in word):
            return True
    return False


def test_every_results_file_the_book_quotes_has_a_step_or_is_a_kept_record():
    orphans = sorted(f for f in quoted_files() if not written_by_a_step(f) and f not in regenerate.RECORDS)
    assert not orphans, f"no step of tools/regenerate.py writes {orphans}, and they are not listed as RECORDS"
    stale = sorted(set(regenerate.RECORDS) - quoted_files())
    assert not stale, f"RECORDS lists {stale}, which the book no longer quotes"


def test_every_figure_script_is_run_by_the_figures_step():
    import json
    sources = json.loads((ROOT / "chapters" / "figures" / "sources.json").read_text(encoding="utf-8"))
    commands = " ".join(step.command for step in regenerate.STEPS)
    for name, entry in sources.items():
        script = entry["drawn_by"]
        if script.startswith("notebooks/"):
            script = "chapters/figures/make_ja.py"           # draws the notebooks' figures, in both languages
        assert script in commands, f"{name} is drawn by {script}, which no step of tools/regenerate.py runs"


def test_every_step_has_a_quick_variant_or_says_why_not():
    for step in regenerate.STEPS:
        assert step.quick or len(step.why_no_quick) > 20, step.name
        assert step.minutes > 0 and step.writes


def test_the_list_gives_each_step_and_the_total_time(capsys):
    assert regenerate.main(["--list"]) == 0
    out = capsys.readouterr().out
    assert all(step.name in out for step in regenerate.STEPS) and "total" in out and "hours" in out
    assert regenerate.main(["--list", "--deterministic"]) == 0
    deterministic = capsys.readouterr().out
    assert "heads" in deterministic and "table3 " not in deterministic


def test_an_unknown_step_is_refused():
    with pytest.raises(SystemExit):
        regenerate.main(["--only", "nonesuch"])


def snapshot() -> dict[str, tuple[int, int]]:
    folders = [*(ROOT / "benchmarks").glob("*/results"), ROOT / "chapters" / "figures", ROOT / "chapters"]
    return {str(p): (p.stat().st_mtime_ns, p.stat().st_size) for folder in folders for p in folder.rglob("*")
            if p.is_file()}


@pytest.mark.later
@pytest.mark.slow
def test_the_quick_regeneration_runs_every_quick_step_and_writes_nothing_in_the_repository():
    before = snapshot()
    done = subprocess.run([sys.executable, str(ROOT / "tools" / "regenerate.py"), "--quick"], cwd=ROOT,
                          capture_output=True, text=True, timeout=3600)
    assert done.returncode == 0, done.stdout[-3000:] + done.stderr[-3000:]
    assert "nothing in the repository was written" in done.stdout
    assert snapshot() == before
