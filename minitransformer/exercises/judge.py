"""The grader's side: compare what a student's code gave for a case with what the reference gave.

Everything here works on plain data (NumPy arrays, dicts of strings) and runs in the grader's own
process, which never imports the student's code: a patched ``assert_allclose`` or ``gradcheck`` in
the student's process changes nothing here. For a backward, the student's gradient is compared with
the reference's, and explained against the central differences of the student's *own* forward
(the ``fd:i`` values the case brought back: the grader divides them by 2ε itself).

Only NumPy is imported, so that an nbgrader course can carry a copy of this file (nbgrader.py).
"""
from __future__ import annotations

import base64
import io
import json
import re
from dataclasses import dataclass

import numpy as np

EPS = 1e-6          # the step of the fd:i values (cases.EPS)
NAME = re.compile(r"^[A-Za-z0-9_.: -]{1,64}$")   # an output's name
RTOL, ATOL = 1e-6, 1e-9
GRAD_ATOL = 1e-8

LABELS = {"out": "the output", "numeric": "your numerical gradient", "weights": "the attention weights",
          "mask": "the mask", "split": "split_heads(x)", "merged": "merge_heads(x)", "table": "the table",
          "rate": "the rate", "step": "the rates step() returns", "optimizer lr": "the optimizer's lr after step()",
          "tokens": "the best outputs' tokens", "log_prob": "their log-probabilities",
          "matches and totals": "(clipped matches, total)", "lengths": "the merged lengths",
          "aer": "the AER", "flops": "the FLOPs", "log_sum_exp": "the log-sum-exp L", "delta": "D",
          "num": "num", "den": "den", "reduced": "unbroadcast(g, shape)",
          "passes a right backward": "gradcheck's verdict on a right backward (it must pass)",
          "passes a wrong backward": "gradcheck's verdict on a wrong backward (it must fail)"}
INPUTS = {"attention_backward": ["Q", "K", "V"], "flash_backward": ["Q", "K", "V"], "layer_norm": ["x", "γ", "β"],
          "gradient": ["a", "b"], "heads": ["x"], "reduction": ["x"], "getitem": ["x"], "cross_entropy": ["logits"]}


def constant_ratio(analytic, numeric) -> float | None:
    """analytic ÷ numeric when it is one number at every position where the gradient is not ~0, else None."""
    analytic, numeric = np.asarray(analytic, dtype=float).ravel(), np.asarray(numeric, dtype=float).ravel()
    if analytic.shape != numeric.shape or not numeric.size:
        return None
    scale = np.abs(numeric).max()
    large = np.abs(numeric) > 1e-3 * scale if scale > 0 else np.zeros_like(numeric, dtype=bool)
    if large.sum() < 2 or not np.isfinite(analytic[large]).all():
        return None
    ratios = analytic[large] / numeric[large]
    ratio = float(np.median(ratios))
    if abs(ratio - 1) < 1e-3 or not np.allclose(ratios, ratio, rtol=1e-3, atol=1e-6):
        return None
    return ratio


def factor_in_words(ratio: float) -> str:
    """2.0 -> "2", 0.5 -> "1/2", 2.8284 -> "√8", -1.0 -> "-1": the plainest name of a constant factor."""
    sign, size = ("-" if ratio < 0 else ""), abs(ratio)
    if size == 0:
        return "0"
    n, m, s, r = round(size), round(1 / size), round(size ** 2), round(size ** -2)
    candidates = [(f"{n}", n) if n >= 1 else None, (f"1/{m}", 1 / m) if m >= 2 else None,
                  (f"√{s}", s ** 0.5) if s >= 2 else None, (f"1/√{r}", r ** -0.5) if r >= 2 else None]
    for name, value in filter(None, candidates):
        if abs(size - value) <= 1e-3 * size:
            return sign + name
    return f"{ratio:.4g}"


def _number(value) -> str:
    return f"{value:.6g}" if isinstance(value, (float, np.floating)) else str(value)


def _close(got: np.ndarray, want: np.ndarray, atol: float) -> np.ndarray:
    """Elementwise: equal (NaN and ±∞ included) or within atol + RTOL·|want|."""
    if want.dtype.kind in "biu" and got.dtype.kind in "biu":
        return got == want
    got, want = got.astype(float), want.astype(float)
    same = (got == want) | (np.isnan(got) & np.isnan(want))
    with np.errstate(invalid="ignore", over="ignore"):
        near = np.abs(got - want) <= atol + RTOL * np.abs(want)
    return same | (near & np.isfinite(got) & np.isfinite(want))


