"""The teacher's casebook: each exercise's cases with the reference's outputs, and what each known mistake gives.

    python -m minitransformer.exercises cases [--cases DIR] [--hidden N] [--new-seed]

writes, for every exercise, ``DIR/<id>/`` (default DIR: ``.hidden-cases/`` in the teacher's repository,
ignored by git and never copied into an edition):

* ``cases.json``: the public cases (the public tests' inputs) and N hidden ones drawn from the
  secret seed in ``DIR/secret.json`` (made on first use), and a fingerprint of what they were made from;
* ``expected.jsonl``: the reference solution's outputs for every case (one JSON line per case,
  arrays as base64 ``.npy``);
* ``mistakes.jsonl``: the outputs each catalogued mistake (its spec's MISTAKES) gives on every case.

They are made by the teacher's own code (trusted), in a process whose package holds just the exercise
and the exercises its cases need (its spec's ``needs``), exactly as the graded package will. ``grade`` makes
or refreshes the casebook of the exercises it grades when it is missing or stale (the solutions,
the cases or the catalogue changed); the secret seed stays, so the hidden cases stay the same.
"""
from __future__ import annotations

import contextlib
import hashlib
import io
import json
import os
import secrets
import subprocess
import sys
import tempfile
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass, field
from pathlib import Path

from .cases import hidden_cases, numbered, public_cases
from .edition import HIDDEN_CASES, write_edition
from .registry import Exercise, ExerciseError, load_exercises, spec_for, spec_path
from .judge import decode_result

HIDDEN_PER_EXERCISE = 8
DRAWS = 4              # draws per hidden case: the first that is not degenerate is kept (degenerate())
VERSION = 2


@dataclass
class Casebook:
    exercise: str
    specs: list[dict]                                               # public cases first, then hidden ones
    expected: dict[str, dict] = field(default_factory=dict)         # case id -> the reference's result
    mistakes: dict[str, dict[str, dict]] = field(default_factory=dict)   # mistake -> case id -> its result
    verdicts: dict[str, str] = field(default_factory=dict)          # mistake -> what the student reads

    def mistakes_for(self, case_id: str) -> dict[str, tuple[str, dict]]:
        return {name: (self.verdicts[name], results[case_id]) for name, results in self.mistakes.items()
                if case_id in results}


def folder(root: Path, given: str | Path | None = None) -> Path:
    return Path(given).resolve() if given else Path(root).resolve() / HIDDEN_CASES


def secret_seed(cases_dir: Path, new: bool = False) -> int:
    """The seed the hidden cases are drawn from, kept in ``cases_dir/secret.json`` (readable by its owner only)."""
    path = cases_dir / "secret.json"
    if path.exists() and not new:
        return int(json.loads(path.read_text(encoding="utf-8"))["seed"])
    cases_dir.mkdir(parents=True, exist_ok=True)
    os.chmod(cases_dir, 0o700)
    seed = secrets.randbits(62)
    path.write_text(json.dumps({"seed": seed}) + "\n", encoding="utf-8")
    os.chmod(path, 0o600)
    (cases_dir / "README.txt").write_text(
        "The hidden grading cases of this course and what the reference solutions give on them.\n"
        "Keep this folder private: it holds the expected outputs. Made by python -m minitransformer.exercises "
        "cases\n", encoding="utf-8")
    return seed


def _exercise_seed(seed: int, exercise_id: str, kind: str) -> int:
    digest = hashlib.sha256(f"{seed}:{exercise_id}:{kind}".encode()).digest()
    return int.from_bytes(digest[:8], "little") >> 2


def specs_for(exercise_id: str, seed: int, hidden: int = HIDDEN_PER_EXERCISE) -> list[dict]:
    """The public cases (fixed seeds, the same for everyone) and ``hidden`` hidden ones (from ``seed``)."""
    import numpy as np

    public = numbered(public_cases(exercise_id), "public", _exercise_seed(0, exercise_id, "public"))
    drawn = hidden_cases(exercise_id, np.random.default_rng(_exercise_seed(seed, exercise_id, "hidden")), hidden)
    return public + numbered(drawn, "hidden", _exercise_seed(seed, exercise_id, "seeds"))


