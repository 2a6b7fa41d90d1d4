"""Why a Tatoeba run scores what it scores: the measurements behind the recipe's settings.

    python benchmarks/quality/tatoeba_diagnosis.py [--run runs/tatoeba-jpn-eng-en-ja]

Four questions about a weak run (medium preset, 12 minutes, 500 test sentences), each answered with
a number, into benchmarks/quality/results/tatoeba_diagnosis.json:

* the learning rate: where eq. 3 stands after the run's steps, for the medium and small recipes;
* the test sentences: the first N of the length-sorted test file against N spread over it;
* the vocabulary: how many of the raw-text BPE's tokens the training text uses rarely, at 8,000 and
  4,000 tokens (each token's embedding learns only from the batches that contain it);
* the decoding: with ``--run``, the tokens the run's model writes for the first test sentence and
  their decoding (a missing character is the model's choice if the tokens lack it, a detokenizer
  bug if not).
* with ``--outputs``, a later run's outputs scored on the same first 500 test pairs as the weak run.
"""
from __future__ import annotations

import argparse
import json
import sys
import time
from collections import Counter
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]
sys.path.insert(0, str(ROOT))
from minitransformer.data.loaders import load_corpus  # noqa: E402
from minitransformer.data.raw_bpe import FIRST_PIECE_ID, RawBPETokenizer  # noqa: E402
from minitransformer.presets import MODELS, PRESETS  # noqa: E402

SHARED = next((p / "shared" for p in (ROOT.parent, ROOT.parent.parent) if (p / "shared" / "data").is_dir()),
              ROOT.parent / "shared")


def noam_rate(preset: str, step: int) -> float:
    """Eq. 3 of the recipe ``preset`` at ``step`` (optim.NoamSchedule without an optimizer)."""
    recipe = PRESETS[preset]
    d_model, warmup = MODELS[preset]["d_model"], recipe["warmup"]
    return recipe["factor"] * d_model ** -0.5 * min(step ** -0.5, step * warmup ** -1.5)


def test_prefix_against_spread(pairs: list[tuple[str, str]], n: int) -> dict:
    mean_words = lambda chosen: round(sum(len(s.split()) for s, _ in chosen) / len(chosen), 2)  # noqa: E731
    prefix = pairs[:n]
    spread = [pairs[i * len(pairs) // n] for i in range(n)]
    return {"n": n, "all": len(pairs), "mean_english_words_all": mean_words(pairs),
            "mean_english_words_first_n": mean_words(prefix), "mean_english_words_spread": mean_words(spread),
            "distinct_sources_first_n": len({s for s, _ in prefix}),
            "distinct_sources_spread": len({s for s, _ in spread})}


def vocabulary_use(texts: list[str], vocab_size: int) -> dict:
    start = time.process_time()
    tokenizer = RawBPETokenizer.train(texts, vocab_size)
    learn_cpu = time.process_time() - start
    counts, tokens = Counter(), 0
    for text in texts:
        ids = tokenizer.encode(text)
        counts.update(ids)
        tokens += len(ids)
    pieces = [counts.get(i, 0) for i in range(FIRST_PIECE_ID, tokenizer.vocab_size)]
    return {"vocab_size": tokenizer.vocab_size, "learn_cpu_seconds": round(learn_cpu, 1),
            "tokens_per_sentence": round(tokens / len(texts), 2), "text_pieces": len(pieces),
            "pieces_under_50_uses": sum(c < 50 for c in pieces), "pieces_unused": sum(c == 0 for c in pieces)}


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--data", default=str(SHARED / "data" / "tatoeba_manythings" / "jpn-eng"))
    parser.add_argument("--run", default=None, help="a finished run folder whose model to question")
    parser.add_argument("--outputs", default=None,
                        help="a later run's test_outputs.txt (en-ja, the whole test file): scored on the first 500 too")
    parser.add_argument("--results", default=str(Path(__file__).resolve().parent / "results" / "tatoeba_diagnosis.json"))
    args = parser.parse_args()
    corpus = load_corpus(args.data, "en-ja")
    result: dict = {"command": "python benchmarks/quality/tatoeba_diagnosis.py" + "".join(f" {a}" for a in sys.argv[1:])}
    result["learning_rate"] = {
        "medium_peak": noam_rate("medium", PRESETS["medium"]["warmup"]), "medium_warmup": PRESETS["medium"]["warmup"],
        "medium_at_1925": noam_rate("medium", 1925),
        "small_peak": noam_rate("small", PRESETS["small"]["warmup"]), "small_warmup": PRESETS["small"]["warmup"],
        "small_at_3000": noam_rate("small", 3000)}
    result["test_500"] = test_prefix_against_spread(corpus.pairs("test", "en-ja"), 500)
    texts = [s for pair in corpus.pairs("train", "en-ja") for s in pair]
    result["vocabulary"] = {str(size): vocabulary_use(texts, size) for size in (8000, 4000)}
    if args.run:
        from minitransformer.decode import decode_sentences  # noqa: PLC0415
        from minitransformer.translator import Translator  # noqa: PLC0415
        translator = Translator.load(args.run)
        tokenizer = translator.tokenizer
        source, reference = corpus.pairs("test", "en-ja")[0]
        ids = decode_sentences(translator.model, [tokenizer.encode(source)], tokenizer.bos_id, tokenizer.eos_id,
                               beam_size=4, alpha=0.6)[0]
        result["decoding"] = {"source": source, "reference": reference,
                              "output_tokens": [tokenizer.vocab[i] for i in ids], "output": tokenizer.decode(ids),
                              "reference_tokens": tokenizer.tokens(reference),
                              # the text is the tokens put together: nothing is lost in detokenization
                              "output_is_its_tokens_joined": tokenizer.decode(ids) == "".join(
                                  tokenizer.vocab[i] for i in ids).replace("\u2581", " ").removeprefix(" ")}
    if args.outputs:
        from minitransformer.bleu import corpus_bleu_score  # noqa: PLC0415
        from minitransformer.chrf import corpus_chrf  # noqa: PLC0415
        outputs = Path(args.outputs).read_text(encoding="utf-8").splitlines()[:500]
        references = [reference for _, reference in corpus.pairs("test", "en-ja")[:500]]
        result["outputs_on_first_500"] = {
            "outputs": args.outputs, "bleu_char": round(corpus_bleu_score(outputs, references, tokenize="char").score, 2),
            "chrf": round(corpus_chrf(outputs, references), 2)}
    Path(args.results).write_text(json.dumps(result, ensure_ascii=False, indent=1) + "\n", encoding="utf-8")
    print(json.dumps(result, ensure_ascii=False, indent=1))
    return 0


if __name__ == "__main__":
    sys.exit(main())
