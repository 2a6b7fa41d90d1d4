"""The house's layers, read from the source (every import statement, those inside functions too, as in
test_import_graph.py), not from what Python happened to import:

* data/ is host-side NumPy: it imports nothing of the package outside data/ (no tensor, ops, functional,
  nn, backend), so reading and batching a corpus does not load the autograd engine;
* nn/ (the model) imports nothing of the trainer, the command line, the classroom or the translator; the
  named sizes it reads come from presets.py, a module of plain data that itself imports nothing of the
  package, so it cannot be a door from the model into the command line;
* the engine's own checker (gradcheck.py) knows nothing of the classroom;
* the tools (tools/*.py, scripts that import each other by name) import each other without a circle.
"""
from __future__ import annotations

import ast
import sys
from pathlib import Path

import pytest

sys.path.insert(0, str(Path(__file__).resolve().parent))
from test_import_graph import PACKAGE, circles, import_graph  # noqa: E402

TOOLS = Path(__file__).resolve().parents[2] / "tools"


@pytest.fixture(scope="module")
def graph() -> dict[str, set[str]]:
    return import_graph(PACKAGE, "minitransformer")


def reaches(graph: dict[str, set[str]], layer: str, forbidden: tuple[str, ...]) -> list[str]:
    """'module -> target' for every import of a module of ``layer`` into a module under ``forbidden``."""
    inside = lambda module, prefix: module == prefix or module.startswith(prefix + ".")  # noqa: E731
    return sorted(f"{module} -> {target}" for module, targets in graph.items() if inside(module, layer)
                  for target in targets if any(inside(target, f) for f in forbidden))


def test_data_imports_nothing_of_the_package_outside_data(graph):
    modules = [m for m in graph if m.startswith("minitransformer.data")]
    assert len(modules) >= 15
    outside = sorted(f"{module} -> {target}" for module in modules for target in graph[module]
                     if not target.startswith("minitransformer.data"))
    assert not outside, f"data/ is host-side NumPy only; these imports load more of the package: {outside}"


def test_the_model_reads_neither_the_trainer_nor_the_command_line(graph):
    forbidden = ("minitransformer.training", "minitransformer.__main__", "minitransformer.exercises",
                 "minitransformer.translator")
    assert len([m for m in graph if m.startswith("minitransformer.nn")]) >= 10
    assert not reaches(graph, "minitransformer.nn", forbidden)
    assert graph["minitransformer.presets"] == set(), "presets.py is plain data: it imports nothing of the package"


def test_gradcheck_knows_nothing_of_the_classroom(graph):
    assert not reaches(graph, "minitransformer.gradcheck", ("minitransformer.exercises",))
    tree = ast.parse((PACKAGE / "gradcheck.py").read_text(encoding="utf-8"))
    raised = {id(node) for statement in ast.walk(tree) if isinstance(statement, ast.Raise)
              for node in ast.walk(statement)}        # the student edition's stub raises "Exercise 1.1: ..."
    looked_for = [node.value for node in ast.walk(tree) if id(node) not in raised
                  and isinstance(node, ast.Constant) and isinstance(node.value, str) and "Exercise" in node.value]
    assert not looked_for, "gradcheck.py looks for the classroom's errors; the classroom (exercises/) should"


def tool_graph(tools: Path) -> dict[str, set[str]]:
    """tools/NAME.py -> the tools it imports (by module name, as the scripts do after a sys.path insert)."""
    names = {path.stem for path in tools.glob("*.py")}
    graph = {}
    for path in tools.glob("*.py"):
        imported = set()
        for node in ast.walk(ast.parse(path.read_text(encoding="utf-8"))):
            if isinstance(node, ast.Import):
                imported.update(alias.name for alias in node.names)
            elif isinstance(node, ast.ImportFrom) and node.level == 0 and node.module:
                imported.add(node.module)
        graph[path.stem] = {name for name in imported if name in names and name != path.stem}
    return graph


def test_the_tools_import_each_other_without_a_circle():
    graph = tool_graph(TOOLS)
    assert {"quoted_numbers", "captions", "unmarked", "book_files"} <= set(graph)
    assert "book_files" in graph["captions"] and "book_files" in graph["unmarked"]
    assert circles(graph) == [], f"tools in an import circle: {circles(graph)}"


def test_a_circle_among_tools_is_found(tmp_path):
    (tmp_path / "a.py").write_text("import sys\nfrom b import x\n")
    (tmp_path / "b.py").write_text("def f():\n    import a\n")
    (tmp_path / "c.py").write_text("from b import f\n")
    assert circles(tool_graph(tmp_path)) == [{"a", "b"}]


def test_a_reach_across_layers_is_found():
    graph = {"minitransformer.nn.transformer": {"minitransformer.training.trainer", "minitransformer.tensor"},
             "minitransformer.nn": {"minitransformer.nn.transformer"}}
    assert reaches(graph, "minitransformer.nn", ("minitransformer.training",)) == \
        ["minitransformer.nn.transformer -> minitransformer.training.trainer"]
