"""The package's modules import each other without circles, except the engine's one deliberate circle.

``tensor.py`` defines Tensor and Function and, at its end, imports ``ops`` for the operator spellings
(``a + b`` is ``ops.add``), while every op imports Function from ``tensor``. Any other circle means two
modules that cannot be read (or imported, or tested) one without the other. The graph is read from the
source (every ``import`` statement, those inside functions included), not from what Python happened to
import, so a lazy import that only hides a circle counts as one.
"""
from __future__ import annotations

import ast
from pathlib import Path

import minitransformer

PACKAGE = Path(minitransformer.__file__).resolve().parent


def modules(root: Path, name: str) -> dict[str, Path]:
    """Dotted module name -> file, for every .py file of the package at ``root`` (a package is its __init__)."""
    found = {}
    for path in sorted(root.rglob("*.py")):
        parts = [name, *path.relative_to(root).with_suffix("").parts]
        if parts[-1] == "__init__":
            parts.pop()
        found[".".join(parts)] = path
    return found


def import_graph(root: Path, name: str) -> dict[str, set[str]]:
    """Module -> the modules of the package it imports. ``from .x import y`` is an edge to module ``x.y``
    when ``y`` is a module, else to ``x``."""
    files = modules(root, name)
    graph: dict[str, set[str]] = {module: set() for module in files}
    for module, path in files.items():
        package = module if path.name == "__init__.py" else module.rpartition(".")[0]
        for node in ast.walk(ast.parse(path.read_text(encoding="utf-8"))):
            if isinstance(node, ast.ImportFrom):
                if node.level:
                    base = package.split(".")[:len(package.split(".")) - node.level + 1]
                    target = ".".join(base + ([node.module] if node.module else []))
                else:
                    target = node.module or ""
                for alias in node.names:
                    submodule = f"{target}.{alias.name}"
                    if submodule in files:
                        graph[module].add(submodule)
                    elif target in files:
                        graph[module].add(target)
            elif isinstance(node, ast.Import):
                graph[module].update(alias.name for alias in node.names if alias.name in files)
    return graph


def circles(graph: dict[str, set[str]]) -> list[set[str]]:
    """The sets of modules that import each other in a circle: the strongly connected components with more
    than one module (Tarjan's algorithm, iterative), and any module that imports itself."""
    index: dict[str, int] = {}
    low: dict[str, int] = {}
    stack: list[str] = []
    on_stack: set[str] = set()
    found: list[set[str]] = []
    for start in graph:
        if start in index:
            continue
        work = [(start, iter(sorted(graph[start])))]
        index[start] = low[start] = len(index)
        stack.append(start)
        on_stack.add(start)
        while work:
            node, successors = work[-1]
            for successor in successors:
                if successor not in index:
                    index[successor] = low[successor] = len(index)
                    stack.append(successor)
                    on_stack.add(successor)
                    work.append((successor, iter(sorted(graph[successor]))))
                    break
                if successor in on_stack:
                    low[node] = min(low[node], index[successor])
            else:
                work.pop()
                if work:
                    low[work[-1][0]] = min(low[work[-1][0]], low[node])
                if low[node] == index[node]:
                    component = set()
                    while True:
                        member = stack.pop()
                        on_stack.discard(member)
                        component.add(member)
                        if member == node:
                            break
                    if len(component) > 1 or node in graph[node]:
                        found.append(component)
    return found


def test_the_only_import_circle_is_the_engines_tensor_and_ops():
    found = circles(import_graph(PACKAGE, "minitransformer"))
    assert len(found) == 1, f"import circles besides tensor <-> ops: {[sorted(c) for c in found]}"
    (engine,) = found
    assert {"minitransformer.tensor", "minitransformer.ops"} <= engine
    others = engine - {"minitransformer.tensor", "minitransformer.ops"}
    assert all(module.startswith("minitransformer.ops.") for module in others), sorted(others)


def test_no_module_of_data_is_in_a_circle():
    graph = import_graph(PACKAGE, "minitransformer")
    data = {module: {m for m in targets if m.startswith("minitransformer.data")}
            for module, targets in graph.items() if module.startswith("minitransformer.data")}
    assert len(data) >= 15 and circles(data) == []


def test_a_circle_is_found_even_through_a_lazy_import(tmp_path):
    package = tmp_path / "pkg"
    (package / "sub").mkdir(parents=True)
    (package / "__init__.py").write_text("")
    (package / "a.py").write_text("from .sub.b import thing\n")
    (package / "sub" / "__init__.py").write_text("")
    (package / "sub" / "b.py").write_text("def thing():\n    from .. import a\n    return a\n")
    (package / "c.py").write_text("from . import a\nimport pkg.c\n")          # imports a (no circle) and itself
    graph = import_graph(package, "pkg")
    assert graph["pkg.a"] == {"pkg.sub.b"} and graph["pkg.sub.b"] == {"pkg.a"}
    assert sorted(map(sorted, circles(graph))) == [["pkg.a", "pkg.sub.b"], ["pkg.c"]]
    (package / "sub" / "b.py").write_text("def thing():\n    return 1\n")
    assert circles(import_graph(package, "pkg")) == [{"pkg.c"}]