def equal_outputs(got: dict, want: dict) -> bool:
    """Do two sets of outputs agree (names, shapes, dtypes' kinds and values; the fd:i values are not compared)?"""
    names = {n for n in want if not n.startswith("fd:")}
    if names != {n for n in got if not n.startswith("fd:")}:
        return False
    for name in names:
        a, b = np.asarray(got[name]), np.asarray(want[name])
        if a.shape != b.shape or (a.dtype.kind == "b") != (b.dtype.kind == "b"):
            return False
        if not _close(a, b, GRAD_ATOL if name.startswith("grad:") else ATOL).all():
            return False
    return True


def _label(name: str, probe: str) -> str:
    if name.startswith("grad:"):
        index = int(name.split(":")[1])
        names = INPUTS.get(probe, [])
        return f"the gradient of input {index}" + (f" ({names[index]})" if index < len(names) else "")
    if name.startswith("input:"):
        return f"input {name.split(':')[1]} after the call"
    return LABELS.get(name, name)


def explain_output(name: str, got: np.ndarray | None, want: np.ndarray, probe: str, fd: np.ndarray | None = None,
                   own_numeric: bool = False) -> str | None:
    """Why output ``name`` is wrong, in a line or two; None when it is right."""
    label = _label(name, probe)
    is_grad = name.startswith("grad:")
    if got is None:
        if is_grad:
            return f"your backward returned no gradient (None) for {label.removeprefix('the gradient of ')}"
        return f"your code gave no {label}"
    if got.shape != want.shape:
        if is_grad:
            return f"{label} has shape {got.shape}; the input has shape {want.shape}"
        return f"{label} has shape {got.shape}, expected {want.shape}"
    if got.dtype.kind != want.dtype.kind or (got.dtype.kind == "f" and got.dtype.itemsize != want.dtype.itemsize):
        return f"{label} has dtype {got.dtype}, expected {want.dtype}"
    close = _close(got, want, GRAD_ATOL if is_grad else ATOL)
    if close.all():
        return None
    if name.startswith("input:"):
        return f"{label} differs from before at {int((~close).sum())} of {close.size} positions: every nudge must be " \
               "undone (put x_i back)"
    if got.dtype.kind == "b" or want.size == 1 and want.ndim == 0:
        if want.ndim == 0:
            return f"{label} is {_number(got.item())}, expected {_number(want.item())}"
        wrong = np.argwhere(~close)
        shown = ", ".join(str(tuple(int(i) for i in w)) for w in wrong[:4])
        return f"{label} is wrong at {len(wrong)} of {want.size} positions, e.g. at {shown}: yours " \
               f"{got[tuple(wrong[0])].item()}, expected {want[tuple(wrong[0])].item()}"
    with np.errstate(invalid="ignore", over="ignore"):
        difference = np.where(close, 0.0, np.abs(got.astype(float) - want.astype(float)))
    difference = np.where(np.isnan(difference), np.inf, difference)
    worst = np.unravel_index(int(np.argmax(difference)), want.shape) if want.ndim else ()
    index = tuple(int(i) for i in worst)
    bad = int((~close).sum())
    if is_grad:
        numeric = None
        if fd is not None and fd.shape == (2, want.size):
            numeric = ((fd[0] - fd[1]) / (2 * EPS)).reshape(want.shape)
        reference = numeric if numeric is not None else want
        which = "the numerical gradient of the forward" if numeric is not None else "the true gradient"
        text = (f"{label}, shape {want.shape}, is wrong at {bad} of {want.size} positions;\n"
                f"worst at index {index}: your backward gives {_number(got[worst])}, {which} "
                f"{_number(reference[worst])} (off by {_number(abs(got[worst] - reference[worst]))})")
        ratio = constant_ratio(got, want)
        if ratio is not None:
            text += f"\nyour backward is {factor_in_words(ratio)} × the true gradient at every position (a constant factor)"
        elif not np.any(got):
            text += "\nyour backward gives 0 at every position: is the gradient computed and returned?"
        return text
    subject = "your numerical gradient" if own_numeric and name == "numeric" else f"{label}"
    text = (f"{subject} is wrong at {bad} of {want.size} positions; worst at index {index}: yours "
            f"{_number(got[worst])}, expected {_number(want[worst])}")
    finite = np.isfinite(got.astype(float))
    if not finite.all() and np.isfinite(want.astype(float))[~finite].any():
        text += f"\nyours holds NaN or ±∞ at {int((~finite).sum())} positions where the right answer is finite"
    ratio = constant_ratio(got, want)
    if ratio is not None:
        text += f"\nyours is {factor_in_words(ratio)} × the right one at every position (a constant factor)"
    return text


