"""No second route to an answer: in the student edition, every other function or class that computes what an
exercise computes gets there through the exercise's own function, so it raises the exercise's
NotImplementedError until the exercise is solved (TEACHING.md: "other code answering an exercise must call the
exercise's function"). A submission cannot then answer an exercise by calling such code (tests/cheats.py,
"computes it by another route").

Two proofs, one general and one exact:

* static, over every exercise: no code of the student edition's package (solution blocks and fast forms gone)
  reproduces a solution block. Each block's statements, and the expressions they compute, are reduced to a
  normal form (variable names, ``self.`` attributes included, numbered in order of appearance; numbers as
  floats; called functions, attributes and operators kept) and looked for everywhere in the package; a function
  that holds three quarters or more of a block's forms is a copy of it (ALLOWED names the one that may, and
  why; at a half, backwards that mirror their forward, 13.3's, would count). It finds copies, renamed or not
  (two planted ones are found below); an equivalent computation written differently (the corpus AER by its own
  formula) it cannot see.
* dynamic, for the known routes: ROUTES lists them per exercise, each a few lines run in a graded package (the
  student edition with the exercise taken out), and each must reach the exercise's NotImplementedError; the proof
  is shown to catch a second route planted in a copy (the corpus AER computed by its own formula, as it once was).
"""
from __future__ import annotations

import ast
import json
import math
import os
import subprocess
import sys
import textwrap
from pathlib import Path

import pytest

from minitransformer.exercises import casebook
from minitransformer.exercises.edition import TEACHER_ONLY, strip_python, write_edition
from minitransformer.exercises.registry import get_exercise, load_exercises, package_sources, parse_file
from submissions import ROOT

pytestmark = pytest.mark.skipif(not any(e.has_solution for e in load_exercises(ROOT)),
                                reason="a student edition: every route already raises")

ROUTES = {
    "12.1": {"the corpus AER (AlignmentTally)": """
                 from minitransformer.alignment_scores import AlignmentTally
                 tally = AlignmentTally()
                 tally.add(np.eye(3), [(0, 0), (1, 1), (2, 2)])
                 tally.scores()
             """},
    "11.2": {"corpus statistics (bleu_stats)": """
                 from minitransformer.bleu import bleu_stats
                 bleu_stats(["the cat sat"], ["the cat sat"], tokenize="none")
             """,
             "sentence BLEU": """
                 from minitransformer.bleu import sentence_bleu
                 sentence_bleu("the cat sat", "the cat sat")
             """,
             "corpus BLEU": """
                 from minitransformer.bleu import corpus_bleu_score
                 corpus_bleu_score(["the cat sat"], ["the cat sat"])
             """},
    "13.1": {"the flash forward": """
                 import minitransformer.functional as F
                 q = np.random.default_rng(0).standard_normal((1, 1, 5, 2))
                 F.flash_attention(q, q, q, block_size=2)
             """},
    "4.3": {"the fused projection and loss (linear_cross_entropy)": """
                import minitransformer as mt
                import minitransformer.functional as F
                x = mt.Tensor(np.random.default_rng(0).standard_normal((3, 4)), requires_grad=True)
                F.linear_cross_entropy(x, np.eye(4), [1, 0, 3], label_smoothing=0.1, ignore_index=0)
            """,
            "the loss's own backward": """
                import minitransformer as mt
                import minitransformer.functional as F
                x = mt.Tensor(np.random.default_rng(0).standard_normal((3, 4)), requires_grad=True)
                F.cross_entropy(x, [1, 0, 3], label_smoothing=0.1, ignore_index=0).backward()
            """},
    "5.1": {"the LayerNorm module's backward": """
                import minitransformer as mt
                from minitransformer.nn import LayerNorm
                x = mt.Tensor(np.random.default_rng(0).standard_normal((2, 4)), requires_grad=True)
                LayerNorm(4)(x).backward(np.ones((2, 4)))
            """,
            "the fast form (fast/normalization.py)": """
                import minitransformer as mt
                from minitransformer.fast.normalization import layer_norm
                x = mt.Tensor(np.random.default_rng(0).standard_normal((2, 4)), requires_grad=True)
                layer_norm(x).backward(np.ones((2, 4)))
            """},
}

