"""What the heads of the trained default model do, measured against the grammar's gold alignments.

    python benchmarks/quality/heads.py --train --run runs/enja --history runs/enja-history
    python benchmarks/quality/heads.py --run runs/enja --history runs/enja-history      # a run trained before

``--train`` first trains the default model (``python -m minitransformer train --out RUN``, which keeps
only the last five checkpoints) and copies every step checkpoint into HISTORY as it appears.

writes benchmarks/quality/results/heads.json (quoted by chapter 12):

* every cross-attention head (layer, head), every layer's head average and the
  average over all heads: alignment accuracy, attention mass and AER on the
  test split, the reference translation fed to the decoder (teacher forcing),
  so that the gold links of the pair apply; against a positional baseline that
  aligns output position t with source position t·S/T (a monotone diagonal);
* the same for each step checkpoint of the run (``--history``: folders
  step-000100, ... copied aside while training ran, since training keeps only
  the last five), on the first ``--history-sentences`` test pairs: how
  alignment grows;
* encoder self-attention: for each head, how often the first subword of an
  English verb puts its strongest attention on its object's head noun (or its
  subject's), against the best fixed offset ("look k subwords away").
"""
from __future__ import annotations

import argparse
import json
import os
import shutil
import subprocess
import sys
import time
from collections import Counter
from pathlib import Path

import numpy as np

ROOT = Path(__file__).resolve().parents[2]
sys.path.insert(0, str(ROOT))
sys.path.insert(0, str(ROOT / "benchmarks"))     # common.py, runs.py

from minitransformer.checkpoint import load_checkpoint  # noqa: E402
from minitransformer.data.grammar.alignment import word_spans  # noqa: E402
from minitransformer.alignment_scores import AlignmentTally  # noqa: E402
from minitransformer.attention_maps import attention_maps  # noqa: E402
from minitransformer.translator import Translator  # noqa: E402
from runs import corpus_of, run_record  # noqa: E402


BLAS_SETTINGS = ("OPENBLAS_CORETYPE", "OPENBLAS_L2_SIZE", "OPENBLAS_NUM_THREADS", "OMP_NUM_THREADS")
BLAS_FILE = "blas_environment.json"      # in the run folder: the BLAS settings the run was trained with


def write_blas_environment(run: Path) -> dict:
    """Record, in the run folder, the BLAS settings this process (and so the training it starts) runs with:
    BLAS's kernel decides the order of its sums, and over thousands of steps that order decides the weights."""
    settings = {name: os.environ.get(name) for name in BLAS_SETTINGS}
    run.mkdir(parents=True, exist_ok=True)
    (run / BLAS_FILE).write_text(json.dumps(settings, indent=1) + "\n", encoding="utf-8")
    return settings


def read_blas_environment(run: Path) -> dict | None:
    path = run / BLAS_FILE
    return json.loads(path.read_text(encoding="utf-8")) if path.is_file() else None


def train_keeping_checkpoints(run: Path, history: Path, extra: list[str] = (), poll_seconds: float = 0.5) -> dict:
    """Train the default model into ``run`` and copy each step checkpoint into ``history`` before training
    prunes it (it keeps five, written every 100 steps: each lives for 500 steps, far longer than a poll)."""
    if run.exists() or history.exists():
        raise SystemExit(f"--train writes a new run: {run if run.exists() else history} exists already")
    history.mkdir(parents=True)
    settings = write_blas_environment(run)
    training = subprocess.Popen([sys.executable, "-m", "minitransformer", "train", "--out", str(run), *extra], cwd=ROOT)

    def copy_new() -> None:
        for folder in sorted((run / "checkpoints").glob("step-*")):
            if (folder / "state.json").is_file() and not (history / folder.name).exists():
                staging = history / f".tmp-{folder.name}"
                shutil.copytree(folder, staging)
                staging.rename(history / folder.name)

    while training.poll() is None:
        copy_new()
        time.sleep(poll_seconds)
    copy_new()
    if training.returncode:
        raise SystemExit(f"training {run} failed (exit {training.returncode})")
    return settings


def diagonal_links(n_target: int, n_source: int) -> np.ndarray:
    """The positional baseline as an attention matrix: row t puts all weight on source t·S/T."""
    weights = np.zeros((n_target, n_source))
    for t in range(n_target):
        weights[t, min(n_source - 1, int(t * n_source / n_target))] = 1.0
    return weights


