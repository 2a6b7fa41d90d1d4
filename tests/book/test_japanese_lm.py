"""benchmarks/quality/japanese_lm.py: nanoGPT's CPU recipe on Japanese written without spaces (chapter 15.9).
Without the corpus it skips with its reason and writes nothing; the segmentation spaces are taken out; the
BPE never sees the held-out sentences; bits per character follow from the loss; and a quick run on a corpus
folder made from the built-in grammar's Japanese side goes through the whole pipeline."""
from __future__ import annotations

import gzip
import importlib
import json
import math
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2]


def script():
    sys.path.insert(0, str(ROOT / "benchmarks" / "quality"))
    try:
        return importlib.import_module("japanese_lm")
    finally:
        sys.path.remove(str(ROOT / "benchmarks" / "quality"))


def builtin_japanese(count: int) -> list[str]:
    """The built-in corpus's Japanese sentences, segmented by spaces as small_parallel_enja's are."""
    from minitransformer.data.grammar import make_builtin_corpus

    return [japanese for _, japanese in make_builtin_corpus(n_train=count, n_dev=0, n_test=0, n_heldout=0).train]


def corpus_folder(folder: Path, sentences: list[str]) -> Path:
    folder.mkdir(parents=True, exist_ok=True)
    with gzip.open(folder / "train.ja.gz", "wt", encoding="utf-8") as out:
        out.write("\n".join(sentences) + "\n")
    return folder


def test_without_the_corpus_it_skips_with_its_reason_and_writes_nothing(tmp_path, capsys):
    results = tmp_path / "japanese_lm.json"
    assert script().main([str(tmp_path / "absent"), "--results", str(results)]) == 0
    out = capsys.readouterr().out
    assert "skipped" in out and "absent" in out and "small_parallel_enja" in out
    assert not results.exists()


def test_a_quick_run_must_name_its_results_file(tmp_path):
    with pytest.raises(SystemExit):
        script().main([str(tmp_path), "--quick"])


def test_the_segmentation_spaces_are_taken_out_and_empty_lines_dropped(tmp_path):
    folder = corpus_folder(tmp_path / "c", ["私 は 学生 で す 。", "", "彼 は  先生 だ 。"] * 6)
    module = script()
    assert module.corpus_file(str(folder)) == folder / "train.ja.gz"
    sentences = module.read_sentences(folder / "train.ja.gz")
    assert sentences == ["私は学生です。", "彼は先生だ。"] * 6
    assert module.read_sentences(folder / "train.ja.gz", limit=11) == sentences[:11]
    with pytest.raises(SystemExit, match="sentences"):
        module.read_sentences(corpus_folder(tmp_path / "short", ["私 は 学生 で す 。"] * 3) / "train.ja.gz")


def test_a_sample_is_shown_one_sentence_a_line_without_its_unfinished_end():
    shown = script().shown
    assert shown("私は学生です。 彼は先生です。 猫が") == "私は学生です。\n彼は先生です。"
    assert shown("猫が") == "猫が"
    assert shown(" 私は学生です。  彼は先生です。 ") == "私は学生です。\n彼は先生です。"


def test_the_bpe_learns_from_the_training_sentences_alone():
    module = script()
    sentences = [s.replace(" ", "") for s in builtin_japanese(200)]
    sentences[-1] = "鬱" + sentences[-1]                     # a character of the held-out tail only
    tokenizer, train, val, facts = module.prepare(sentences, 600)
    assert "鬱" not in tokenizer.vocab
    cut = int(module.TRAIN_FRACTION * len(sentences))
    assert tokenizer.decode(train.tolist()) == " ".join(sentences[:cut])
    assert tokenizer.decode(val.tolist()) == " ".join(sentences[cut:])          # byte fallback: nothing lost
    assert facts["sentences"] == {"train": cut, "held_out": len(sentences) - cut}
    assert facts["characters"]["held_out"] == len(" ".join(sentences[cut:]))
    assert facts["bpe_vocab"] == len(tokenizer.vocab) <= 600 and facts["bpe_merges"] > 0


@pytest.mark.slow
def test_a_quick_run_writes_its_figures_and_seeded_samples(tmp_path):
    folder = corpus_folder(tmp_path / "small_parallel_enja", builtin_japanese(300))
    results = tmp_path / "japanese_lm.json"
    module = script()
    assert module.main([str(folder), "--quick", "--iters", "3", "--results", str(results)]) == 0
    record = json.loads(results.read_text(encoding="utf-8"))
    assert record["quick"] and record["recipe"]["iters"] == 3 and record["recipe"]["n_layers"] == 4
    bpc = record["val_loss"] * record["tokens"]["held_out"] / record["characters"]["held_out"] / math.log(2)
    assert record["val_bpc"] == pytest.approx(bpc, abs=1e-3) and record["val_bpc"] > 0
    assert record["val_perplexity"] == pytest.approx(math.exp(record["val_loss"]), rel=1e-3)
    assert 0 < record["val_loss"] < 2 * math.log(record["bpe_vocab"])
    assert record["machine"]["cpu"] and record["seconds_per_iter"] > 0
    assert [s["prompt"] for s in record["samples"]] == list(module.PROMPTS)
    for s in record["samples"]:
        assert s["generated"].startswith(s["prompt"]) and " " not in s["text"] and s["seed"] == 0
