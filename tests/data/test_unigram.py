"""The unigram language model over raw text (data/unigram.py): exact round trips, byte fallback, the
Viterbi segmentation and one EM step against hand-computed values, pruning that keeps every character,
the file and its dispatch, and a short training run on raw Japanese."""
import itertools
import json
import math
import random

import numpy as np
import pytest

from minitransformer.data import make_builtin_corpus
from minitransformer.data.bpe import BPETokenizer
from minitransformer.data.raw_bpe import RawBPETokenizer, choose_tokenizer
from minitransformer.data.raw_text import BYTE_TOKENS, FIRST_BYTE_ID, FIRST_PIECE_ID, SPACE
from minitransformer.data.tokenizer import SPECIAL_TOKENS
from minitransformer.data.unigram import (MAX_TEXT_LENGTH, Lattice, UnigramTokenizer, forward_backward, m_step,
                                          pruning_loss, viterbi)
from minitransformer.training.trainer import train
from minitransformer.training.options import TrainOptions
from minitransformer.translator import Translator, tokenizer_from_dict

JAPANESE = ["私は学生です。", "猫が魚を食べた。", "東京に住んでいます。", "私は東京の学生です。", "猫が好きです。"]
ENGLISH = ["I am a student.", "The cat ate the fish.", "I live in Tokyo.", "I like cats."]


@pytest.fixture(scope="module")
def tokenizer():
    return UnigramTokenizer.train((JAPANESE + ENGLISH) * 3, vocab_size=320)


def hand_made(pieces: dict[str, float]) -> UnigramTokenizer:
    """A tokenizer with the given pieces ("▁" for the space) and log-probabilities."""
    return UnigramTokenizer(list(SPECIAL_TOKENS) + list(BYTE_TOKENS) + list(pieces), list(pieces.values()))


def test_round_trip_is_exact_on_random_unicode_japanese_emoji_and_control_characters(tokenizer):
    rng = random.Random(0)
    alphabet = "abc xyz私は学生猫。、!?" + "\t\n\r\x00\x07\x1b" + "😀👍🏽🇯🇵" + SPACE + "é\u0301\u200b\ufeff"
    texts = JAPANESE + ENGLISH + ["", " ", "  two  spaces ", "\x00", "日本語と English が混ざった文。", "👨‍👩‍👧 family"]
    texts += ["".join(rng.choice(alphabet) for _ in range(rng.randrange(0, 30))) for _ in range(200)]
    texts += ["".join(chr(rng.randrange(1, 0x10FFFF)) for _ in range(10)).encode("utf-8", "replace").decode(
              "utf-8", "replace") for _ in range(50)]
    for text in texts:
        assert tokenizer.decode(tokenizer.encode(text)) == text, repr(text)


def test_characters_never_seen_fall_back_to_their_utf8_bytes(tokenizer):
    assert "☃" not in tokenizer.characters and "私" in tokenizer.characters
    ids = tokenizer.encode("私☃")
    snowman = [FIRST_BYTE_ID + b for b in "☃".encode("utf-8")]
    assert ids[-3:] == snowman and all(i >= FIRST_PIECE_ID for i in ids[:-3])
    assert tokenizer.decode(ids) == "私☃"
    assert tokenizer.tokens("▁")[1:] == ["<0xE2>", "<0x96>", "<0x81>"]     # a literal "▁" is not a space
    assert tokenizer.unk_id not in tokenizer.encode("☃ ü 🙂 \x00")


def test_viterbi_finds_the_hand_computed_best_segmentation_not_the_greedy_one():
    # "▁abc" cut every way the pieces allow, with its log-probability:
    #   ▁|a|b|c  -1-3-3-3 = -10     ▁|ab|c  -1-4-3 = -8     ▁|a|bc  -1-3-3.5 = -7.5
    #   ▁|abc    -1-4.5   = -5.5    ▁a|b|c  -2.5-3-3 = -8.5  ▁a|bc  -2.5-3.5 = -6
    # The best is ▁|abc (-5.5); taking the longest piece from the left would give ▁a|bc (-6).
    pieces = {SPACE: -1.0, "a": -3.0, "b": -3.0, "c": -3.0, "ab": -4.0, "bc": -3.5, SPACE + "a": -2.5, "abc": -4.5}
    tok = hand_made(pieces)
    assert tok.tokens("abc") == [SPACE, "abc"]
    assert viterbi(" abc", tok.log_probs, tok.unknown, exclude="abc") == [" a", "bc"]          # the runner-up
    with_abc_worse = hand_made({**pieces, "abc": -5.5})                                         # -6.5 < -6
    assert with_abc_worse.tokens("abc") == [SPACE + "a", "bc"]
    assert hand_made({**pieces, "abc": -5.0}).tokens("abc") == [SPACE, "abc"]                  # -6 ties -6: longest last piece


