"""The cheat suite: every cheat in tests/cheats.py scores 0 with ``grade`` and touches none of the grader's files,
while correct, wrong, blank and syntax-error submissions score full, partial, 0 and 0. Exercises 2.2 and 5.1
(backwards), 11.2, 12.1 and 13.1; a hang costs at most two case limits. (The nbgrader route's cheats:
tests/exercises/test_nbgrader.py.)

The in-process routes, ``check`` and the public grading tests (``pytest -m grades_X``), refuse a backward answered
with the engine's own autograd as ``grade`` does (tests/conftest.py, pytest_support.graded_backwards_guarded): the
cheat gives the right gradient without the guard and fails with it."""
from __future__ import annotations

import json
import os
import re
from types import SimpleNamespace

import pytest

from cheats import CONSTANT, GRADE_TARGETS, SPECIFIC, cheat_code, cheats_for
from minitransformer.exercises import sandbox
from submissions import REQUIRE_SANDBOX
from minitransformer.exercises.registry import get_exercise, load_exercises
from minitransformer.exercises.submission import NUMERICS, grade_submission
from submissions import ROOT, fingerprint_of_files, make_submission, solution_bodies

# the catalogue quotes the solutions: the teacher's edition only (a student edition skips this file)
mistakes = pytest.importorskip("minitransformer.exercises.mistakes", reason="a student edition: no catalogue")
CATALOGUE, mutate = mistakes.CATALOGUE, mistakes.mutate

pytestmark = [pytest.mark.later,
              pytest.mark.skipif(not any(e.has_solution for e in load_exercises(ROOT)),
                                 reason="a student edition: there are no solutions to grade with")]
SANDBOXED = pytest.mark.skipif(sandbox.bubblewrap_problem() is not None and not REQUIRE_SANDBOX,
                               reason=f"no sandbox here: {sandbox.bubblewrap_problem()}")
LIMITS = sandbox.Limits(cpu_seconds=15, case_seconds=3, wall_seconds=60, memory_bytes=2 * 2 ** 30)


def honest_submissions(exercise_id: str) -> dict:
    """correct, wrong (the first catalogued mistake), blank and syntax-error bodies for the exercise's stubs."""
    exercise = get_exercise(exercise_id, ROOT)
    texts = {path: (ROOT / path).read_text(encoding="utf-8") for path in exercise.files}
    wrong = mutate(texts, exercise_id, CATALOGUE[exercise_id][0])
    return {"correct": solution_bodies(exercise_id), "wrong": solution_bodies(exercise_id, wrong), "blank": None,
            "syntax-error": "x = = 1"}


@pytest.fixture(scope="module")
def cases_dir(tmp_path_factory):
    return tmp_path_factory.mktemp("casebook")


@SANDBOXED
@pytest.mark.parametrize("exercise_id", sorted(GRADE_TARGETS))
def test_every_cheat_scores_zero_and_honest_submissions_score_as_they_should(exercise_id, tmp_path, cases_dir):
    target = GRADE_TARGETS[exercise_id]
    sentinel = tmp_path / "written-by-a-submission"
    scores = {}
    for kind, code in honest_submissions(exercise_id).items():
        [score] = grade_submission(exercise_id, make_submission(tmp_path / kind, exercise_id, code), ROOT, cases_dir,
                                   limits=LIMITS).scores
        scores[kind] = (score.points, score.max_points)
    before = fingerprint_of_files(ROOT, cases_dir)
    for name in cheats_for(exercise_id):
        code = cheat_code(name, target, ROOT, cases_dir, sentinel)
        submission = make_submission(tmp_path / name.replace(" ", "-").replace("'", ""), exercise_id, code)
        grade = grade_submission(exercise_id, submission, ROOT, cases_dir, limits=LIMITS)
        [score] = grade.scores
        scores[name] = (grade.points, grade.max_points)
        assert len(score.timed_out) <= 2, f"{name}: a hang cost more than two case limits: {score.text()}"
        # every case, public ones included, has a past that an offline step loses (issue 47)
        assert grade.points == 0, f"{name}: {grade.text()}"
        if name.startswith("differentiates"):         # the small cases pass; the large one cannot finish
            assert score.note == NUMERICS and any(i.startswith("hidden") for i in score.timed_out), score.text()
        if name == "calls the engine's autograd":
            assert all("your backward built a graph" in c.why for c in score.cases), score.text()
    [score] = grade_submission(exercise_id, make_submission(tmp_path / "constant", exercise_id, CONSTANT[exercise_id]),
                               ROOT, cases_dir, limits=LIMITS).scores
    scores["returns what a degenerate case accepts"] = (score.points, score.max_points)
    assert score.points == 0, score.text()          # public cases too: none is answered by a constant (issue 47)
    if os.environ.get("MT_CHEAT_TABLE"):
        with open(os.environ["MT_CHEAT_TABLE"], "a", encoding="utf-8") as table:
            table.write(json.dumps({"exercise": exercise_id, "scores": scores}, ensure_ascii=False) + "\n")
    assert fingerprint_of_files(ROOT, cases_dir) == before, "a submission changed the grader's files"
    assert not sentinel.exists(), "a submission wrote outside the sandbox"
    full = scores["correct"][1]
    # the first catalogued mistake loses marks (5.1's forgotten mean(g) term loses every case)
    assert scores["correct"] == (full, full) and scores["wrong"][0] < full, scores
    assert scores["blank"][0] == scores["syntax-error"][0] == 0, scores


