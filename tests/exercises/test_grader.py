"""The grader (``python -m minitransformer.exercises grade``): sandboxed runs, judged outside, on hidden cases.

The quick checks run with the suite; the cheat suite, the catalogue of mistakes and the nbgrader
route take minutes and run with ``-m later`` (tests/exercises/test_cheats.py, tests/exercises/test_mistakes.py).
"""
from __future__ import annotations

import base64
import importlib.util
import io
import json
import subprocess
import sys
import xml.etree.ElementTree as ElementTree
from pathlib import Path

import numpy as np
import pytest

from minitransformer.exercises import casebook, judge, sandbox
from submissions import REQUIRE_SANDBOX
from minitransformer.exercises.registry import get_exercise, load_exercises
from minitransformer.exercises.submission import grade_submission, gradescope_results, junit_xml, transplant
from submissions import ROOT, make_submission

pytestmark = pytest.mark.skipif(not any(e.has_solution for e in load_exercises(ROOT)),
                                reason="a student edition: there are no solutions to grade with")
NEEDS_BWRAP = pytest.mark.skipif(sandbox.bubblewrap_problem() is not None and not REQUIRE_SANDBOX,
                                 reason=f"no sandbox here: {sandbox.bubblewrap_problem()}")

CATALOGUE_HERE = importlib.util.find_spec("minitransformer.exercises.mistakes") is not None
NOAM = {   # what a student puts in place of the stub of 10.1 -> how it must score
    "correct": "return self.factor * self.d_model ** -0.5 * min(step ** -0.5, step * self.warmup ** -1.5)",
    "wrong": "return self.d_model ** -0.5 * min(step ** -0.5, step * self.warmup ** -1.5)",     # no factor
    "blank": None,
    "syntax-error": "return self.factor * * self.d_model",
}


@pytest.fixture(scope="module")
def cases_dir(tmp_path_factory):
    return tmp_path_factory.mktemp("casebook")


# -- the judge: plain data in, a verdict out ------------------------------------------------------------------------
def test_a_wrong_gradient_is_explained_against_the_central_differences_of_the_students_forward():
    want = np.array([[1.0, -2.0], [0.5, 4.0]])
    x_plus, x_minus = want.ravel() * 1e-6, -want.ravel() * 1e-6     # the forward's values at x ± ε e_k
    why = judge.explain_output("grad:1", 2 * want, want, "gradient", fd=np.stack([x_plus, x_minus]))
    assert "the gradient of input 1 (b), shape (2, 2), is wrong at 4 of 4 positions" in why
    assert "your backward gives 8, the numerical gradient of the forward 4" in why
    assert "your backward is 2 × the true gradient at every position" in why
    assert judge.explain_output("grad:1", want + 1e-12, want, "gradient") is None


def test_a_wrong_forward_is_not_called_a_backward():
    why = judge.explain_output("num", np.zeros((2, 3)), np.ones((2, 3)), "causal_prefix")
    assert why.startswith("num is wrong at 6 of 6 positions") and "backward" not in why
    assert "has shape (3, 2), expected (2, 3)" in judge.explain_output("num", np.ones((3, 2)), np.ones((2, 3)),
                                                                       "causal_prefix")
    assert "dtype float32, expected float64" in judge.explain_output("num", np.ones(3, np.float32), np.ones(3), "x")


def test_an_exception_is_shown_with_the_students_own_line():
    error = {"type": "ValueError", "message": "matmul: mismatch", "exercise": None, "frames": [
        {"file": "minitransformer/ops/matmul.py", "line": 42, "function": "backward", "code": "ga = gy @ b2"}]}
    why = judge.explain_error(error, "2.2", own={"minitransformer/ops/matmul.py": (40, 44)})
    assert why == "your code raised ValueError: matmul: mismatch\nin your code, minitransformer/ops/matmul.py:42:  " \
                  "ga = gy @ b2"
    other = {"type": "NotImplementedError", "message": "Exercise 2.1: unbroadcast", "exercise": "2.1", "frames": []}
    assert "reached Exercise 2.1 (unbroadcast), which this exercise does not need" in \
        judge.explain_error(other, "1.2", titles={"2.1": "unbroadcast"})


