"""Cheats: what a student might hand in instead of a solution, to get marks without solving the exercise.

Each is the body a student puts in place of the stub, written for the exercise's function (its
arguments, what the code after it expects). Every one must score 0 on every grading route, and leave
the grader's files as they were (tests/exercises/test_cheats.py; benchmarks/book/grader.py writes the table).
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


def cheat_code(name: str, target: Target, root, cases, sentinel) -> str:
    """The body of cheat ``name`` for ``target``, with the grader's paths filled in (the cheater knows them)."""
    import textwrap

    module = target.path.removesuffix(".py").replace("/", ".")
    code = textwrap.dedent(CHEATS[name])
    return code.format(root=str(root), cases=str(cases), sentinel=str(sentinel), path=target.path, module=module,
                       module_suffix=module.removeprefix("minitransformer"), exercise=target.exercise,
                       call=target.call, garbage=target.garbage, anything=target.anything)