def cross_attention_scores(translator: Translator, corpus, pairs) -> dict:
    """Per head, per layer average, overall average and the diagonal baseline, over ``pairs``."""
    config = translator.model.config
    heads = {(layer, head): AlignmentTally() for layer in range(config.n_layers) for head in range(config.n_heads)}
    layer_means = {layer: AlignmentTally() for layer in range(config.n_layers)}
    overall, diagonal = AlignmentTally(), AlignmentTally()
    tok = translator.tokenizer
    for english, japanese in pairs:
        maps = attention_maps(translator, english, output_ids=tok.encode(japanese))
        links = corpus.subword_alignment(tok, english)
        cross = maps.weights["cross"][:, :, :-1, :]          # the eos row has no gold partner
        for (layer, head), tally in heads.items():
            tally.add(cross[layer, head], links)
        for layer, tally in layer_means.items():
            tally.add(cross[layer].mean(axis=0), links)
        overall.add(cross.mean(axis=(0, 1)), links)
        diagonal.add(diagonal_links(*cross.shape[2:]), links)
    per_head = [{"layer": layer + 1, "head": head + 1, **tally.scores()} for (layer, head), tally in heads.items()]
    best = max(per_head, key=lambda h: h["accuracy"])
    # two different things: the scores of a layer's head-averaged matrix, and the mean of its heads' scores
    mean_of_scores = [{"layer": layer + 1, **{key: float(np.mean([h[key] for h in per_head if h["layer"] == layer + 1]))
                                              for key in ("accuracy", "mass", "aer")}}
                      for layer in range(config.n_layers)]
    return {"heads": per_head, "best_head": best, "layer_mean_of_heads": mean_of_scores,
            "layer_average": [{"layer": layer + 1, **t.scores()} for layer, t in layer_means.items()],
            "all_heads_average": overall.scores(), "diagonal_baseline": diagonal.scores(), "sentences": len(pairs)}


def compare_heads(final: dict) -> dict:
    """What chapter 12 reads off the table: each layer's weakest and strongest head, against the diagonal."""
    diagonal = final["diagonal_baseline"]["accuracy"]
    layers = []
    for layer in sorted({h["layer"] for h in final["heads"]}):
        heads = [h for h in final["heads"] if h["layer"] == layer]
        low, high = min(heads, key=lambda h: h["accuracy"]), max(heads, key=lambda h: h["accuracy"])
        layers.append({"layer": layer, "lowest": {"head": low["head"], "accuracy": low["accuracy"]},
                       "highest": {"head": high["head"], "accuracy": high["accuracy"]},
                       "lowest_over_diagonal": low["accuracy"] / diagonal,
                       "highest_over_diagonal": high["accuracy"] / diagonal})
    return {"layers": layers}


def relation_scores(translator: Translator, corpus, pairs, kind: str) -> dict:
    """Encoder self-attention: share of (verb, argument) pairs whose verb row peaks on the argument's head
    word, per head, against the best fixed offset from the verb's first subword."""
    config = translator.model.config
    table = corpus.verb_objects if kind == "object" else corpus.verb_subjects
    hits = np.zeros((config.n_layers, config.n_heads), dtype=int)
    offsets: Counter = Counter()
    total = 0
    for english, _ in pairs:
        relations = table[english]
        if not relations:
            continue
        spans = word_spans(translator.tokenizer, english)
        maps = attention_maps(translator, english, output_ids=[])
        encoder = maps.weights["encoder"]                     # (layers, heads, S, S)
        for verb, argument in relations:
            row, target = spans[verb][0], set(spans[argument])
            hits += np.isin(encoder[:, :, row, :].argmax(axis=-1), list(target))
            offsets.update({k for k in range(-12, 13) if row + k in target})
            total += 1
    best_offset, best_count = offsets.most_common(1)[0] if offsets else (0, 0)
    per_head = [{"layer": layer + 1, "head": head + 1, "accuracy": float(hits[layer, head] / max(total, 1))}
                for layer in range(config.n_layers) for head in range(config.n_heads)]
    return {"relation": f"verb -> head noun of its {kind}", "pairs": total, "heads": per_head,
            "best_head": max(per_head, key=lambda h: h["accuracy"]),
            "offset_baseline": {"offset": best_offset, "accuracy": best_count / max(total, 1)}}


