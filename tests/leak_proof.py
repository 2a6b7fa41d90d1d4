"""The proof that the student edition gives no answer away: no piece of code in any of its files solves an exercise.

Every file of the student edition is read for code: the chapters and every other Markdown file (fenced
listings), the notebooks (code cells) and their sources, the tests, the tools, the benchmarks and the
package's other modules (every run of up to WINDOW consecutive statements of every body, and every
function). Each piece is tried in each exercise's stub, the way a student might paste it:

* as it stands, or with the value it checks or returns bound to what the stub must produce (an
  ``assert_allclose(A, B)``, ``assert A == B`` or ``return A`` gives ``A`` or ``B``; the stub's names
  are in its comment: ``gx``, or ``return`` ...);
* with up to RENAMES of the names it reads and the stub does not have renamed to ones it has (``w`` to
  ``weight``, ``allowed`` to ``self.mask``, ``sigma`` to ``1 / inv_std``): the names the reference
  solution reads, ``self.`` attributes included, and their reciprocals;
* a function of the same name as the one holding the stub, in its place.

A piece solves the exercise when every public case and eight hidden ones (a fixed seed) give the
reference's outputs. Trying every piece with every renaming would take hours, so for each stub the
pieces are ranked by how much they compute like the reference solution (the operations, methods and
functions they use, weighted by how rare they are in the repository: TF-IDF) and the LIKELIEST most alike are
tried; each try is first run on the stub's own local variables, recorded from the reference (a few
microseconds), and only a try that gives the reference's values there is run on the cases. The trials
run in a bubblewrap sandbox (the pieces are code from all over the repository, run out of context), in
one process per exercise.
"""
from __future__ import annotations

import ast
import builtins
import collections
import difflib
import itertools
import math
import json
import os
import re
import subprocess
import sys
import tempfile
import textwrap
from dataclasses import dataclass, field
from pathlib import Path

from minitransformer.exercises import bwrap
from minitransformer.exercises.edition import block_returns, names_produced, repository_files, write_edition
from minitransformer.exercises.registry import load_exercises

ROOT = Path(__file__).resolve().parents[1]
WINDOW = 7            # the longest run of consecutive statements tried as one piece
RENAMES = 2           # names a piece may read that the stub lacks, renamed to ones it has
TRIALS = 600          # the most pastes of one piece into one stub
LIKELIEST = 600       # the pieces tried per stub: those that compute most like its reference solution
ASSERTS = {"assert_allclose", "assert_array_equal", "assert_array_almost_equal", "assert_equal", "assert_almost_equal"}
BUILTINS = set(dir(builtins))


@dataclass
class Piece:
    where: str                         # "tests/exercises/test_exercises.py:421-427"
    statements: list                   # ast statements (a window), or [a FunctionDef] for a whole function
    function: str | None = None        # the name, for a whole function
    kept: list = field(default_factory=list)      # the statements without checks and returns
    values: list = field(default_factory=list)    # the expressions those checked or returned
    loads: set = field(default_factory=set)       # the names the kept statements read ...
    stores: set = field(default_factory=set)      # ... and write
    value_loads: list = field(default_factory=list)   # the names each value reads
    operations: collections.Counter = field(default_factory=collections.Counter)


def operations(nodes) -> collections.Counter:
    """What a piece of code does, as a bag of tokens: the methods and attributes it uses, the functions it calls,
    its operators, comprehensions and numbers (names of variables left out: they can be renamed)."""
    bag = collections.Counter()
    for node in nodes:
        for sub in ast.walk(node):
            if isinstance(sub, ast.Attribute):
                bag["." + sub.attr] += 1
            elif isinstance(sub, ast.Call) and isinstance(sub.func, ast.Name):
                bag["call " + sub.func.id] += 1
            elif isinstance(sub, (ast.BinOp, ast.AugAssign)):
                bag[type(sub.op).__name__] += 1
            elif isinstance(sub, ast.UnaryOp):
                bag[type(sub.op).__name__] += 1
            elif isinstance(sub, ast.Compare):
                bag.update(type(op).__name__ for op in sub.ops)
            elif isinstance(sub, (ast.ListComp, ast.SetComp, ast.DictComp, ast.GeneratorExp, ast.Subscript,
                                  ast.Slice, ast.IfExp, ast.While, ast.For)):
                bag[type(sub).__name__] += 1
            elif isinstance(sub, ast.Constant) and isinstance(sub.value, (int, float)) and not isinstance(sub.value, bool):
                bag[f"#{sub.value!r}"] += 1
    return bag