def candidate_specs(exercise_id: str, seed: int, hidden: int = HIDDEN_PER_EXERCISE) -> list[dict]:
    """The public cases and DRAWS draws for each of the ``hidden`` hidden cases (the first draw is specs_for's,
    but for a backward exercise's large case, its spec's ``large``): ids ``draw1-03``..., each with its ``slot`` (03), for
    the casebook to keep one per slot."""
    import numpy as np

    public = numbered(public_cases(exercise_id), "public", _exercise_seed(0, exercise_id, "public"))
    draws = []
    for k in range(DRAWS):
        suffix = "" if k == 0 else f"-{k}"
        drawn = hidden_cases(exercise_id, np.random.default_rng(_exercise_seed(seed, exercise_id, "hidden" + suffix)),
                             hidden, large=True)
        for slot, spec in enumerate(numbered(drawn, f"draw{k}", _exercise_seed(seed, exercise_id, "seeds" + suffix)), 1):
            draws.append(dict(spec, kind="hidden", slot=slot))
    return public + draws


def answers(outputs: dict) -> dict:
    """The outputs that are the student's answer: a backward's gradients (``grad:i``) when there are any, else
    every output but the central values and the inputs after the call."""
    grads = {n: a for n, a in outputs.items() if n.startswith("grad:")}
    return grads or {n: a for n, a in outputs.items() if not n.startswith(("fd:", "input:"))}


def degenerate(outputs: dict, probe: str, public: bool = False) -> str | None:
    """Why a trivial answer would pass a case whose right outputs are ``outputs`` (None when none would): every
    answer all zeros (``return 0``), or, beside a backward (whose upstream gradient is random), every answer one
    value repeated (``return 0.0`` for 12.1's AER of heads over one source token). ``public``: a public case may
    be one worked example whose answer is one number (the FLOPs of one layer), which no constant guesses."""
    import numpy as np

    shown = {n: np.asarray(a, dtype=float) for n, a in answers(outputs).items()}
    if probe == "causal_mask":
        shown = {"mask": shown["mask"]}           # the attention output is the package's, from the student's mask
    if not shown:
        return None
    if all(a.size and not np.any(a) for a in shown.values()):
        return "every answer is zero"
    gradient = any(n.startswith("grad:") for n in shown)
    if public and all(a.size == 1 for a in shown.values()):
        return None
    if not gradient and all(a.size and np.all(a == a.reshape(-1)[0]) for a in shown.values()):
        return "every answer is one value repeated"
    return None


def choose_hidden(specs: list[dict], expected: dict[str, dict]) -> list[dict]:
    """Public cases as they are; for each hidden slot the first draw that is not degenerate (renamed ``hidden-03``).

    ``expected``: case id -> the reference's result. A slot with no usable draw is an ExerciseError: its
    generator (``hidden_case`` in the exercise's spec) must draw better."""
    chosen = [s for s in specs if s["kind"] == "public"]
    slots: dict[int, list[dict]] = {}
    for spec in specs:
        if spec["kind"] == "hidden":
            slots.setdefault(spec["slot"], []).append(spec)
    for slot, draws in sorted(slots.items()):
        reasons = []
        for spec in draws:
            outcome = expected[spec["id"]]
            why = None if outcome.get("error") else degenerate(outcome["outputs"], spec["probe"])
            if why is None:
                chosen.append({k: v for k, v in spec.items() if k != "slot"} | {"id": f"hidden-{slot:02d}"})
                break
            reasons.append(why)
        else:
            exercise_id = draws[0].get("exercise", "?")
            raise ExerciseError(f"Exercise {exercise_id}: every draw of hidden case {slot} is degenerate "
                                f"({'; '.join(reasons)}); make hidden_case in "
                                f"{spec_path(exercise_id) if exercise_id != '?' else 'its spec'} draw better")
    return chosen


def kept_exercises(exercise_id: str) -> set[str]:
    """The exercises whose solutions the graded package holds: this one's prerequisites (its spec's needs) only."""
    return set(spec_for(exercise_id).needs)


def graded_package(root: Path, out_dir: Path, exercise: Exercise, keep_own: bool) -> Path:
    """The package as graded: every exercise taken out except the prerequisites (and, for the reference, itself)."""
    every = {e.id for e in load_exercises(root)}
    kept = kept_exercises(exercise.id) | ({exercise.id} if keep_own else set())
    write_edition(root, out_dir, every - kept, only=("minitransformer/",))
    return out_dir


