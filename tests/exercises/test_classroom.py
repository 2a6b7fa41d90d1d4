"""CI's proof of the classroom edition (TEACHING.md).

(a) The teacher's edition passes everything: that is the rest of this suite.
(b) The student edition, written to a temporary folder, imports cleanly, and
    its test suite fails exactly the tests that tests/exercise_map.json assigns
    to the exercises: no more, no fewer, each saying which exercise it needs.
(c) Every exercise can be graded: with only its solution taken out, its
    grading tests (``pytest -m ex_X tests/exercises/test_exercises.py``) fail; in the
    student edition with its solution and those of its prerequisites put back,
    they pass.
Plus the small things: malformed markers are refused, notebooks get nbgrader's
convention, the chapters list their graded exercises.

These tests skip themselves in a student edition (no solutions to check).
"""
from __future__ import annotations

import ast
import json
import os
import re
import shutil
import subprocess
import sys
import tempfile
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path

import numpy as np
import pytest

from minitransformer.exercises.edition import (FAST_FORM, NO_MISTAKES, TEACHER_BEGIN, TEACHER_ONLY, repository_files,
                                               shipped, strip_notebook, strip_python, write_edition)
from minitransformer.exercises.grading import GRADING_FILE, SUITE_ARGS, explain_failure, grading_tests, run_pytest
from minitransformer.exercises.pytest_support import load_map
from minitransformer.exercises.registry import (BEGIN, END, RAISED, ExerciseError, find_blocks, load_exercises,
                                                parse_file)

ROOT = Path(__file__).resolve().parents[2]
EXERCISES = load_exercises(ROOT)
EXERCISE_MAP = load_map(ROOT)
GRADING = grading_tests(ROOT)

pytestmark = pytest.mark.skipif(not any(e.has_solution for e in EXERCISES),
                                reason="a student edition: there are no solutions to check")


@pytest.fixture(scope="module")
def student_edition(tmp_path_factory):
    folder = tmp_path_factory.mktemp("student") / "edition"
    write_edition(ROOT, folder)
    return folder


def _environment(edition: Path) -> dict:
    environment = dict(os.environ)
    environment["PYTHONPATH"] = str(edition)
    return environment


def _suite_environment() -> dict:
    """The environment of the edition's own suite: an edition is a copy of the tracked files, so it has no
    node_modules (npm ci installs them per checkout) and no Japanese text to lint; CI's demand that textlint
    runs holds for the project's checkout, not for the copy."""
    return {name: value for name, value in os.environ.items() if name != "MT_REQUIRE_TEXTLINT"}


# -- the exercises themselves -----------------------------------------------------------------------------------
def test_there_are_at_least_15_exercises_in_at_least_8_chapters():
    assert len(EXERCISES) >= 15
    assert len({e.chapter for e in EXERCISES}) >= 8
    assert all(e.has_solution for e in EXERCISES)


NUMBER_WORDS = {word: n for n, word in enumerate(
    "zero one two three four five six seven eight nine ten eleven twelve thirteen fourteen fifteen sixteen seventeen "
    "eighteen nineteen twenty".split())}
NUMBER_WORDS.update({f"twenty-{word}": 20 + n for word, n in list(NUMBER_WORDS.items())[1:10]})
NUMBER_WORDS.update({f"thirty-{word}": 30 + n for word, n in list(NUMBER_WORDS.items())[1:10]}, thirty=30)


def test_readme_and_teaching_md_quote_the_registrys_counts():
    counts = (len(EXERCISES), len({e.chapter for e in EXERCISES}))
    def text(name: str) -> str:                 # the text a reader sees: figure markers left out
        return re.sub(r"<!--.*?-->", "", (ROOT / name).read_text(encoding="utf-8"))

    def number(word: str) -> int | None:
        return int(word) if word.isdigit() else NUMBER_WORDS.get(word.lower())

    found = re.search(r"(\d+) graded exercises in (\d+) chapters", text("README.md"))
    assert found and (int(found[1]), int(found[2])) == counts, f"README.md: the registry holds {counts}"
    found = re.search(r"([\w-]+) graded exercises, spread over (\w+)\s+chapters", text("TEACHING.md"))
    assert found and (number(found[1]), number(found[2])) == counts, f"TEACHING.md: the registry holds {counts}"


