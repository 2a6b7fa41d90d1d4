"""Which trained run a result or a picture comes from.

Two runs of the same command can differ: BLAS sums in another order on another machine (or with another
kernel), and a few thousand steps turn that rounding into other weights and other scores. So a results
file that measures a trained model records the run by what identifies it, and a picture drawn from a run
folder is drawn only from the run its results file names:

* ``run_record(run)``: the preset, seed, steps and scores of RUN/results.json, its dev history, and a
  digest of the final model's weights;
* ``weights_digest(run)``: SHA-256 over the final weights' names, shapes, dtypes and bytes (not over the
  .npz file, whose zip entries carry the time they were written), its first 12 hex digits;
* ``require_run(run, record)``: refuses a run folder whose weights are not the recorded ones;
* ``corpus_of(run)``: the built-in corpus the run was trained on (heads.py, attention_rank.py and
  long_sequences.py --error score a run on its own test sentences).
"""
from __future__ import annotations

import hashlib
import json
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
if str(ROOT) not in sys.path:
    sys.path.insert(0, str(ROOT))

RUN_FIELDS = ("steps", "test_bleu", "test_exact_match", "test_heldout_bleu", "test_heldout_exact_match",
              "final_model")


def corpus_of(run: Path):
    """The built-in corpus the run was trained on (its preset's sizes, seed 0)."""
    from minitransformer.checkpoint import load_checkpoint  # noqa: PLC0415
    from minitransformer.data.run_data import load_data  # noqa: PLC0415
    from minitransformer.presets import PRESETS  # noqa: PLC0415

    settings = load_checkpoint(run, with_optimizer=False).state.get("training") or {}
    if settings.get("data") is not None or settings.get("direction") != "en-ja":
        raise SystemExit(f"{run}: these benchmarks measure runs on the built-in corpus, en-ja")
    return load_data(None, "en-ja", PRESETS[settings["preset"]]["corpus"], limit=settings.get("limit"))


def weights_digest(run: Path) -> str:
    from minitransformer.checkpoint import load_checkpoint  # noqa: PLC0415

    weights = load_checkpoint(Path(run) / "final", with_optimizer=False).weights
    digest = hashlib.sha256()
    for name in sorted(weights):
        array = weights[name]
        digest.update(f"{name}:{array.dtype.str}:{array.shape}".encode())
        digest.update(array.tobytes())
    return digest.hexdigest()[:12]


def run_record(run: Path, command: str | None = None) -> dict:
    """What identifies a finished training run, and the scores the book quotes from it."""
    run = Path(run)
    source = run / "results.json"
    if not source.is_file():
        raise SystemExit(f"{source}: no results.json (is {run} a finished training run?)")
    summary = json.loads(source.read_text(encoding="utf-8"))
    training = summary.get("training", {})
    record = {"command": command or f"python -m minitransformer train --out {run.as_posix()}",
              "preset": training.get("preset"), "seed": training.get("seed"),
              **{k: summary[k] for k in RUN_FIELDS if k in summary},
              "weights": weights_digest(run),
              "history": [{"epoch": h["epoch"], "step": h["step"], "dev_bleu_greedy": round(h["dev_bleu_greedy"], 1)}
                          for h in summary.get("history", [])]}
    return record


def require_run(run: Path, record: dict, source: str) -> None:
    """Stop unless ``run`` holds the weights ``record`` (from the results file ``source``) names."""
    found = weights_digest(run)
    if found != record.get("weights"):
        raise SystemExit(f"{run}: its final weights are {found}, but {source} was measured on the run with weights "
                         f"{record.get('weights')} ({record.get('command')}); draw from that run, or measure this "
                         f"one first")