def test_only_plain_arrays_come_back_from_the_sandbox():
    def line(array_bytes: bytes) -> bytes:
        return json.dumps({"id": "public-01", "outputs": {"out": base64.b64encode(array_bytes).decode()},
                           "error": None}).encode()

    buffer = io.BytesIO()
    np.save(buffer, np.arange(3.0), allow_pickle=False)
    case_id, result = judge.decode_record(line(buffer.getvalue()))
    assert case_id == "public-01" and result["outputs"]["out"].tolist() == [0.0, 1.0, 2.0]
    pickled = io.BytesIO()
    np.save(pickled, np.array([object()], dtype=object), allow_pickle=True)   # what an object would need
    with pytest.raises(ValueError):
        judge.decode_record(line(pickled.getvalue()))
    with pytest.raises(ValueError):
        judge.decode_result({"id": "public-01", "outputs": {"../../x": ""}})


def test_the_students_code_is_found_between_the_header_and_the_code_after_the_stub():
    from minitransformer.exercises.edition import strip_python
    from minitransformer.exercises.registry import BEGIN, END

    text = "\n".join(["def f(x):", "    y = x", "    # Exercise 3.1 — a title (chapters/03-cpu-gpu.md; graded by "
                      "pytest -m ex_3_1)", "    " + BEGIN, "    y = 2 * x", "    " + END, "    return y", ""])
    stub = strip_python(text, "minitransformer/fake.py", {"3.1"})
    submitted = stub.replace('    raise NotImplementedError("Exercise 3.1: a title — see chapters/03-cpu-gpu.md")\n',
                             "    z = x + 1\n    y = z * 2\n").replace("def f(x):", "def f(x):  # edited elsewhere")
    graded = transplant(stub, submitted, "3.1")
    assert "    z = x + 1\n    y = z * 2\n    return y\n" in graded and "NotImplementedError" not in graded
    assert "# edited elsewhere" not in graded       # the rest of the file is the teacher's


# -- grading, end to end (the student's code in the sandbox) ---------------------------------------------------------
@NEEDS_BWRAP
def test_grade_scores_correct_wrong_blank_and_syntax_error_submissions(tmp_path, cases_dir):
    points = {}
    for kind, code in NOAM.items():
        grade = grade_submission("10.1", make_submission(tmp_path / kind, "10.1", code), ROOT, cases_dir)
        [score] = grade.scores
        points[kind] = score.points
        assert score.max_points == grade.max_points > score.count("public")[1] > 0
        if kind == "syntax-error":
            assert "your code does not compile: SyntaxError" in score.note and "optim.py:" in score.note
            assert "  E " not in grade.text() and "at E" not in grade.text()
        if kind == "blank":
            assert all("not attempted" in c.why for c in score.cases)
        if kind == "wrong":
            assert score.count("public") == (2, 3)      # the public tests' own score: 2 of 3
            if CATALOGUE_HERE:
                assert any(c.mistake == "factor forgotten" for c in score.cases), grade.text()
    full = points["correct"]
    assert points == {"correct": full, "wrong": points["wrong"], "blank": 0, "syntax-error": 0}
    assert 0 < points["wrong"] < full


@NEEDS_BWRAP
def test_the_sandbox_cannot_read_the_teachers_repository_or_casebook(tmp_path, cases_dir):
    reads = f"""
        for path in [{str(ROOT / 'minitransformer/optim.py')!r}, {str(cases_dir / 'secret.json')!r}]:
            open(path).read()
        return self.factor * self.d_model ** -0.5 * min(step ** -0.5, step * self.warmup ** -1.5)
    """
    [score] = grade_submission("10.1", make_submission(tmp_path / "reads", "10.1", reads), ROOT, cases_dir).scores
    assert score.points == 0 and "FileNotFoundError" in score.cases[0].why, score.text()