def test_solution_blocks_stay_small():
    for exercise in EXERCISES:
        for block in exercise.blocks:
            assert block.end - block.begin - 1 <= 12, f"{block.path}:{block.begin}: Exercise {exercise.id}'s block " \
                                                      "is too long for a student to write in one sitting"


def test_every_exercise_has_grading_tests_and_a_map_entry():
    assert set(EXERCISE_MAP) == {e.id for e in EXERCISES}, "run python tools/exercise_map.py"
    assert set(GRADING) == {e.id for e in EXERCISES}, f"exercises without a grading test in {GRADING_FILE}"
    for exercise in EXERCISES:
        mapped = {t.split("[")[0] for t in EXERCISE_MAP[exercise.id]}
        assert set(GRADING[exercise.id]) <= mapped, \
            f"Exercise {exercise.id}: some grading tests do not fail without it: " \
            f"{sorted(set(GRADING[exercise.id]) - mapped)} (or run python tools/exercise_map.py)"


def test_the_chapters_list_their_graded_exercises():
    for exercise in EXERCISES:
        chapter = ROOT / exercise.chapter
        if not chapter.exists():
            pytest.fail(f"Exercise {exercise.id} points at {exercise.chapter}, which does not exist")
        text = chapter.read_text(encoding="utf-8")
        assert "### Graded exercises" in text, f"{exercise.chapter} has no 'Graded exercises' section"
        assert f"-m {exercise.marker}" in text, f"{exercise.chapter} does not list Exercise {exercise.id}"


# -- the markers: what is accepted and what is refused -----------------------------------------------------
def _function(*body: str, header: str = "    # Exercise 3.1 — a title (chapters/03-cpu-gpu.md; graded by "
                                           "pytest -m ex_3_1)") -> str:
    return "\n".join(["def f(x):", "    y = x", header, "    " + BEGIN, *body, "    " + END, "    return y", ""])


def test_a_well_formed_block_is_found_and_stripped_with_its_indentation():
    text = _function("    y = 2 * x")
    [(info, block)] = parse_file(text, "minitransformer/fake.py")
    assert (info["id"], info["title"], info["marker"], block.begin, block.end) == ("3.1", "a title", "ex_3_1", 4, 6)
    student = strip_python(text, "minitransformer/fake.py")
    assert '    raise NotImplementedError("Exercise 3.1: a title — see chapters/03-cpu-gpu.md")\n' in student
    assert BEGIN not in student and "y = 2 * x" not in student and "    return y" in student
    compile(student, "student.py", "exec")


@pytest.mark.parametrize("text, complaint", [
    (_function("    y = 1").replace("    " + END + "\n", ""), "never closed"),
    (_function("    y = 1", header="    # just a comment"), "without an exercise header"),
    (_function("    y = 1", header="    # Exercise 3.1 — a title (chapters/03-cpu-gpu.md; graded by pytest -m ex_3_2)"),
     "must be graded by marker ex_3_1"),
    ("# Exercise 3.1 — t (chapters/03-cpu-gpu.md; graded by pytest -m ex_3_1)\n" + BEGIN + "\nX = 1\n" + END + "\n",
     "not inside a function body"),
    (_function("    " + BEGIN, "    y = 1"), "a second"),
])
def test_malformed_blocks_are_refused_with_file_and_line(text, complaint):
    with pytest.raises(ExerciseError, match=complaint) as error:
        parse_file(text, "minitransformer/fake.py")
    assert "minitransformer/fake.py:" in str(error.value)


def test_a_fast_form_of_an_exercise_leaves_the_student_edition_and_its_class_inherits_the_plain_form():
    text = ("class Fast(Plain):\n    \"\"\"doc\"\"\"\n\n    " + FAST_FORM + " 5.1\n    def backward(self, gy):\n"
            "        return gy\n    ### END FAST " + "FORM\n\n\nx = 1\n")
    student = strip_python(text, "minitransformer/fast/x.py")
    assert "def backward" not in student and FAST_FORM not in student
    assert "    pass  # the plain form of Exercise 5.1 runs here" in student and student.endswith("\n\n\nx = 1\n")
    assert strip_python(text, "minitransformer/fast/x.py", remove={"4.1"}) == text   # another exercise's edition
    with pytest.raises(ExerciseError, match="never closed"):
        strip_python(text.replace("    ### END FAST " + "FORM\n", ""), "minitransformer/fast/x.py")


