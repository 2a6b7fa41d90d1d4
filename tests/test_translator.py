"""Text in, text out: typed input brought into the corpus's form, warnings naming what the model never saw,
translation in eval mode, the tokenizer's JSON in one place."""
from __future__ import annotations

import dataclasses
import warnings

import pytest

from minitransformer import checkpoint as ckpt
from minitransformer.data.bpe import BPETokenizer
from minitransformer.data.grammar import make_builtin_corpus
from minitransformer.data.writing import CorpusWriting
from minitransformer.nn.transformer import Transformer, TransformerConfig
from minitransformer.translator import (TranslationWarning, Translator, tokenizer_from_dict, tokenizer_to_dict)


@pytest.fixture(scope="module")
def corpus():
    return make_builtin_corpus(seed=0, n_train=3000, n_dev=50, n_test=50, n_heldout=0)


@pytest.fixture(scope="module")
def tokenizer(corpus):
    return BPETokenizer.train([s for pair in corpus.train for s in pair], vocab_size=400)


@pytest.fixture(scope="module")
def writing(tokenizer):
    return CorpusWriting.of_tokenizer(tokenizer)


# -- the corpus's own form ----------------------------------------------------------------------------
@pytest.mark.parametrize("typed, expected", [
    ("Did the small dog drink the milk yesterday?", "did the small dog drink the milk yesterday ?"),
    ("The teacher's cat ate the fish.", "the teacher 's cat ate the fish ."),
    ("Mary, the cat is big!", "mary , the cat is big !"),
    ("  The   CAT  ate the fish .  ", "the cat ate the fish ."),
    ("It is five o'clock.", "it is five o'clock ."),                 # a known word keeps its apostrophe
    ("猫 は 魚 を 食べ ます。", "猫 は 魚 を 食べ ます 。"),
])
def test_typed_english_and_japanese_take_the_corpus_form(writing, typed, expected):
    assert writing.lowercased
    assert writing.normalize(typed) == expected


def test_corpus_text_is_left_exactly_as_it_is(corpus, writing):
    for english, japanese in corpus.train[:500] + corpus.dev:
        assert writing.normalize(english) == english and writing.normalize(japanese) == japanese


def test_a_corpus_with_capitals_and_attached_punctuation_is_not_rewritten():
    """A corpus read from files keeps its own form: nothing the corpus does not do is applied to the input."""
    texts = ["The cat sat on the mat.", "Did you see the cat?", "Paris is big.", "We saw Paris, then Rome."]
    writing = CorpusWriting.of_tokenizer(BPETokenizer.train(texts, vocab_size=80))
    assert not writing.lowercased
    for text in texts:
        assert writing.normalize(text) == text
    assert writing.normalize("Did you see Paris?") == "Did you see Paris?"     # marks stay attached, as written
    assert writing.normalize("THE cat sat on the mat.") == "the cat sat on the mat."   # only an unknown word is lowered
    assert writing.normalize("the cat.") == "the cat."                          # "cat." is how this corpus writes it


@pytest.mark.parametrize("typed, words, characters", [
    ("Did you lost the xyzzy?", ["you", "lost", "xyzzy"], []),
    ("the cat ate the 🐟 .", ["🐟"], ["🐟"]),
    ("猫が魚を食べた。", ["猫が魚を食べた"], []),                               # unsegmented Japanese
    ("the cat ate the fish .", [], []),
])
def test_unseen_words_and_characters_are_named(writing, typed, words, characters):
    seen_words, seen_characters = writing.unseen(writing.normalize(typed))
    if "you" not in words:
        assert seen_words == words
    else:                              # "you" may or may not occur in this small corpus; the others never do
        assert [w for w in seen_words if w != "you"] == [w for w in words if w != "you"]
    assert seen_characters == characters


def test_a_tokenizer_without_recorded_words_still_checks_case_and_characters(tokenizer):
    older = BPETokenizer(tokenizer.vocab, tokenizer.merges)       # as saved by an older version
    writing = CorpusWriting.of_tokenizer(older)
    assert writing.words is None and writing.lowercased
    assert writing.normalize("The Cat") == "the cat"
    assert writing.unseen("the cat 🐟") == ([], ["🐟"])