def test_without_bubblewrap_grade_refuses_unless_told_it_is_unsafe(tmp_path, cases_dir, monkeypatch):
    monkeypatch.setattr(sandbox, "bubblewrap_problem", lambda: "bubblewrap (bwrap) is not installed")
    submission = make_submission(tmp_path / "correct", "10.1", NOAM["correct"])
    with pytest.raises(sandbox.SandboxUnavailable, match="--unsafe-no-sandbox"):
        grade_submission("10.1", submission, ROOT, cases_dir)
    grade = grade_submission("10.1", submission, ROOT, cases_dir, unsafe=True)
    assert grade.points == grade.max_points


def test_the_command_refuses_without_bubblewrap_and_names_the_flag(tmp_path):
    submission = make_submission(tmp_path / "correct", "10.1", NOAM["correct"])
    script = ("import sys; from minitransformer.exercises import sandbox, __main__ as m\n"
              "sandbox.bubblewrap_problem = lambda: 'bubblewrap (bwrap) is not installed'\n"
              f"sys.exit(m.main(['grade', '10.1', '--submission', {str(submission)!r}]))")
    result = subprocess.run([sys.executable, "-c", script], cwd=ROOT, capture_output=True, text=True,
                            env={"PYTHONPATH": str(ROOT), "PATH": "/usr/bin:/bin"})
    assert result.returncode == 2 and "--unsafe-no-sandbox" in result.stderr, result.stdout + result.stderr


# -- reports: JUnit XML and Gradescope ----------------------------------------------------------------------------------
def _grade_of(passes: dict[str, list[bool]]):
    from minitransformer.exercises.submission import CaseResult, Grade, Score

    return Grade([Score(get_exercise(i, ROOT), [CaseResult(f"{'public' if n < 2 else 'hidden'}-{n:02d}",
                                                           "public" if n < 2 else "hidden", f"case {n}", ok,
                                                           "" if ok else "wrong", seconds=0.25)
                                                for n, ok in enumerate(flags)]) for i, flags in passes.items()])


def test_an_assignment_reports_each_exercise_and_the_total():
    grade = _grade_of({"2.1": [True, True, False], "2.2": [True, False, False, False]})
    assert (grade.points, grade.max_points) == (3, 7)
    assert "Total: 3 of 7 (2.1: 2 of 3, 2.2: 1 of 4)" in grade.text()
    results = gradescope_results(grade)
    numbers = [t["number"] for t in results["tests"]]
    assert len(set(numbers)) == len(numbers) == 7 and numbers[:2] == ["2.1.1", "2.1.2"]
    assert (results["score"], results["max_score"]) == (3, 7)
    suites = ElementTree.fromstring(junit_xml(grade).split("\n", 1)[1]).findall("testsuite")
    assert [s.get("tests") for s in suites] == ["3", "4"]
    assert all(case.get("time") == "0.250" for s in suites for case in s.findall("testcase"))
    assert {p.get("value") for p in suites[1].findall(".//property[@name='exercise']")} == {"2.2"}


def test_every_exercise_has_public_and_hidden_cases_and_public_seeds_are_fixed():
    seeds = {}
    for exercise in load_exercises(ROOT):
        specs = casebook.specs_for(exercise.id, seed=1)
        kinds = [s["kind"] for s in specs]
        assert kinds.count("public") >= 2 and kinds.count("hidden") == casebook.HIDDEN_PER_EXERCISE, exercise.id
        assert casebook.specs_for(exercise.id, seed=2)[:kinds.count("public")] == specs[:kinds.count("public")]
        assert casebook.specs_for(exercise.id, seed=2)[kinds.count("public"):] != specs[kinds.count("public"):]
        seeds[exercise.id] = [s["seed"] for s in specs]
    assert len(seeds) == len(load_exercises(ROOT))