def test_marker_lines_inside_strings_are_not_blocks():
    text = f'def f():\n    """Example:\n\n    {BEGIN}\n    {END}\n    """\n    return 1\n'
    assert find_blocks(text) == []


def test_notebooks_get_nbgraders_convention():
    notebook = {"cells": [
        {"cell_type": "markdown", "metadata": {}, "source": ["Why?\n", BEGIN + "\n", "Because.\n", END + "\n"]},
        {"cell_type": "code", "metadata": {}, "execution_count": None, "outputs": [],
         "source": ["def f(x):\n", "    " + BEGIN + "\n", "    return 2 * x\n", "    " + END + "\n", "f(1)"]},
        {"cell_type": "code", "metadata": {}, "execution_count": None, "outputs": [], "source": ["print(1)"]}],
        "metadata": {}, "nbformat": 4, "nbformat_minor": 5}
    text = json.dumps(notebook, indent=1) + "\n"
    stripped = json.loads(strip_notebook(text, "notebooks/x.ipynb"))
    cells = ["".join(cell["source"]) for cell in stripped["cells"]]
    assert cells[0] == "Why?\nYOUR ANSWER HERE\n"
    assert cells[1] == "def f(x):\n    # YOUR CODE HERE\n    raise NotImplementedError()\nf(1)"
    assert cells[2] == "print(1)"
    assert strip_notebook(text, "notebooks/x.ipynb", remove={"5.1"}) == text   # partial editions keep notebooks
    source = "# %%\ndef f(x):\n    " + BEGIN + "\n    return 2 * x\n    " + END + "\n"
    assert strip_python(source, "notebooks/src/x.py") == \
        "# %%\ndef f(x):\n    # YOUR CODE HERE\n    raise NotImplementedError()\n"


def test_a_gradcheck_failure_is_explained_in_words():
    message = ("GradcheckError: gradient of input 0 (x) with shape (2, 3) is wrong at 6 of 6 positions; worst at "
               "index (1, 2): analytic 0.5, numeric 0.25 (|difference| 0.25 > atol 1e-05 + rtol 0.001 × |numeric|)")
    explained = explain_failure(message)
    assert "input 0 (x)" in explained and "your backward gives 0.5" in explained and "off by 0.25" in explained


def test_an_unsolved_exercise_behind_gradchecks_backward_failed_is_named_as_unsolved():
    """gradcheck knows nothing of the classroom: a backward that raises is a BackwardFailed with the error as
    its cause. The classroom looks behind it, so the pytest report (tests/conftest.py), the grader's reading of
    a failure message and the hidden cases' record all name the exercise that is not solved yet."""
    import minitransformer as mt
    from minitransformer.exercises.cases import describe_error
    from minitransformer.exercises.grading import unsolved_exercise
    from minitransformer.exercises.registry import unsolved_in

    class Unsolved(mt.Function):
        def forward(self, x):
            return x * 2

        def backward(self, gy):
            raise NotImplementedError("Exercise 5.1: layer-norm backward — see chapters/05-layers.md")

    with pytest.raises(mt.GradcheckError) as caught:
        mt.gradcheck(lambda t: Unsolved()(t), [mt.Tensor(np.ones(3), requires_grad=True)])
    assert unsolved_in(caught.value) is caught.value.__cause__
    described = describe_error(caught.value)
    assert described["type"] == "NotImplementedError" and described["exercise"] == "5.1"
    assert unsolved_exercise(f"{type(caught.value).__name__}: {caught.value}") == "5.1"
    assert unsolved_in(ValueError("Exercise 5.1: no")) is None and unsolved_in(NotImplementedError("later")) is None
    assert describe_error(ValueError("boom"))["exercise"] is None


def test_list_command_names_every_exercise_and_marker():
    result = subprocess.run([sys.executable, "-m", "minitransformer.exercises", "list"], cwd=ROOT,
                            capture_output=True, text=True, env=_environment(ROOT))
    assert result.returncode == 0, result.stderr
    for exercise in EXERCISES:
        assert f"-m {exercise.marker}" in result.stdout and exercise.title in result.stdout


