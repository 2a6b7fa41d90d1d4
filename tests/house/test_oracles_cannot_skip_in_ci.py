"""The torch oracle tests are the one external check on our gradients: where CI expects them to run
(MT_REQUIRE_TORCH=1, set by .ci/run), a skip for want of torch is a failure, not a quiet green."""
from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]


def _pytest_without_torch(tmp_path, *tests, require: bool) -> subprocess.CompletedProcess:
    fake = tmp_path / "no_torch" / "torch"
    fake.mkdir(parents=True)
    (fake / "__init__.py").write_text("raise ModuleNotFoundError(\"No module named 'torch'\", name='torch')\n")
    env = dict(os.environ, PYTHONPATH=os.pathsep.join([str(fake.parent), str(ROOT)]))
    env.pop("MT_REQUIRE_TORCH", None)
    if require:
        env["MT_REQUIRE_TORCH"] = "1"
    return subprocess.run([sys.executable, "-m", "pytest", "-q", "-p", "no:cacheprovider", "-p", "no:xdist",
                           "-rfEs", *tests], cwd=ROOT, env=env, capture_output=True, text=True, timeout=120)


ORACLE_FILE = "tests/ops/test_torch_oracle_ops.py"                  # importorskip at module level
ORACLE_TEST = "tests/test_optim.py::test_adam_matches_torch"     # importorskip inside a test


def test_with_the_requirement_a_missing_torch_fails_the_run(tmp_path):
    module = _pytest_without_torch(tmp_path / "a", ORACLE_FILE, require=True)
    assert module.returncode != 0, module.stdout
    assert "MT_REQUIRE_TORCH=1 but the torch oracle cannot run" in module.stdout, module.stdout
    assert module.stdout.splitlines()[-1].startswith("1 error"), module.stdout       # not "1 skipped"
    test = _pytest_without_torch(tmp_path / "b", ORACLE_TEST, require=True)
    assert test.returncode != 0, test.stdout
    assert "MT_REQUIRE_TORCH=1 but the torch oracle cannot run" in test.stdout, test.stdout
    assert test.stdout.splitlines()[-1].startswith("1 failed"), test.stdout


def test_without_the_requirement_a_missing_torch_still_skips(tmp_path):
    """On a machine without torch (a student's laptop) the oracle tests step aside, as before."""
    result = _pytest_without_torch(tmp_path, ORACLE_TEST, require=False)
    assert result.returncode == 0 and result.stdout.splitlines()[-1].startswith("1 skipped"), result.stdout