def fingerprint(root: Path, exercise: Exercise, seed: int, hidden: int) -> str:
    """What the casebook of ``exercise`` depends on: the solutions used, the cases, the catalogue, the seed."""
    from .registry import BEGIN

    digest = hashlib.sha256(f"{VERSION}:{seed}:{hidden}".encode())
    here = Path(__file__).resolve().parent
    own = spec_path(exercise.id).removeprefix("minitransformer/exercises/")       # specs/ex_5_1.py
    for name in ("cases.py", "spec.py", "mistakes.py", own):
        if (here / name).exists():
            digest.update((here / name).read_bytes())
    wanted = kept_exercises(exercise.id) | {exercise.id}
    for other in load_exercises(root):
        if other.id in wanted:
            for path in other.files:
                text = (root / path).read_text(encoding="utf-8")
                digest.update(text.encode() if BEGIN in text else b"")
    return digest.hexdigest()


def _catalogue():
    """The catalogue of mistakes and its mutate(), or ({}, None) in a copy without it (it is the teacher's only)."""
    try:
        from .mistakes import CATALOGUE, mutate
    except ImportError:
        return {}, None
    return CATALOGUE, mutate


def _mutants(package: Path, exercise: Exercise) -> dict[str, list[dict]]:
    """mistake name -> [{"module", "text", "functions"}]: each catalogued mistake made in the graded package's files."""
    from .trial import enclosing_functions, module_name

    CATALOGUE, mutate = _catalogue()
    texts = {path: (package.parent / path).read_text(encoding="utf-8") for path in exercise.files}
    lines = {path: [b.begin + 1 for b in exercise.blocks if b.path == path] for path in exercise.files}
    found = {}
    for mistake in CATALOGUE.get(exercise.id, []):
        changed = mutate(texts, exercise.id, mistake)
        found[mistake.name] = [{"module": module_name(path), "text": text,
                                "functions": enclosing_functions(text, lines[path])} for path, text in changed.items()]
    return found


def generate(root: Path, cases_dir: Path, exercise: Exercise, seed: int, hidden: int) -> Casebook:
    """Run the reference and every catalogued mistake on the exercise's cases; write and return the casebook."""
    CATALOGUE, _ = _catalogue()
    specs = candidate_specs(exercise.id, seed, hidden)
    with tempfile.TemporaryDirectory(prefix="mt-casebook-") as scratch:
        package = graded_package(root, Path(scratch) / "edition", exercise, keep_own=True) / "minitransformer"
        (Path(scratch) / "specs.json").write_text(json.dumps(specs), encoding="utf-8")
        (Path(scratch) / "mutants.json").write_text(json.dumps(_mutants(package, exercise)), encoding="utf-8")
        environment = {**os.environ, "PYTHONPATH": str(package.parent), "OPENBLAS_NUM_THREADS": "1",
                       "MPLBACKEND": "Agg"}
        result = subprocess.run([sys.executable, "-m", "minitransformer.exercises.casebook",
                                 str(Path(scratch) / "specs.json"), str(Path(scratch) / "mutants.json")],
                                cwd=scratch, env=environment, capture_output=True, timeout=1800)
        if result.returncode != 0:
            raise ExerciseError(f"Exercise {exercise.id}: the reference could not run its cases:\n"
                                f"{result.stderr.decode('utf-8', 'replace')[-3000:]}")
    verdicts = {m.name: m.verdict for m in CATALOGUE.get(exercise.id, [])}
    expected_lines, mistake_lines = [], []
    for line in result.stdout.decode("utf-8").splitlines():
        entry = json.loads(line)
        if "chosen" in entry:
            specs = entry["chosen"]
        elif entry["mistake"] is None:
            expected_lines.append(line)
            case_id, outcome = decode_result(entry["record"])
            if outcome["error"]:
                error = outcome["error"]
                hint = f" (add Exercise {error['exercise']} to needs in {spec_path(exercise.id)})" \
                    if error.get("exercise") else ""
                raise ExerciseError(f"Exercise {exercise.id}, case {case_id}: the reference raised "
                                    f"{error['type']}: {error['message']}{hint}")
        else:
            mistake_lines.append(line)
    target = cases_dir / exercise.id
    target.mkdir(parents=True, exist_ok=True)
    (target / "expected.jsonl").write_text("\n".join(expected_lines) + "\n", encoding="utf-8")
    (target / "mistakes.jsonl").write_text("\n".join(mistake_lines) + "\n", encoding="utf-8")
    (target / "cases.json").write_text(json.dumps({"fingerprint": fingerprint(root, exercise, seed, hidden),
                                                   "specs": specs, "verdicts": verdicts}, indent=1,
                                                  ensure_ascii=False) + "\n", encoding="utf-8")
    return read(cases_dir, exercise.id)


