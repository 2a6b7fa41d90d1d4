"""Every module of the package, imported, except those whose optional extra is not installed.

A test that walks the whole package (every Function subclass, the student edition imports cleanly) must
not depend on an optional extra: the README's test command installs none of them. A module that needs
one says so by failing with ModuleNotFoundError for that extra's import name; only such a failure is
skipped, so a module that is broken for any other reason still fails the walk.
"""
from __future__ import annotations

import importlib
import pkgutil
import tomllib
from pathlib import Path

# import name -> the extra of pyproject.toml that installs it (tests/house/test_package_modules.py keeps it true)
OPTIONAL_IMPORTS = {"nbgrader": "classroom", "cupy": "gpu", "mpi4py": "mpi"}


def import_package(package: str = "minitransformer") -> tuple[list[str], dict[str, str]]:
    """Import every module under ``package`` (not ``__main__``): the names imported, and name -> extra skipped."""
    root = importlib.import_module(package)
    imported, skipped = [], {}
    for module in pkgutil.walk_packages(root.__path__, package + "."):
        if module.name.endswith("__main__"):
            continue
        try:
            importlib.import_module(module.name)
        except ModuleNotFoundError as error:
            top = (error.name or "").partition(".")[0]
            if top not in OPTIONAL_IMPORTS:
                raise
            skipped[module.name] = OPTIONAL_IMPORTS[top]
        else:
            imported.append(module.name)
    return imported, skipped


def extras_in_pyproject(root: Path) -> dict[str, list[str]]:
    """pyproject.toml's optional extras: name -> requirement strings."""
    with open(root / "pyproject.toml", "rb") as handle:
        return tomllib.load(handle)["project"]["optional-dependencies"]
