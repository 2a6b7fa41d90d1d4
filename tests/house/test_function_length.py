"""No function in the package runs over MAX_LINES lines unless ALLOWED says why.

A long function is read as one block; split into named steps it reads as its outline. The length is the
function's lines from ``def`` to its last line, its docstring not counted (a docstring explains, it does
not add steps). A function that is long for a reason (a table, one entry per exercise) is listed in
ALLOWED with that reason; an entry that no longer names a long function is reported too, so that the
list cannot outgrow the code.
"""
from __future__ import annotations

import ast
from pathlib import Path

import minitransformer

PACKAGE = Path(minitransformer.__file__).resolve().parent
MAX_LINES = 60

# "module path:qualified name" -> why it is long
ALLOWED: dict[str, str] = {}


def _docstring_lines(function: ast.FunctionDef | ast.AsyncFunctionDef) -> int:
    first = function.body[0]
    if isinstance(first, ast.Expr) and isinstance(first.value, ast.Constant) and isinstance(first.value.value, str):
        return first.end_lineno - first.lineno + 1
    return 0


def function_lengths(root: Path = PACKAGE) -> dict[str, int]:
    """"path:qualified.name" -> lines without the docstring, for every function and method under ``root``."""
    lengths: dict[str, int] = {}

    def visit(node: ast.AST, path: str, prefix: str) -> None:
        for child in ast.iter_child_nodes(node):
            if isinstance(child, (ast.FunctionDef, ast.AsyncFunctionDef)):
                name = prefix + child.name
                lengths[f"{path}:{name}"] = child.end_lineno - child.lineno + 1 - _docstring_lines(child)
                visit(child, path, name + ".")
            elif isinstance(child, ast.ClassDef):
                visit(child, path, prefix + child.name + ".")

    for file in sorted(root.rglob("*.py")):
        visit(ast.parse(file.read_text(encoding="utf-8")), file.relative_to(root).as_posix(), "")
    return lengths


def test_no_function_is_longer_than_the_limit_without_a_reason():
    lengths = function_lengths()
    too_long = {name: n for name, n in lengths.items() if n > MAX_LINES and name not in ALLOWED}
    assert not too_long, (f"functions over {MAX_LINES} lines (docstring not counted): {too_long}; split them "
                          f"into named steps, or list them in ALLOWED with the reason")


def test_every_allowed_function_exists_is_long_and_says_why():
    lengths = function_lengths()
    for name, why in ALLOWED.items():
        assert name in lengths, f"ALLOWED names {name}, which the package no longer has"
        assert lengths[name] > MAX_LINES, f"{name} is {lengths[name]} lines now: take it off ALLOWED"
        assert len(why) > 20, f"{name}: say why it is long"


def test_the_measure_counts_a_planted_long_function(tmp_path):
    """The check can fail: a 70-line function in a package of one file is found, its docstring not counted."""
    body = "\n".join(f"    x{i} = {i}" for i in range(69))
    method_body = "\n".join("    " + line for line in body.splitlines())
    (tmp_path / "planted.py").write_text(f'def long():\n    """Says\n    nothing."""\n{body}\n\n\ndef short():\n'
                                         f'    return 1\n\n\nclass C:\n    def method(self):\n{method_body}\n')
    lengths = function_lengths(tmp_path)
    assert lengths == {"planted.py:long": 70, "planted.py:short": 2, "planted.py:C.method": 70}
