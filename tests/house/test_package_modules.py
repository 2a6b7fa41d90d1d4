"""The package walk that whole-package tests use skips a module only for want of an optional extra."""
from __future__ import annotations

import importlib.util
import sys
from pathlib import Path

import pytest

from package_modules import OPTIONAL_IMPORTS, extras_in_pyproject, import_package

ROOT = Path(__file__).resolve().parents[2]


def test_each_optional_import_is_installed_by_the_extra_it_names():
    extras = extras_in_pyproject(ROOT)
    for name, extra in OPTIONAL_IMPORTS.items():
        assert extra in extras, f"pyproject.toml has no extra {extra!r} (for {name})"
        assert any(requirement.startswith(name) for requirement in extras[extra]), (name, extras[extra])


def test_the_course_side_of_the_grader_is_skipped_exactly_when_nbgrader_is_absent():
    imported, skipped = import_package()
    course = "minitransformer.exercises.course_grading"
    if importlib.util.find_spec("nbgrader") is None:
        assert skipped == {course: "classroom"}
    else:
        assert course in imported and not skipped
    assert "minitransformer.exercises.grading" in imported


def _planted(tmp_path, monkeypatch, body: str) -> str:
    package = tmp_path / "planted_package"
    package.mkdir()
    (package / "__init__.py").write_text("")
    (package / "fine.py").write_text("VALUE = 1\n")
    (package / "needs_something.py").write_text(body)
    monkeypatch.syspath_prepend(str(tmp_path))
    monkeypatch.delitem(sys.modules, "planted_package", raising=False)
    return "planted_package"


def test_a_module_missing_an_ordinary_dependency_fails_the_walk(tmp_path, monkeypatch):
    package = _planted(tmp_path, monkeypatch, "import a_dependency_nobody_declared\n")
    with pytest.raises(ModuleNotFoundError, match="a_dependency_nobody_declared"):
        import_package(package)


def test_a_module_missing_an_optional_extra_is_skipped_and_named(tmp_path, monkeypatch):
    if importlib.util.find_spec("cupy") is not None:
        pytest.skip("CuPy is installed here, so a module importing it does not fail")
    package = _planted(tmp_path, monkeypatch, "import cupy\n")
    imported, skipped = import_package(package)
    assert imported == ["planted_package.fine"]
    assert skipped == {"planted_package.needs_something": "gpu"}