# -- (b) the student edition ----------------------------------------------------------------------------------
def test_the_student_edition_has_every_solution_replaced_and_everything_else_identical(tmp_path):
    student_edition = tmp_path / "edition"
    write_edition(ROOT, student_edition)
    files = [name for name in repository_files(ROOT) if shipped(name)]
    assert sorted(repository_files(student_edition)) == sorted(files)
    assert not set(repository_files(ROOT)) - set(files) - TEACHER_ONLY, "only the teacher's own files stay behind"
    changed = set()
    for name in files:
        original, copy = (ROOT / name).read_bytes(), (student_edition / name).read_bytes()
        if original != copy:
            changed.add(name)
            assert BEGIN.encode() not in copy and END.encode() not in copy, name
    marked_books = {name for name in files if name.endswith(".md") and
                    "\n<!-- BEGIN SOLUTION" in (ROOT / name).read_text(encoding="utf-8")}
    fast_forms = {name for name in files if name.endswith(".py") and
                  FAST_FORM in (ROOT / name).read_text(encoding="utf-8")}
    catalogued = {name for name in files if name.endswith(".py") and
                  ("\n" + TEACHER_BEGIN) in (ROOT / name).read_text(encoding="utf-8")}   # the specs' mistakes
    assert changed == {block.path for e in EXERCISES for block in e.blocks} | marked_books | fast_forms | catalogued
    for name in fast_forms:
        assert FAST_FORM not in (student_edition / name).read_text(encoding="utf-8"), name
    assert len(catalogued) == len(EXERCISES)
    for name in catalogued:
        text = (student_edition / name).read_text(encoding="utf-8")
        assert TEACHER_BEGIN not in text and NO_MISTAKES in text, name
    for name in marked_books:
        assert "<!-- BEGIN SOLUTION" not in (student_edition / name).read_text(encoding="utf-8"), name
    for exercise in EXERCISES:
        for path in exercise.files:
            text = (student_edition / path).read_text(encoding="utf-8")
            assert f'raise NotImplementedError("{exercise.message()}")' in text
    student_exercises = load_exercises(student_edition)
    assert [(e.id, e.title, e.chapter) for e in student_exercises] == [(e.id, e.title, e.chapter) for e in EXERCISES]
    assert not any(e.has_solution for e in student_exercises)


@pytest.mark.slow
def test_the_student_edition_imports_cleanly(student_edition):
    script = ("import sys; sys.path.insert(0, 'tests')\n"
              "import minitransformer\n"
              "from package_modules import import_package\n"
              "names, skipped = import_package()\n"
              "print(minitransformer.__file__, len(names), sorted(skipped))\n")
    result = subprocess.run([sys.executable, "-c", script], cwd=student_edition, capture_output=True, text=True,
                            env=_environment(student_edition))
    assert result.returncode == 0, result.stderr
    assert result.stdout.startswith(str(student_edition)), "the edition's own package must be the one imported"


@pytest.mark.later
@pytest.mark.slow
def test_the_student_edition_fails_exactly_the_tests_of_the_exercises(student_edition):
    results, process = run_pytest(student_edition, ["-q", *SUITE_ARGS], workers=2, timeout=600,
                                  env=_suite_environment())
    assert not results["collection_errors"], results["collection_errors"]
    tests = results["tests"]
    failed = {t for t, entry in tests.items() if entry["outcome"] == "failed"}
    ran = {t for t, entry in tests.items() if entry["outcome"] != "skipped"}
    mapped = set().union(*EXERCISE_MAP.values())
    skipped_modules = tuple(module + "::" for module in results["skipped_modules"])
    vanished = sorted(t for t in mapped if t not in tests and not t.startswith(skipped_modules))
    assert not vanished, f"tests/exercise_map.json names tests that no longer exist: {vanished[:10]}; " \
                         "run python tools/exercise_map.py"
    expected = mapped & ran
    extra = sorted(failed - expected)
    assert not extra, "these tests fail in the student edition but the map gives them to no exercise (run " \
                      "python tools/exercise_map.py, or make them independent of the exercises):\n" + \
                      "\n".join(f"{t}\n    {explain_failure(tests[t]['message'])}" for t in extra[:10])
    missing = sorted(expected - failed)
    assert not missing, f"these tests should fail in the student edition but pass: {missing[:10]}; " \
                        "run python tools/exercise_map.py"
    silent = sorted(t for t in failed if not RAISED.search(tests[t]["message"]))
    assert not silent, "these tests fail without naming the exercise they need:\n" + \
                       "\n".join(f"{t}\n    {explain_failure(tests[t]['message'])}" for t in silent[:10])


