"""The raw-text BPE (data/raw_bpe.py): exact round trips, byte fallback, merges as computed by hand and
by a slow reference that recounts every pair before each merge, files, and the kind dispatch."""
import json
import random
from collections import Counter

import pytest

from minitransformer.data.bpe import BPETokenizer
from minitransformer.data.raw_bpe import (BYTE_TOKENS, FIRST_BYTE_ID, FIRST_PIECE_ID, SPACE, RawBPETokenizer,
                                          split_pieces)
from minitransformer.translator import tokenizer_from_dict, tokenizer_to_dict

JAPANESE = ["私は学生です。", "私は先生です。", "これはペンです。", "猫が魚を食べた。", "犬は牛乳を飲みましたか？",
            "東京に行きたい。", "彼女は本を読んでいます。", "今日はいい天気ですね。"]
ENGLISH = ["I am a student.", "I am a teacher.", "This is a pen.", "The cat ate the fish.",
           "Did the dog drink the milk?", "I want to go to Tokyo.", "She is reading a book.", "Nice weather today."]


@pytest.fixture(scope="module")
def tokenizer():
    return RawBPETokenizer.train((JAPANESE + ENGLISH) * 3, vocab_size=400)


def random_text(rng: random.Random, length: int) -> str:
    """Any Unicode scalar values (no surrogates: they are not text), biased to spaces and controls."""
    chars = []
    for _ in range(length):
        kind = rng.random()
        if kind < 0.2:
            chars.append(" ")
        elif kind < 0.3:
            chars.append(chr(rng.randrange(0, 32)))             # control characters, \x00 and \n included
        elif kind < 0.35:
            chars.append(SPACE)                                 # a literal "▁" must not come back as a space
        else:
            code = rng.randrange(0, 0x110000)
            chars.append(chr(code if not 0xD800 <= code < 0xE000 else 0x41))
    return "".join(chars)


def test_round_trip_of_random_unicode_is_exact(tokenizer):
    rng = random.Random(0)
    for _ in range(300):
        text = random_text(rng, rng.randrange(0, 30))
        assert tokenizer.decode(tokenizer.encode(text)) == text, repr(text)


@pytest.mark.parametrize("text", ["私は学生です。", "猫が魚を食べた？", "🎉👍🏽 emoji 🇯🇵!", "tab\there\nnewline\r\x00\x7f",
                                  "  two leading spaces", "trailing  ", "", " ", "a  b   c", "▁literal▁", "Ünïcödé ß"])
def test_round_trip_of_japanese_emoji_controls_and_spaces(tokenizer, text):
    ids = tokenizer.encode(text)
    assert tokenizer.decode(ids) == text
    assert tokenizer.unk_id not in ids
    assert tokenizer.decode(tokenizer.encode(text, add_bos=True, add_eos=True)) == text


def test_characters_never_seen_fall_back_to_their_utf8_bytes(tokenizer):
    ids = tokenizer.encode("魑魅")                              # not in the training text
    bytes_of = list("魑魅".encode("utf-8"))
    assert ids[0] == tokenizer.token_to_id[SPACE]               # the dummy prefix
    assert ids[1:] == [FIRST_BYTE_ID + b for b in bytes_of]
    assert [tokenizer.vocab[i] for i in ids[1:4]] == [BYTE_TOKENS[b] for b in bytes_of[:3]]
    assert tokenizer.decode(ids) == "魑魅"


def test_seen_text_uses_merged_tokens(tokenizer):
    assert tokenizer.tokens("私は学生です。")[0].startswith(SPACE + "私")
    assert len(tokenizer.encode("私は学生です。")) < len("私は学生です。")


def test_broken_byte_sequences_from_a_model_decode_to_the_replacement_character(tokenizer):
    assert tokenizer.decode([FIRST_BYTE_ID + 0xE7, tokenizer.token_to_id["I"]]) == "\ufffdI"
    with pytest.raises(ValueError, match="outside the vocabulary"):
        tokenizer.decode([tokenizer.vocab_size])


def test_split_pieces_starts_a_piece_at_every_space():
    assert split_pieces("I am  here") == [" I", " am", " ", " here"]
    assert split_pieces("私は学生です。") == [" 私は学生です。"]
    assert split_pieces("") == [" "]


def test_merges_on_a_tiny_corpus_equal_the_hand_computed_ones():
    # pieces: "▁aab" twice, "▁ab" once; ids a < b < ▁ (sorted characters).
    # counts (▁,a) 3, (a,a) 2, (a,b) 3: the tie goes to the smaller ids, (a,b)      -> "ab"
    # then ▁ a ab ×2, ▁ ab ×1: (▁,a) 2, (a,ab) 2, (▁,ab) 1: the tie goes to (a,ab)  -> "aab"
    # then ▁ aab ×2, ▁ ab ×1: (▁,aab) 2                                             -> "▁aab"
    # then only (▁,ab) is left, once: below min_frequency 2, so learning stops.
    tok = RawBPETokenizer.train(["aab aab", "ab"], vocab_size=1000)
    assert tok.merges == [("a", "b"), ("a", "ab"), (SPACE, "aab")]
    assert tok.vocab[FIRST_PIECE_ID:] == ["a", "b", SPACE, "ab", "aab", SPACE + "aab"]
    assert tok.tokens("aab ab") == [SPACE + "aab", SPACE, "ab"]


