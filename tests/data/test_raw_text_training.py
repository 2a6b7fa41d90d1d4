"""Raw text in, meaningful scores out: the tokenizer a run chooses, and a short run on raw Japanese
(written by the test from the built-in grammar, spaces taken out) that reaches a character BLEU well
above zero, then reloads, translates and evaluates through the command line."""
import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

from minitransformer.data import CONSTRUCTION_WEIGHTS, make_builtin_corpus
from minitransformer.data.bpe import BPETokenizer
from minitransformer.data.raw_bpe import RawBPETokenizer, choose_tokenizer, looks_unsegmented
from minitransformer.training.trainer import train
from minitransformer.training.options import TrainOptions
from minitransformer.translator import Translator

ROOT = Path(__file__).resolve().parents[2]


def _raw_english(sentence: str) -> str:
    """The built-in corpus's lowercased, punctuation-apart English, written as people write it."""
    sentence = sentence[0].upper() + sentence[1:]
    return sentence.replace(" ?", "?").replace(" .", ".")


# One-clause sentences only: a 600-step toy run learns them well enough to score.
SHORT = {name: weight for name, weight in CONSTRUCTION_WEIGHTS.items() if name not in ("and", "but", "when")}


def write_raw_corpus(folder: Path, n_train: int) -> Path:
    """{train,dev,test}.{en,ja}: raw English and Japanese without a single space."""
    corpus = make_builtin_corpus(seed=0, n_train=n_train, n_dev=30, n_test=40, n_heldout=0, weights=SHORT)
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


@pytest.fixture(scope="module")
def raw_run(tmp_path_factory):
    """A 600-step run of the toy model on 600 raw pairs: (run folder, summary, log lines)."""
    base = tmp_path_factory.mktemp("rawja")
    data = write_raw_corpus(base / "rawja", n_train=600)
    lines = []
    options = TrainOptions(out=str(base / "run"), data=str(data), direction="en-ja", preset="toy",
                           steps=600, vocab_size=700, average=1, beam=1, plot=False, quiet=True)
    summary = train(options, log=lines.append)
    again = []
    train(options, log=again.append)                          # the same run, finished: nothing to train
    return base / "run", summary, lines + again


def test_a_short_run_on_raw_japanese_reaches_a_character_bleu_well_above_zero(raw_run):
    out, summary, lines = raw_run
    assert any(line.startswith("BPE (raw text") and "almost no spaces" in line for line in lines)
    assert any("BLEU" in line and "(char tokens)" in line and "chrF2" in line for line in lines)
    assert summary["test_bleu_tokenize"] == "char"
    assert summary["test_bleu"] > 10.0 and summary["test_chrf"] > 5.0
    results = json.loads((out / "results.json").read_text(encoding="utf-8"))
    assert results["test_bleu_tokenize"] == "char" and results["test_bleu"] == summary["test_bleu"]
    assert results["dev_bleu_tokenize"] == "char"
    assert any("already holds this run" in line and "(char tokens)" in line for line in lines)
    assert json.loads((out / "tokenizer.json").read_text(encoding="utf-8"))["kind"] == "raw"


def test_the_run_reloads_its_raw_tokenizer_and_translates(raw_run):
    out, _, _ = raw_run
    translator = Translator.load(out)
    assert isinstance(translator.tokenizer, RawBPETokenizer)
    assert translator.writing.normalize("Hanako did not study.") == "Hanako did not study."
    [output] = translator.translate(["Hanako did not study."], beam_size=1, warn_unseen=False)
    assert output and " " not in output                                # Japanese, written without spaces
    assert translator.display_tokens([5, 300]) == [translator.tokenizer.vocab[5], translator.tokenizer.vocab[300]]
    messages = []
    translator.warn = messages.append
    translator.translate(["Hanako did not study ☃."], beam_size=1)
    assert messages and "'☃'" in messages[0] and "its UTF-8 bytes" in messages[0]


def test_evaluate_on_the_command_line_names_the_tokenization(raw_run):
    out, _, _ = raw_run
    env = dict(os.environ, PYTHONPATH=str(ROOT) + os.pathsep + os.environ.get("PYTHONPATH", ""))
    result = subprocess.run([sys.executable, "-m", "minitransformer", "evaluate", "--checkpoint", str(out),
                             "--limit", "10", "--greedy"], capture_output=True, text=True, env=env, cwd=ROOT,
                            timeout=300)
    assert result.returncode == 0, result.stderr
    assert "(char tokens), chrF2 = " in result.stdout


def test_tokenizer_words_overrides_the_choice(tmp_path):
    data = write_raw_corpus(tmp_path / "rawja", n_train=60)
    lines = []
    train(TrainOptions(out=str(tmp_path / "run"), data=str(data), direction="en-ja", preset="toy", steps=1,
                       tokenizer="words", average=1, evaluate=False, quiet=True), log=lines.append)
    assert any(line.startswith("BPE (within words: chosen with --tokenizer)") for line in lines)
    assert isinstance(Translator.load(tmp_path / "run").tokenizer, BPETokenizer)