RUN = """
import json, sys, textwrap
import numpy as np
found = {}
for name, code in json.loads(sys.argv[1]).items():
    try:
        exec(textwrap.dedent(code), {"np": np})
        found[name] = None
    except NotImplementedError as error:
        found[name] = str(error)
    except Exception as error:
        found[name] = f"{type(error).__name__}: {error}"
print(json.dumps(found))
"""


def routes_that_answer(package_root: Path, exercise_id: str) -> dict[str, str]:
    """The routes of ``exercise_id`` that do not reach its NotImplementedError in the package at ``package_root``:
    name -> what happened instead."""
    result = subprocess.run([sys.executable, "-c", RUN, json.dumps(ROUTES[exercise_id])], cwd=package_root,
                            env={**os.environ, "PYTHONPATH": str(package_root), "MPLBACKEND": "Agg"},
                            capture_output=True, text=True, timeout=300)
    assert result.returncode == 0, result.stderr
    found = json.loads(result.stdout.splitlines()[-1])
    return {name: why or "it returned an answer" for name, why in found.items()
            if not (why or "").startswith(f"Exercise {exercise_id}:")}


@pytest.mark.parametrize("exercise_id", sorted(ROUTES))
def test_every_other_route_to_an_answer_calls_the_exercises_function(exercise_id, tmp_path):
    package = casebook.graded_package(ROOT, tmp_path / "edition", get_exercise(exercise_id, ROOT), keep_own=False)
    assert routes_that_answer(package, exercise_id) == {}


def test_the_proof_finds_a_second_route_planted_in_the_edition(tmp_path):
    package = casebook.graded_package(ROOT, tmp_path / "edition", get_exercise("12.1", ROOT), keep_own=False)
    path = package / "minitransformer" / "alignment_scores.py"
    text = path.read_text(encoding="utf-8")
    planted = text.replace('"aer": alignment_error_rate(*self.as_one_sentence())',
                           '"aer": 1.0 - (self.sure_hits + self.hits) / (self.rows + self.sure)')
    assert planted != text
    path.write_text(planted, encoding="utf-8")
    assert list(routes_that_answer(package, "12.1")) == ["the corpus AER (AlignmentTally)"]


def test_the_corpus_aer_is_the_aer_of_one_sentence_with_the_same_counts():
    import numpy as np

    from minitransformer.alignment_scores import AlignmentTally

    rng = np.random.default_rng(3)
    for _ in range(20):
        tally = AlignmentTally()
        for _ in range(int(rng.integers(1, 5))):
            rows, columns = (int(n) for n in rng.integers(1, 6, 2))
            links = {(int(rng.integers(0, columns)), int(rng.integers(0, rows))) for _ in range(int(rng.integers(1, 8)))}
            tally.add(rng.dirichlet(np.ones(columns), size=rows), sorted(links))
        direct = 1.0 - (tally.sure_hits + tally.hits) / (tally.rows + tally.sure)
        assert tally.scores()["aer"] == pytest.approx(direct, abs=1e-12)


# -- the static proof: no code of the student edition reproduces a solution block ---------------------------------
SMALLEST = 8        # forms of fewer AST nodes (``x = a + b``) are too common to say anything
SHARE = 0.75        # a function that holds this share of a block's forms (at least one) reproduces the block
# what the package may hold of a block, and why: (exercise, file:function) -> the reason
ALLOWED = {("2.3", "minitransformer/ops/shape.py:BroadcastTo.forward"):
           "sum's backward is NumPy's broadcast_to of the gradient, as BroadcastTo's forward is of its input: the "
           "lesson is to see that the gradient of a sum is a broadcast, which calling BroadcastTo does not skip"}