# -- reading the pieces --------------------------------------------------------------------------------------------
def _names(nodes) -> tuple[set, set]:
    loads, stores = set(), set()
    for node in nodes:
        for sub in ast.walk(node):
            if isinstance(sub, ast.Name):
                (loads if isinstance(sub.ctx, ast.Load) else stores).add(sub.id)
            elif isinstance(sub, (ast.FunctionDef, ast.Lambda)):
                stores.update(a.arg for a in sub.args.args + sub.args.kwonlyargs)
            elif isinstance(sub, ast.arg):
                stores.add(sub.arg)
    return loads, stores


def _bodies(tree):
    """Every list of statements in the tree: the module's, each function's, each loop's and branch's."""
    for node in ast.walk(tree):
        for name in ("body", "orelse", "finalbody"):
            body = getattr(node, name, None)
            if isinstance(body, list) and body and isinstance(body[0], ast.stmt):
                yield body


def python_pieces(text: str, where: str) -> list[Piece]:
    try:
        tree = ast.parse(text)
    except SyntaxError:
        return []
    found = []
    for body in _bodies(tree):
        usable = [s for s in body if not isinstance(s, (ast.Import, ast.ImportFrom, ast.ClassDef, ast.FunctionDef,
                                                        ast.AsyncFunctionDef, ast.Global, ast.Nonlocal, ast.Pass))]
        runs, run = [], []
        for statement in body:                                    # runs of usable statements, split by the others
            if statement in usable:
                run.append(statement)
            else:
                runs, run = runs + [run], []
        runs.append(run)
        for run in runs:
            for start in range(len(run)):
                for stop in range(start + 1, min(start + WINDOW, len(run)) + 1):
                    window = run[start:stop]
                    found.append(Piece(f"{where}:{window[0].lineno}-{window[-1].end_lineno}", window))
    for node in ast.walk(tree):
        if isinstance(node, ast.FunctionDef):
            found.append(Piece(f"{where}:{node.lineno} (def {node.name})", [node], function=node.name))
    for piece in found:
        if piece.function is None:
            piece.kept, piece.values = _values(piece.statements)
            piece.loads, piece.stores = _names(piece.kept)
            piece.value_loads = [loads - stores for loads, stores in (_names([v]) for v in piece.values)]
        piece.operations = operations(piece.statements)
    return found


def likeliest(found: list[Piece], reference: collections.Counter, count: int, names: set = frozenset()) -> list[Piece]:
    """The ``count`` pieces most like the reference solution: their operations (TF-IDF cosine), and how many of the
    stub's own variables (``names``: ``x_hat``, ``scores``, ``partners`` ...) they read by name."""
    frequency = collections.Counter(token for piece in found for token in piece.operations)
    weight = {token: math.log(len(found) / (1 + n)) for token, n in frequency.items()}

    def vector(bag):
        return {t: c * weight.get(t, math.log(len(found))) for t, c in bag.items()}

    target = vector(reference)
    norm = math.sqrt(sum(v * v for v in target.values())) or 1.0

    def score(piece):
        mine = vector(piece.operations)
        dot = sum(v * target.get(t, 0.0) for t, v in mine.items())
        shared = len((piece.loads | set().union(*piece.value_loads)) & names)
        return dot / (norm * (math.sqrt(sum(v * v for v in mine.values())) or 1.0)) + 0.5 * min(shared, 3) / 3

    return sorted(found, key=score, reverse=True)[:count]


FENCE = re.compile(r"^```[ \t]*(?:python|py|python3)?[ \t]*\n(.*?)^```", re.S | re.M)


