"""Gold word alignments from the grammar: consistent with each pair, across every construction."""

import pytest

from minitransformer.data.bpe import END_OF_WORD, BPETokenizer
from minitransformer.data.grammar import CONSTRUCTION_WEIGHTS, make_builtin_corpus
from minitransformer.data.grammar.lexicon import ANIMALS, FOODS, NAMES, PEOPLE, PLACES, PRONOUNS, VERBS
from minitransformer.data.grammar.alignment import Word, linked, subword_links, word_alignment, word_spans

PER_CONSTRUCTION = 60


@pytest.fixture(scope="module")
def corpus():
    return make_builtin_corpus(seed=3, n_train=4000, n_dev=100, n_test=100, n_heldout=100)


@pytest.fixture(scope="module")
def sample(corpus):
    """Up to PER_CONSTRUCTION pairs of every construction, from every split."""
    chosen = {}
    for split in corpus.SPLITS:
        for en, ja in corpus.split(split):
            group = chosen.setdefault(corpus.constructions[en], [])
            if len(group) < PER_CONSTRUCTION:
                group.append((en, ja))
    assert set(chosen) == set(CONSTRUCTION_WEIGHTS)
    return [pair for group in chosen.values() for pair in group]


def _lexicon() -> dict[str, str]:
    """English word form -> its Japanese word, for nouns, names and pronouns (one-word forms only)."""
    verb_forms = {form for v in VERBS for form in (v.base, v.third, v.past, v.ing)}
    table = {}
    for noun in PEOPLE + ANIMALS + FOODS + PLACES + NAMES:
        for form in (noun.en, noun.plural):
            if form and " " not in form and form not in verb_forms:     # "cook" is also a verb
                table[form] = noun.ja
    for pronoun in PRONOUNS:
        table[pronoun.en] = table[pronoun.en_object] = pronoun.ja
    table["her"] = "彼女"                 # object and possessive alike
    return table


def test_links_are_inside_the_pair_and_end_with_the_full_stop(corpus, sample):
    for en, ja in sample:
        links = corpus.alignment(en)
        n_en, n_ja = len(en.split()), len(ja.split())
        assert links and list(links) == sorted(set(links))
        assert all(0 <= i < n_en and 0 <= j < n_ja for i, j in links), (en, ja, links)
        assert (n_en - 1, n_ja - 1) in links                       # "." ↔ "。", "?" ↔ "？"
        aligned = {i for i, _ in links}
        assert len(aligned) >= 0.5 * n_en, (en, ja, links)         # most English words render meaning


def test_every_noun_and_pronoun_links_to_its_japanese_word(corpus, sample):
    lexicon, checked = _lexicon(), 0
    for en, ja in sample:
        english, japanese = en.split(), ja.split()
        links = corpus.alignment(en)
        for i, word in enumerate(english):
            if word in lexicon and english.count(word) == 1:
                partners = {japanese[j] for a, j in links if a == i}
                assert lexicon[word] in partners, (en, ja, word, partners)
                checked += 1
    assert checked > 500


def test_verb_object_pairs_join_a_verb_and_a_noun(corpus, sample):
    verb_forms = {form for v in VERBS for form in (v.base, v.third, v.past, v.ing)} | {"like", "likes", "liked"}
    found = 0
    for en, _ in sample:
        english = en.split()
        for verb, obj in corpus.verb_objects[en]:
            assert english[verb] in verb_forms, (en, english[verb])
            assert english[obj] not in verb_forms or english[obj] == "cook"
            found += 1
        for verb, subject in corpus.verb_subjects[en]:
            assert english[verb] in verb_forms and subject != verb
    assert found > 200


def test_the_text_is_plain_strings_and_alignment_words_are_strings():
    c = make_builtin_corpus(seed=1, n_train=50, n_dev=5, n_test=5, n_heldout=5)
    assert all(type(en) is str and type(ja) is str for en, ja in c.train)
    word = Word("猫", links={"cat"})
    assert word == "猫" and " ".join([word, "は"]) == "猫 は"
    english = ["the"] + linked(["black"], "adj") + linked(["cat"], "cat") + ["."]
    assert word_alignment(english, linked(["黒い"], "adj") + linked(["猫"], "cat") + ["。"]) == ((1, 0), (2, 1))
    with pytest.raises(KeyError, match="not an English sentence"):
        c.alignment("no such sentence")


def test_subword_links_cover_the_words_subwords(corpus, sample):
    tokenizer = BPETokenizer.train([s for pair in corpus.train for s in pair], 400)
    for en, ja in sample[::7]:
        for direction in ("en-ja", "ja-en"):
            source, target = (en, ja) if direction == "en-ja" else (ja, en)
            links = corpus.subword_alignment(tokenizer, en, direction)
            src_ids, tgt_ids = tokenizer.encode(source), tokenizer.encode(target)
            assert all(0 <= a < len(src_ids) and 0 <= b < len(tgt_ids) for a, b in links)
            spans = word_spans(tokenizer, source)
            for word, span in zip(source.split(), spans):          # the pieces spell the word
                pieces = "".join(tokenizer.vocab[src_ids[p]] for p in span)
                assert pieces.replace(END_OF_WORD, "") == word or tokenizer.unk_id in src_ids
            word_links = corpus.alignment(en) if direction == "en-ja" else [(j, i) for i, j in corpus.alignment(en)]
            tgt_spans = word_spans(tokenizer, target)
            assert len(links) == len({(a, b) for i, j in word_links for a in spans[i] for b in tgt_spans[j]})
    with pytest.raises(ValueError, match="outside the sentences"):
        subword_links(tokenizer, "a b", "c", [(2, 0)])