# -- (c) every exercise can be graded ------------------------------------------------------------------------------
def _grading_outcomes(remove: set[str], exercise) -> dict:
    """Outcomes of the exercise's grading tests (pytest -m ex_X on them) in an edition without ``remove``."""
    with tempfile.TemporaryDirectory(prefix="mt-grading-") as scratch:
        edition = Path(scratch) / "edition"
        write_edition(ROOT, edition, remove)
        results, _ = run_pytest(edition, ["-q", "-m", exercise.marker, *GRADING[exercise.id]], timeout=300,
                                env=_suite_environment())
    assert not results["collection_errors"], results["collection_errors"]
    return results["tests"]


def _grade_one(exercise) -> list[str]:
    """Problems with grading ``exercise``: its tests must fail without it and pass with it (and prerequisites)."""
    problems = []
    if exercise.id not in GRADING:
        return [f"Exercise {exercise.id} has no grading test in {GRADING_FILE}"]
    without = _grading_outcomes({exercise.id}, exercise)
    if not without:
        return [f"Exercise {exercise.id}: -m {exercise.marker} selects none of its grading tests"]
    for test, entry in without.items():
        if entry["outcome"] != "failed" or f"Exercise {exercise.id}" not in entry["message"]:
            problems.append(f"Exercise {exercise.id}: {test} does not fail for want of it "
                            f"({entry['outcome']}: {explain_failure(entry['message'])})")
    prerequisites = {other for other, tests in EXERCISE_MAP.items()
                     if other != exercise.id and set(tests) & set(without)}
    restored = prerequisites | {exercise.id}
    with_it = _grading_outcomes({e.id for e in EXERCISES} - restored, exercise)
    for test, entry in with_it.items():
        if entry["outcome"] != "passed":
            problems.append(f"Exercise {exercise.id} (with {sorted(prerequisites)} solved): {test} "
                            f"{entry['outcome']}: {explain_failure(entry['message'])}")
    return problems


@pytest.mark.later
@pytest.mark.slow
def test_each_exercise_fails_without_its_solution_and_passes_with_it():
    with ThreadPoolExecutor(max_workers=2) as pool:
        problems = [p for found in pool.map(_grade_one, EXERCISES) for p in found]
    assert not problems, "\n".join(problems)


# -- the verdict: the right error, the right exercise ------------------------------------------------------------
def _edition_with(folder: Path, solved: set[str], replace: dict[str, tuple[str, str]]) -> Path:
    """A student edition with only ``solved`` in place, then ``replace``: path -> (old text, new text)."""
    write_edition(ROOT, folder, {e.id for e in EXERCISES} - solved)
    for path, (old, new) in replace.items():
        text = (folder / path).read_text(encoding="utf-8")
        assert old in text, f"{path} no longer holds {old!r}"
        (folder / path).write_text(text.replace(old, new), encoding="utf-8")
    return folder


MATMUL_RAISE = 'raise NotImplementedError("Exercise 2.2: MatMul backward — see chapters/02-tensors-broadcasting.md")'
MATMUL_GA = "ga = unbroadcast(gy @ b2.swapaxes(-1, -2), a2.shape).reshape(a.shape)"


@pytest.mark.slow
def test_a_backward_that_raises_is_reported_with_its_own_error(tmp_path):
    from minitransformer.exercises.grading import check

    edition = _edition_with(tmp_path / "edition", {e.id for e in EXERCISES} - {"2.2"}, {
        "minitransformer/ops/matmul.py": (MATMUL_RAISE, "ga = (gy @ b2.swapaxes(-1, -2)).reshape(3, 7)\n"
                                                        "        gb = (a2.swapaxes(-1, -2) @ gy).reshape(b.shape)")})
    verdict, text = check("2.2", edition, workers=0)
    assert not verdict.solved
    assert "your backward raised ValueError: cannot reshape array" in text, text
    assert "at minitransformer/ops/matmul.py:" in text and "reshape(3, 7)" in text, text     # the student's line
    assert "{type(error).__name__}" not in text, "the grader quoted the source line pytest echoes, not the error"


