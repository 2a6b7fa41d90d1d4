"""An exercise is one object: its spec (minitransformer/exercises/specs/ex_5_1.py), found by the registry.

Adding an exercise touches its markers, its spec and its chapter (TEACHING.md, "Adding an exercise"): a
throwaway exercise made that way in a copy of the package is found, graded and collected, and a spec
without markers or markers without a spec are refused with both named.
"""
from __future__ import annotations

import ast
import importlib.util
import json
import os
import shutil
import subprocess
import sys
import textwrap
from pathlib import Path

import pytest

from minitransformer.exercises.cases import SHARED_PROBES, find_probe, public_cases
from minitransformer.exercises.edition import NO_MISTAKES, TEACHER_BEGIN, TEACHER_END, strip_python
from minitransformer.exercises.grading import GRADING_FILE, grading_tests
from minitransformer.exercises.registry import BEGIN, END, load_exercises, load_specs, spec_path

ROOT = Path(__file__).resolve().parents[2]
MACHINERY = ["minitransformer/exercises/cases.py", "minitransformer/exercises/casebook.py",
             "minitransformer/exercises/spec.py", "minitransformer/exercises/registry.py",
             "minitransformer/exercises/mistakes.py", "tests/exercises/test_exercises.py"]


def test_every_exercise_is_one_spec_joined_with_its_markers():
    specs = load_specs()
    assert list(specs) == [e.id for e in load_exercises(ROOT)]
    assert grading_tests(ROOT) == {i: [f"{GRADING_FILE}::{t.__name__}" for t in s.tests] for i, s in specs.items()}
    for spec in specs.values():
        assert spec.tests and spec.public, spec.id
        for case in public_cases(spec.id):
            assert find_probe(case["probe"], spec.id) is not None
        assert all(name not in SHARED_PROBES for name in spec.probe_table), spec.id


def test_the_machinery_names_no_exercise():
    """The ids of exercises appear in their specs and markers only, not in the code that runs every exercise."""
    for path in MACHINERY:
        if not (ROOT / path).exists():          # mistakes.py: the teacher's edition only
            continue
        tree = ast.parse((ROOT / path).read_text(encoding="utf-8"))
        named = [node.value for node in ast.walk(tree) if isinstance(node, ast.Constant)
                 and isinstance(node.value, str) and node.value.replace(".", "", 1).isdigit() and "." in node.value]
        assert not named, f"{path} names exercises {named}: that belongs in their specs"


@pytest.mark.skipif(importlib.util.find_spec("minitransformer.exercises.mistakes") is None,
                    reason="a student edition: the specs hold no mistakes")
def test_the_student_edition_keeps_no_catalogued_mistake():
    path = spec_path("5.1")
    text = (ROOT / path).read_text(encoding="utf-8")
    student = strip_python(text, path)
    assert TEACHER_BEGIN in text and TEACHER_BEGIN not in student and NO_MISTAKES in student
    assert "mean_g" in text and "mean_g" not in student       # a mistake's edit quotes the solution's lines
    compile(student, path, "exec")


# -- a throwaway exercise, added as TEACHING.md's recipe says, in a copy --------------------------------------------
MARKED = f'''
def double(x):
    # Exercise 99.1 — doubling (chapters/05-layers.md; graded by pytest -m ex_99_1)
    {BEGIN}
    return 2 * x
    {END}
'''
SPEC = f'''
"""Exercise 99.1 — doubling: a throwaway exercise (tests/exercises/test_specs.py)."""
import numpy as np

from ..spec import ExerciseSpec, case, mistake, parametrize


@parametrize("x", [1.0, -2.5])
def test_doubling_doubles(x):
    from minitransformer.throwaway import double
    assert double(x) == 2 * x


def probe_doubling(rng, n):
    from minitransformer.throwaway import double
    return {{"twice": np.asarray(double(rng.standard_normal(n)))}}


def hidden_case(r, n, count):
    return case("random", "doubling", n=int(r.integers(2, 9)))


{TEACHER_BEGIN}
MISTAKES = (mistake("once", "double it", ("2 * x", "x")), mistake("thrice", "double it", ("2 * x", "3 * x")))
{TEACHER_END}

SPEC = ExerciseSpec("99.1", public=[case("three numbers", "doubling", n=3)], hidden=hidden_case,
                    probes=[probe_doubling], mistakes=MISTAKES)
'''
PROBE = """
import json, numpy as np
from minitransformer.exercises.cases import hidden_cases, numbered, public_cases, run_case
from minitransformer.exercises.registry import load_specs
spec = load_specs()["99.1"]
public = numbered(public_cases("99.1"), "public", 0)
print(json.dumps({"tests": [t.__name__ for t in spec.tests], "hidden": len(hidden_cases("99.1", np.random.default_rng(1))),
                  "twice": run_case(public[0])["twice"].tolist(), "mistakes": [m.name for m in spec.mistakes]}))
"""