def all_segmentations(text, pieces):
    if not text:
        yield []
    for end in range(1, len(text) + 1):
        if text[:end] in pieces:
            for rest in all_segmentations(text[end:], pieces):
                yield [text[:end]] + rest


def test_one_em_step_gives_the_hand_computed_expected_counts():
    # p(a) = p(b) = 1/4, p(ab) = 1/2.  "ab" (once): a|b has 1/16, ab has 1/2, so P = 9/16 and the
    # posteriors are 1/9 and 8/9.  "aab" (twice): a|a|b has 1/64, a|ab has 1/8, P = 9/64, posteriors
    # 1/9 and 8/9.  Expected counts: a = 1/9 + 2·(2/9 + 8/9) = 7/3, b = 1/9 + 2/9 = 1/3, ab = 8/9 + 16/9 = 8/3.
    candidates = ["a", "b", "ab"]
    lattice = Lattice(["ab", "aab"], [1, 2], candidates)
    log_probs = np.log([1 / 4, 1 / 4, 1 / 2, 1e-9])                   # the fallback last, never used here
    expected, likelihood = forward_backward(lattice, log_probs)
    assert expected[:3] == pytest.approx([7 / 3, 1 / 3, 8 / 3], rel=1e-12)
    assert expected[3] == 0.0
    assert likelihood == pytest.approx(math.log(9 / 16) + 2 * math.log(9 / 64), rel=1e-12)
    new_log_probs, alive = m_step(expected, np.ones(4, bool), np.array([True, True, False, True]))
    assert np.exp(new_log_probs[:3]) == pytest.approx([7 / 16, 1 / 16, 8 / 16], rel=1e-12)   # the M step
    assert alive.all()


def test_forward_backward_equals_summing_over_every_segmentation():
    rng = random.Random(3)
    candidates = ["a", "b", "c", "ab", "bc", "abc", "ca", "cab", "bb"]
    pieces = ["".join(rng.choice("abc") for _ in range(rng.randrange(1, 9))) for _ in range(12)]
    counts = [rng.randrange(1, 4) for _ in pieces]
    log_probs = np.log(np.r_[rng.sample(range(1, 100), len(candidates)), 1.0] / 500)
    expected, likelihood = forward_backward(Lattice(pieces, counts, candidates), log_probs)
    by_hand, total = np.zeros(len(candidates)), 0.0
    for piece, count in zip(pieces, counts):
        segmentations = list(all_segmentations(piece, set(candidates)))
        probs = [math.exp(sum(log_probs[candidates.index(p)] for p in seg)) for seg in segmentations]
        total += count * math.log(sum(probs))
        for seg, prob in zip(segmentations, probs):
            for p in seg:
                by_hand[candidates.index(p)] += count * prob / sum(probs)
    assert expected[:-1] == pytest.approx(by_hand, rel=1e-9) and likelihood == pytest.approx(total, rel=1e-12)


