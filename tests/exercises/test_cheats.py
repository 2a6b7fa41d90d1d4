"""The cheat suite: every cheat in tests/cheats.py scores 0 with ``grade`` and touches none of the grader's files,
while correct, wrong, blank and syntax-error submissions score full, partial, 0 and 0. Exercises 2.2 and 5.1
(backwards), 11.2, 12.1 and 13.1; a hang costs at most two case limits. (The nbgrader route's cheats:
tests/exercises/test_nbgrader.py.)"""
from __future__ import annotations

import json
import os

import pytest

from cheats import CONSTANT, GRADE_TARGETS, cheat_code, cheats_for
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
                                 reason="a student edition: there are no solutions to grade with"),
              pytest.mark.skipif(sandbox.bubblewrap_problem() is not None and not REQUIRE_SANDBOX,
                                 reason=f"no sandbox here: {sandbox.bubblewrap_problem()}")]
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
