"""BPE tokenizer: merges, exact round trip, unknown characters, files."""

import gzip
import json
import random
from collections import Counter
from pathlib import Path

import pytest

from minitransformer.data.bpe import BPETokenizer
from minitransformer.data.tokenizer import SPECIAL_TOKENS, TOKENIZERS

DATA = Path(__file__).resolve().parents[2] / ".." / "shared" / "data" / "small_parallel_enja"

TEXTS = ["the cat ate the fish .", "the dog ate the meat .", "猫 は 魚 を 食べ ました 。",
         "犬 は 肉 を 食べ ました 。", "the cat that ate the fish is sleeping ."] * 3


def naive_merges(texts, vocab_size, min_frequency=2):
    """Reference BPE: recount every pair after every merge (slow, obviously right)."""
    counts = Counter(w for t in texts for w in t.split())
    words = sorted(counts)
    alphabet = sorted({s for w in words for s in list(w[:-1]) + [w[-1] + "</w>"]})
    vocab = list(SPECIAL_TOKENS) + alphabet
    ids = {s: i for i, s in enumerate(vocab)}
    corpus = [[ids[s] for s in list(w[:-1]) + [w[-1] + "</w>"]] for w in words]
    merges = []
    while len(vocab) < vocab_size:
        pairs = Counter()
        for word, symbols in zip(words, corpus):
            for pair in zip(symbols, symbols[1:]):
                pairs[pair] += counts[word]
        if not pairs:
            break
        best = min(pairs, key=lambda p: (-pairs[p], p))
        if pairs[best] < min_frequency:
            break
        new_id = len(vocab)
        vocab.append(vocab[best[0]] + vocab[best[1]])
        merges.append((vocab[best[0]], vocab[best[1]]))
        for k, symbols in enumerate(corpus):
            out, i = [], 0
            while i < len(symbols):
                if i + 1 < len(symbols) and (symbols[i], symbols[i + 1]) == best:
                    out.append(new_id)
                    i += 2
                else:
                    out.append(symbols[i])
                    i += 1
            corpus[k] = out
    return merges


def test_special_tokens_come_first():
    tok = BPETokenizer.train(TEXTS, vocab_size=60)
    assert (tok.pad_id, tok.bos_id, tok.eos_id, tok.unk_id) == (0, 1, 2, 3)
    assert tok.vocab[:4] == ["<pad>", "<s>", "</s>", "<unk>"]


def test_frequent_words_become_single_tokens():
    tok = BPETokenizer.train(TEXTS, vocab_size=200)
    assert tok.tokens("the cat") == ["the</w>", "cat</w>"]
    assert len(tok.encode("食べ ました")) == 2


def test_incremental_training_matches_naive_recounting():
    rng = random.Random(0)
    letters = "abcdeあいう"
    texts = [" ".join("".join(rng.choice(letters) for _ in range(rng.randint(1, 7)))
                      for _ in range(rng.randint(1, 8))) for _ in range(300)]
    for vocab_size in (20, 60, 150):
        tok = BPETokenizer.train(texts, vocab_size=vocab_size)
        assert tok.merges == naive_merges(texts, vocab_size)


def test_vocab_size_and_min_frequency():
    tok = BPETokenizer.train(TEXTS, vocab_size=45)
    assert tok.vocab_size == len(tok) == 45
    rare = BPETokenizer.train(["abcdef"], vocab_size=100, min_frequency=2)
    assert rare.merges == []  # every pair occurs once
    assert BPETokenizer.train(["abcdef"], vocab_size=100, min_frequency=1).tokens("abcdef") == ["abcdef</w>"]


@pytest.mark.parametrize("kind", ["words", "raw", "unigram"])
@pytest.mark.parametrize("texts,vocab_size,message", [
    ([], 100, r"no text to learn from \(0 texts, none at all\)"),
    (["", ""], 100, r"no text to learn from \(2 texts, all empty\)"),
    (TEXTS, 0, r"vocab_size must be a positive number of tokens, got 0"),
    (TEXTS, -5, r"vocab_size must be a positive number of tokens, got -5"),
    (TEXTS, 2.5, r"vocab_size must be a positive number of tokens, got 2.5"),
    (TEXTS, True, r"vocab_size must be a positive number of tokens, got True"),
])
def test_training_on_no_text_or_to_no_size_is_refused(kind, texts, vocab_size, message):
    # train([], 100) used to give a vocabulary of the special tokens alone, and a negative size was taken
    with pytest.raises(ValueError, match=message):
        TOKENIZERS[kind].train(texts, vocab_size)