def _frames(error: dict, own: dict[str, tuple[int, int]]) -> str:
    frames = error.get("frames") or []
    mine = [f for f in frames if f["file"] in own and own[f["file"]][0] <= f["line"] <= own[f["file"]][1]]
    if mine:
        f = mine[-1]
        where = f"\nin your code, {f['file']}:{f['line']}:  {f['code'].strip()}"
        if frames and frames[-1] is not f:
            inner = frames[-1]
            where += f"\n(raised further in, at {inner['file']}:{inner['line']}, {inner['function']})"
        return where
    if frames:
        inner = frames[-1]
        return f"\nat {inner['file']}:{inner['line']} ({inner['function']}):  {inner['code'].strip()}"
    return ""


def explain_error(error: dict, exercise_id: str, own: dict[str, tuple[int, int]] | None = None,
                  titles: dict[str, str] | None = None) -> str:
    """A student's exception, in words, with the line of their code it came from."""
    own, titles = own or {}, titles or {}
    kind, message = error.get("type", "Error"), error.get("message", "")
    other = error.get("exercise")
    if kind == "NotImplementedError" and other == exercise_id:
        return "not attempted: the stub's NotImplementedError is still there"
    if kind == "NotImplementedError" and other:
        title = f" ({titles[other]})" if other in titles else ""
        return (f"your code reached Exercise {other}{title}, which this exercise does not need and which is not "
                f"solved in the graded package" + _frames(error, own))
    if kind in ("Stopped", "GradingError"):
        return message
    if kind == "CaseTimeout":
        if message.startswith("not run"):
            return message
        return (message or "it ran past its time limit") + " (an endless loop?)"
    if kind == "MemoryError":
        return "it ran out of memory"
    first = message.splitlines()[0][:300] if message else ""
    return f"your code raised {kind}" + (f": {first}" if first else "") + _frames(error, own)


@dataclass
class CaseVerdict:
    passed: bool
    why: str = ""
    mistake: str | None = None         # the name of the catalogued mistake it matches


def _same_error(a: dict | None, b: dict | None) -> bool:
    """The same exception: its type, the exercise it names, and its message (which carries the case's shapes)."""
    return bool(a and b and all(a.get(key) == b.get(key) for key in ("type", "exercise", "message")))


def judge_case(spec: dict, want: dict, got: dict | None, exercise_id: str,
               mistakes: dict[str, tuple[str, dict]] | None = None, own: dict[str, tuple[int, int]] | None = None,
               titles: dict[str, str] | None = None, hidden: bool = False) -> CaseVerdict:
    """Is ``got`` (the student's record for the case) right, compared with ``want`` (the reference's)?

    ``mistakes``: name -> (verdict, the record that mistake gives for this case); a wrong result that
    equals one of them is named. ``hidden``: a hidden case, whose verdict says what went wrong and which
    known mistake it is, never a value of the case (hidden_why).
    """
    verdict = _judge(spec, want, got, exercise_id, mistakes, own, titles)
    if hidden and not verdict.passed:
        verdict.why = hidden_why(spec, want, got, exercise_id, verdict, own, titles)
    return verdict


def hidden_why(spec: dict, want: dict, got: dict | None, exercise_id: str, verdict: CaseVerdict,
               own: dict[str, tuple[int, int]] | None = None, titles: dict[str, str] | None = None) -> str:
    """Why a hidden case failed, without anything that gives the case away: which outputs are wrong and how (their
    values, shape or dtype), the type of an exception and the line of the student's code that raised it (not its
    message, which may print the case's inputs), a time-out, and the catalogued mistake it matches."""
    if got is None:
        why = "no result came back for this case"
    elif got.get("error"):
        error = got["error"]
        kept = error.get("type") in ("Stopped", "GradingError", "CaseTimeout", "GraphInBackward") or error.get("exercise")
        why = explain_error(error if kept else dict(error, message=""), exercise_id, own, titles)
        if not kept and error.get("message"):
            why = why.replace(f"your code raised {error.get('type')}",
                              f"your code raised {error.get('type')} (its message is not shown for a hidden case)", 1)
    elif want.get("error"):
        why = f"it should raise {want['error']['type']}, and it does not"
    else:
        reasons = []
        for name, wanted in want["outputs"].items():
            if name.startswith("fd:"):
                continue
            mine = got["outputs"].get(name)
            label = _label(name, spec["probe"])
            if mine is None:
                reasons.append(f"{label}: missing")
            elif mine.shape != wanted.shape:
                reasons.append(f"{label}: wrong shape")
            elif mine.dtype.kind != wanted.dtype.kind or (mine.dtype.kind == "f" and
                                                          mine.dtype.itemsize != wanted.dtype.itemsize):
                reasons.append(f"{label}: wrong dtype")
            elif not _close(mine, wanted, GRAD_ATOL if name.startswith("grad:") else ATOL).all():
                reasons.append(f"{label}: wrong values")
        why = "; ".join(reasons) or "wrong"
    why += "\n(a hidden case: its inputs and expected outputs are not shown; the public cases show the details)"
    if verdict.mistake:
        why += f"\nA known mistake — {verdict.why.split('A known mistake — ', 1)[-1]}"
    return why


