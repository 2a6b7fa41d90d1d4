"""How well a trained translator keeps every clause of a long sentence of the built-in corpus.

    python benchmarks/quality/long_sentences.py --run runs/enja --label default
    python benchmarks/quality/long_sentences.py --run runs/enja --label default --count 80 --seed 20261201
    python benchmarks/quality/long_sentences.py --run runs/enja --label default-diagnosis --diagnose

The grammar draws sentences with a seed that training never uses (the default run's corpus is seed 0);
the set keeps the first ``--count`` of them that have three clauses or more (a main clause with
relative clauses, or two joined clauses with a relative clause: counted as the distinct verbs that
have a subject or an object) and that are in no split of the seed-0 corpus. The run's translator
decodes them with beam 4, α 0.6 (the default run's settings); the script records BLEU (on the
corpus's own segmentation), exact match, the misses, and the run's own BLEU on the generated test
splits (its results.json), under ``--label`` in benchmarks/quality/results/long_sentences.json.

``--diagnose`` asks where the misses come from: the same set decoded by the final model with other
length penalties α and greedily, and by each checkpoint the run kept (or those in ``--checkpoints``),
so that steps, averaging (§6.1) and the length penalty can be told apart; "shorter" counts the
outputs with fewer words than the reference (a dropped clause or modifier).
"""
from __future__ import annotations

import argparse
import json
import os
import random
import sys
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]
sys.path.insert(0, str(ROOT))

from minitransformer.data.grammar.builtin import make_builtin_corpus  # noqa: E402
from minitransformer.data.grammar.sampler import _Sampler  # noqa: E402

RESULTS = Path(__file__).resolve().parent / "results" / "long_sentences.json"
SEED = 20261201       # no run, test or notebook draws the corpus with this seed


def clause_count(sentence) -> int:
    """Clauses of a generated sentence: the distinct verbs that have a subject or an object."""
    return len({verb for verb, _ in sentence.verb_subject} | {verb for verb, _ in sentence.verb_object})


def training_coverage(training) -> dict:
    """How the default run's training split spreads over clause counts (and its sentence lengths)."""
    counts: dict[str, int] = {}
    for english, _ in training.train:
        verbs = {v for v, _ in training.verb_subjects[english]} | {v for v, _ in training.verb_objects[english]}
        key = str(min(len(verbs), 3)) + ("+" if len(verbs) >= 3 else "")
        counts[key] = counts.get(key, 0) + 1
    words = [len(english.split()) for english, _ in training.train]
    return {"train_sentences_by_clauses": dict(sorted(counts.items())),
            "train_share_3plus_clauses": round(counts.get("3+", 0) / len(words), 4),
            "train_mean_english_words": round(sum(words) / len(words), 2),
            "train_share_at_max_words": round(sum(w >= 18 for w in words) / len(words), 4)}


def long_sentences(count: int, seed: int = SEED, min_clauses: int = 3, training=None) -> list[dict]:
    """The first ``count`` distinct generated pairs with ``min_clauses`` clauses or more, none of them in
    the seed-0 corpus (on either side)."""
    training = training or make_builtin_corpus(seed=0)
    seen = {text for split in training.SPLITS for pair in training.split(split) for text in pair}
    sampler = _Sampler(random.Random(seed))
    chosen, attempts = [], 0
    while len(chosen) < count:
        attempts += 1
        if attempts > 2_000_000:
            raise SystemExit(f"only {len(chosen)} long sentences after {attempts - 1} draws")
        sentence = sampler.sentence()
        if sentence is None or clause_count(sentence) < min_clauses:
            continue
        if sentence.english in seen or sentence.japanese in seen:
            continue
        seen.update((sentence.english, sentence.japanese))
        chosen.append({"source": sentence.english, "reference": sentence.japanese,
                       "construction": sentence.construction, "clauses": clause_count(sentence)})
    return chosen