@pytest.fixture(scope="module")
def copy(tmp_path_factory) -> Path:
    """The package, tests/conftest.py and tests/exercises/test_exercises.py, with Exercise 99.1 added: its marked
    solution (minitransformer/throwaway.py) and its spec (specs/ex_99_1.py), nothing else."""
    root = tmp_path_factory.mktemp("copy")
    shutil.copytree(ROOT / "minitransformer", root / "minitransformer",
                    ignore=shutil.ignore_patterns("__pycache__"))
    for name in ("pyproject.toml", "tests/conftest.py", "tests/exercises/test_exercises.py"):
        (root / name).parent.mkdir(parents=True, exist_ok=True)
        shutil.copy(ROOT / name, root / name)
    (root / "minitransformer/throwaway.py").write_text(textwrap.dedent(MARKED), encoding="utf-8")
    (root / spec_path("99.1")).write_text(textwrap.dedent(SPEC), encoding="utf-8")
    return root


def run_in(root: Path, *command: str) -> subprocess.CompletedProcess:
    environment = {**os.environ, "PYTHONPATH": str(root), "MPLBACKEND": "Agg"}
    return subprocess.run([sys.executable, *command], cwd=root, env=environment, capture_output=True, text=True,
                          timeout=300)


def test_a_new_exercise_is_found_graded_and_collected_from_its_markers_and_its_spec(copy):
    result = run_in(copy, "-c", PROBE)
    assert result.returncode == 0, result.stderr
    found = json.loads(result.stdout)
    assert found["tests"] == ["test_doubling_doubles"] and found["hidden"] == 8 and len(found["twice"]) == 3
    assert found["mistakes"] == ["once", "thrice"]
    assert grading_tests(copy)["99.1"] == [f"{GRADING_FILE}::test_doubling_doubles"]
    collected = run_in(copy, "-m", "pytest", "--collect-only", "-q", "-p", "no:cacheprovider", "-m", "grades_99_1",
                       GRADING_FILE)
    assert collected.returncode == 0, collected.stdout + collected.stderr
    assert f"{GRADING_FILE}::test_doubling_doubles[1.0]" in collected.stdout
    assert f"{GRADING_FILE}::test_doubling_doubles[-2.5]" in collected.stdout
    assert "2 tests collected" in collected.stdout or "2/" in collected.stdout, collected.stdout


def test_markers_without_a_spec_are_refused_naming_both(copy, tmp_path):
    lone = tmp_path / "lone"
    shutil.copytree(copy, lone)
    (lone / spec_path("99.1")).unlink()
    result = run_in(lone, "-c", "from minitransformer.exercises.registry import load_specs; load_specs()")
    assert result.returncode != 0
    assert "Exercise 99.1 is marked in the package (minitransformer/throwaway.py:3) but has no spec" in result.stderr
    assert spec_path("99.1") in result.stderr


def test_a_spec_without_markers_is_refused_naming_both(copy, tmp_path):
    lone = tmp_path / "lone"
    shutil.copytree(copy, lone)
    (lone / "minitransformer/throwaway.py").unlink()
    result = run_in(lone, "-c", "from minitransformer.exercises.registry import load_specs; load_specs()")
    assert result.returncode != 0
    assert f"{spec_path('99.1')} is the spec of Exercise 99.1, but no '# Exercise 99.1" in result.stderr