@pytest.mark.later
@pytest.mark.slow
def test_a_failure_is_blamed_on_the_exercise_whose_code_is_wrong(tmp_path):
    from minitransformer.exercises.grading import check

    # 1.1 and 2.1 right, 2.2 written with its gradient doubled: 2.2's tests fail, and only 2.2 answers for them
    edition = _edition_with(tmp_path / "edition", {"1.1", "2.1", "2.2"}, {
        "minitransformer/ops/matmul.py": (MATMUL_GA, "ga = 2 * " + MATMUL_GA.removeprefix("ga = "))})
    verdict, text = check("1.1", edition, workers=2)
    assert verdict.solved, text
    assert "test_matmul_backward_gradcheck" not in {t.split("[")[0].split("::")[-1]
                                                    for t in {**verdict.grading_failed, **verdict.dependent_failed}}
    assert "tests/exercises/test_exercises.py::test_matmul_backward_when_only_one_side_needs_it" in verdict.blamed["2.2"]
    verdict, text = check("2.2", edition, workers=0)
    assert not verdict.solved and "tests/exercises/test_exercises.py::test_matmul_backward_when_only_one_side_needs_it" \
        in verdict.grading_failed
    assert "yours is 2 × the true one" in text, text        # a constant factor is named in the verdict


def test_a_verdict_orders_exercises_as_the_book_does_and_names_what_the_code_should_not_need():
    from minitransformer.exercises.grading import Verdict, format_verdict

    div = next(e for e in EXERCISES if e.id == "1.2")
    grading = "tests/exercises/test_exercises.py::test_div_by_a_number_and_of_a_number"
    verdict = Verdict(div, waiting={"13.1": ["tests/test_x.py::test_a"], "2.1": [grading]}, grading={grading},
                      prerequisites={"1.1"})
    text = format_verdict(verdict, {"2.1": "unbroadcast", "13.1": "the online-softmax merge"})
    assert text.index("Exercise 2.1 (unbroadcast)") < text.index("Exercise 13.1")
    assert "reaches Exercise 2.1, which its reference solution does not need" in text and "requires_grad" in text
    assert "solve Exercise 2.1 first" not in text, text
    verdict.prerequisites = {"1.1", "2.1"}            # an exercise it does need: then it waits for it
    assert "solve Exercise 2.1 first" in format_verdict(verdict, {})


def test_a_planted_mutant_and_a_syntax_error_are_reported_as_what_they_are():
    from minitransformer.exercises.grading import CollectionError, _shown

    shown = _shown("tests/house/test_mutations.py::test_a_broken_backward_is_caught[Div: gb with the wrong sign]")
    assert "plants a bug on purpose, 'Div: gb with the wrong sign'" in shown
    error = CollectionError({"tests/test_x.py": 'E     File "/course/minitransformer/bleu.py", line 146\n'
                                                "E       matches = = 0\nE   SyntaxError: invalid syntax"})
    explained = error.explain()
    assert 'at File "/course/minitransformer/bleu.py", line 146' in explained and "at E" not in explained, explained
    assert explain_failure("E  backward() failed: ValueError: no", where="minitransformer/ops/matmul.py:42:  x") == \
        "your backward raised ValueError: no\n      at minitransformer/ops/matmul.py:42:  x"


def test_a_constant_factor_is_recognised_and_named():
    from minitransformer.exercises.grading import factor_in_words
    from minitransformer.exercises.pytest_results import constant_ratio

    numeric = np.array([[0.5, -1.0, 2.0], [0.0, 3.0, -0.25]])
    assert constant_ratio(2 * numeric, numeric) == pytest.approx(2.0)
    assert constant_ratio(numeric / 8 ** 0.5, numeric) == pytest.approx(8 ** -0.5)
    assert constant_ratio(numeric + 0.1, numeric) is None          # a wrong formula, not a factor
    assert constant_ratio(numeric, numeric) is None
    assert [factor_in_words(r) for r in (2.0, 0.5, 8 ** 0.5, 8 ** -0.5, -1.0, 0.37)] == \
        ["2", "1/2", "√8", "1/√8", "-1", "0.37"]


# -- the code graded is the student's own ------------------------------------------------------------------------
@pytest.mark.slow
def test_plain_pytest_grades_this_folder_even_with_another_copy_on_the_path(student_edition):
    pytest_script = Path(sys.executable).with_name("pytest")
    if not pytest_script.exists():
        pytest.skip("no pytest script next to this Python")
    environment = _environment(student_edition)
    environment["PYTHONPATH"] = str(ROOT)      # the teacher's package found first, as when it is installed
    result = subprocess.run([str(pytest_script), "-q", "-p", "no:cacheprovider", "-m", "grades_5_1",
                             "tests/exercises/test_exercises.py"], cwd=student_edition, capture_output=True, text=True,
                            env=environment)
    assert result.returncode == 1 and "Exercise 5.1" in result.stdout, result.stdout[-2000:]