def test_pruning_keeps_every_character_and_removes_the_least_useful_pieces_first():
    texts = ["abcabc abd", "abcd bcd", "dabc"] * 4
    small = UnigramTokenizer.train(texts, vocab_size=FIRST_PIECE_ID + 3)                 # fewer than the characters
    assert set(small.characters) == set("abcd ")
    for text in texts:
        assert small.decode(small.encode(text)) == text and small.unk_id not in small.encode(text)
    bigger = UnigramTokenizer.train(texts, vocab_size=FIRST_PIECE_ID + 9)
    assert len(bigger.pieces) == 9 and set("abcd ") <= set(bigger.pieces)
    assert len(bigger.encode("abcabc")) < len(small.encode("abcabc"))
    # the loss of one piece by hand: "ab" used 3 times (of N = 10) goes to a|b
    candidates = ["a", "b", "ab"]
    expected = np.array([4.0, 3.0, 3.0, 0.0])
    log_probs = np.r_[np.log(expected[:3] / 10), -20.0]
    loss = pruning_loss(candidates, expected, log_probs, np.ones(4, bool))
    assert loss[0] == loss[1] == math.inf                                               # characters stay
    assert loss[2] == pytest.approx(3 * (math.log(3 / 10) - math.log(7 / 13) - math.log(6 / 13)))


def test_saved_and_loaded_through_the_tokenizer_dispatch(tokenizer, tmp_path):
    data = json.loads(json.dumps(tokenizer.to_dict()))
    assert data["kind"] == "unigram" and data["format"] == "minitransformer-bpe"
    assert len(data["vocab"]) == tokenizer.vocab_size - len(BYTE_TOKENS)                  # the bytes are implied
    for again in (UnigramTokenizer.from_dict(data), BPETokenizer.from_dict(data), tokenizer_from_dict(data)):
        assert isinstance(again, UnigramTokenizer)
        assert again.vocab == tokenizer.vocab and again.scores == tokenizer.scores
        assert again.encode("私は東京の学生です。") == tokenizer.encode("私は東京の学生です。")
    tokenizer.save(tmp_path / "t.json")
    assert UnigramTokenizer.load(tmp_path / "t.json").vocab == tokenizer.vocab


def test_foreign_and_broken_files_are_refused_with_a_reason(tokenizer, tmp_path):
    data = tokenizer.to_dict()
    with pytest.raises(ValueError, match="kind 'unigram'"):
        UnigramTokenizer.from_dict({**data, "kind": "raw"})
    with pytest.raises(ValueError, match="kind 'raw'"):
        RawBPETokenizer.from_dict(data)
    with pytest.raises(ValueError, match="'scores'"):
        UnigramTokenizer.from_dict({k: v for k, v in data.items() if k != "scores"})
    with pytest.raises(ValueError, match="scores for"):
        UnigramTokenizer.from_dict({**data, "scores": data["scores"][:-1]})
    with pytest.raises(ValueError, match="log-probability"):
        UnigramTokenizer.from_dict({**data, "scores": [float("nan")] + data["scores"][1:]})
    with pytest.raises(ValueError, match="duplicate"):
        UnigramTokenizer.from_dict({**data, "vocab": data["vocab"] + ["私"], "scores": data["scores"] + [-1.0]})
    (tmp_path / "bad.json").write_text("{not json", encoding="utf-8")
    with pytest.raises(ValueError, match="bad.json"):
        UnigramTokenizer.load(tmp_path / "bad.json")
    with pytest.raises(FileNotFoundError, match="missing.json"):
        UnigramTokenizer.load(tmp_path / "missing.json")


def test_learning_is_deterministic_and_pieces_never_continue_across_a_space(tokenizer):
    again = UnigramTokenizer.train((JAPANESE + ENGLISH) * 3, vocab_size=320)
    assert again.vocab == tokenizer.vocab and again.scores == tokenizer.scores
    assert all(SPACE not in piece[1:] for piece in tokenizer.vocab[FIRST_PIECE_ID:])
    assert any(len(piece) > 1 for piece in tokenizer.vocab[FIRST_PIECE_ID:])


def test_tokenizer_unigram_is_chosen_only_when_asked():
    raw = ["私は学生です。"]
    assert choose_tokenizer("unigram", [ENGLISH, raw]) == ("unigram", "chosen with --tokenizer")
    assert choose_tokenizer("auto", [ENGLISH, raw])[0] == "raw"


