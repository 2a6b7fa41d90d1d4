"""The built-in English-Japanese corpus: determinism, splits, held-out combinations, grammar."""

import pytest

from minitransformer.data.corpus import Corpus
from minitransformer.data.grammar import CONSTRUCTION_WEIGHTS, BuiltinCorpus, GrammarError, make_builtin_corpus
from minitransformer.data.grammar.lexicon import ADJECTIVES, VERBS, godan, ichidan, suru

SMALL = dict(n_train=3000, n_dev=200, n_test=200, n_heldout=200)


@pytest.fixture(scope="module")
def corpus() -> BuiltinCorpus:
    return make_builtin_corpus(seed=0)  # the default sizes


def test_default_sizes(corpus):
    assert corpus.sizes() == {"train": 20000, "dev": 500, "test": 500, "test_heldout": 500}
    assert isinstance(corpus, Corpus)


def test_same_seed_same_corpus_other_seed_other_corpus():
    a, b, c = make_builtin_corpus(seed=3, **SMALL), make_builtin_corpus(seed=3, **SMALL), \
        make_builtin_corpus(seed=4, **SMALL)
    assert a.train == b.train and a.test_heldout == b.test_heldout and a.reserved == b.reserved
    assert a.train != c.train


def test_no_sentence_in_two_splits_on_either_side(corpus):
    for side in (0, 1):
        seen = {}
        for split in corpus.SPLITS:
            for pair in corpus.split(split):
                assert pair[side] not in seen, f"{pair[side]!r} in {seen.get(pair[side])} and {split}"
                seen[pair[side]] = split


def test_pairs_in_both_directions(corpus):
    en_ja, ja_en = corpus.pairs("dev"), corpus.pairs("dev", "ja-en")
    assert en_ja == corpus.dev
    assert ja_en == [(ja, en) for en, ja in en_ja]
    with pytest.raises(ValueError, match="unknown direction"):
        corpus.pairs("dev", "en-de")


def test_lengths(corpus):
    english = [len(en.split()) for en, _ in corpus.train]
    japanese = [len(ja.split()) for _, ja in corpus.train]
    assert max(english) <= 20 and max(japanese) <= 20
    assert min(english) >= 3 and min(japanese) >= 3
    in_range = sum(4 <= n <= 20 for n in english) / len(english)
    assert in_range > 0.95
    assert 6 < sum(english) / len(english) < 12


def test_tokenization_conventions(corpus):
    for en, ja in corpus.train[:2000]:
        assert en == en.lower() and en.strip() == en and "  " not in en
        assert en.split()[-1] in {".", "?"} and ja.split()[-1] in {"。", "？"}
        assert not any(w[-1] in ".?," and len(w) > 1 for w in en.split())  # punctuation stands alone
        assert en.isascii() and not ja.isascii()


def test_vocabulary_is_a_few_hundred_words(corpus):
    english = {w for en, _ in corpus.train for w in en.split()}
    japanese = {w for _, ja in corpus.train for w in ja.split()}
    assert 300 < len(english) < 1000 and 300 < len(japanese) < 1000


def test_every_construction_occurs(corpus):
    seen = {corpus.constructions[en] for en, _ in corpus.train}
    assert seen == set(CONSTRUCTION_WEIGHTS)


def test_translation_is_a_function_both_ways():
    # GrammarError is raised if two meanings ever give one sentence two translations.
    big = make_builtin_corpus(seed=11, n_train=60000, n_dev=0, n_test=0, n_heldout=300)
    assert len(big.train) == 60000
    pairs = big.train + big.test_heldout
    assert len({en for en, _ in pairs}) == len({ja for _, ja in pairs}) == len(pairs)   # one-to-one


def test_a_sentence_drawn_again_with_another_translation_raises_grammar_error():
    from types import SimpleNamespace

    from minitransformer.data.grammar.builtin import _unique_sentences

    drawn = iter([SimpleNamespace(english="I eat.", japanese="食べる。", combinations=frozenset()),
                  SimpleNamespace(english="I eat.", japanese="食べます。", combinations=frozenset())])
    sampler = SimpleNamespace(sentence=lambda force=None: next(drawn))
    with pytest.raises(GrammarError, match=r"ambiguous pair: 'I eat\.' -> '食べます。'"):
        _unique_sentences(sampler, 2, {}, {}, accept=lambda s: True)


def test_heldout_combinations_never_meet_in_training(corpus):
    reserved = set(corpus.reserved)
    assert {kind for kind, _, _ in reserved} == {"subject-verb", "adjective-noun"}
    for split in ("train", "dev", "test"):
        for en, _ in corpus.split(split):
            assert not corpus.combinations[en] & reserved, en
    for en, _ in corpus.test_heldout:
        assert corpus.combinations[en] & reserved, en
    # Every reserved combination is tested, and each of its words is seen in training.
    tested = set().union(*(corpus.combinations[en] for en, _ in corpus.test_heldout)) & reserved
    assert tested == reserved
    train_words = set().union(*(corpus.combinations[en] for en, _ in corpus.train))
    words_in_training = {w for _, a, b in train_words for w in (a, b)}
    for _, a, b in reserved:
        assert a in words_in_training and b in words_in_training