@pytest.mark.slow
def test_check_names_the_folder_it_grades_and_refuses_outside_a_copy(student_edition, tmp_path):
    environment = _environment(ROOT)           # the command itself comes from the teacher's copy
    command = [sys.executable, "-m", "minitransformer.exercises", "check", "6.3"]
    outside = subprocess.run(command, cwd=tmp_path, capture_output=True, text=True, env=environment)
    assert outside.returncode != 0 and "not inside a copy of the course" in outside.stderr + outside.stdout
    inside = subprocess.run(command, cwd=student_edition / "notebooks", capture_output=True, text=True,
                            env=environment)
    assert f"grading the code in {student_edition}" in inside.stdout, inside.stdout + inside.stderr
    assert inside.returncode == 1 and "not attempted yet" in inside.stdout, inside.stdout


def test_the_stubs_say_what_to_produce_and_to_keep_the_header(tmp_path):
    edition = tmp_path / "edition"
    write_edition(ROOT, edition, {"4.3", "5.1", "6.3", "11.1"})
    decode = (edition / "minitransformer/decode.py").read_text(encoding="utf-8")
    assert "sets flat_index, flat_value" in decode and "_top_candidates" in decode and "2k" in decode
    assert "sets grad " in (edition / "minitransformer/functional/loss.py").read_text(encoding="utf-8")
    assert "returns the result" in (edition / "minitransformer/functional/masks.py").read_text(encoding="utf-8")
    normalization = (edition / "minitransformer/functional/normalization.py").read_text(encoding="utf-8")
    assert "keep the comment line above: it is how `check 5.1` finds this exercise" in normalization
    for name in ("g_weight", "g_bias", "gx"):
        assert name in normalization.split("raise NotImplementedError")[0].rsplit("# Exercise 5.1", 1)[1]
    header = next(line for line in normalization.splitlines() if line.lstrip().startswith("# Exercise 5.1"))
    (edition / "minitransformer/functional/normalization.py").write_text(normalization.replace(header + "\n", ""),
                                                                         encoding="utf-8")
    from minitransformer.exercises.grading import check

    with pytest.raises(KeyError, match="put it back"):
        check("5.1", edition)


@pytest.mark.slow
def test_a_syntax_error_in_the_students_code_gets_a_verdict_not_a_crash(tmp_path):
    edition = _edition_with(tmp_path / "edition", set(), {"minitransformer/bleu.py": (
        'raise NotImplementedError("Exercise 11.2: BLEU\'s clipped n-gram precision — see chapters/11-translator.md")',
        "matches = = 0")})
    result = subprocess.run([sys.executable, "-m", "minitransformer.exercises", "check", "11.2"], cwd=edition,
                            capture_output=True, text=True, env=_environment(edition))
    assert result.returncode == 1, result.stdout + result.stderr
    assert "Your code does not import" in result.stdout and "SyntaxError" in result.stdout, result.stdout
    assert "bleu.py" in result.stdout and "Traceback" not in result.stderr, result.stdout + result.stderr


def test_each_notebook_runs_its_own_repository_and_names_the_exercises_it_waits_for(student_edition):
    notebook = json.loads((student_edition / "notebooks/01-autograd.ipynb").read_text(encoding="utf-8"))
    setup = next("".join(c["source"]) for c in notebook["cells"] if c["cell_type"] == "code")
    environment = _environment(ROOT)           # another copy first on the path, as when the teacher's is installed
    result = subprocess.run([sys.executable, "-c", setup], cwd=student_edition / "notebooks", capture_output=True,
                            text=True, env=environment)
    assert result.returncode == 0, result.stderr
    assert f"minitransformer from {student_edition / 'minitransformer'}" in result.stdout, result.stdout
    traced = json.loads((ROOT / "notebooks/src/exercises.json").read_text(encoding="utf-8"))["notebooks"]
    assert traced["01-autograd"][:2] == ["1.1", "2.1"], "the notebook of chapter 1 no longer runs 1.1 and 2.1?"
    assert f"Not solved in this copy yet: Exercises {', '.join(traced['01-autograd'])}" in result.stdout, result.stdout