def test_the_catalogue_names_two_or_three_mistakes_per_exercise_and_each_still_applies():
    mistakes = pytest.importorskip("minitransformer.exercises.mistakes", reason="a copy without the catalogue")
    CATALOGUE, mutate = mistakes.CATALOGUE, mistakes.mutate

    exercises = load_exercises(ROOT)
    assert set(CATALOGUE) == {e.id for e in exercises}
    for exercise in exercises:
        mistakes = CATALOGUE[exercise.id]
        assert 2 <= len(mistakes) <= 3 and len({m.name for m in mistakes}) == len(mistakes), exercise.id
        texts = {path: (ROOT / path).read_text(encoding="utf-8") for path in exercise.files}
        for mistake in mistakes:
            changed = mutate(texts, exercise.id, mistake)           # raises when an edit no longer applies
            assert changed != texts, f"{exercise.id}: {mistake.name} changes nothing"
            for path, text in changed.items():
                compile(text, path, "exec")


@NEEDS_BWRAP
def test_a_runtime_that_lives_under_tmp_is_seen_inside_the_sandbox(tmp_path, monkeypatch):
    from minitransformer.exercises import bwrap
    runtime = tmp_path / "venv"                  # pytest's tmp_path is under /tmp, like a clone made there
    runtime.mkdir()
    (runtime / "marker.txt").write_text("the runtime", encoding="utf-8")
    monkeypatch.setattr(bwrap, "runtime_folders", lambda real=bwrap.runtime_folders: [*real(), str(runtime)])
    command = bwrap.arguments() + [bwrap.python(), "-c", f"print(open({str(runtime / 'marker.txt')!r}).read())"]
    result = subprocess.run(command, capture_output=True, text=True, timeout=60)
    assert result.returncode == 0 and result.stdout.strip() == "the runtime", result.stderr


def test_no_hidden_case_of_the_online_softmax_is_answered_by_a_step_that_does_nothing():
    from minitransformer.exercises.specs.ex_13_1 import probe_online_softmax
    for seed in range(200):                     # heavy masking: a row masked everywhere would keep its first state
        rng = np.random.default_rng(seed)
        length = int(rng.integers(2, 12))
        found = probe_online_softmax(rng, rows=int(rng.integers(1, 5)), length=length, d_v=2, cuts=[0, length],
                                     scale=10.0, masked=0.7)
        assert np.isfinite(found["log_sum_exp"]).all(), seed


def _running_maxima(spec: dict, seed: int) -> list:
    """The running maximum of each row that each online_softmax_step of a 13.1 case starts from, after the first."""
    from minitransformer.exercises.cases import STAGED, call_here

    probe = STAGED[spec["probe"]](np.random.default_rng(seed), **spec["params"])
    call, maxima = next(probe), []
    while call[1] == "online_softmax_step":
        maxima.append(call[2][0])
        call = probe.send(call_here(call[0], call[1], *call[2]))
    return maxima[1:]


def test_every_hidden_case_of_the_online_softmax_brings_a_past_to_its_later_blocks():
    """A row whose earlier blocks are all masked brings no past: a step that ignores the state (the plain softmax of
    the blocks it has seen, kept offline) would pass it. Every row of every hidden draw has a finite score in its
    first block, so each later call must use the state."""
    from minitransformer.exercises.cases import hidden_cases

    for seed in range(30):
        for spec in hidden_cases("13.1", np.random.default_rng(seed)):
            maxima = _running_maxima(spec, seed)
            assert maxima and all(np.isfinite(m).all() for m in maxima), spec


def test_every_public_case_of_the_online_softmax_brings_a_past_to_its_later_blocks():
    """Issue 47's leftover: an offline step (the last block alone) passed the one-block case and the case whose
    first block was masked. Now every public case has a later call that some row's past reaches."""
    from minitransformer.exercises.cases import public_cases

    for spec in public_cases("13.1"):
        maxima = _running_maxima(spec, 0)
        assert maxima and all(np.isfinite(m).any() for m in maxima), spec


