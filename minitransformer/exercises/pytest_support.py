"""What tests/conftest.py needs for the classroom: markers, the exercise map, readable failures.

* ``register_markers``: two markers per exercise: ``grades_5_1``, which the
  grading tests of Exercise 5.1 in tests/exercises/test_exercises.py carry (the tests
  that score it), and ``ex_5_1``, the wider set of every test that needs it.
* ``apply_exercise_map``: puts ``ex_X`` on every test listed for X in
  tests/exercise_map.json (the tests that fail when only X is unsolved; see
  tools/exercise_map.py) and on every test marked ``grades_X``.
* ``explain_unsolved``: a test that fails because some exercise still raises
  NotImplementedError("Exercise 5.1: ...") gets a short report naming the
  exercise, instead of a traceback through code the student has not read yet.
* ``graded_backwards_guarded``: during a grading test, the backward of every
  backward exercise runs under the grader's guard against graph building
  (cases.no_graph_building), so a backward answered with the engine's own
  autograd fails ``check`` and ``pytest -m grades_X`` as it fails ``grade``.
"""
from __future__ import annotations

import contextlib
import functools
import importlib
import json
from pathlib import Path

from .registry import RAISED, Exercise, grading_marker, load_exercises, unsolved_in

MAP_FILE = Path("tests") / "exercise_map.json"

_exercises: dict[str, Exercise] = {}


def register_markers(config) -> None:
    root = Path(config.rootpath)
    try:
        exercises = load_exercises(root) if (root / "minitransformer").is_dir() else load_exercises()
    except Exception as error:  # a broken header must not hide the whole test run
        config.issue_config_time_warning(UserWarning(f"exercise markers not registered: {error}"), stacklevel=2)
        exercises = []
    _exercises.clear()
    for exercise in exercises:
        _exercises[exercise.id] = exercise
        config.addinivalue_line("markers", f"{exercise.marker}: needs Exercise {exercise.id}, {exercise.title} "
                                           f"({exercise.chapter})")
        config.addinivalue_line("markers", f"{grading_marker(exercise.id)}: a grading test of Exercise "
                                           f"{exercise.id} (its score)")


def load_map(root: Path) -> dict[str, list[str]]:
    """Exercise id -> test ids, from tests/exercise_map.json (empty when there is none)."""
    path = Path(root) / MAP_FILE
    if not path.exists():
        return {}
    return json.loads(path.read_text(encoding="utf-8"))["exercises"]


def apply_exercise_map(config, items) -> None:
    import pytest

    exercise_map = load_map(Path(config.rootpath))
    by_test: dict[str, list[str]] = {}
    for exercise_id, tests in exercise_map.items():
        for test in tests:
            by_test.setdefault(test, []).append(exercise_id)
    for item in items:
        wanted = set(by_test.get(item.nodeid, ()))
        wanted |= {mark.name.removeprefix("grades_").replace("_", ".") for mark in item.iter_markers()
                   if mark.name.startswith("grades_")}
        for exercise_id in sorted(wanted):
            marker = "ex_" + exercise_id.replace(".", "_")
            if item.get_closest_marker(marker) is None:
                item.add_marker(getattr(pytest.mark, marker))


def _where_raised(error: BaseException) -> str:
    traceback = error.__traceback__
    while traceback is not None and traceback.tb_next is not None:
        traceback = traceback.tb_next
    if traceback is None:
        return ""
    filename = Path(traceback.tb_frame.f_code.co_filename)
    parts = filename.parts
    shown = "/".join(parts[parts.index("minitransformer"):]) if "minitransformer" in parts else str(filename)
    return f"{shown}:{traceback.tb_lineno}"


def unsolved_message(exercise_id: str, where: str = "", own: bool = False) -> str:
    """The report of a test that cannot pass before Exercise ``exercise_id`` is solved."""
    exercise = _exercises.get(exercise_id)
    title = f" ({exercise.title})" if exercise else ""
    first = (f"Exercise {exercise_id}{title} is not solved yet: this test grades it." if own else
             f"needs Exercise {exercise_id}{title}, which is not solved yet.")
    lines = [first, f"  (NotImplementedError: Exercise {exercise_id}" + (f", raised at {where})" if where else ")")]
    if exercise:
        lines.append(f"  Solve it in {exercise.file}; {exercise.chapter} explains it.")
    lines.append(f"  Then check it with: python -m minitransformer.exercises check {exercise_id}")
    return "\n".join(lines)


def explain_unsolved(item, call, report) -> None:
    """Replace the traceback of a failure caused by an unsolved exercise with a short explanation."""
    if not report.failed or call.excinfo is None:
        return
    error = unsolved_in(call.excinfo.value)
    if error is not None:
        exercise_id = str(error).split()[1].rstrip(":")
        where = _where_raised(error)
    else:  # the exception travelled as text (a notebook cell's error): find it in the message
        match = RAISED.search(str(call.excinfo.value))
        if match is None:
            return
        exercise_id, where = match.group(1), ""
    own = item.get_closest_marker(grading_marker(exercise_id)) is not None
    report.longrepr = unsolved_message(exercise_id, where, own) + "\n"


# -- the guard against graph building, in the student's own process ------------------------------------------------
_backward_methods: list[tuple[str, str, str]] | None = None


def backward_exercise_methods() -> list[tuple[str, str, str]]:
    """(exercise id, module, Class.backward) of each exercise whose block lies in a Function's ``backward``: the
    backward exercises. Read from the package that runs (its headers stand in either edition)."""
    global _backward_methods
    if _backward_methods is None:
        from .registry import repository_root
        from .trial import enclosing_functions, module_name

        found = []
        root = repository_root()
        for exercise in load_exercises(root):
            for block in exercise.blocks:
                text = (root / block.path).read_text(encoding="utf-8")
                for qualname in enclosing_functions(text, [block.header_line]):
                    entry = (exercise.id, module_name(block.path), qualname)
                    if qualname.endswith(".backward") and entry not in found:
                        found.append(entry)
        _backward_methods = found
    return _backward_methods


def _guarded(method):
    """``method`` (a Function's backward) run under cases.no_graph_building."""
    from .cases import no_graph_building

    @functools.wraps(method)
    def backward(self, *args, **kwargs):
        with no_graph_building():
            return method(self, *args, **kwargs)
    return backward


@contextlib.contextmanager
def graded_backwards_guarded(item):
    """While a grading test (marked ``grades_X``) runs, every backward exercise's backward refuses to build a graph:
    GraphInBackward, with the grader's words, as in ``grade``'s sandbox. Other tests run as they are."""
    if not any(mark.name.startswith("grades_") for mark in item.iter_markers()):
        yield
        return
    from .trial import resolve

    try:
        methods = backward_exercise_methods()
    except Exception:               # a malformed header: register_markers has warned about it already
        methods = []
    swapped = []
    try:
        for _, module, qualname in methods:
            try:
                owner = resolve(importlib.import_module(module), qualname.rsplit(".", 1)[0])
            except Exception:       # a module that does not import: the test itself says why
                continue
            method = vars(owner).get("backward")
            if method is not None:
                setattr(owner, "backward", _guarded(method))
                swapped.append((owner, method))
        yield
    finally:
        for owner, method in reversed(swapped):
            setattr(owner, "backward", method)