def test_a_numpy_mismatch_is_summarised_not_printed_as_arrays():
    try:
        np.testing.assert_allclose(np.arange(6.0).reshape(2, 3) * 2, np.arange(6.0).reshape(2, 3), rtol=1e-6)
    except AssertionError as error:
        text = f"{type(error).__name__}: {error}"
    explained = explain_failure("E   AssertionError: ...", exception=text, exercise_id="1.1")
    assert "Mismatched elements: 5 / 6" in explained and "Max absolute difference" in explained, explained
    assert "array(" not in explained and "ACTUAL" not in explained


# -- the student edition gives no answers away (tests/leak_proof.py) -------------------------------------------------
@pytest.mark.later
@pytest.mark.slow
def test_no_piece_of_code_in_any_file_of_the_student_edition_solves_an_exercise(student_edition, tmp_path):
    from leak_proof import find_leaks

    leaks = find_leaks(student_edition, tmp_path)
    assert not leaks, "these pieces of the student edition solve an exercise: mark a listing <!-- BEGIN SOLUTION " \
                      "X.Y --> ... <!-- END SOLUTION -->, rewrite a check so that it states no answer, or have the " \
                      "code call the exercise's own function:\n" + "\n".join(leaks)


@pytest.mark.later
@pytest.mark.slow
def test_the_leak_proof_finds_an_answer_hidden_in_a_test_and_in_a_notebook(student_edition, tmp_path):
    from leak_proof import find_leaks

    edition = tmp_path / "edition"
    shutil.copytree(student_edition, edition, ignore=shutil.ignore_patterns(".venv", "__pycache__"))
    (edition / "tests/test_planted.py").write_text(
        "def test_aer(weights, links, partners):\n"       # the AER of 12.1, written out, under other names
        "    gold = {(s, t) for t, sources in partners.items() if len(sources) == 1 for s in sources}\n"
        "    argmax = {(int(np.argmax(weights[t])), t) for t in partners}\n"
        "    linked = {(s, t) for t, sources in partners.items() for s in sources}\n"
        "    assert aer(weights, links) == 1.0 - (len(argmax & gold) + len(argmax & linked)) / (len(argmax) + "
        "len(gold))\n", encoding="utf-8")
    leaks = find_leaks(edition, tmp_path / "scratch", exercises={"12.1"})
    assert any(leak.startswith("tests/test_planted.py") for leak in leaks), leaks


def test_teaching_md_states_the_prerequisites_the_map_implies_and_retypes_no_counts():
    from minitransformer.exercises.grading import prerequisites

    needs = prerequisites(EXERCISE_MAP, GRADING)
    text = (ROOT / "TEACHING.md").read_text(encoding="utf-8")
    table = text.split("## Suggested order and prerequisites")[1].split("\n## ")[0]
    rows = {cells[0]: cells[2] for cells in ([c.strip() for c in line.strip("|").split("|")]
                                              for line in table.splitlines() if re.match(r"\| \d", line))}
    assert set(rows) == {e.id for e in EXERCISES}
    for exercise_id, prerequisite in needs.items():
        stated = set(re.findall(r"\d+\.\d+", rows[exercise_id].split("(")[0]))
        assert stated == prerequisite, f"TEACHING.md: Exercise {exercise_id} needs {sorted(prerequisite)}, " \
                                       f"the table says {sorted(stated)}"
    assert "| Tests |" not in text, "test counts change with the suite: `list` prints them"


def test_marked_listings_become_pointers_in_the_student_editions_chapters():
    from minitransformer.exercises.edition import strip_markdown

    text = ("The derivation: $g = y - t$.\n\n<!-- BEGIN SOLUTION 4.1 -->\n```python\ngx = y * (gy - s)\n```\n"
            "<!-- END SOLUTION -->\n\nMore prose.\n<!-- BEGIN SOLUTION 5.1 -->\n```python\nx = 1\n```\n"
            "<!-- END SOLUTION -->\n")
    student = strip_markdown(text, "chapters/x.md", files={"4.1": "minitransformer/functional/softmax.py"})
    assert "gx = y" not in student and "x = 1" not in student and "$g = y - t$" in student
    assert "**Exercise 4.1**" in student and "`minitransformer/functional/softmax.py`" in student
    assert "check 4.1" in student and "More prose." in student
    partial = strip_markdown(text, "chapters/x.md", remove={"5.1"})
    assert "gx = y * (gy - s)" in partial and "x = 1" not in partial
    with pytest.raises(ExerciseError, match="never closed"):
        strip_markdown(text.rsplit("<!-- END SOLUTION -->", 1)[0], "chapters/x.md")