def test_word_bpe_refuses_texts_of_spaces_alone_and_takes_an_iterator():
    with pytest.raises(ValueError, match="no words to learn from"):
        BPETokenizer.train(["   ", "\t"], 100)
    assert BPETokenizer.train(iter(TEXTS), 45).vocab == BPETokenizer.train(TEXTS, 45).vocab


def test_exact_round_trip_and_bos_eos():
    tok = BPETokenizer.train(TEXTS, vocab_size=80)
    for text in TEXTS + ["  the   fish ate  the cat  ", "ate", "魚 猫"]:
        assert tok.decode(tok.encode(text)) == " ".join(text.split())
    ids = tok.encode("the cat", add_bos=True, add_eos=True)
    assert ids[0] == tok.bos_id and ids[-1] == tok.eos_id
    assert tok.decode(ids + [tok.pad_id, tok.pad_id]) == "the cat"


def test_unseen_characters_become_unk():
    tok = BPETokenizer.train(TEXTS, vocab_size=80)
    ids = tok.encode("the zebra")
    assert tok.unk_id in ids
    assert ids[:1] == tok.encode("the")
    assert tok.encode("Ω") == [tok.unk_id]


def test_an_unseen_last_character_keeps_the_word_boundary():
    tok = BPETokenizer.train(TEXTS, vocab_size=80)
    # 'Ω' was never seen: as the last character it used to carry the word's end away with it
    assert tok.decode(tok.encode("the catΩ sat")) == "the cat sat"
    assert tok.decode(tok.encode("the fisΩΩ ate")) == "the fis ate"
    assert tok.encode("the catΩ") == tok.encode("the cat") + [tok.unk_id]
    # 'p' was seen inside words ("sleeping") but never at a word's end: it cannot end one either
    assert tok.encode("catp") == tok.encode("cat") + [tok.unk_id]
    assert tok.encode("ΩΩ") == [tok.unk_id, tok.unk_id]
    assert tok.decode(tok.encode("the cΩt sat")) == "the ct sat"   # inside a word: the word still ends


def test_encode_batch_and_decode_batch():
    tok = BPETokenizer.train(TEXTS, vocab_size=80)
    batch = tok.encode_batch(TEXTS[:3], add_eos=True)
    assert batch == [tok.encode(t, add_eos=True) for t in TEXTS[:3]]
    assert tok.decode_batch(batch) == TEXTS[:3]


def test_decode_rejects_ids_outside_the_vocabulary():
    tok = BPETokenizer.train(TEXTS, vocab_size=50)
    with pytest.raises(ValueError, match="outside the vocabulary"):
        tok.decode([tok.vocab_size])


def test_save_and_load_json(tmp_path):
    tok = BPETokenizer.train(TEXTS, vocab_size=70)
    path = tmp_path / "bpe.json"
    tok.save(path)
    data = json.loads(path.read_text(encoding="utf-8"))
    assert data["vocab"] == tok.vocab
    loaded = BPETokenizer.load(path)
    assert loaded.vocab == tok.vocab and loaded.merges == tok.merges
    for text in TEXTS:
        assert loaded.encode(text) == tok.encode(text)


def test_load_reports_bad_files(tmp_path):
    with pytest.raises(FileNotFoundError, match="not found"):
        BPETokenizer.load(tmp_path / "missing.json")
    bad = tmp_path / "bad.json"
    bad.write_text("{not json", encoding="utf-8")
    with pytest.raises(ValueError, match="not a JSON"):
        BPETokenizer.load(bad)
    bad.write_text(json.dumps({"format": "minitransformer-bpe", "vocab": ["<pad>", "<s>", "</s>", "<unk>"]}))
    with pytest.raises(ValueError, match="missing key 'merges'"):
        BPETokenizer.load(bad)
    bad.write_text(json.dumps({"format": "minitransformer-bpe", "vocab": ["<pad>", "<s>", "</s>", "<unk>", "a"],
                               "merges": [["a", "b"]]}))
    with pytest.raises(ValueError, match="not in the vocabulary"):
        BPETokenizer.load(bad)