def score(translator, items: list[dict], beam_size: int = 4, alpha: float = 0.6) -> dict:
    from minitransformer.bleu import corpus_bleu_score
    outputs = translator.translate([item["source"] for item in items], beam_size=beam_size, alpha=alpha,
                                   warn_unseen=False)
    references = [item["reference"] for item in items]
    return {"bleu": round(corpus_bleu_score(outputs, references, tokenize="none").score, 2),
            "exact_match": round(sum(o == r for o, r in zip(outputs, references)) / len(items), 3),
            "shorter": sum(len(o.split()) < len(r.split()) for o, r in zip(outputs, references)),
            "longer": sum(len(o.split()) > len(r.split()) for o, r in zip(outputs, references))}


def diagnose(translator, items: list[dict], checkpoints: Path) -> dict:
    """The long set decoded with other α, greedily, and by every kept checkpoint (beam 4, α 0.6)."""
    from minitransformer.translator import Translator
    found = {"final_model": {f"beam4_alpha_{alpha:g}".replace(".", "_"): score(translator, items, 4, alpha)
                             for alpha in (0.0, 0.6, 1.0, 1.5)}}     # no dots in keys: tools/quoted_numbers.py walks them
    found["final_model"]["greedy"] = score(translator, items, 1)
    for folder in sorted(checkpoints.glob("step-*")):
        found[folder.name] = score(Translator.load(folder), items)
        print(folder.name, found[folder.name], flush=True)
    return found


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--run", type=Path, required=True, help="a run folder of `python -m minitransformer train`")
    parser.add_argument("--label", required=True, help="name of this measurement in the results file")
    parser.add_argument("--count", type=int, default=60)
    parser.add_argument("--seed", type=int, default=SEED)
    parser.add_argument("--results", type=Path, default=RESULTS)
    parser.add_argument("--diagnose", action="store_true", help="also other α, greedy, and every checkpoint")
    parser.add_argument("--checkpoints", type=Path, help="folder of step-* checkpoints (default: the run's)")
    args = parser.parse_args(argv)

    from minitransformer.bleu import corpus_bleu_score
    from minitransformer.translator import Translator

    training = make_builtin_corpus(seed=0)
    items = long_sentences(args.count, args.seed, training=training)
    translator = Translator.load(args.run)
    started = time.monotonic()
    outputs = translator.translate([item["source"] for item in items], beam_size=4, alpha=0.6, warn_unseen=False)
    seconds = time.monotonic() - started
    references = [item["reference"] for item in items]
    score = corpus_bleu_score(outputs, references, tokenize="none")
    exact = sum(o == r for o, r in zip(outputs, references)) / len(items)
    results_file = args.run / "results.json"      # a checkpoint folder has none
    run_results = json.loads(results_file.read_text(encoding="utf-8")) if results_file.is_file() else {}
    record = {
        "command": f"python benchmarks/quality/long_sentences.py --run {args.run} --label {args.label}",
        "run": str(args.run), "run_command_options": run_results.get("options"),
        "steps": run_results.get("steps"), "final_model": run_results.get("final_model"),
        "seed": args.seed, "sentences": len(items), **training_coverage(training),
        "mean_english_words": round(sum(len(i["source"].split()) for i in items) / len(items), 1),
        "bleu": round(score.score, 2), "exact_match": round(exact, 3),
        "test_bleu": run_results.get("test_bleu"), "test_exact_match": run_results.get("test_exact_match"),
        "test_heldout_bleu": run_results.get("test_heldout_bleu"),
        "test_heldout_exact_match": run_results.get("test_heldout_exact_match"),
        "decode_seconds": round(seconds, 1), "load_average": round(os.getloadavg()[0], 2),
        "misses": [{**item, "output": output} for item, output in zip(items, outputs)
                   if output != item["reference"]],
    }
    if args.diagnose:
        record["diagnosis"] = diagnose(translator, items, args.checkpoints or args.run / "checkpoints")
    results = json.loads(args.results.read_text(encoding="utf-8")) if args.results.is_file() else {}
    results[args.label] = record
    args.results.parent.mkdir(parents=True, exist_ok=True)
    args.results.write_text(json.dumps(results, indent=1, ensure_ascii=False) + "\n", encoding="utf-8")
    print(f"{args.label}: {len(items)} sentences of 3+ clauses (seed {args.seed}): BLEU {score.score:.2f}, "
          f"{exact:.1%} exact; test BLEU {record['test_bleu']}, test_heldout {record['test_heldout_bleu']}; "
          f"wrote {args.results}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