def pieces(edition: Path) -> list[Piece]:
    """Every piece of code in every file of the edition."""
    found = []
    for name in repository_files(edition):
        path = edition / name
        if name.endswith(".md"):
            for n, match in enumerate(FENCE.finditer(path.read_text(encoding="utf-8")), 1):
                found += python_pieces(textwrap.dedent(match.group(1)), f"{name} listing {n}")
        elif name.endswith(".ipynb"):
            notebook = json.loads(path.read_text(encoding="utf-8"))
            for n, cell in enumerate(notebook.get("cells", [])):
                source = "".join(cell["source"]) if isinstance(cell["source"], list) else cell["source"]
                if cell["cell_type"] == "code":
                    found += python_pieces(source, f"{name} cell {n}")
                else:
                    found += [p for m in FENCE.finditer(source) for p in
                              python_pieces(textwrap.dedent(m.group(1)), f"{name} cell {n}")]
        elif name.endswith(".py"):
            found += python_pieces(path.read_text(encoding="utf-8"), name)
    return found


# -- one exercise's stub, as the pieces see it -----------------------------------------------------------------------
@dataclass
class Stub:
    exercise: str
    path: str
    function: str                      # its qualified name
    template: str                      # the function's source (dedented), with BODY where the stub's raise is
    indent: str                        # the indentation of BODY in the template
    lines: tuple                       # (begin, end): the solution block's marker lines in the teacher's file
    available: set                     # names the pasted code may read as they are
    targets: list                      # what an unknown name may be renamed to
    produced: list                     # names the code after the stub reads
    returns: bool                      # the stub's block ends the function with a return
    checks: list                       # what a try must get right on the recorded locals
    operations: collections.Counter    # what the reference solution does
    names: set                         # the stub's own variables that the reference solution reads


def stubs(exercise, teacher_root: Path, edition_root: Path) -> list[Stub]:
    """One Stub per solution block of ``exercise`` (the edition holds its stubs; the teacher's files, the blocks)."""
    from minitransformer.exercises.trial import enclosing_functions

    found = []
    for block in exercise.blocks:
        teacher = (teacher_root / block.path).read_text(encoding="utf-8")
        tree = ast.parse(teacher)
        holder = max((n for n in ast.walk(tree) if isinstance(n, ast.FunctionDef)
                      and n.lineno < block.begin <= n.end_lineno), key=lambda n: n.lineno)
        qualname = enclosing_functions(teacher, [block.begin + 1])[0]
        solution = ast.parse(textwrap.dedent("\n".join(teacher.splitlines()[block.begin:block.end - 1]))).body
        reads, _ = _names(solution)
        params = {a.arg for a in holder.args.args + holder.args.kwonlyargs}
        earlier = {n.id for n in ast.walk(holder) if isinstance(n, ast.Name) and isinstance(n.ctx, ast.Store)
                   and n.lineno < block.begin}
        module = {n.id for n in ast.walk(tree) if isinstance(n, ast.Name) and isinstance(n.ctx, ast.Store)
                  and n.col_offset == 0} | {a.asname or a.name.split(".")[0] for n in tree.body
                                            if isinstance(n, (ast.Import, ast.ImportFrom)) for a in n.names} | \
            {n.name for n in tree.body if isinstance(n, (ast.FunctionDef, ast.ClassDef))}
        attributes = sorted({f"self.{n.attr}" for statement in solution for n in ast.walk(statement)
                             if isinstance(n, ast.Attribute) and isinstance(n.value, ast.Name) and n.value.id == "self"
                             and isinstance(n.ctx, ast.Load)})
        in_scope = sorted((reads & (params | earlier)) - {"self"})
        targets = in_scope + attributes + [f"(1 / {name})" for name in in_scope]
        read_after = sorted({n.id for n in ast.walk(holder) if isinstance(n, ast.Name) and isinstance(n.ctx, ast.Load)
                             and n.lineno > block.end} & (params | earlier | _names(solution)[1]))
        produced = names_produced(teacher, block.begin, block.end)
        returns = block_returns(teacher, block.begin, block.end)
        checks = ["__result__"] if returns else (produced or read_after)
        # the function as the edition has it, with BODY where the raise is
        edition_text = (edition_root / block.path).read_text(encoding="utf-8")
        lines = edition_text.splitlines()
        stub_at = next(i for i, line in enumerate(lines) if line.lstrip().startswith(
            f'raise NotImplementedError("Exercise {exercise.id}:') and i + 1 >= block.header_line)
        holder_there = max((n for n in ast.walk(ast.parse(edition_text)) if isinstance(n, ast.FunctionDef)
                            and n.lineno <= stub_at + 1 <= n.end_lineno), key=lambda n: n.lineno)
        function_lines = lines[holder_there.lineno - 1:holder_there.end_lineno]
        relative = stub_at - (holder_there.lineno - 1)
        indent = function_lines[relative][:len(function_lines[relative]) - len(function_lines[relative].lstrip())]
        function_lines[relative] = indent + "BODY"
        base = function_lines[0][:len(function_lines[0]) - len(function_lines[0].lstrip())]
        found.append(Stub(exercise.id, block.path, qualname, textwrap.dedent("\n".join(function_lines)),
                          indent[len(base):], (block.begin, block.end), params | earlier | module | BUILTINS | {"self"},
                          targets, produced, returns, checks, operations(solution), set(in_scope)))
    return found