def normal_form(node: ast.AST, names: dict | None = None) -> str:
    """``node`` with its variables (and ``self.`` attributes) numbered in order of appearance, numbers as floats;
    called names, attributes, operators and strings kept. ``gx = inv_std * (g - m)`` and ``out = s * (h - k)`` have
    the same form."""
    names = {} if names is None else names
    if isinstance(node, ast.Name):
        return f"v{names.setdefault(node.id, len(names))}"
    if isinstance(node, ast.Attribute) and isinstance(node.value, ast.Name) and node.value.id == "self":
        return f"v{names.setdefault('self.' + node.attr, len(names))}"
    if isinstance(node, ast.Constant):
        value = node.value
        number = isinstance(value, (int, float)) and not isinstance(value, bool)
        return repr(float(value)) if number else repr(value)
    parts = []
    for field, value in ast.iter_fields(node):
        if field == "func" and isinstance(value, ast.Name):
            parts.append(value.id)                      # a called function keeps its name: len, min, unbroadcast
        elif isinstance(value, list):
            parts.append("[" + ",".join(normal_form(v, names) if isinstance(v, ast.AST) else repr(v)
                                        for v in value) + "]")
        elif isinstance(value, ast.AST):
            if not isinstance(value, ast.expr_context):
                parts.append(normal_form(value, names))
        elif value is not None and field != "type_comment":
            parts.append(repr(value))
    return f"{type(node).__name__}({','.join(parts)})"


def _sizes(tree: ast.AST) -> dict[int, int]:
    """id(node) -> the number of AST nodes under it (itself included; load/store contexts not counted)."""
    sizes: dict[int, int] = {}

    def visit(node) -> int:
        total = 0 if isinstance(node, ast.expr_context) else 1
        for child in ast.iter_child_nodes(node):
            total += visit(child)
        sizes[id(node)] = total
        return total

    visit(tree)
    return sizes


def block_forms(code: str) -> set[tuple[str, int, str]]:
    """(node type, size, normal form) of each statement of a block (an ``if`` with all it holds, and each statement
    inside it) and of the expression it computes (an assignment's value, a return's, a condition), those of
    SMALLEST nodes or more."""
    tree = ast.parse(textwrap.dedent(code))
    sizes = _sizes(tree)
    forms = set()
    for node in ast.walk(tree):
        parts = [node] if isinstance(node, ast.stmt) else []
        parts += [getattr(node, field) for field in ("value", "test", "iter")
                  if isinstance(getattr(node, field, None), ast.expr) and isinstance(node, ast.stmt)]
        for part in parts:
            if sizes[id(part)] >= SMALLEST:
                forms.add((type(part).__name__, sizes[id(part)], normal_form(part)))
    return forms


def solution_blocks(root: Path) -> dict[str, list[tuple[str, int, set]]]:
    """Exercise id -> (file, first line, forms) of each of its solution blocks in the teacher's edition at ``root``."""
    found: dict[str, list] = {}
    for source in package_sources(root):
        path = source.relative_to(root).as_posix()
        text = source.read_text(encoding="utf-8")
        lines = text.splitlines(keepends=True)
        for info, block in parse_file(text, path):
            if block.begin is not None:
                forms = block_forms("".join(lines[block.begin:block.end - 1]))
                found.setdefault(info["id"], []).append((path, block.begin, forms))
    return found


def edition_package(root: Path, edition: Path | None = None) -> dict[str, str]:
    """File -> text of the student edition's package: written at ``edition``, or made here from ``root``."""
    if edition is not None:
        return {p.relative_to(edition).as_posix(): p.read_text(encoding="utf-8") for p in package_sources(edition)}
    texts = {}
    for source in package_sources(root):
        path = source.relative_to(root).as_posix()
        if path not in TEACHER_ONLY:
            texts[path] = strip_python(source.read_text(encoding="utf-8"), path)
    return texts