def test_one_registry_reads_every_kind_and_each_kind_reads_only_its_own(tmp_path):
    from minitransformer.data import RawBPETokenizer, UnigramTokenizer
    from minitransformer.data.tokenizer import SPECIAL_TOKENS, TOKENIZERS, Tokenizer, load_tokenizer

    assert TOKENIZERS == {"words": BPETokenizer, "raw": RawBPETokenizer, "unigram": UnigramTokenizer}
    for kind, learner in TOKENIZERS.items():
        tokenizer = learner.train(TEXTS, 300)
        assert tokenizer.vocab[:4] == list(SPECIAL_TOKENS) and tokenizer.kind == kind
        assert (tokenizer.pad_id, tokenizer.bos_id, tokenizer.eos_id, tokenizer.unk_id) == (0, 1, 2, 3)
        tokenizer.save(tmp_path / f"{kind}.json")
        for loaded in (load_tokenizer(tmp_path / f"{kind}.json"), Tokenizer.from_dict(tokenizer.to_dict())):
            assert type(loaded) is learner and loaded.to_dict() == tokenizer.to_dict()
        for other in set(TOKENIZERS.values()) - {learner, BPETokenizer}:     # BPETokenizer reads every kind
            with pytest.raises(ValueError, match=f"not a minitransformer-bpe tokenizer of kind '{other.kind}' "
                                                 f"\\(its kind is '{kind}'\\)"):
                other.from_dict(tokenizer.to_dict())


def test_a_kind_is_registered_once_and_by_name():
    from minitransformer.data.tokenizer import TOKENIZERS, register

    class Words(BPETokenizer):
        kind = "words"

    with pytest.raises(ValueError, match="tokenizer kind 'words' is taken by minitransformer.data.bpe.BPETokenizer"):
        register(Words)

    class Unnamed(BPETokenizer):
        pass

    with pytest.raises(TypeError, match="Unnamed must set its own kind"):
        register(Unnamed)
    assert TOKENIZERS["words"] is BPETokenizer


def test_a_module_run_again_registers_its_tokenizers_again():
    """An exercise's trial (like importlib.reload) runs a module's text once more: its classes are new objects
    with the same module and name, and they take their kinds back instead of failing the import."""
    from pathlib import Path

    import minitransformer.data.raw_bpe as raw_bpe
    from minitransformer.data.tokenizer import TOKENIZERS

    original = TOKENIZERS["raw"]
    namespace = {"__name__": raw_bpe.__name__, "__package__": raw_bpe.__package__, "__file__": raw_bpe.__file__}
    try:
        exec(compile(Path(raw_bpe.__file__).read_text(encoding="utf-8"), raw_bpe.__file__, "exec"), namespace)
        assert namespace["RawBPETokenizer"] is not original and TOKENIZERS["raw"] is namespace["RawBPETokenizer"]
    finally:
        TOKENIZERS["raw"] = original


def test_training_is_deterministic():
    a = BPETokenizer.train(TEXTS, vocab_size=70)
    b = BPETokenizer.train(list(reversed(TEXTS)), vocab_size=70)
    assert a.vocab == b.vocab and a.merges == b.merges


def test_real_data_round_trip():
    if not (DATA / "train.en.gz").is_file():
        pytest.skip(f"real data not found at {DATA}")
    texts = []
    for name in ("train.en.gz", "train.ja.gz"):
        with gzip.open(DATA / name, "rt", encoding="utf-8") as f:
            texts += [next(f).rstrip("\n") for _ in range(1000)]
    tok = BPETokenizer.train(texts, vocab_size=2000)
    assert tok.vocab_size == 2000
    ids = tok.encode_batch(texts)
    assert all(tok.decode(i) == " ".join(t.split()) for i, t in zip(ids, texts))
    assert sum(map(len, ids)) < 0.7 * sum(len(t.replace(" ", "")) for t in texts)  # subwords, not characters
