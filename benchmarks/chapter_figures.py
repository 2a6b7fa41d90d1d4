"""Figures the chapters compute rather than time: simulations, closed forms, and ratios of recorded
measurements. Writes benchmarks/results/chapter_figures.json, which the chapters quote.

    python benchmarks/chapter_figures.py            # a few seconds on one core

* score_gap (chapter 6): the gap between the two largest of S scores q·k with unit-variance
  components, simulated, against the scores' standard deviation √d_k.
* smoothing (chapters 4, 10): the entropy H(q) of the label-smoothed target, the training loss floor.
* fused_ratio (README, chapters 4–5): composed / fused from fused_vs_composed.json.
* bpe_vocabulary (chapter 11): what the default preset's shared vocabulary of 1,000 is spent on.
* residual (chapter 9): the gradient norm at the input of a deep stack, with and without residual
  connections, measured with the engine (float64, a random upstream gradient).
"""
from __future__ import annotations

import argparse
import json
import math
from pathlib import Path

import numpy as np

RESULTS = Path(__file__).resolve().parent / "results"


def score_gap(d_k: int, n_keys: int, trials: int, rng: np.random.Generator) -> dict:
    """Median gap between the best and second-best score of one query over n_keys random keys."""
    q = rng.standard_normal((trials, 1, d_k))
    k = rng.standard_normal((trials, n_keys, d_k))
    scores = (q * k).sum(axis=-1)                         # unscaled q·k, s.d. √d_k
    top2 = np.sort(scores, axis=-1)[:, -2:]
    gap = top2[:, 1] - top2[:, 0]
    return {"d_k": d_k, "keys": n_keys, "trials": trials, "score_sd": round(float(scores.std()), 2),
            "gap_median": round(float(np.median(gap)), 2), "gap_mean": round(float(gap.mean()), 2),
            "gap_median_scaled": round(float(np.median(gap)) / math.sqrt(d_k), 3),
            "top_vs_second_weight_median": round(float(np.median(1 / (1 + np.exp(-gap)))), 4)}


def smoothing_entropy(vocab: int, eps: float) -> dict:
    """H(q) for q = (1 − ε) on the target + ε/(V − 1) on every other non-pad class (chapter 4)."""
    others = vocab - 2                                    # V − 1 allowed classes, one of them the target
    p_target, p_other = 1 - eps + eps / (vocab - 1), eps / (vocab - 1)
    entropy = -(p_target * math.log(p_target) + others * p_other * math.log(p_other))
    return {"vocab": vocab, "epsilon": eps, "entropy_nats": round(entropy, 3),
            "optimal_perplexity_on_targets": round(1 / p_target, 3)}


def bpe_vocabulary(vocab_size: int) -> dict:
    """What the default preset's 1,000 shared BPE symbols are spent on (chapter 11)."""
    from minitransformer.data.bpe import BPETokenizer
    from minitransformer.data.tokenizer import SPECIAL_TOKENS
    from minitransformer.data.source import load_data
    from minitransformer.presets import PRESETS

    pairs = load_data(None, "en-ja", PRESETS["small"]["corpus"]).pairs("train", "en-ja")
    tokenizer = BPETokenizer.train([s for pair in pairs for s in pair], vocab_size)
    words = {side: {w for pair in pairs for w in pair[i].split()} for i, side in enumerate(("en", "ja"))}
    alphabet = tokenizer.vocab_size - len(SPECIAL_TOKENS) - len(tokenizer.merges)
    whole = {side: sum(len(tokenizer.encode(w)) == 1 for w in ws) for side, ws in words.items()}
    return {"vocab_size": tokenizer.vocab_size, "specials": len(SPECIAL_TOKENS), "characters": alphabet,
            "merges": len(tokenizer.merges), "words_en": len(words["en"]), "words_ja": len(words["ja"]),
            "words": len(words["en"] | words["ja"]), "one_token_en": whole["en"], "one_token_ja": whole["ja"],
            "one_token": whole["en"] + whole["ja"]}


def residual_gradients(depths: list[int], d_model: int, seed: int) -> dict:
    """The gradient at the input of a stack of FFN sub-layers (§3.3), five ways: its norm, and its
    cosine with the gradient arriving at the top (1 = the top's signal passes through unchanged)."""
    import minitransformer as mt
    from minitransformer.nn import FeedForward, LayerNorm
    from minitransformer.nn import init as nn_init

    stacks = {
        "plain": lambda ffn, norm, h: ffn(h),                      # no identity path, no norm
        "plain_ln": lambda ffn, norm, h: norm(ffn(h)),             # no identity path
        "residual": lambda ffn, norm, h: h + ffn(h),               # identity path, no norm
        "post_ln": lambda ffn, norm, h: norm(h + ffn(h)),          # the paper: LayerNorm(x + Sublayer(x)), §3.1
        "pre_ln": lambda ffn, norm, h: h + ffn(norm(h)),           # normalise the sub-layer's input instead
    }
    out: dict = {"d_model": d_model, "d_ff": 4 * d_model, "tokens": 64, "depths": depths, "dtype": "float64"}
    for kind, layer in stacks.items():
        norms, cosines = [], []
        for depth in depths:
            nn_init.set_seed(seed)                                 # the same weights for every stack
            blocks = [(FeedForward(d_model, 4 * d_model), LayerNorm(d_model)) for _ in range(depth)]
            for ffn, norm in blocks:
                for p in list(ffn.parameters()) + list(norm.parameters()):
                    p.data = p.data.astype(np.float64)
            rng = np.random.default_rng(seed)
            x = mt.Tensor(rng.standard_normal((64, d_model)), requires_grad=True)
            h = x
            for ffn, norm in blocks:
                h = layer(ffn, norm, h)
            upstream = rng.standard_normal(h.shape)
            upstream /= np.linalg.norm(upstream)                   # ‖∂L/∂(top)‖ = 1
            (h * mt.Tensor(upstream)).sum().backward()
            grad = np.asarray(x.grad)
            norms.append(float(f"{np.linalg.norm(grad):.3g}"))
            cosines.append(round(float((grad * upstream).sum() / np.linalg.norm(grad)), 2) + 0.0)   # no "-0.0"
        out[kind] = {"grad_norm": norms, "cosine_with_top": cosines}
    return out


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--results", default=str(RESULTS / "chapter_figures.json"))
    args = parser.parse_args()
    rng = np.random.default_rng(0)
    figures: dict = {"command": "python benchmarks/chapter_figures.py"}
    figures["score_gap"] = {f"d_k_{d}_keys_{n}": score_gap(d, n, 20_000, rng) for d in (64, 512) for n in (10, 100)}
    figures["smoothing"] = smoothing_entropy(1000, 0.1)
    recorded = {name: json.loads((RESULTS / f"{name}.json").read_text()) for name in
                ("fused_vs_composed",) if (RESULTS / f"{name}.json").exists()}
    if "fused_vs_composed" in recorded:
        figures["fused_ratio"] = {name: round(row["composed_ms"] / row["fused_ms"], 1)
                                  for name, row in recorded["fused_vs_composed"]["functions"].items()}
    figures["bpe_vocabulary"] = bpe_vocabulary(1000)
    figures["residual"] = residual_gradients([2, 6, 12, 24], 32, 0)
    Path(args.results).write_text(json.dumps(figures, indent=1, ensure_ascii=False) + "\n", encoding="utf-8")
    print(json.dumps(figures, indent=1, ensure_ascii=False))
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