def reproductions(blocks: dict[str, list], package: dict[str, str]) -> dict[str, list[str]]:
    """Exercise id -> "file:function (k of n forms of the block at file:line)" for each function of ``package``
    that reproduces one of its blocks."""
    wanted: dict[tuple[str, int], set[str]] = {}
    for found in blocks.values():
        for _, _, forms in found:
            for kind, size, form in forms:
                wanted.setdefault((kind, size), set()).add(form)
    seen: dict[str, set[str]] = {}          # location (file:function) -> the forms found there
    for path, text in package.items():
        tree = ast.parse(text)
        sizes = _sizes(tree)

        def visit(node, where: str) -> None:
            if isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef, ast.ClassDef)):
                where = f"{where}.{node.name}" if where else node.name
            if isinstance(node, (ast.expr, ast.stmt)):
                signature = (type(node).__name__, sizes[id(node)])
                if signature in wanted:
                    form = normal_form(node)
                    if form in wanted[signature]:
                        seen.setdefault(f"{path}:{where or '<module>'}", set()).add(form)
            for child in ast.iter_child_nodes(node):
                visit(child, where)

        visit(tree, "")
    found: dict[str, list[str]] = {}
    for exercise_id, exercise_blocks in blocks.items():
        for path, begin, forms in exercise_blocks:
            own = {form for _, _, form in forms}
            for location, forms_there in sorted(seen.items()):
                shared = own & forms_there
                if own and len(shared) >= max(1, math.ceil(SHARE * len(own))) and \
                        (exercise_id, location) not in ALLOWED:
                    found.setdefault(exercise_id, []).append(
                        f"{location} ({len(shared)} of {len(own)} forms of the block at {path}:{begin})")
    return found


def test_every_solution_block_has_forms_to_look_for():
    blocks = solution_blocks(ROOT)
    assert set(blocks) == {e.id for e in load_exercises(ROOT) if e.has_solution}    # (an edition may lack some)
    empty = [f"{i} ({path}:{begin})" for i, found in blocks.items() for path, begin, forms in found if not forms]
    assert not empty, f"blocks too small for the static proof (fewer than {SMALLEST} AST nodes a statement): {empty}"


def test_no_code_of_the_student_edition_reproduces_a_solution_block():
    assert reproductions(solution_blocks(ROOT), edition_package(ROOT)) == {}


def test_the_static_proof_finds_copies_planted_in_another_module_renamed_or_not(tmp_path):
    edition = tmp_path / "edition"
    write_edition(ROOT, edition, only=("minitransformer/",))
    blocks = solution_blocks(ROOT)
    assert reproductions(blocks, edition_package(ROOT, edition)) == {}
    texts = {path: (ROOT / path).read_text(encoding="utf-8") for path in ("minitransformer/functional/normalization.py",
                                                                          "minitransformer/alignment_scores.py")}
    layer_norm = _block_text(texts["minitransformer/functional/normalization.py"], "5.1")
    renamed = layer_norm
    for old, new in (("g_weight", "d_gamma"), ("g_bias", "d_beta"), ("mean_g_x_hat", "m2"), ("mean_g", "m1"),
                     ("x_hat", "xn"), ("inv_std", "r"), ("gx", "dx")):
        renamed = renamed.replace(old, new)
    assert renamed != layer_norm
    aer = _block_text(texts["minitransformer/alignment_scores.py"], "12.1")
    planted = edition / "minitransformer" / "functional" / "linear.py"
    planted.write_text(planted.read_text(encoding="utf-8") + "\n\ndef _helper(gy, xn, r, weight, leading):\n"
                       + textwrap.indent(textwrap.dedent(renamed), "    ") + "    return dx, d_gamma, d_beta\n",
                       encoding="utf-8")
    other = edition / "minitransformer" / "bleu.py"
    other.write_text(other.read_text(encoding="utf-8") + "\n\ndef _rate(weights, links, partners, possible):\n"
                     + textwrap.indent(textwrap.dedent(aer), "    "), encoding="utf-8")
    found = reproductions(blocks, edition_package(ROOT, edition))
    assert sorted(found) == ["12.1", "5.1"], found
    assert found["5.1"][0].startswith("minitransformer/functional/linear.py:_helper ("), found
    assert found["12.1"][0].startswith("minitransformer/bleu.py:_rate ("), found


def _block_text(text: str, exercise_id: str) -> str:
    """The lines of the (first) solution block of ``exercise_id`` in a file's text."""
    lines = text.splitlines(keepends=True)
    [block, *_] = [b for info, b in parse_file(text, "") if info["id"] == exercise_id]
    return "".join(lines[block.begin:block.end - 1])