# -- the pastes of one piece into one stub ----------------------------------------------------------------------------
def _values(statements) -> tuple[list, list]:
    """(statements without checks and returns, the expressions those checked or returned)."""
    kept, values = [], []
    for statement in statements:
        if isinstance(statement, ast.Assert):
            test = statement.test
            if isinstance(test, ast.Compare) and len(test.ops) == 1 and isinstance(test.ops[0], ast.Eq):
                values += [test.left, test.comparators[0]]
            continue
        if isinstance(statement, ast.Expr) and isinstance(statement.value, ast.Call):
            function = statement.value.func
            name = function.attr if isinstance(function, ast.Attribute) else getattr(function, "id", "")
            if name in ASSERTS:
                values += statement.value.args[:2]
                continue
        if isinstance(statement, ast.Return):
            if statement.value is not None:
                values.append(statement.value)
            continue
        kept.append(statement)
    unwrapped = []
    for value in values:     # pytest.approx(x) -> x
        if isinstance(value, ast.Call) and getattr(value.func, "attr", getattr(value.func, "id", "")) == "approx" \
                and value.args:
            value = value.args[0]
        unwrapped.append(value)
    if kept and isinstance(kept[-1], ast.Expr):
        unwrapped.append(kept.pop().value)
    return kept, unwrapped


class Rename(ast.NodeTransformer):
    def __init__(self, mapping: dict[str, str]) -> None:
        self.mapping = {k: ast.parse(v, mode="eval").body for k, v in mapping.items()}

    def visit_Name(self, node):
        if isinstance(node.ctx, ast.Load) and node.id in self.mapping:
            return ast.copy_location(self.mapping[node.id], node)
        return node


def _text(statements) -> str:
    return ast.unparse(ast.Module(body=statements, type_ignores=[]))


