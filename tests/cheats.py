"""Cheats: what a student might hand in instead of a solution, to get marks without solving the exercise.

Each is the body a student puts in place of the stub, written for the exercise's function (its
arguments, what the code after it expects). Every one must score 0 on every grading route, and leave
the grader's files as they were (tests/exercises/test_cheats.py; benchmarks/book/grader.py writes the table).
CHEATS work on every target; SPECIFIC ones on the exercises they are written for (a derivation replaced by
numerics on a backward, the past kept in module state on the online softmax, another route to the answer);
CONSTANT ones return what a degenerate case would accept and must score 0, public cases included.
"""
from __future__ import annotations

from dataclasses import dataclass


@dataclass(frozen=True)
class Target:
    """An exercise's function as a cheat sees it."""

    exercise: str
    path: str            # the file holding it
    call: str            # the reference's answer, given a module ``ref`` that holds the reference
    garbage: str         # a wrong answer (what a failed cheat ends with)
    anything: str        # the same answer built from objects equal to everything


TARGETS = {
    "2.2": Target("2.2", "minitransformer/ops/matmul.py", "return ref.MatMul.backward(self, gy)",
                  "return None, None", "return Anything(0.123), Anything(0.123)"),
    "12.1": Target("12.1", "minitransformer/alignment_scores.py", "return ref.alignment_error_rate(weights, links)",
                   "return 0.123", "return Anything(0.123)"),
    "13.1": Target("13.1", "minitransformer/functional/flash_attention.py",
                   "return ref.online_softmax_step(row_max, row_sum, weighted, scores, values)",
                   "return row_max, row_sum, weighted", "return Anything(0.123), Anything(0.123), Anything(0.123)"),
}

# the grade route's cheat suite also covers a layer-norm backward and BLEU's statistics (issue 47)
GRADE_TARGETS = {
    **TARGETS,
    "5.1": Target("5.1", "minitransformer/functional/normalization.py",
                  "return ref.LayerNormFunction.backward(self, gy)", "return None, None, None",
                  "return Anything(0.123), Anything(0.123), Anything(0.123)"),
    "11.2": Target("11.2", "minitransformer/bleu.py", "return ref.clipped_ngram_matches(hypothesis, reference, n)",
                   "return 0, 0", "return Anything(0.123), Anything(0.123)"),
}

CHEATS = {
    "imports the reference": """
        import importlib, importlib.util, sys
        spec = importlib.util.spec_from_file_location("teacher", {root!r} + "/minitransformer/__init__.py",
                                                      submodule_search_locations=[{root!r} + "/minitransformer"])
        package = importlib.util.module_from_spec(spec)
        sys.modules["teacher"] = package
        spec.loader.exec_module(package)
        ref = importlib.import_module("teacher" + {module_suffix!r})
        {call}
    """,
    "reads the reference by path": """
        import types
        source = open({root!r} + "/" + {path!r}).read()
        namespace = {{"__name__": {module!r}, "__package__": {module!r}.rpartition(".")[0]}}
        exec(compile(source, "reference", "exec"), namespace)
        ref = types.SimpleNamespace(**namespace)
        {call}
    """,
    "redefines the grading helpers": """
        import minitransformer.exercises.cases as cases_module, minitransformer.exercises.judge as judge_module
        judge_module.judge_case = lambda *args, **kwargs: judge_module.CaseVerdict(True)
        judge_module.equal_outputs = lambda *args, **kwargs: True
        cases_module.run_case = lambda spec: {{}}
        try:
            import minitransformer.exercises.nbgrader as nbgrader_module
            nbgrader_module.run_test = nbgrader_module.record = lambda *args, **kwargs: None
        except Exception:
            pass
        {garbage}
    """,
    "replaces pytest.main, assert_allclose and gradcheck": """
        import numpy, numpy.testing, minitransformer, minitransformer.gradcheck as gradcheck_module
        numpy.testing.assert_allclose = numpy.testing.assert_array_equal = lambda *args, **kwargs: None
        numpy.allclose = numpy.array_equal = lambda *args, **kwargs: True
        minitransformer.gradcheck = gradcheck_module.gradcheck = lambda *args, **kwargs: True
        try:
            import pytest
            pytest.main = lambda *args, **kwargs: 0
        except ImportError:
            pass
        {garbage}
    """,
    "returns objects equal to everything": """
        class Anything(float):
            def __eq__(self, other):
                return True

            def __ne__(self, other):
                return False

            __hash__ = float.__hash__
        {anything}
    """,
    "exhausts memory": """
        hog = [bytearray(2 ** 30) for _ in range(1024)]
        {garbage}
    """,
    "loops forever": """
        while True:
            pass
    """,
    "writes outside the sandbox": """
        for target in [{root!r} + "/tests/exercises/test_exercises.py", {root!r} + "/" + {path!r}, {cases!r} + "/secret.json",
                       {sentinel!r}]:
            try:
                with open(target, "a") as file:
                    file.write("# written by a submission\\n")
            except OSError:
                pass
        {garbage}
    """,
    "reads the teacher's files by absolute path": """
        expected = open({cases!r} + "/" + {exercise!r} + "/expected.jsonl").read()
        secret = open({cases!r} + "/secret.json").read()
        source = open({root!r} + "/" + {path!r}).read()
        {garbage}
    """,
    # cheats of our own
    "forges result records": """
        import os
        for fd in range(3, 32):
            for kind, count in (("public", 12), ("hidden", 12)):
                for n in range(1, count + 1):
                    try:
                        os.write(fd, ('{{"id": "%s-%02d", "outputs": {{}}, "error": null}}\\n' % (kind, n)).encode())
                    except OSError:
                        pass
        {garbage}
    """,
    "ends the process early": """
        import os
        os._exit(0)
    """,
    "catches the time limit and loops on": """
        while True:
            try:
                while True:
                    pass
            except BaseException:
                pass
    """,
}