def test_reserved_adjective_noun_pairs_never_adjacent_in_training_text(corpus):
    # The same property checked on the raw text: "big town" never occurs in train.
    train_text = "\n".join(en for en, _ in corpus.train)
    heldout_text = "\n".join(en for en, _ in corpus.test_heldout)
    pairs = [f" {a} {b} " for kind, a, b in corpus.reserved if kind == "adjective-noun"]
    assert not any(p in f" {train_text} " for p in pairs)
    assert any(p in f" {heldout_text} " for p in pairs)


def test_weights_switch_constructions_off():
    only = make_builtin_corpus(seed=1, weights={"statement": 1}, **SMALL)
    assert {only.constructions[en] for en, _ in only.train} == {"statement"}
    with pytest.raises(ValueError, match="unknown constructions"):
        make_builtin_corpus(weights={"poem": 1})
    with pytest.raises(ValueError, match="n_train must be >= 0"):
        make_builtin_corpus(n_train=-1)


def test_japanese_verb_conjugation():
    taberu, nomu, benkyou = ichidan("食べ"), godan("飲", "む"), suru("勉強")
    assert taberu.polite(past=False) == ["食べ", "ます"]
    assert taberu.polite(past=True, negative=True) == ["食べ", "ません", "でした"]
    assert taberu.plain(past=True) == ["食べ", "た"] and taberu.plain(past=False, negative=True) == ["食べ", "ない"]
    assert nomu.plain(past=True) == ["飲ん", "だ"] and nomu.plain(past=False, negative=True) == ["飲ま", "ない"]
    assert nomu.plain(past=True, negative=True) == ["飲ま", "なかっ", "た"]
    assert nomu.polite(past=False, progressive=True) == ["飲ん", "で", "い", "ます"]
    assert godan("書", "く").plain(past=True) == ["書い", "た"]
    assert godan("行", "く", onbin="っ").plain(past=True) == ["行っ", "た"]
    assert godan("話", "す").te == ("話し", "て")
    assert godan("買", "う").plain(past=False, negative=True) == ["買わ", "ない"]
    assert benkyou.polite(past=True) == ["勉強", "し", "ました"]
    big = next(a for a in ADJECTIVES if a.en == "big")
    assert big.predicate(past=True, negative=False) == ["大きかっ", "た", "です"]
    assert big.predicate(past=False, negative=True) == ["大きく", "ない", "です"]
    quiet = next(a for a in ADJECTIVES if a.en == "quiet")
    assert quiet.attributive() == ["静か", "な"]


def test_constructions_look_right(corpus):
    by_construction = {}
    for en, ja in corpus.train:
        by_construction.setdefault(corpus.constructions[en], []).append((en, ja))
    for en, ja in by_construction["yes_no_question"][:200]:
        assert en.endswith(" ?") and ja.endswith("か ？")
    for en, ja in by_construction["statement"][:500]:  # SOV: the verb ending is last
        assert ja.split()[-2] in {"ます", "ました", "ません", "でした"}
    relative = [(en, ja) for en, ja in corpus.train if " that " in en]
    assert len(relative) > 500
    for en, ja in by_construction["when"][:100]:
        assert en.startswith("when ") and "とき 、" in ja
    verbs_seen = {en.split()[1] for en, _ in by_construction["request"] if en.startswith("please")}
    assert len(verbs_seen) > 10
    assert len(VERBS) > 40


def test_the_generated_corpus_is_byte_identical_to_the_pinned_one():
    """The grammar may be reorganised, never changed by accident: a seed always gives these very pairs."""
    import hashlib
    import json
    c = make_builtin_corpus(seed=7, **SMALL)
    blob = json.dumps({"train": c.train, "dev": c.dev, "test": c.test, "heldout": c.test_heldout,
                       "reserved": c.reserved, "combinations": {k: sorted(v) for k, v in c.combinations.items()},
                       "constructions": c.constructions}, ensure_ascii=False, sort_keys=True)
    assert hashlib.sha256(blob.encode()).hexdigest() == \
        "ed3eaa8174d6c81447de3d10af5cc7ea5b22d4184045fbd53dc4d2befce68ca9"


def test_the_built_in_corpus_is_importable_from_the_data_package_and_the_grammar():
    from minitransformer import data
    from minitransformer.data import grammar
    assert data.make_builtin_corpus is grammar.make_builtin_corpus is make_builtin_corpus
    assert data.BuiltinCorpus is BuiltinCorpus and issubclass(BuiltinCorpus, data.Corpus)