def _tatoeba_recipe():
    """benchmarks/quality/tatoeba.py as a module (benchmarks/ is not a package)."""
    import importlib.util  # noqa: PLC0415
    spec = importlib.util.spec_from_file_location("tatoeba_recipe", ROOT / "benchmarks" / "quality" / "tatoeba.py")
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


def test_the_tatoeba_test_limit_spreads_over_the_length_sorted_file():
    """The ManyThings files are sorted by length: --test-limit N must not mean the N shortest sentences."""
    spread_sample = _tatoeba_recipe().spread_sample
    assert spread_sample(list(range(10)), 5) == [0, 2, 4, 6, 8]
    assert spread_sample(list(range(10)), 3) == [0, 3, 6]
    assert spread_sample(list(range(4)), None) == [0, 1, 2, 3] and spread_sample(list(range(4)), 9) == [0, 1, 2, 3]
    with pytest.raises(ValueError, match="--test-limit must be positive"):
        spread_sample([1, 2], 0)
    by_length = [("w " * n, "x") for n in range(1, 101)]        # like the files: shortest first
    sample = spread_sample(by_length, 20)
    assert len(sample) == 20 and len(set(sample)) == 20
    mean = lambda pairs: sum(len(s.split()) for s, _ in pairs) / len(pairs)  # noqa: E731
    assert abs(mean(sample) - mean(by_length)) < 5                 # a prefix of 20 would average 10.5 against 50.5


def test_the_tatoeba_recipe_runs_end_to_end_on_a_tiny_corpus(tmp_path):
    """benchmarks/quality/tatoeba.py on a made-up jpn-eng folder (TSV, as the real one), a few steps of the toy model,
    a step budget, and a test limit that samples the whole (length-sorted) test file."""
    folder = tmp_path / "jpn-eng"
    folder.mkdir()
    corpus = make_builtin_corpus(seed=1, n_train=80, n_dev=10, n_test=12, n_heldout=0)
    for split in ("train", "dev", "test"):
        pairs = sorted(getattr(corpus, split), key=lambda pair: len(pair[0]))
        (folder / f"{split}.tsv").write_text("".join(f"{_raw_english(e)}\t{j.replace(' ', '')}\tCC-BY\n"
                                                     for e, j in pairs), encoding="utf-8")
    out = tmp_path / "run"
    env = dict(os.environ, PYTHONPATH=str(ROOT) + os.pathsep + os.environ.get("PYTHONPATH", ""))
    result = subprocess.run([sys.executable, str(ROOT / "benchmarks" / "quality" / "tatoeba.py"), "jpn-eng", "en-ja",
                             "--data", str(folder), "--out", str(out), "--preset", "toy", "--vocab-size", "300",
                             "--steps", "3", "--test-limit", "6", "--extra", "--quiet"],
                            capture_output=True, text=True, env=env, cwd=ROOT, timeout=600)
    assert result.returncode == 0, result.stderr
    scores = json.loads((out / "tatoeba_scores.json").read_text(encoding="utf-8"))
    assert scores["steps"] == 3 and scores["steps_budget"] == 3 and scores["minutes_budget"] is None
    assert scores["test_sentences"] == 6 and scores["test_sentences_in_file"] == 12
    assert {"bleu_char", "bleu_13a", "bleu_none", "bleu_ja-mecab", "chrf", "chrf++"} <= set(scores)
    assert {"load_average_at_start", "load_average_mean", "train_cpu_minutes", "quiet_2core_minutes_estimate"} <= set(scores)
    # a 3-step model may write any byte, "\x1d" too, which splitlines() would take for a line break
    outputs = (out / "test_outputs.txt").read_text(encoding="utf-8")
    assert "(char)" in result.stdout and outputs.count("\n") == 6
    test_file = sorted(corpus.test, key=lambda pair: len(pair[0]))
    assert [e["source"] for e in scores["examples"]] == [_raw_english(test_file[i][0]) for i in (0, 2, 4, 6, 8, 10)]
    # --rescore scores the same outputs again (the same figures here) and keeps the rest of the file
    (out / "tatoeba_scores.json").write_text(json.dumps({**scores, "chrf": -1.0}), encoding="utf-8")
    again = subprocess.run([sys.executable, str(ROOT / "benchmarks" / "quality" / "tatoeba.py"), "jpn-eng", "en-ja", "--data",
                            str(folder), "--out", str(out), "--rescore"], capture_output=True, text=True, env=env,
                           cwd=ROOT, timeout=600)
    assert again.returncode == 0, again.stderr
    rescored = json.loads((out / "tatoeba_scores.json").read_text(encoding="utf-8"))
    assert rescored == scores
