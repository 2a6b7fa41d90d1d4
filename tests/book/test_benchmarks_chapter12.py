"""The chapter-12 benchmarks run: Table 3 at small scale in its --quick mode."""
from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]


def test_table3_quick_writes_every_row_with_its_seeds(tmp_path):
    out = tmp_path / "table3.json"
    env = dict(os.environ, PYTHONPATH=str(ROOT), OPENBLAS_NUM_THREADS="1")
    result = subprocess.run([sys.executable, str(ROOT / "benchmarks" / "quality" / "table3.py"), "--quick", "--seeds", "2",
                             "--out", str(out)], capture_output=True, text=True, env=env, cwd=ROOT, timeout=300)
    assert result.returncode == 0, result.stderr
    results = json.loads(out.read_text())
    assert [row["row"] for row in results["rows"]] == ["base", "A", "E", "D", "B", "C"]
    for row in results["rows"]:
        assert len(row["runs"]) == 2 and row["summary"]["seeds"] == [0, 1]
        for run in row["runs"]:
            assert run["dev_ppl"] > 1 and 0 <= run["bleu"] <= 100 and run["train_flops"] > 0
    rows = {row["label"]: row["summary"] for row in results["rows"]}
    assert rows["d_k=4"]["parameters"] < rows["base"]["parameters"]          # narrower W^Q and W^K
    assert rows["positions=learned"]["parameters"] > rows["base"]["parameters"]
    assert rows["h=1"]["parameters"] == rows["base"]["parameters"]          # constant compute (row A)
    assert "(E)" in result.stdout and "wall time" in result.stdout


def test_table3_refuses_an_unknown_row():
    env = dict(os.environ, PYTHONPATH=str(ROOT))
    result = subprocess.run([sys.executable, str(ROOT / "benchmarks" / "quality" / "table3.py"), "--quick", "--rows", "Z"],
                            capture_output=True, text=True, env=env, cwd=ROOT, timeout=120)
    assert result.returncode != 0 and "unknown rows ['Z']" in result.stderr
    labels = subprocess.run([sys.executable, str(ROOT / "benchmarks" / "quality" / "table3.py"), "--quick", "--labels", "h=3"],
                            capture_output=True, text=True, env=env, cwd=ROOT, timeout=120)
    assert labels.returncode != 0 and "unknown labels ['h=3']" in labels.stderr
