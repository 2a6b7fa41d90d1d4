"""Figures the chapters compute rather than time: simulations, closed forms, and ratios of recorded
measurements. Writes benchmarks/book/results/chapter_figures.json, which the chapters quote.

    python benchmarks/book/chapter_figures.py            # a few seconds on one core

* score_gap (chapter 6): the gap between the two largest of S scores q·k with unit-variance
  components, simulated, against the scores' standard deviation √d_k.
* largest_weight (chapter 4): the mean largest softmax weight of one query over ten random keys,
  with and without the 1/√d_k of eq. 1.
* smoothing (chapters 4, 10): the entropy H(q) of the label-smoothed target, the training loss floor.
* fused_ratio (README, chapters 4–5): composed / fused from fused_vs_composed.json.
* bpe_vocabulary (chapter 11): what the default preset's shared vocabulary of 1,000 is spent on.
* padding (chapter 10): how much of a batch is padding, batched by length or in random order.
* tokenization (chapter 11, as its notebook computes it): four Japanese outputs scored with BLEU on
  whitespace tokens, on hand-segmented words and on characters, and with chrF and chrF++.
* parameters (chapter 9): the parameter count by the chapter's formula for the rows of the paper's
  Table 3 that change the sizes, with V = 37,000, and the vocabulary each reported total implies.
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
# the speed group's measurement, whose ratios chapter 4 quotes beside these figures
FUSED_VS_COMPOSED = Path(__file__).resolve().parents[1] / "speed" / "results" / "fused_vs_composed.json"


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


def largest_weight(d_k: int, n_keys: int, trials: int, rng: np.random.Generator) -> dict:
    """Mean over queries of the largest softmax weight, scores q·k unscaled and divided by √d_k."""
    q = rng.standard_normal((trials, 1, d_k))
    k = rng.standard_normal((trials, n_keys, d_k))
    scores = (q * k).sum(axis=-1)

    def top(s):
        e = np.exp(s - s.max(axis=-1, keepdims=True))
        return float((e / e.sum(axis=-1, keepdims=True)).max(axis=-1).mean())
    return {"d_k": d_k, "keys": n_keys, "trials": trials, "unscaled": round(top(scores), 3),
            "scaled": round(top(scores / math.sqrt(d_k)), 3)}


def padding(pairs, tokenizer, max_tokens: int = 1000) -> dict:
    """The share of padding in one epoch's batches (chapter 10): bucketed by length within a token budget,
    as training makes them, against the same number of sentences per batch drawn in random order."""
    from minitransformer.data.batching import collate, epoch_batches
    from minitransformer.training.trainer import encode_pairs

    examples = encode_pairs(tokenizer, pairs, 256)
    bucketed = epoch_batches(examples, max_tokens, 0, seed=0, epoch=0)
    per_batch = round(float(np.mean([b.src.shape[0] for b in bucketed])))
    order = np.random.default_rng(0).permutation(len(examples))
    drawn = [collate(examples, list(order[i:i + per_batch]), 0, 1, 2) for i in range(0, len(examples), per_batch)]

    def share(batches) -> float:
        real = sum(b.n_src_tokens + b.n_tgt_tokens for b in batches)
        return round(1 - real / sum(b.src.size + b.tgt_out.size for b in batches), 4)
    return {"max_tokens": max_tokens, "sentences_per_batch": per_batch, "bucketed_share": share(bucketed),
            "random_share": share(drawn)}


REFERENCES = ["私は学生です。", "猫が魚を食べた。", "明日東京に行きます。", "この本はとても面白かった。"]
OUTPUTS = ["私は先生です。", "猫が魚を食べました。", "明日東京へ行きます。", "この本はとても面白かった。"]
REFERENCES_WORDS = ["私 は 学生 です 。", "猫 が 魚 を 食べ た 。", "明日 東京 に 行き ます 。", "この 本 は とても 面白かっ た 。"]
OUTPUTS_WORDS = ["私 は 先生 です 。", "猫 が 魚 を 食べ まし た 。", "明日 東京 へ 行き ます 。", "この 本 は とても 面白かっ た 。"]


def tokenization() -> dict:
    """One set of outputs scored three ways (chapter 11): BLEU depends on what a token is; chrF does not ask."""
    from minitransformer.bleu import corpus_bleu
    from minitransformer.chrf import corpus_chrf

    return {"bleu_whitespace": round(corpus_bleu(OUTPUTS, REFERENCES, tokenize="none"), 2),
            "bleu_words": round(corpus_bleu(OUTPUTS_WORDS, REFERENCES_WORDS, tokenize="none"), 2),
            "bleu_characters": round(corpus_bleu(OUTPUTS, REFERENCES, tokenize="char"), 2),
            "first_reference_tokens": {"whitespace": len(REFERENCES[0].split()), "words": len(REFERENCES_WORDS[0].split()),
                                       "characters": len(REFERENCES[0])},
            "chrf": round(corpus_chrf(OUTPUTS, REFERENCES), 2),
            "chrf_plus_plus": round(corpus_chrf(OUTPUTS, REFERENCES, word_order=2), 2)}


def smoothing_entropy(vocab: int, eps: float) -> dict:
    """H(q) for q = (1 − ε) on the target + ε/(V − 1) on every other non-pad class (chapter 4)."""
    others = vocab - 2                                    # V − 1 allowed classes, one of them the target
    p_target, p_other = 1 - eps + eps / (vocab - 1), eps / (vocab - 1)
    entropy = -(p_target * math.log(p_target) + others * p_other * math.log(p_other))
    return {"vocab": vocab, "epsilon": eps, "entropy_nats": round(entropy, 3),
            "optimal_perplexity_on_targets": round(1 / p_target, 3)}


def default_corpus(vocab_size: int):
    """The default preset's training pairs and the shared BPE learned on them, as `train` learns it."""
    from minitransformer.data.bpe import BPETokenizer
    from minitransformer.data.run_data import load_data
    from minitransformer.presets import PRESETS

    pairs = load_data(None, "en-ja", PRESETS["small"]["corpus"]).pairs("train", "en-ja")
    return pairs, BPETokenizer.train([s for pair in pairs for s in pair], vocab_size)