# issue 47's: a hang that ignores every signal, helpers forked beside the case (a case, or a notebook's kernel, is
# one process), installed packages reached by path. The nbgrader route gets them too (its kernels have the same
# seccomp filter and are killed from outside at a case cell's time-out).
GRADE_CHEATS = {
    "ignores the alarm and sleeps": """
        import signal, time
        for name in ("SIGALRM", "SIGVTALRM", "SIGPROF", "SIGXCPU", "SIGTERM", "SIGINT"):
            signal.signal(getattr(signal, name), signal.SIG_IGN)
        while True:
            try:
                time.sleep(1000)
            except BaseException:
                pass
    """,
    "forks helpers that hold memory": """
        import os
        for _ in range(20):                   # (small: were forks let through, the machine must survive the test)
            try:
                if os.fork() == 0:
                    hog = bytearray(2 ** 27)
                    os._exit(0)
            except OSError:
                break
        {garbage}
    """,
    "imports the reference from an installed copy": """
        import glob, importlib, sys
        for pattern in ("/lib/python3*/site-packages", "/lib/python3*/dist-packages"):
            for prefix in (sys.base_prefix, sys.prefix, "/usr", "/usr/local"):
                for folder in glob.glob(prefix + pattern):
                    if glob.glob(folder + "/minitransformer/__init__.py"):
                        for name in [m for m in sys.modules if m == "minitransformer" or m.startswith("minitransformer.")]:
                            del sys.modules[name]
                        sys.path.insert(0, folder)
                        ref = importlib.import_module({module!r})
                        {call}
        {garbage}
    """,
}