def pastes(piece: Piece, stub: Stub) -> list[dict]:
    """The tries of this piece in the stub: {"body", "bind": names to bind, "sources": what to bind them to,
    "unknown": names to rename, "targets": the renamings}. Which source binds which name is found by the try."""
    if piece.function is not None:
        name = stub.function.split(".")[-1]
        return [{"body": ast.unparse(piece.statements[0]), "bind": [], "sources": [], "unknown": [], "targets": [[]],
                 "whole": True}] if piece.function == name else []
    unknown = piece.loads - piece.stores - stub.available          # a quick look first: most pieces stop here
    least = min([len(unknown | (loads - piece.stores - stub.available)) for loads in piece.value_loads] +
                [len(unknown)])
    if least > RENAMES or not (piece.kept or piece.values):
        return []
    body = _text(piece.kept) if piece.kept else ""
    assigned = [t.id for s in piece.kept if isinstance(s, (ast.Assign, ast.AugAssign, ast.AnnAssign))
                for t in (s.targets if isinstance(s, ast.Assign) else [s.target]) if isinstance(t, ast.Name)]
    bind = ["__result__"] if stub.returns else [p for p in stub.produced if p not in piece.stores]
    if not bind and not piece.kept:
        return []
    sources = [(ast.unparse(v), loads - piece.stores - stub.available) for v, loads in zip(piece.values,
                                                                                           piece.value_loads)]
    for v in piece.values:                     # a tuple checked or returned also gives its items
        if isinstance(v, ast.Tuple):
            sources += [(ast.unparse(e), (lambda ls: ls[0] - ls[1])(_names([e])) - piece.stores - stub.available)
                        for e in v.elts]
    sources += [(name, set()) for name in dict.fromkeys(reversed(assigned)) if name not in bind]
    itself = stub.function.split(".")[-1]                  # a check that calls the stub's own function proves nothing
    sources = [(text, extra) for text, extra in sources if not re.search(rf"\b{re.escape(itself)}\b", text)]
    tries = []
    for names in {frozenset(unknown | extra) for _, extra in sources} | {frozenset(unknown)}:
        if len(names) > RENAMES:
            continue
        usable = [text for text, extra in sources if extra <= names]
        if bind and not usable:
            continue
        renamings = [list(c) for c in itertools.product(stub.targets, repeat=len(names)) if len(set(c)) == len(c)]
        tries.append({"body": body, "bind": bind, "sources": list(dict.fromkeys(usable)), "unknown": sorted(names),
                      "targets": renamings[:TRIALS]})
    return tries


# -- running the trials --------------------------------------------------------------------------------------------
def find_leaks(student_edition: Path, scratch: Path, exercises=None, seed: int = 20240531) -> list[str]:
    """"where: solves Exercise X" for every piece of the student edition that solves an exercise."""
    from minitransformer.exercises.casebook import specs_for

    found_pieces = pieces(student_edition)
    leaks = []
    for exercise in load_exercises(ROOT):
        if exercises is not None and exercise.id not in exercises:
            continue
        edition = scratch / f"edition-{exercise.id}"
        write_edition(ROOT, edition, {exercise.id}, only=("minitransformer/",))
        job = {"exercise": exercise.id, "specs": specs_for(exercise.id, seed), "stubs": []}
        for stub in stubs(exercise, ROOT, edition):
            chosen = likeliest([p for p in found_pieces if p.function is None], stub.operations, LIKELIEST,
                               stub.names)
            chosen += [p for p in found_pieces if p.function == stub.function.split(".")[-1]]
            tries = [dict(t, where=piece.where) for piece in chosen for t in pastes(piece, stub)]
            job["stubs"].append({"module": stub.path.removesuffix(".py").replace("/", "."), "function": stub.function,
                                 "template": stub.template, "indent": stub.indent, "lines": stub.lines,
                                 "checks": stub.checks, "reference": (ROOT / stub.path).read_text(encoding="utf-8"),
                                 "tries": tries})
        leaks += [f"{where}: solves Exercise {exercise.id}" for where in _run(job, edition, scratch)]
    return sorted(set(leaks))


def _run(job: dict, edition: Path, scratch: Path) -> list[str]:
    job_file = scratch / f"job-{job['exercise']}.json"
    job_file.write_text(json.dumps(job), encoding="utf-8")
    here = Path(__file__).resolve()
    command = [bwrap.python(), "-S", "-s", "-B", str(here), str(job_file)]
    environment = {"PYTHONPATH": os.pathsep.join([str(edition), *bwrap.site_directories()]),
                   "OPENBLAS_NUM_THREADS": "1", "MPLBACKEND": "Agg", "HOME": "/tmp", "PATH": "/usr/bin:/bin"}
    if bwrap.problem() is None:
        command = bwrap.arguments(read_only=[(edition, edition), (job_file, job_file), (here, here)],
                                  environment=environment) + command
    result = subprocess.run(command, capture_output=True, text=True, env=environment, timeout=3600)
    if result.returncode != 0:
        raise RuntimeError(f"the trials of Exercise {job['exercise']} failed:\n{result.stderr[-3000:]}")
    return [line for line in result.stdout.splitlines() if line.strip()]