def _judge(spec: dict, want: dict, got: dict | None, exercise_id: str,
           mistakes: dict[str, tuple[str, dict]] | None = None, own: dict[str, tuple[int, int]] | None = None,
           titles: dict[str, str] | None = None) -> CaseVerdict:
    if got is None:
        return CaseVerdict(False, "no result came back for this case (the run ended before it)")
    if got.get("error"):
        why = explain_error(got["error"], exercise_id, own, titles)
        if want.get("error") and _same_error(got["error"], want["error"]):
            return CaseVerdict(True)
        matched = [(n, v) for n, (v, r) in (mistakes or {}).items() if _same_error(got["error"], r.get("error"))]
    else:
        if want.get("error"):
            return CaseVerdict(False, f"it should raise {want['error']['type']}, and it does not")
        reasons = []
        for name, wanted in want["outputs"].items():
            if name.startswith("fd:"):
                continue
            fd = got["outputs"].get("fd:" + name.split(":")[1]) if name.startswith("grad:") else None
            reason = explain_output(name, got["outputs"].get(name), wanted, spec["probe"], fd,
                                    own_numeric=exercise_id == "1.1")
            if reason:
                reasons.append(reason)
        if not reasons:
            return CaseVerdict(True)
        why = "\n".join(reasons[:2]) + (f"\n(and {len(reasons) - 2} more outputs are wrong)" if len(reasons) > 2 else "")
        matched = [(n, v) for n, (v, r) in (mistakes or {}).items()
                   if not r.get("error") and equal_outputs(got["outputs"], r["outputs"])]
    if matched:
        name, verdict = matched[0]
        return CaseVerdict(False, f"{why}\nA known mistake — {verdict}", name)
    return CaseVerdict(False, why)


# -- records: what crosses from the student's process to the grader's ------------------------------------------
def decode_record(line: bytes) -> tuple[str, dict]:
    """One case's record (a JSON line) as plain data: (case id, {"outputs": {name: array}, "error", "seconds"})."""
    return decode_result(json.loads(line))


def decode_result(record) -> tuple[str, dict]:
    """A decoded JSON record checked and turned into plain data; ValueError for anything else."""
    if not isinstance(record, dict) or not isinstance(record.get("id"), str):
        raise ValueError("a record without a case id")
    outputs = {}
    for name, encoded in (record.get("outputs") or {}).items():
        if not isinstance(name, str) or not NAME.match(name) or not isinstance(encoded, str):
            raise ValueError(f"a malformed output name {str(name)[:40]!r}")
        array = np.load(io.BytesIO(base64.b64decode(encoded, validate=True)), allow_pickle=False)
        if not isinstance(array, np.ndarray) or array.dtype.kind not in "biuf" or array.size > 10 ** 7:
            raise ValueError(f"output {name} is not a plain array of numbers")
        outputs[name] = array
    error = record.get("error")
    if error is not None:
        if not isinstance(error, dict):
            raise ValueError("a malformed error")
        error = {"type": str(error.get("type", "Error"))[:80], "message": str(error.get("message", ""))[:500],
                 "exercise": error.get("exercise") if isinstance(error.get("exercise"), str) else None,
                 "frames": [{"file": str(f.get("file", ""))[:200], "line": int(f.get("line") or 0),
                             "function": str(f.get("function", ""))[:80], "code": str(f.get("code", ""))[:300]}
                            for f in (error.get("frames") or [])[:8] if isinstance(f, dict)]}
    seconds = record.get("seconds")
    return record["id"], {"outputs": outputs, "error": error,
                          "seconds": float(seconds) if isinstance(seconds, (int, float)) else None}