def read(cases_dir: Path, exercise_id: str) -> Casebook:
    target = cases_dir / exercise_id
    meta = json.loads((target / "cases.json").read_text(encoding="utf-8"))
    book = Casebook(exercise_id, meta["specs"], verdicts=meta["verdicts"])
    for line in (target / "expected.jsonl").read_text(encoding="utf-8").splitlines():
        if line.strip():
            case_id, outcome = decode_result(json.loads(line)["record"])
            book.expected[case_id] = outcome
    for line in (target / "mistakes.jsonl").read_text(encoding="utf-8").splitlines():
        if line.strip():
            entry = json.loads(line)
            case_id, outcome = decode_result(entry["record"])
            book.mistakes.setdefault(entry["mistake"], {})[case_id] = outcome
    return book


def load(root: Path, cases_dir: Path, exercises: list[Exercise], hidden: int = HIDDEN_PER_EXERCISE,
         workers: int = 2, refresh: bool = False) -> dict[str, Casebook]:
    """The casebooks of ``exercises``, made or remade where missing or stale (several at once, in processes)."""
    seed = secret_seed(cases_dir)

    def one(exercise: Exercise) -> Casebook:
        meta = cases_dir / exercise.id / "cases.json"
        if not refresh and meta.exists() and json.loads(meta.read_text(encoding="utf-8")).get("fingerprint") == \
                fingerprint(root, exercise, seed, hidden):
            return read(cases_dir, exercise.id)
        return generate(root, cases_dir, exercise, seed, hidden)

    with ThreadPoolExecutor(max_workers=max(1, workers)) as pool:
        return dict(zip([e.id for e in exercises], pool.map(one, exercises)))


# -- the process that runs the reference and the mistakes (the teacher's code, in the graded package) ------------
def main(argv: list[str] | None = None) -> int:
    from .cases import run_all
    from .trial import swapped

    spec_file, mutant_file = (sys.argv[1:] if argv is None else argv)
    specs = json.loads(Path(spec_file).read_text(encoding="utf-8"))
    mutants = json.loads(Path(mutant_file).read_text(encoding="utf-8"))

    def records(chosen: list[dict]) -> list[dict]:
        buffer = io.BytesIO()
        run_all(chosen, buffer)
        return [json.loads(line) for line in buffer.getvalue().decode("utf-8").splitlines()]

    def emit(mistake: str | None, found: list[dict]) -> None:
        for record in found:
            print(json.dumps({"mistake": mistake, "record": record}), flush=True)

    # the reference on every draw; the hidden cases kept (not degenerate), renamed; the mistakes on those only
    reference = records(specs)
    by_id = {r["id"]: r for r in reference}
    chosen = choose_hidden(specs, {r["id"]: decode_result(r)[1] for r in reference})
    print(json.dumps({"chosen": chosen}), flush=True)
    renamed = {spec["id"]: spec for spec in chosen}
    originals = {s["id"]: s for s in specs}
    emit(None, [dict(by_id[_draw_id(spec, originals)], id=case_id) for case_id, spec in renamed.items()])
    specs = chosen
    for name, files in mutants.items():
        with contextlib.ExitStack() as stack:
            for f in files:
                stack.enter_context(swapped(f["module"], f["text"], f["functions"]))
            emit(name, records(specs))
    return 0


def _draw_id(spec: dict, originals: dict[str, dict]) -> str:
    """The id a kept case had among the draws (the same seed and parameters)."""
    if spec["kind"] == "public":
        return spec["id"]
    return next(i for i, o in originals.items() if o["kind"] == "hidden" and o["seed"] == spec["seed"]
                and o["params"] == spec["params"])


if __name__ == "__main__":
    sys.exit(main())