# -- the in-process routes: check and the public grading tests -------------------------------------------------------
AUTOGRAD = SPECIFIC["calls the engine's autograd", "5.1"]
LAYER_NORM = "minitransformer/functional/normalization.py"


def _with_block(text: str, exercise_id: str, body: str) -> str:
    """``text`` with the solution block of ``exercise_id`` (its marker lines too) replaced by ``body``."""
    import textwrap

    from minitransformer.exercises.registry import parse_file

    lines = text.splitlines(keepends=True)
    [block] = [b for info, b in parse_file(text, "") if info["id"] == exercise_id]
    return "".join(lines[:block.begin - 1]) + textwrap.indent(textwrap.dedent(body).strip("\n") + "\n",
                                                               block.indent) + "".join(lines[block.end:])


def test_autograd_in_a_backward_passes_a_gradient_check_unguarded_and_fails_a_grading_test():
    import numpy as np

    import minitransformer as mt
    import minitransformer.functional as F
    from minitransformer.exercises.cases import GRAPH_IN_BACKWARD, GraphInBackward
    from minitransformer.exercises.pytest_support import backward_exercise_methods, graded_backwards_guarded
    from minitransformer.exercises.trial import swapped

    assert ("5.1", "minitransformer.functional.normalization", "LayerNormFunction.backward") in \
        backward_exercise_methods()
    from minitransformer.functional.normalization import LayerNormFunction

    original = vars(LayerNormFunction)["backward"]
    rng = np.random.default_rng(0)
    x, weight, bias = (mt.Tensor(rng.standard_normal(shape), requires_grad=True) for shape in ((2, 3, 5), 5, 5))
    text = _with_block((ROOT / LAYER_NORM).read_text(encoding="utf-8"), "5.1", AUTOGRAD)
    with swapped("minitransformer.functional.normalization", text, ["LayerNormFunction.backward"]):
        assert mt.gradcheck(lambda a, w, b: F.layer_norm(a, w, b), [x, weight, bias])   # a right gradient
        grading_test = SimpleNamespace(iter_markers=lambda: [pytest.mark.grades_5_1.mark])
        with graded_backwards_guarded(grading_test), pytest.raises(mt.GradcheckError) as caught:
            mt.gradcheck(lambda a, w, b: F.layer_norm(a, w, b), [x, weight, bias])
        other_test = SimpleNamespace(iter_markers=lambda: [pytest.mark.slow.mark])
        with graded_backwards_guarded(other_test):             # a test that grades nothing runs as it is
            assert mt.gradcheck(lambda a, w, b: F.layer_norm(a, w, b), [x, weight, bias])
    assert isinstance(caught.value.__cause__, GraphInBackward) and GRAPH_IN_BACKWARD in str(caught.value)
    assert vars(LayerNormFunction)["backward"] is original                                 # put back as it was


@pytest.mark.slow
def test_check_fails_a_backward_answered_by_the_engines_autograd_and_says_why(tmp_path):
    from minitransformer.exercises.edition import write_edition
    from minitransformer.exercises.grading import GRADING_FILE, check

    edition = tmp_path / "edition"
    write_edition(ROOT, edition, {"5.1"})                       # every other exercise solved
    make_submission(edition, "5.1", AUTOGRAD)
    # check runs its grading tests and every test the exercise map gives it: here only the grading tests (the
    # others run the command line and training for minutes, and grade nothing; the guard is for grading tests)
    exercise_map = edition / "tests" / "exercise_map.json"
    data = json.loads(exercise_map.read_text(encoding="utf-8"))
    data["exercises"]["5.1"] = [t for t in data["exercises"]["5.1"] if t.startswith(GRADING_FILE)]
    exercise_map.write_text(json.dumps(data), encoding="utf-8")
    verdict, text = check("5.1", edition, workers=0)
    assert not verdict.solved and verdict.grading_failed, text
    assert all("your backward raised GraphInBackward: your backward built a graph" in why
               for why in verdict.grading_failed.values()), text
    assert re.search(r"its grading tests \(.*\): 0 of \d+ passed", text), text