def test_a_short_raw_japanese_run_with_the_unigram_tokenizer_trains(tmp_path):
    corpus = make_builtin_corpus(seed=0, n_train=200, n_dev=10, n_test=10, n_heldout=0)
    folder = tmp_path / "rawja"
    folder.mkdir()
    for split in ("train", "dev", "test"):
        pairs = getattr(corpus, split)
        (folder / f"{split}.en").write_text("".join(e + "\n" for e, _ in pairs), encoding="utf-8")
        (folder / f"{split}.ja").write_text("".join(j.replace(" ", "") + "\n" for _, j in pairs), encoding="utf-8")
    lines = []
    summary = train(TrainOptions(out=str(tmp_path / "run"), data=str(folder), direction="en-ja", preset="toy",
                                 steps=60, vocab_size=400, tokenizer="unigram", average=1, evaluate=False,
                                 plot=False, quiet=True), log=lines.append)
    assert any(line.startswith("unigram LM (raw text, SentencePiece-style: chosen with --tokenizer)") for line in lines)
    losses = summary["losses"]
    assert np.mean(losses[-10:]) < np.mean(losses[:10]) - 1.0
    assert json.loads((tmp_path / "run" / "tokenizer.json").read_text(encoding="utf-8"))["kind"] == "unigram"
    translator = Translator.load(tmp_path / "run")
    assert isinstance(translator.tokenizer, UnigramTokenizer)
    assert translator.writing.words is None                               # raw text: characters, no word list
    ids = translator.tokenizer.encode("私は学生です。")
    assert translator.display_tokens(ids) == [translator.tokenizer.vocab[i] for i in ids]


def test_a_literal_space_symbol_in_training_text_is_learned_as_bytes_and_nothing_is_refused():
    texts = ["a▁b a▁b", "x▁", "▁▁", ""] * 3
    tok = UnigramTokenizer.train(texts, vocab_size=FIRST_PIECE_ID + 20)
    assert all(SPACE not in piece[1:] and piece != SPACE * 2 for piece in tok.vocab[FIRST_PIECE_ID:])
    for text in texts:
        assert tok.decode(tok.encode(text)) == text
    with pytest.raises(ValueError, match="no text"):
        UnigramTokenizer.train([], vocab_size=300)


def test_texts_longer_than_the_limit_are_left_out_of_learning_counted_and_said():
    """One unspaced line of 40,000 characters used to hold the learner for 43 s, to be dropped from training later."""
    texts = (JAPANESE + ENGLISH) * 3
    long_line = "".join(JAPANESE) * 3                                     # one text, no spaces
    said = []
    learned = UnigramTokenizer.train(texts + [long_line], vocab_size=320, max_text_length=len(long_line) - 1,
                                     log=said.append)
    assert learned.skipped_texts == 1 and said[0] == f"1 of {len(texts) + 1} texts left out: longer than " \
                                                     f"{len(long_line) - 1:,} characters"
    without = UnigramTokenizer.train(texts, vocab_size=320)
    assert learned.vocab == without.vocab and learned.scores == without.scores and without.skipped_texts == 0
    assert UnigramTokenizer.train([long_line], 300, max_text_length=len(long_line)).skipped_texts == 0
    with pytest.raises(ValueError, match=r"all 1 texts are longer than 10 characters"):
        UnigramTokenizer.train([long_line], 300, max_text_length=10)


def test_a_run_says_how_many_sentences_were_too_long_to_learn_the_vocabulary_from(tmp_path):
    folder = tmp_path / "corpus"
    folder.mkdir()
    pairs = [("the cat .", "猫です。"), ("the dog .", "犬です。")] * 10
    long_pair = ("the cat " * 400, "猫" * (MAX_TEXT_LENGTH + 1))      # over the limit on one side only
    for split in ("train", "dev", "test"):
        lines = pairs + [long_pair] if split == "train" else pairs
        (folder / f"{split}.en").write_text("".join(e + "\n" for e, _ in lines), encoding="utf-8")
        (folder / f"{split}.ja").write_text("".join(j + "\n" for _, j in lines), encoding="utf-8")
    said = []
    train(TrainOptions(out=str(tmp_path / "run"), data=str(folder), direction="en-ja", preset="toy", steps=1,
                       vocab_size=300, tokenizer="unigram", average=1, evaluate=False, plot=False, quiet=True),
          log=said.append)
    assert f"1 sentence longer than {MAX_TEXT_LENGTH:,} characters was left out of learning the vocabulary" in said