def test_overlapping_pairs_merge_left_to_right():
    # "▁aaa" twice: (a,a) occurs twice in each, 4 in all; merged left to right it gives ▁ aa a
    assert RawBPETokenizer.train(["aaa"] * 2, vocab_size=FIRST_PIECE_ID + 3).tokens("aaa") == [SPACE, "aa", "a"]
    tok = RawBPETokenizer.train(["aaa"] * 2, vocab_size=1000)
    assert tok.merges == [("a", "a"), (SPACE, "aa"), (SPACE + "aa", "a")]
    assert tok.tokens("aaaa") == [SPACE + "aa", "aa"]


def reference_merges(texts, vocab_size, min_frequency=2):
    """Slow BPE of the same definition: recount every pair before each merge."""
    counts = Counter(p for t in texts for p in split_pieces(t))
    alphabet = sorted({SPACE if c == " " else c for p in counts for c in p if c != SPACE})
    vocab = ["<pad>", "<s>", "</s>", "<unk>", *BYTE_TOKENS, *alphabet]
    ids = {t: i for i, t in enumerate(vocab)}
    words = {p: [ids[SPACE] if c == " " else ids[c] for c in p] for p in counts}
    merges = []
    while len(vocab) < vocab_size:
        pairs = Counter()
        for piece, symbols in words.items():
            for pair in zip(symbols, symbols[1:]):
                pairs[pair] += counts[piece]
        if not pairs:
            break
        pair = min(pairs, key=lambda p: (-pairs[p], p))
        if pairs[pair] < min_frequency:
            break
        new = len(vocab)
        vocab.append(vocab[pair[0]] + vocab[pair[1]])
        merges.append((vocab[pair[0]], vocab[pair[1]]))
        for piece, symbols in words.items():
            out, i = [], 0
            while i < len(symbols):
                if i + 1 < len(symbols) and (symbols[i], symbols[i + 1]) == pair:
                    out.append(new)
                    i += 2
                else:
                    out.append(symbols[i])
                    i += 1
            words[piece] = out
    return merges


@pytest.mark.parametrize("seed", range(6))
def test_incremental_learning_equals_recounting_every_pair(seed):
    rng = random.Random(seed)
    texts = ["".join(rng.choice("aabbc d") for _ in range(rng.randrange(1, 25))) for _ in range(40)]
    assert RawBPETokenizer.train(texts, vocab_size=330).merges == reference_merges(texts, 330)


def test_learning_on_japanese_equals_recounting_every_pair():
    texts = JAPANESE + ENGLISH
    assert RawBPETokenizer.train(texts * 2, vocab_size=420).merges == reference_merges(texts * 2, 420)


def test_encoding_a_training_piece_reproduces_its_segmentation_in_training():
    rng = random.Random(7)
    texts = ["".join(rng.choice("abcab ") for _ in range(rng.randrange(1, 20))) for _ in range(50)]
    tok = RawBPETokenizer.train(texts, vocab_size=300)
    for text in texts:
        assert tok.decode(tok.encode(text)) == text
        assert all(tok.vocab[i].count(SPACE) <= 1 and (SPACE not in tok.vocab[i] or tok.vocab[i][0] == SPACE)
                   for i in tok.encode(text))           # a token never continues across a space


def test_saved_and_loaded_through_the_run_folder_dispatch(tokenizer, tmp_path):
    data = tokenizer_to_dict(tokenizer)
    assert data["kind"] == "raw"
    json.dumps(data)
    again = tokenizer_from_dict(json.loads(json.dumps(data)))
    assert isinstance(again, RawBPETokenizer)
    assert again.vocab == tokenizer.vocab and again.merges == tokenizer.merges
    assert again.encode("私は学生です。") == tokenizer.encode("私は学生です。")
    assert isinstance(BPETokenizer.from_dict(data), RawBPETokenizer)   # an older caller of BPETokenizer.from_dict
    words = BPETokenizer.train(["a b c"], 20)
    assert tokenizer_to_dict(words)["kind"] == "words"
    assert isinstance(tokenizer_from_dict(tokenizer_to_dict(words)), BPETokenizer)
    legacy = {key: value for key, value in words.to_dict().items() if key != "kind"}   # saved before "kind"
    assert isinstance(tokenizer_from_dict(legacy), BPETokenizer)
    tokenizer.save(tmp_path / "t.json")
    assert RawBPETokenizer.load(tmp_path / "t.json").vocab == tokenizer.vocab


def test_broken_files_are_refused_by_name(tokenizer):
    data = tokenizer.to_dict()
    with pytest.raises(ValueError, match="kind"):
        RawBPETokenizer.from_dict({**data, "kind": "words"})
    with pytest.raises(ValueError, match="merges"):
        RawBPETokenizer.from_dict({k: v for k, v in data.items() if k != "merges"})
    with pytest.raises(ValueError, match="not in the vocabulary"):
        RawBPETokenizer.from_dict({**data, "merges": [["x", "y"]]})
    with pytest.raises(ValueError, match="unknown tokenizer kind"):
        BPETokenizer.from_dict({**data, "kind": "wordpiece"})


def test_text_that_spells_a_special_or_byte_token_learns_its_own_piece():
    texts = ["x<s>", "y<s>", "z<0x41>", "w<0x41>"] * 5                # merges build "<s>" and "<0x41>" from text
    tok = RawBPETokenizer.train(texts, vocab_size=1000)
    assert "<s>" in tok.vocab[FIRST_PIECE_ID:] and "<0x41>" in tok.vocab[FIRST_PIECE_ID:]
    for text in texts[:4] + ["<pad> <unk> </s>"]:
        ids = tok.encode(text)
        assert tok.decode(ids) == text
        assert min(ids) >= FIRST_BYTE_ID                                  # never the special tokens
    again = RawBPETokenizer.from_dict(json.loads(json.dumps(tok.to_dict())))
    assert again.encode("x<s>") == tok.encode("x<s>")