# -- in the sandbox ------------------------------------------------------------------------------------------------
def _copy(value):
    import copy

    import numpy as np

    if isinstance(value, np.ndarray):
        return value.copy()
    try:
        return copy.copy(value) if hasattr(value, "__dict__") else copy.deepcopy(value)
    except Exception:       # noqa: BLE001  (a module, a generator: used as it is)
        return value


def _same(a, b) -> bool:
    import numpy as np

    from minitransformer.exercises.judge import _close

    try:
        if isinstance(b, np.ndarray) or isinstance(a, np.ndarray):
            a, b = np.asarray(a), np.asarray(b)
            return a.shape == b.shape and a.dtype.kind in "biuf" and bool(_close(a, b, 1e-9).all())
        if isinstance(b, float) or isinstance(a, float):
            return math.isclose(float(a), float(b), rel_tol=1e-9, abs_tol=1e-12) or (math.isnan(a) and math.isnan(b))
        return type(a) is type(b) and a == b
    except Exception:       # noqa: BLE001
        return False


def _plain(value) -> bool:
    """Data a try must reproduce (arrays, numbers, text, containers of them), not objects such as self or a module."""
    import numpy as np

    if isinstance(value, (list, tuple, set, frozenset)):
        return all(_plain(v) for v in value)
    if isinstance(value, dict):
        return all(_plain(v) for v in value.values())
    return isinstance(value, (np.ndarray, np.generic, int, float, str, bool, type(None)))


def _checked(namespace: dict, name: str):
    if name.startswith("self."):
        return getattr(namespace["self"], name[5:])
    return namespace[name]


def _record(function, reference_code, begin: int, end: int, checks: list, specs: list, run_case) -> list:
    """(locals before the block, the checked values after it) of the reference, for a few calls of the function."""
    import sys as system

    records, state = [], {}

    def local(frame, event, arg):
        inside = begin < frame.f_lineno < end
        if event == "line" and inside and "before" not in state:
            state["before"] = {k: _copy(v) for k, v in frame.f_locals.items()}
        elif "before" in state and (event == "return" or event == "line" and not inside):
            values = dict(frame.f_locals, __result__=arg if event == "return" else None)
            try:
                after = {name: _copy(_checked(values, name)) for name in checks}
                after = {name: value for name, value in after.items() if _plain(value)}
                records.append((state.pop("before"), after))
            except Exception:   # noqa: BLE001
                state.pop("before")
        return local

    def tracer(frame, event, arg):
        return local if frame.f_code is reference_code and len(records) < 6 else None

    function.__code__ = reference_code
    for spec in specs[:4]:
        system.settrace(tracer)
        try:
            run_case(spec)
        finally:
            system.settrace(None)
    return records