# cheats written for one exercise each: (cheat, exercise) -> the body
SPECIFIC = {
    ("differentiates numerically", "5.1"): """
        import numpy
        x = x_hat / inv_std                       # a row shifted by its mean, which layer norm does not see

        def forward(rows):
            centered = rows - rows.mean(axis=1, keepdims=True)
            return centered / numpy.sqrt((centered * centered).mean(axis=1, keepdims=True) + self.eps)

        gx = numpy.zeros_like(x)
        step = 1e-6
        for k in numpy.ndindex(*x.shape):         # central differences, one coordinate at a time
            up, down = x.copy(), x.copy()
            up[k] += step
            down[k] -= step
            gx[k] = ((forward(up) - forward(down)) * weight * gy).sum() / (2 * step)
        g_weight, g_bias = (gy * x_hat).sum(axis=0), gy.sum(axis=0)
        return gx.reshape(self.x_shape), g_weight, g_bias
    """,
    ("differentiates by complex steps", "5.1"): """
        import numpy
        x = (x_hat / inv_std).astype(complex)

        def forward(rows):
            centered = rows - rows.mean(axis=1, keepdims=True)
            return centered / numpy.sqrt((centered * centered).mean(axis=1, keepdims=True) + self.eps)

        gx = numpy.zeros(x.shape)
        for k in numpy.ndindex(*x.shape):         # Im f(x + ih e_k) / h: one forward per coordinate
            nudged = x.copy()
            nudged[k] += 1e-30j
            gx[k] = (forward(nudged).imag * weight * gy).sum() / 1e-30
        return gx.reshape(self.x_shape), (gy * x_hat).sum(axis=0), gy.sum(axis=0)
    """,
    ("calls the engine's autograd", "5.1"): """
        import minitransformer as mt
        x = mt.Tensor(x_hat / inv_std, requires_grad=True)      # x − μ: layer norm does not see the shift
        gamma = mt.Tensor(weight, requires_grad=True)
        centered = x - x.mean(axis=-1, keepdims=True)
        y = centered / ((centered * centered).mean(axis=-1, keepdims=True) + self.eps) ** 0.5 * gamma
        y.backward(gy)                                          # right, where the engine's other backwards are
        return x.grad, gamma.grad, gy.sum(axis=leading)
    """,
    ("keeps the earlier blocks in module state", "13.1"): """
        import sys
        import numpy
        seen = sys.modules[__name__].__dict__.setdefault("_seen_blocks", [])
        if numpy.isneginf(row_max).all():         # a fresh state: a new row of blocks begins
            seen.clear()
        seen.append((scores, values))
        every = numpy.concatenate([s for s, _ in seen], axis=1)
        values_so_far = numpy.concatenate([v for _, v in seen], axis=0)
        top = every.max(axis=1, keepdims=True)      # the plain softmax over everything so far, each call
        safe = numpy.where(numpy.isneginf(top), 0.0, top)
        weights = numpy.exp(every - safe)
        return top, weights.sum(axis=1, keepdims=True), weights @ values_so_far
    """,
    ("computes it by another route", "12.1"): """
        tally = AlignmentTally()
        tally.add(weights, links)
        return tally.scores()["aer"]
    """,
    ("computes it by another route", "11.2"): """
        correct, totals, _, _ = bleu_stats([" ".join(hypothesis)], [" ".join(reference)], max_order=4,
                                           tokenize="none")
        return correct[n - 1], totals[n - 1]
    """,
    ("uses an installed package (sacrebleu)", "11.2"): """
        import glob, sys
        for folder in glob.glob(sys.prefix + "/lib/python3*/site-packages") + glob.glob(sys.base_prefix +
                                                                                     "/lib/python3*/site-packages"):
            sys.path.append(folder)
        import sacrebleu
        score = sacrebleu.corpus_bleu([" ".join(hypothesis)], [[" ".join(reference)]], tokenize="none")
        return score.counts[n - 1], score.totals[n - 1]
    """,
}

# what a degenerate case would accept: each must score 0, on the public cases too
CONSTANT = {
    "5.1": "return 0 * gy.reshape(self.x_shape), 0 * weight, 0 * weight",
    "11.2": "return 0, max(len(hypothesis) - n + 1, 0)",
    "12.1": "return 0.0",
    "13.1": "return row_max, row_sum, weighted",
    "2.2": "return 0 * a, 0 * b",
}


def cheats_for(exercise: str) -> list[str]:
    """The names of the cheats tried on ``exercise``: every generic one and those written for it."""
    return [*CHEATS, *GRADE_CHEATS, *(name for name, e in SPECIFIC if e == exercise)]


def cheat_code(name: str, target: Target, root, cases, sentinel) -> str:
    """The body of cheat ``name`` for ``target``, with the grader's paths filled in (the cheater knows them)."""
    import textwrap

    if (name, target.exercise) in SPECIFIC:
        return textwrap.dedent(SPECIFIC[name, target.exercise])
    module = target.path.removesuffix(".py").replace("/", ".")
    code = textwrap.dedent({**CHEATS, **GRADE_CHEATS}[name])
    return code.format(root=str(root), cases=str(cases), sentinel=str(sentinel), path=target.path, module=module,
                       module_suffix=module.removeprefix("minitransformer"), exercise=target.exercise,
                       call=target.call, garbage=target.garbage, anything=target.anything)