# -- a hard limit: a case past its time is killed from outside, whatever the student's code catches ---------------
@NEEDS_BWRAP
def test_a_hang_that_catches_every_exception_is_killed_from_outside_and_named(tmp_path, cases_dir):
    hang = """
        import signal, time
        signal.signal(signal.SIGALRM, signal.SIG_IGN)
        while True:
            try:
                time.sleep(1000)
            except BaseException:
                pass
    """
    limits = sandbox.Limits(case_seconds=1, wall_seconds=60)
    [score] = grade_submission("10.1", make_submission(tmp_path / "hang", "10.1", hang), ROOT, cases_dir,
                               limits=limits).scores
    assert score.points == 0
    # two cases ran to their limit and were killed; the others were not run: the hang costs two case limits
    assert score.timed_out == ["public-01", "public-02"], score.text()
    assert "ran past the case's time limit of 1 s and was stopped" in score.cases[0].why
    assert all(c.why.startswith("not run: the 2 cases before it") for c in score.cases[2:] if c.kind == "public")
    assert "timed out (stopped from outside at the case's time limit): public-01, public-02" in score.text()


def test_the_exercises_wall_clock_limit_stops_the_cases_after_it():
    clock = sandbox._Clock(sandbox.Limits(wall_seconds=0))
    assert "wall-clock limit of 0 s" in clock.stopped()["error"]["message"]
    clock = sandbox._Clock(sandbox.Limits())
    assert clock.stopped() is None
    clock.count(True), clock.count(True)
    assert "the 2 cases before it ran past" in clock.stopped()["error"]["message"]


# -- feedback that teaches without leaking: a hidden case says what is wrong, never what is right ------------------
@NEEDS_BWRAP
def test_a_hidden_case_names_what_is_wrong_and_the_known_mistake_but_no_value(tmp_path, cases_dir):
    grade = grade_submission("10.1", make_submission(tmp_path / "wrong", "10.1", NOAM["wrong"]), ROOT, cases_dir)
    [score] = grade.scores
    book = casebook.read(cases_dir, "10.1")
    hidden = [c for c in score.cases if c.kind == "hidden" and not c.passed]    # (a draw with factor 1 passes)
    assert hidden
    for case in hidden:
        values = {judge._number(v) for array in book.expected[case.id]["outputs"].values()
                  for v in np.asarray(array, dtype=float).ravel()}
        assert not any(v in case.why for v in values), case.why
        assert ", expected " not in case.why and "yours " not in case.why
        assert "the rate: wrong values" in case.why and "a hidden case" in case.why
        if CATALOGUE_HERE:
            assert case.mistake == "factor forgotten" and "A known mistake — " in case.why
    public = [c for c in score.cases if c.kind == "public" and not c.passed]
    assert public and "expected" in public[0].why          # the public cases keep their full feedback
    tests = gradescope_results(grade)["tests"]
    assert {t["visibility"] for t in tests if "hidden" in t["tags"]} == {"after_published"}
    assert {t["visibility"] for t in tests if "public" in t["tags"]} == {"visible"}


def test_a_hidden_cases_exception_shows_its_type_and_line_but_not_its_message():
    error = {"type": "ValueError", "message": "the input was [0.123, 4.56]", "exercise": None, "frames": [
        {"file": "minitransformer/optim.py", "line": 42, "function": "rate", "code": "raise ValueError(x)"}]}
    verdict = judge.judge_case({"probe": "noam"}, {"outputs": {"rate": np.ones(2)}, "error": None},
                               {"outputs": {}, "error": error}, "10.1", own={"minitransformer/optim.py": (40, 44)},
                               hidden=True)
    assert not verdict.passed and "0.123" not in verdict.why
    assert "your code raised ValueError (its message is not shown for a hidden case)" in verdict.why
    assert "minitransformer/optim.py:42" in verdict.why