def run_flops(run: Path, corpus) -> dict:
    """Training FLOPs of the run by formula (minitransformer/flops.py): its batches rebuilt exactly
    (``iterate_batches`` is a pure function of the seed), real (non-pad) tokens counted."""
    from minitransformer.data.batching import iterate_batches  # noqa: PLC0415
    from minitransformer.flops import training_flops  # noqa: PLC0415
    from minitransformer.training.trainer import encode_pairs  # noqa: PLC0415

    checkpoint = load_checkpoint(run, with_optimizer=False)
    translator = Translator.load(run)
    config, tok, settings = translator.model.config, translator.tokenizer, checkpoint.state["training"]
    results = json.loads((run / "results.json").read_text()) if (run / "results.json").is_file() else {}
    steps = results.get("steps") or checkpoint.state.get("step")
    examples = encode_pairs(tok, corpus.pairs("train"), config.max_len)
    source_tokens = target_tokens = 0
    for step, (_, _, batch) in enumerate(iterate_batches(examples, settings["max_tokens"], config.pad_id,
                                                         settings["seed"], 0, 0, tok.bos_id, tok.eos_id)):
        if step == steps:
            break
        source_tokens += int((batch.src != config.pad_id).sum())
        target_tokens += batch.n_tgt_tokens
    source_len = sum(len(s) for s, _ in examples) / len(examples)
    target_len = sum(len(t) + 1 for _, t in examples) / len(examples)
    return {"steps": steps, "source_tokens": source_tokens, "target_tokens": target_tokens,
            "mean_source_len": source_len, "mean_target_len": target_len,
            "training_flops": training_flops(config, source_tokens, target_tokens, source_len, target_len),
            "parameters": translator.model.num_parameters()}


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--run", default="runs/enja", help="the trained run folder (default runs/enja)")
    parser.add_argument("--history", default=None, help="a folder of step-N checkpoint folders, for the curve")
    parser.add_argument("--train", action="store_true",
                        help="train the default model into --run first, keeping every checkpoint in --history")
    parser.add_argument("--train-args", default="", help="more arguments for the training command with --train "
                                                         "(e.g. '--preset toy' for a quick check); the book's run has none")
    parser.add_argument("--sentences", type=int, default=500, help="test pairs for the final model (default 500)")
    parser.add_argument("--history-sentences", type=int, default=100, help="test pairs per checkpoint (default 100)")
    parser.add_argument("--out", default=str(Path(__file__).resolve().parent / "results" / "heads.json"))
    args = parser.parse_args(argv)
    run = Path(args.run)
    started = time.monotonic()
    if args.train:
        if not args.history:
            parser.error("--train needs --history, the folder that keeps every checkpoint")
        train_keeping_checkpoints(run, Path(args.history), args.train_args.split())
    environment = read_blas_environment(run)
    corpus = corpus_of(run)
    test = corpus.pairs("test")
    translator = Translator.load(run)
    command = "python -m minitransformer train --out " + run.as_posix() + (" " + args.train_args if args.train_args else "")
    results = {"command": "python benchmarks/quality/heads.py " + " ".join(argv if argv is not None else sys.argv[1:]),
               "run": {**run_record(run, command), "blas_environment": environment}, "split": "test",
               "final": cross_attention_scores(translator, corpus, test[:args.sentences])}
    final = results["final"]
    results["comparisons"] = compare_heads(final)
    print(f"cross-attention, {final['sentences']} test sentences (accuracy / mass / AER):")
    for h in final["heads"]:
        print(f"  layer {h['layer']} head {h['head']}: {h['accuracy']:.3f} / {h['mass']:.3f} / {h['aer']:.3f}")
    for name in ("all_heads_average", "diagonal_baseline"):
        s = final[name]
        print(f"  {name}: {s['accuracy']:.3f} / {s['mass']:.3f} / {s['aer']:.3f}")
    if (run / "final").is_dir():
        results["flops"] = run_flops(run, corpus)
        print(f"training FLOPs of the run by formula: {results['flops']['training_flops']:.3e}")
    results["encoder_relations"] = [relation_scores(translator, corpus, test[:args.sentences], kind)
                                    for kind in ("object", "subject")]
    for relation in results["encoder_relations"]:
        print(f"encoder, {relation['relation']} ({relation['pairs']} pairs): best head "
              f"{relation['best_head']}, best offset {relation['offset_baseline']}")
    if args.history:
        curve = []
        for folder in sorted(Path(args.history).glob("step-*")):
            scores = cross_attention_scores(Translator.load(folder), corpus, test[:args.history_sentences])
            step = int(folder.name.split("-")[1])
            curve.append({"step": step, "best_head": scores["best_head"],
                          "heads": [{k: h[k] for k in ("layer", "head", "accuracy")} for h in scores["heads"]],
                          "all_heads_average": scores["all_heads_average"]["accuracy"]})
            print(f"  step {step}: best head {scores['best_head']['accuracy']:.3f}, "
                  f"average {scores['all_heads_average']['accuracy']:.3f}", flush=True)
        results["history"] = {"sentences": args.history_sentences, "curve": curve}
    results["wall_seconds"] = round(time.monotonic() - started, 1)
    Path(args.out).parent.mkdir(parents=True, exist_ok=True)
    Path(args.out).write_text(json.dumps(results, indent=1))
    print(f"wall time {results['wall_seconds']:.0f} s; results: {args.out}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
