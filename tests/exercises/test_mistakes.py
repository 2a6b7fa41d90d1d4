"""The catalogue of mistakes (minitransformer/exercises/mistakes.py): each mistake, handed in as a submission,
loses marks and gets a verdict that names it; the classic ones get the words a student needs."""
from __future__ import annotations

import pytest

from cheats import GRADE_TARGETS, TARGETS
from minitransformer.exercises import sandbox
from submissions import REQUIRE_SANDBOX
from minitransformer.exercises.registry import get_exercise, load_exercises
from minitransformer.exercises.submission import grade_submission
from submissions import ROOT, make_submission, solution_bodies

# the catalogue quotes the solutions: the teacher's edition only (a student edition skips this file)
mistakes = pytest.importorskip("minitransformer.exercises.mistakes", reason="a student edition: no catalogue")
CATALOGUE, mutate = mistakes.CATALOGUE, mistakes.mutate

pytestmark = [pytest.mark.later,
              pytest.mark.skipif(not any(e.has_solution for e in load_exercises(ROOT)),
                                 reason="a student edition: there are no solutions to grade with"),
              pytest.mark.skipif(sandbox.bubblewrap_problem() is not None and not REQUIRE_SANDBOX,
                                 reason=f"no sandbox here: {sandbox.bubblewrap_problem()}")]

# beyond naming the mistake: what the verdict must (and must not) say for the classic ones
MUST = {("6.1", "mask inverted"): ["inverted"], ("6.1", "mask forgotten"): ["not applied"],
        ("13.1", "running sum not rescaled"): ["rescaled"],
        ("1.2", "no requires_grad guard"): ["requires_grad"],
        ("2.2", "B not transposed"): ["in your code, minitransformer/ops/matmul.py:", "gy @ b2,"]}
MUST_NOT = {("13.3", "diagonal left out"): ["your backward gives"], ("1.2", "no requires_grad guard"): ["first"],
            ("2.2", "B not transposed"): ["Traceback"]}


@pytest.fixture(scope="module")
def cases_dir(tmp_path_factory):
    return tmp_path_factory.mktemp("casebook")


@pytest.mark.parametrize("exercise_id", sorted(CATALOGUE, key=lambda i: tuple(map(int, i.split(".")))))
def test_each_catalogued_mistake_loses_marks_and_its_verdict_names_it(exercise_id, tmp_path, cases_dir):
    exercise = get_exercise(exercise_id, ROOT)
    texts = {path: (ROOT / path).read_text(encoding="utf-8") for path in exercise.files}
    for number, mistake in enumerate(CATALOGUE[exercise_id]):
        bodies = solution_bodies(exercise_id, mutate(texts, exercise_id, mistake))
        submission = make_submission(tmp_path / f"mistake-{number}", exercise_id, bodies)
        grade = grade_submission(exercise_id, submission, ROOT, cases_dir)
        [score] = grade.scores
        text = grade.text()
        assert score.points < score.max_points, f"{exercise_id} {mistake.name} is not caught:\n{text}"
        # the cheat suites hand the first mistake in as their honest 'wrong' student and expect a partial score:
        # public cases (the same every draw) that it passes and fails keep that true whatever the hidden draw
        public = [c.passed for c in score.cases if c.kind == "public"]
        if number == 0 and exercise_id in TARGETS:
            assert any(public), f"{exercise_id} {mistake.name} passes no public case (0 < score hangs on the draw):\n{text}"
        if number == 0 and exercise_id in GRADE_TARGETS:
            assert not all(public), f"{exercise_id} {mistake.name} fails no public case (score < full hangs on the draw)"
        named = [case for case in score.cases if case.mistake == mistake.name]
        assert named and mistake.verdict in text, f"{exercise_id}: the verdict does not name {mistake.name!r}:\n{text}"
        for words in MUST.get((exercise_id, mistake.name), []):
            assert words in text, f"{exercise_id} {mistake.name}: {words!r} is not in the verdict:\n{text}"
        for words in MUST_NOT.get((exercise_id, mistake.name), []):
            assert words not in text, f"{exercise_id} {mistake.name}: {words!r} is in the verdict:\n{text}"
    correct = make_submission(tmp_path / "correct", exercise_id, solution_bodies(exercise_id))
    [score] = grade_submission(exercise_id, correct, ROOT, cases_dir).scores
    assert score.points == score.max_points and not any(c.mistake for c in score.cases), score.text()