# -- limits per submission: a case is one process (seccomp refuses new ones), so its memory limit is the submission's --
@NEEDS_BWRAP
def test_a_case_cannot_start_another_process(tmp_path, cases_dir):
    forks = """
        import os, subprocess
        try:
            pid = os.fork()
        except OSError as error:
            raise RuntimeError(f"fork refused: {error}") from None
        if pid == 0:
            os._exit(0)
        return self.factor * self.d_model ** -0.5 * min(step ** -0.5, step * self.warmup ** -1.5)
    """
    spawns = """
        import subprocess
        subprocess.run(["/bin/true"], check=True)
        return self.factor * self.d_model ** -0.5 * min(step ** -0.5, step * self.warmup ** -1.5)
    """
    threads = """
        import threading
        box = []
        worker = threading.Thread(target=lambda: box.append(self.factor * self.d_model ** -0.5 * min(
            step ** -0.5, step * self.warmup ** -1.5)))
        worker.start(), worker.join()
        return box[0]
    """
    for name, code in (("forks", forks), ("spawns", spawns)):
        [score] = grade_submission("10.1", make_submission(tmp_path / name, "10.1", code), ROOT, cases_dir).scores
        assert score.points == 0, score.text()
        assert "fork refused" in score.cases[0].why or "PermissionError" in score.cases[0].why, score.cases[0].why
    # threads stay: they are not processes, and a case's one memory limit covers them
    [score] = grade_submission("10.1", make_submission(tmp_path / "threads", "10.1", threads), ROOT, cases_dir).scores
    assert score.points == score.max_points, score.text()


def test_the_seccomp_filter_is_a_program_bwrap_reads():
    program = sandbox.bwrap.seccomp_program()
    if program is None:
        pytest.skip("an architecture the filter does not know")
    assert len(program) % 8 == 0 and 8 < len(program) // 8 < 64
    codes = [int.from_bytes(program[i:i + 2], "little") for i in range(0, len(program), 8)]
    assert codes[0] == 0x20 and codes[-1] == 0x06          # loads the architecture first, ends with a verdict


# -- the sandbox sees only what grading needs: the standard library, NumPy, the graded package --------------------
@NEEDS_BWRAP
def test_a_package_installed_in_the_base_interpreter_is_unreachable(tmp_path, cases_dir, monkeypatch):
    base = tmp_path / "base-python"
    site = base / "lib" / f"python{sys.version_info.major}.{sys.version_info.minor}" / "site-packages"
    (site / "decoy_answer").mkdir(parents=True)
    (site / "decoy_answer" / "__init__.py").write_text(
        "def rate(factor, d_model, warmup, step):\n"
        "    return factor * d_model ** -0.5 * min(step ** -0.5, step * warmup ** -1.5)\n")
    info = site / "decoy_answer-1.0.dist-info"          # as pip leaves a non-editable install
    info.mkdir()
    (info / "METADATA").write_text("Metadata-Version: 2.1\nName: decoy-answer\nVersion: 1.0\n")
    (info / "RECORD").write_text("decoy_answer/__init__.py,,\n")
    monkeypatch.setattr(sys, "base_prefix", str(base))       # a base interpreter behind this environment ...
    monkeypatch.setattr(sys, "path", [*sys.path, str(site)])  # ... whose site-packages it sees
    uses = f"""
        import importlib.util, sys
        try:
            import decoy_answer
        except ImportError:
            spec = importlib.util.spec_from_file_location("decoy_answer", {str(site / 'decoy_answer/__init__.py')!r})
            decoy_answer = importlib.util.module_from_spec(spec)
            spec.loader.exec_module(decoy_answer)
        return decoy_answer.rate(self.factor, self.d_model, self.warmup, step)
    """
    submission = make_submission(tmp_path / "decoy", "10.1", uses)
    [unsandboxed] = grade_submission("10.1", submission, ROOT, cases_dir, unsafe=True).scores
    assert unsandboxed.points == unsandboxed.max_points      # the decoy answers, where it can be reached
    [score] = grade_submission("10.1", submission, ROOT, cases_dir).scores
    assert score.points == 0 and "FileNotFoundError" in score.cases[0].why, score.text()
    others = """
        import sys
        for name in ("sacrebleu", "torch", "pytest", "matplotlib"):
            try:
                __import__(name)
            except ImportError:
                continue
            raise RuntimeError(f"{name} can be imported")
        return self.factor * self.d_model ** -0.5 * min(step ** -0.5, step * self.warmup ** -1.5)
    """
    [score] = grade_submission("10.1", make_submission(tmp_path / "others", "10.1", others), ROOT, cases_dir).scores
    assert score.points == score.max_points, score.text()


