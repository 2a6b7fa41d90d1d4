"""Raw text in, meaningful scores out: the tokenizer a run chooses, and a short run on raw Japanese
(written by the test from the built-in grammar, spaces taken out) that reaches a character BLEU well
above zero."""
import json
from pathlib import Path

import pytest

from minitransformer.data import make_builtin_corpus
from minitransformer.data.bpe import BPETokenizer
from minitransformer.data.raw_bpe import RawBPETokenizer, choose_tokenizer, looks_unsegmented
from minitransformer.train import train
from minitransformer.training.options import TrainOptions
from minitransformer.translator import Translator


def _raw_english(sentence: str) -> str:
    """The built-in corpus's lowercased, punctuation-apart English, written as people write it."""
    sentence = sentence[0].upper() + sentence[1:]
    return sentence.replace(" ?", "?").replace(" .", ".")


def write_raw_corpus(folder: Path, n_train: int) -> Path:
    """{train,dev,test}.{en,ja}: raw English and Japanese without a single space."""
    corpus = make_builtin_corpus(seed=0, n_train=n_train, n_dev=30, n_test=40, n_heldout=0)
    folder.mkdir(parents=True, exist_ok=True)
    for split in ("train", "dev", "test"):
        pairs = getattr(corpus, split)
        (folder / f"{split}.en").write_text("".join(_raw_english(e) + "\n" for e, _ in pairs), encoding="utf-8")
        (folder / f"{split}.ja").write_text("".join(j.replace(" ", "") + "\n" for _, j in pairs), encoding="utf-8")
    return folder


def test_a_side_without_spaces_is_raw_text():
    english = ["I am a student.", "The cat ate the fish."]
    segmented = ["私 は 学生 です 。", "猫 が 魚 を 食べ た 。"]
    raw = ["私は学生です。", "猫が魚を食べた。"]
    assert looks_unsegmented(raw) and not looks_unsegmented(segmented) and not looks_unsegmented(english)
    assert choose_tokenizer(None, [english, raw])[0] == "raw"
    assert choose_tokenizer("auto", [english, segmented])[0] == "words"
    assert choose_tokenizer("words", [english, raw]) == ("words", "chosen with --tokenizer")
    assert choose_tokenizer("raw", [english, segmented])[0] == "raw"
    with pytest.raises(ValueError, match="unknown tokenizer 'bytes'"):
        choose_tokenizer("bytes", [english])


def test_a_short_run_on_raw_japanese_reaches_a_character_bleu_well_above_zero(tmp_path):
    data = write_raw_corpus(tmp_path / "rawja", n_train=600)
    lines = []
    summary = train(TrainOptions(out=str(tmp_path / "run"), data=str(data), direction="en-ja", preset="toy",
                                 steps=300, vocab_size=700, average=1, beam=1, plot=False, quiet=True),
                    log=lines.append)
    assert any(line.startswith("BPE (raw text") and "almost no spaces" in line for line in lines)
    assert any("BLEU" in line and "(char tokens)" in line and "chrF2" in line for line in lines)
    assert summary["test_bleu_tokenize"] == "char"
    assert summary["test_bleu"] > 10.0 and summary["test_chrf"] > 5.0
    results = json.loads((tmp_path / "run" / "results.json").read_text(encoding="utf-8"))
    assert results["test_bleu_tokenize"] == "char" and results["test_bleu"] == summary["test_bleu"]
    saved = json.loads((tmp_path / "run" / "tokenizer.json").read_text(encoding="utf-8"))
    assert saved["kind"] == "raw"

    translator = Translator.load(tmp_path / "run")                     # the run reloads its raw tokenizer
    assert isinstance(translator.tokenizer, RawBPETokenizer)
    assert translator.writing.normalize("Hanako did not study.") == "Hanako did not study."
    [output] = translator.translate(["Hanako did not study."], beam_size=1, warn_unseen=False)
    assert output and " " not in output                                # Japanese, written without spaces
    assert all(label == translator.tokenizer.vocab[i]
               for label, i in zip(translator.display_tokens([5, 300]), [5, 300]))


def test_tokenizer_words_overrides_the_choice(tmp_path):
    data = write_raw_corpus(tmp_path / "rawja", n_train=60)
    lines = []
    train(TrainOptions(out=str(tmp_path / "run"), data=str(data), direction="en-ja", preset="toy", steps=1,
                       tokenizer="words", average=1, evaluate=False, quiet=True), log=lines.append)
    assert any(line.startswith("BPE (within words: chosen with --tokenizer)") for line in lines)
    assert isinstance(Translator.load(tmp_path / "run").tokenizer, BPETokenizer)