def bpe_vocabulary(pairs, tokenizer) -> dict:
    """What the default preset's 1,000 shared BPE symbols are spent on (chapter 11)."""
    from minitransformer.data.tokenizer import SPECIAL_TOKENS

    words = {side: {w for pair in pairs for w in pair[i].split()} for i, side in enumerate(("en", "ja"))}
    alphabet = tokenizer.vocab_size - len(SPECIAL_TOKENS) - len(tokenizer.merges)
    whole = {side: sum(len(tokenizer.encode(w)) == 1 for w in ws) for side, ws in words.items()}
    return {"vocab_size": tokenizer.vocab_size, "specials": len(SPECIAL_TOKENS), "characters": alphabet,
            "merges": len(tokenizer.merges), "words_en": len(words["en"]), "words_ja": len(words["ja"]),
            "words": len(words["en"] | words["ja"]), "one_token_en": whole["en"], "one_token_ja": whole["ja"],
            "one_token": whole["en"] + whole["ja"]}


# Table 3's rows that change the sizes: (d_model, d_ff, N, the total the paper reports in millions)
TABLE3_SIZES = {"base": (512, 2048, 6, 65), "N=2": (512, 2048, 2, 36), "N=4": (512, 2048, 4, 50),
                "N=8": (512, 2048, 8, 80), "d_model=256": (256, 2048, 6, 28), "d_model=1024": (1024, 2048, 6, 168),
                "d_ff=1024": (512, 1024, 6, 53), "d_ff=4096": (512, 4096, 6, 90), "big": (1024, 4096, 6, 213)}


def table3_parameters(vocab: int = 37000) -> dict:
    """Chapter 9's count, (attention + FFN + LayerNorms) per layer plus one shared (V, d) embedding,
    for each size of Table 3; and the rows of one shared embedding each reported total implies."""
    out = {}
    for name, (d, d_ff, n, reported) in TABLE3_SIZES.items():
        attention, ffn = 4 * (d * d + d), (d * d_ff + d_ff) + (d_ff * d + d)
        layers = n * (attention + ffn + 2 * 2 * d) + n * (2 * attention + ffn + 3 * 2 * d)
        out[name] = {"reported_millions": reported, "ours": layers + vocab * d,
                     "ours_millions": round((layers + vocab * d) / 1e6, 1),
                     "implied_rows_thousands": round((reported * 1e6 - layers) / d / 1e3, 1)}
    out["base"]["gap_millions"] = round(out["base"]["reported_millions"] - out["base"]["ours"] / 1e6, 1)
    return out


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
    figures: dict = {"command": "python benchmarks/book/chapter_figures.py"}
    figures["score_gap"] = {f"d_k_{d}_keys_{n}": score_gap(d, n, 20_000, rng) for d in (64, 512) for n in (10, 100)}
    figures["largest_weight"] = {f"d_k_{d}": largest_weight(d, 10, 20_000, np.random.default_rng(0)) for d in (1, 64, 512)}
    figures["smoothing"] = smoothing_entropy(1000, 0.1)
    if FUSED_VS_COMPOSED.exists():
        figures["fused_ratio"] = {name: round(row["composed_ms"] / row["fused_ms"], 1) for name, row in
                                  json.loads(FUSED_VS_COMPOSED.read_text())["functions"].items()}
    pairs, tokenizer = default_corpus(1000)
    figures["bpe_vocabulary"] = bpe_vocabulary(pairs, tokenizer)
    figures["padding"] = padding(pairs, tokenizer)
    figures["parameters"] = table3_parameters()
    figures["tokenization"] = tokenization()
    figures["residual"] = residual_gradients([2, 6, 12, 24], 32, 0)
    Path(args.results).write_text(json.dumps(figures, indent=1, ensure_ascii=False) + "\n", encoding="utf-8")
    print(json.dumps(figures, indent=1, ensure_ascii=False))
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