# -- no degenerate hidden cases: no draw that zeros, one repeated value or a step that does nothing would answer ----
def test_a_draw_that_a_constant_answers_is_refused_and_the_next_draw_kept():
    one_source = {"aer": np.zeros(20)}                 # 12.1's heads over one source token: AER 0, always
    assert casebook.degenerate(one_source, "alignment_error_rate") == "every answer is zero"
    assert casebook.degenerate({"aer": np.full(20, 0.5)}, "alignment_error_rate") == "every answer is one value repeated"
    assert casebook.degenerate({"aer": np.linspace(0, 1, 20)}, "alignment_error_rate") is None
    assert casebook.degenerate({"out": np.ones(3), "grad:0": np.zeros((2, 2))}, "gradient") == "every answer is zero"
    assert casebook.degenerate({"out": np.ones(3), "grad:0": np.full((2, 2), 0.7)}, "gradient") is None   # upstream
    assert casebook.degenerate({"mask": np.ones((1, 1), bool), "out": np.arange(6.0)}, "causal_mask") is not None
    # a public case may be one worked example with one number for its answer, but not zero
    assert casebook.degenerate({"flops": np.array([304.0])}, "flops", public=True) is None
    assert casebook.degenerate({"flops": np.array([304.0])}, "flops") == "every answer is one value repeated"
    assert casebook.degenerate({"aer": np.array([0.0])}, "alignment_error_rate", public=True) == "every answer is zero"
    specs = [{"id": "public-01", "kind": "public", "probe": "alignment_error_rate"},
             *({"id": f"draw{k}-01", "kind": "hidden", "slot": 1, "probe": "alignment_error_rate", "seed": k,
                "params": {}} for k in range(3))]
    expected = {"public-01": {"outputs": one_source, "error": None},      # a public case stays as it is
                "draw0-01": {"outputs": one_source, "error": None},
                "draw1-01": {"outputs": {"aer": np.linspace(0, 1, 20)}, "error": None},
                "draw2-01": {"outputs": {"aer": np.linspace(0, 1, 20)}, "error": None}}
    chosen = casebook.choose_hidden(specs, expected)
    assert [(s["id"], s.get("seed")) for s in chosen] == [("public-01", None), ("hidden-01", 1)]
    with pytest.raises(casebook.ExerciseError, match="every draw of hidden case 1 is degenerate"):
        casebook.choose_hidden(specs, {**expected, "draw1-01": expected["draw0-01"],
                                       "draw2-01": expected["draw0-01"]})


@pytest.mark.later
@pytest.mark.parametrize("exercise_id", [e.id for e in load_exercises(ROOT)])
def test_no_hidden_case_of_any_exercise_is_answered_by_zeros_or_one_value(exercise_id, tmp_path):
    [book] = casebook.load(ROOT, tmp_path, [get_exercise(exercise_id, ROOT)]).values()
    hidden = [s for s in book.specs if s["kind"] == "hidden"]
    assert len(hidden) == casebook.HIDDEN_PER_EXERCISE
    for spec in hidden:
        assert casebook.degenerate(book.expected[spec["id"]]["outputs"], spec["probe"]) is None, spec
    for spec in (s for s in book.specs if s["kind"] == "public"):
        assert casebook.degenerate(book.expected[spec["id"]]["outputs"], spec["probe"], public=True) is None, spec


@pytest.mark.parametrize("exercise_id", [e.id for e in load_exercises(ROOT)])
def test_no_public_case_of_any_exercise_is_answered_by_zeros_or_one_value(exercise_id):
    """Issue 47's leftover: `return 0.0` scored two public cases of 12.1. The reference's outputs on each public
    case, here in this process (the teacher's package holds every solution)."""
    from minitransformer.exercises.cases import run_case

    for spec in casebook.specs_for(exercise_id, seed=0)[:len(casebook.public_cases(exercise_id))]:
        assert spec["kind"] == "public"
        assert casebook.degenerate(run_case(spec), spec["probe"], public=True) is None, spec
