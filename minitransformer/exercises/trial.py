"""Try another version of a function in a running package: compile a changed module text, swap code objects.

Used where the code is the teacher's (a catalogued mistake run on the cases, a listing of the student
edition tried in an exercise's stub) and by the nbgrader notebooks (the student's function installed
into the package, in the sandboxed kernel). The function object stays the same, so every module that
imported it by name runs the new code, with the module's own globals.
"""
from __future__ import annotations

import ast
import contextlib
import importlib
from types import ModuleType
from .registry import parse_python


def enclosing_functions(text: str, lines: list[int]) -> list[str]:
    """The qualified names (``Class.method``) of the innermost functions holding each of ``lines`` (1-based)."""
    found: list[str] = []
    tree = parse_python(text)

    def visit(node, prefix: list[str]):
        for child in ast.iter_child_nodes(node):
            if isinstance(child, (ast.FunctionDef, ast.AsyncFunctionDef, ast.ClassDef)):
                yield from visit(child, [*prefix, child.name])
                if not isinstance(child, ast.ClassDef):
                    yield child, ".".join([*prefix, child.name])

    functions = list(visit(tree, []))
    for line in lines:
        holders = [(node, name) for node, name in functions if node.lineno < line <= node.end_lineno]
        if holders:
            _, name = max(holders, key=lambda pair: pair[0].lineno)
            if name not in found:
                found.append(name)
    return found


def resolve(owner, qualname: str):
    """The plain function object at ``qualname`` in a module or namespace (a staticmethod's underlying one too)."""
    *path, last = qualname.split(".")
    for part in path:
        owner = owner[part] if isinstance(owner, dict) else getattr(owner, part)
    function = owner[last] if isinstance(owner, dict) else vars(owner)[last] if isinstance(owner, type) \
        else getattr(owner, last)
    return getattr(function, "__func__", function)


def compile_module(module: ModuleType, text: str) -> dict:
    """Run ``text`` as if it were ``module``'s source, in a fresh namespace (relative imports work)."""
    namespace = {"__name__": module.__name__, "__package__": module.__package__,
                 "__file__": getattr(module, "__file__", None), "__builtins__": __builtins__}
    exec(compile(text, getattr(module, "__file__", None) or "<trial>", "exec"), namespace)
    return namespace


@contextlib.contextmanager
def swapped(module_name: str, text: str, qualnames: list[str]):
    """Inside the block, the functions ``qualnames`` of ``module_name`` run the code they have in ``text``."""
    module = importlib.import_module(module_name)
    namespace = compile_module(module, text)
    originals = []
    try:
        for qualname in qualnames:
            function = resolve(module, qualname)
            originals.append((function, function.__code__))
            function.__code__ = resolve(namespace, qualname).__code__
        yield
    finally:
        for function, code in originals:
            function.__code__ = code


def module_name(path: str) -> str:
    """"minitransformer/ops/matmul.py" -> "minitransformer.ops.matmul"."""
    return path.removesuffix(".py").replace("/", ".").removesuffix(".__init__")