def _trial_main(job_file: str) -> None:
    """The reference's outputs and locals, then every try: print where each piece that solves came from."""
    import importlib
    import signal

    from minitransformer.exercises.cases import run_case
    from minitransformer.exercises.judge import equal_outputs
    from minitransformer.exercises.trial import compile_module, resolve

    class Timeout(BaseException):
        pass

    def alarm(signum, frame):
        raise Timeout()

    signal.signal(signal.SIGALRM, alarm)
    job = json.loads(Path(job_file).read_text(encoding="utf-8"))
    functions = []
    for stub in job["stubs"]:
        module = importlib.import_module(stub["module"])
        function = resolve(module, stub["function"])
        functions.append((stub, module, function, resolve(compile_module(module, stub["reference"]),
                                                          stub["function"]).__code__))
    for _, _, function, code in functions:
        function.__code__ = code
    expected = [run_case(spec) for spec in job["specs"]]

    def limited(seconds, call):
        signal.setitimer(signal.ITIMER_REAL, seconds)
        try:
            return call()
        except BaseException:       # noqa: BLE001  (a piece out of its context fails in every way there is)
            return None
        finally:
            signal.setitimer(signal.ITIMER_REAL, 0)

    def solves(function, code) -> bool:
        function.__code__ = code
        return all(limited(2.0, lambda spec=spec, want=want: equal_outputs(run_case(spec), want))
                   for spec, want in zip(job["specs"], expected))

    results = os.fdopen(os.dup(1), "w")          # the pieces' own prints go nowhere
    sys.stdout = open(os.devnull, "w")
    for stub, module, function, reference_code in functions:
        records = _record(function, reference_code, *stub["lines"], stub["checks"], job["specs"], run_case)
        for attempt in stub["tries"]:
            try:
                quick = compile(attempt["body"], "<piece>", "exec")
                sources = [compile(source, "<piece>", "eval") for source in attempt["sources"]]
            except SyntaxError:
                continue
            for targets in attempt["targets"]:
                renames = dict(zip(attempt["unknown"], targets))
                if records and not all(_reciprocal_of_a_number(target, records[0][0]) for target in targets):
                    continue
                if attempt.get("whole"):
                    bindings = {}
                elif records:
                    bindings = limited(1.0, lambda: _bindings(quick, sources, attempt, module, records, renames))
                    if bindings is None:
                        continue
                else:
                    continue
                body = attempt["body"] + "".join(f"\n{name} = {attempt['sources'][i]}" for name, i in bindings.items())
                candidate = limited(5.0, lambda: _build(stub, module, body, renames, attempt.get("whole")))
                if candidate is not None and solves(function, candidate):
                    print(attempt["where"], file=results, flush=True)
                    break
        function.__code__ = reference_code


def _bindings(code, sources, attempt: dict, module, records: list, renames: dict) -> dict | None:
    """Which source gives each name to bind on every recorded call (None when some name has none, or when what
    the body itself sets is wrong)."""
    choices = {name: set(range(len(sources))) for name in attempt["bind"]}
    for before, after in records:
        namespace = dict(vars(module))
        namespace.update({k: _copy(v) for k, v in before.items()})
        for name, target in renames.items():
            namespace[name] = eval(target, namespace)
        exec(code, namespace)
        for name, value in after.items():
            if name in choices:
                values = {}
                for i in list(choices[name]):
                    if i not in values:
                        try:
                            values[i] = eval(sources[i], namespace)
                        except Exception:      # noqa: BLE001
                            values[i] = _MISSING
                    if values[i] is _MISSING or not _same(values[i], value):
                        choices[name].discard(i)
            elif not _same(_checked(namespace, name), value):
                return None
        if any(not options for options in choices.values()):
            return None
    return {name: min(options) for name, options in choices.items()}


_MISSING = object()


def _reciprocal_of_a_number(target: str, before: dict) -> bool:
    """A renaming to "(1 / x)" stands for σ and 1/σ: only where x holds floating-point numbers."""
    import numpy as np

    found = re.fullmatch(r"\(1 / (\w+)\)", target)
    if not found:
        return True
    value = before.get(found.group(1))
    return isinstance(value, float) or isinstance(value, np.ndarray) and value.dtype.kind == "f"


def _build(stub: dict, module, body: str, renames: dict, whole: bool):
    """The code object of the holder function with the try pasted in (or the piece's own function)."""
    namespace = dict(vars(module))
    if whole:
        exec(compile(body, "<piece>", "exec"), namespace)
        return namespace[stub["function"].split(".")[-1]].__code__
    tree = Rename(renames).visit(ast.parse(body))
    text = ast.unparse(ast.fix_missing_locations(tree))
    if stub["checks"] == ["__result__"]:
        text += "\nreturn __result__"
    source = stub["template"].replace(stub["indent"] + "BODY", textwrap.indent(text, stub["indent"]))
    exec(compile(source, "<piece>", "exec"), namespace)
    return namespace[stub["function"].split(".")[-1]].__code__


if __name__ == "__main__":
    _trial_main(sys.argv[1])