# -- the tokenizer's JSON ---------------------------------------------------------------------------------
def test_the_tokenizer_json_round_trips_with_its_words_and_reads_older_files(tokenizer):
    data = tokenizer.to_dict()
    assert tokenizer_to_dict(tokenizer) == data and "cat" in data["words"]
    again = BPETokenizer.from_dict(data)
    assert again.vocab == tokenizer.vocab and again.merges == tokenizer.merges and again.words == tokenizer.words
    older = {key: value for key, value in data.items() if key != "words"}
    assert tokenizer_from_dict(older).words is None
    with pytest.raises(ckpt.CheckpointError, match="where.json: not a minitransformer-bpe tokenizer"):
        tokenizer_from_dict({"format": "something else"}, "where.json")


# -- the Translator -------------------------------------------------------------------------------------
@pytest.fixture
def translator(tokenizer):
    config = TransformerConfig(src_vocab_size=tokenizer.vocab_size, tgt_vocab_size=tokenizer.vocab_size, d_model=16,
                               n_heads=2, d_ff=32, n_layers=1, dropout=0.5, max_len=40, seed=1)
    return Translator(Transformer(config), tokenizer)


def test_translate_warns_naming_the_unseen_words_and_reads_typed_text_as_the_corpus(translator):
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        typed = translator.translate(["Did the small dog drink the milk yesterday?", "the xyzzy ate 🐟"], beam_size=1)
    assert [w.category for w in caught] == [TranslationWarning]
    message = str(caught[0].message)
    assert message.startswith("sentence 2:") and "'xyzzy'" in message and "'🐟'" in message
    with warnings.catch_warnings():
        warnings.simplefilter("error")                            # corpus text: nothing to warn about
        written = translator.translate(["did the small dog drink the milk yesterday ?"], beam_size=1)
    assert typed[0] == written[0]


def test_bleu_on_corpus_text_does_not_warn_about_unseen_words(translator):
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        score, hypotheses = translator.bleu([("the xyzzy ate the fish .", "猫 は 魚 を 食べ ます 。")], beam_size=1)
    assert len(hypotheses) == 1


def test_translate_uses_eval_mode_and_restores_the_callers_mode(translator):
    model = translator.model
    model.eval()
    expected = translator.translate(["the cat ate the fish ."] * 3, beam_size=2)
    model.train()                                                 # a caller who forgot .eval()
    assert translator.translate(["the cat ate the fish ."] * 3, beam_size=2) == expected
    assert model.training
    weights, *_ = translator.cross_attention("The cat ate the fish.")
    assert model.training and weights.shape[1] == len(translator.tokenizer.encode("the cat ate the fish ."))


def test_the_command_line_prints_the_warnings_on_stderr(translator, tmp_path, capsys):
    from minitransformer.__main__ import main
    config = dataclasses.asdict(translator.model.config)
    ckpt.save_final(tmp_path, translator.model.state_dict(), {"config": config},
                    tokenizer=translator.tokenizer.to_dict())
    assert main(["translate", "--checkpoint", str(tmp_path), "--greedy", "The xyzzy ate the fish?"]) == 0
    out, err = capsys.readouterr()
    assert out.count("\n") == 1
    assert "warning: sentence 1: word never seen in training: 'xyzzy'" in err


def test_an_attention_lstm_translates_from_its_run_folder_and_shows_its_attention(tokenizer, tmp_path, capsys):
    from minitransformer.__main__ import main
    from minitransformer.nn.seq2seq import Seq2Seq, Seq2SeqConfig
    config = Seq2SeqConfig(tokenizer.vocab_size, tokenizer.vocab_size, d_model=16, n_layers=1, dropout=0.5,
                           max_len=40, seed=1)
    model = Seq2Seq(config)
    ckpt.save_final(tmp_path, model.state_dict(), {"config": dataclasses.asdict(config)}, tokenizer=tokenizer.to_dict())
    loaded = Translator.load(tmp_path)
    assert type(loaded.model) is Seq2Seq and loaded.model.config == config
    sentences = ["the cat ate the fish .", "did the small dog drink the milk ?"]
    assert loaded.translate(sentences, beam_size=3) == Translator(model, tokenizer).translate(sentences, beam_size=3)
    weights, source, output, *_ = loaded.cross_attention("The cat ate the fish.")
    assert weights.shape == (len(output), len(source)) and abs(weights.sum(axis=1) - 1).max() < 1e-5
    assert main(["translate", "--checkpoint", str(tmp_path), "--greedy", "the cat ate the fish ."]) == 0
    out, _ = capsys.readouterr()
    assert out.strip() == loaded.translate(["the cat ate the fish ."], beam_size=1)[0]
