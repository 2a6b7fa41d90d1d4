"""The application layer's public API probed as a student or an outside test-writer would call it: inputs that
used to be accepted and turned into garbage, or that crashed deep inside, now get one clear error naming
the problem. Valid inputs keep their outputs (the other test files pin those)."""
from __future__ import annotations

import dataclasses
import json
import math
import re
from types import SimpleNamespace

import numpy as np
import pytest

from minitransformer import checkpoint as ckpt
from minitransformer.bleu import corpus_bleu, sentence_bleu
from minitransformer.chrf import corpus_chrf
from minitransformer.data.bpe import BPETokenizer
from minitransformer.data.raw_bpe import RawBPETokenizer
from minitransformer.data.unigram import UnigramTokenizer
from minitransformer.decode import beam_search, greedy_decode
from minitransformer.nn.transformer import Transformer, TransformerConfig
from minitransformer.translator import Translator

TEXTS = ["the cat sat on the mat .", "the dog ate the fish .", "a cat and a dog sat ."]


@pytest.fixture(scope="module")
def tokenizer():
    return BPETokenizer.train(TEXTS, vocab_size=60, min_frequency=1)


@pytest.fixture
def translator(tokenizer):
    config = TransformerConfig(src_vocab_size=tokenizer.vocab_size, tgt_vocab_size=tokenizer.vocab_size, d_model=16,
                               n_heads=2, d_ff=32, n_layers=1, dropout=0.0, max_len=40, seed=1)
    return Translator(Transformer(config), tokenizer)


# -- tokenizers ----------------------------------------------------------------------------------------
@pytest.mark.parametrize("kind", [BPETokenizer, RawBPETokenizer, UnigramTokenizer])
def test_training_on_one_string_is_refused_rather_than_learning_from_its_characters(kind):
    """A string is iterable: train("the cat sat") used to learn from the texts "t", "h", "e", ..."""
    with pytest.raises(TypeError, match="list of texts, not one string"):
        kind.train("the cat sat on the mat", 60)


def test_bpe_decode_refuses_a_negative_id_as_the_other_tokenizers_do(tokenizer):
    """-1 used to count as a special token and vanish silently."""
    with pytest.raises(ValueError, match="token id -1 is outside the vocabulary"):
        tokenizer.decode([-1])
    assert tokenizer.decode(tokenizer.encode("the cat sat")) == "the cat sat"


def test_bpe_load_refuses_a_file_that_is_not_utf8_with_its_path(tmp_path):
    path = tmp_path / "tokenizer.json"
    path.write_bytes(b"\xff\xfe\x00 not text")
    with pytest.raises(ValueError, match=r"tokenizer\.json: not a JSON tokenizer file"):
        BPETokenizer.load(path)


@pytest.mark.parametrize("data, reason", [
    ({"format": "minitransformer-bpe", "kind": ["words"]}, "unknown tokenizer kind"),
    ({"format": "minitransformer-bpe", "vocab": ["<pad>", "<s>", "</s>", "<unk>", "a</w>"], "merges": [["a"]]},
     "broken tokenizer"),
    ({"format": "minitransformer-bpe", "vocab": ["<pad>", "<s>", "</s>", "<unk>", 5], "merges": []},
     "broken tokenizer"),
])
def test_bpe_from_dict_names_a_broken_field(data, reason):
    with pytest.raises(ValueError, match=reason):
        BPETokenizer.from_dict(data)


@pytest.fixture(scope="module")
def every_tokenizer(tokenizer):
    """One trained tokenizer of each kind that ``tokenizer.json`` can hold."""
    return {"words": tokenizer, "raw": RawBPETokenizer.train(TEXTS, vocab_size=300, min_frequency=1),
            "unigram": UnigramTokenizer.train(TEXTS, vocab_size=290)}


@pytest.mark.parametrize("kind", ["words", "raw", "unigram"])
@pytest.mark.parametrize("bad", [4.7, 4.0, np.float64(4.7), np.float32(5.0), True, np.bool_(True), "4"], ids=repr)
def test_decode_refuses_an_id_that_is_not_an_integer(every_tokenizer, kind, bad):
    """decode([4.7]) used to decode id 4 (int() truncates), and True read as id 1; ids are integers
    everywhere else too (the model refuses a float or bool array of ids)."""
    tokenizer = every_tokenizer[kind]
    ids = tokenizer.encode("the cat sat")
    with pytest.raises(TypeError, match=re.escape(f"token ids must be integers, got {bad!r}")):
        tokenizer.decode(ids[:1] + [bad] + ids[1:])


@pytest.mark.parametrize("kind", ["words", "raw", "unigram"])
def test_decode_keeps_taking_python_and_numpy_integers(every_tokenizer, kind):
    tokenizer = every_tokenizer[kind]
    ids = tokenizer.encode("the cat sat", add_bos=True, add_eos=True)
    text = tokenizer.decode(ids)
    assert text == "the cat sat"
    for dtype in (np.int64, np.int32, np.uint16):
        assert tokenizer.decode(np.asarray(ids, dtype=dtype)) == text       # iterates NumPy integer scalars
    assert tokenizer.decode_batch([ids, np.asarray(ids)]) == [text, text]


@pytest.mark.parametrize("kind", ["words", "raw", "unigram"])
@pytest.mark.parametrize("version, reason", [
    (2, r"tokenizer format version 2 is newer than this code reads \(version 1\); upgrade minitransformer"),
    (0, r"tokenizer format version 0 is not one this code reads \(it reads version 1\)"),
    ("1", r"tokenizer format version '1' is not one this code reads \(it reads version 1\)"),
], ids=["newer", "older", "a string"])
def test_a_tokenizer_file_of_another_version_is_refused_not_misread(every_tokenizer, tmp_path, kind, version,
                                                                    reason):
    """The "version" field was written but never read: a file of a later format loaded as if it were this one."""
    from minitransformer.translator import tokenizer_from_dict

    tokenizer = every_tokenizer[kind]
    data = tokenizer.to_dict()
    data["version"] = version
    path = tmp_path / "tokenizer.json"
    path.write_text(json.dumps(data), encoding="utf-8")
    for reader in (BPETokenizer, type(tokenizer)):         # the dispatching reader and the kind's own
        with pytest.raises(ValueError, match=reason):
            reader.from_dict(data)
        with pytest.raises(ValueError, match=r"tokenizer\.json: " + reason):
            reader.load(path)
    with pytest.raises(ckpt.CheckpointError, match=r"where\.json: " + reason):
        tokenizer_from_dict(data, "where.json")


@pytest.mark.parametrize("kind", ["words", "raw", "unigram"])
def test_tokenizer_files_of_this_version_and_without_a_version_still_load(every_tokenizer, tmp_path, kind):
    tokenizer = every_tokenizer[kind]
    data = tokenizer.to_dict()
    assert data["version"] == 1
    del data["version"]                                   # no writer left it out, but the field was never required
    for written in (tokenizer.to_dict(), data):
        path = tmp_path / "tokenizer.json"
        path.write_text(json.dumps(written), encoding="utf-8")
        for loaded in (BPETokenizer.load(path), type(tokenizer).load(path)):
            assert type(loaded) is type(tokenizer) and loaded.to_dict() == tokenizer.to_dict()


# -- BLEU and chrF ---------------------------------------------------------------------------------------
def test_sacrebleu_style_nested_references_are_refused_not_scored_as_one_token():
    """sacrebleu takes ``[references]``; here one sentence's reference list ["the cat sat"] read as one token
    "the cat sat" and scored a silent 0."""
    with pytest.raises(ValueError, match="contains whitespace; pass one reference string"):
        corpus_bleu(["the cat sat"], [["the cat sat"]])
    with pytest.raises(ValueError, match="contains whitespace; pass one reference string"):
        sentence_bleu(["the cat sat", "on the mat"], "the cat sat")
    assert corpus_bleu([["the", "cat", "sat"]], [["the", "cat", "sat"]]) == pytest.approx(0.0)   # too short, as before
    assert sentence_bleu(["the", "cat", "sat"], "the cat sat").score == pytest.approx(100.0)


@pytest.mark.parametrize("max_order", [0, -1])
def test_bleu_refuses_a_max_order_below_one(max_order):
    """max_order 0 used to give a silent 0.0."""
    with pytest.raises(ValueError, match="max_order must be >= 1"):
        corpus_bleu(["the cat"], ["the cat"], max_order=max_order)


def test_bleu_names_a_sentence_that_is_not_text():
    with pytest.raises(TypeError, match="hypothesis 2 is NoneType"):
        corpus_bleu(["the cat", None], ["the cat", "the dog"])


@pytest.mark.parametrize("hypotheses, references, match", [
    (["the cat"], [["the cat"]], "reference 1 is list"),
    ([None], ["the cat"], "hypothesis 1 is NoneType"),
])
def test_chrf_names_a_sentence_that_is_not_a_string(hypotheses, references, match):
    """These used to crash inside with "'list' object has no attribute 'split'"."""
    with pytest.raises(TypeError, match=match):
        corpus_chrf(hypotheses, references)


# -- decoding --------------------------------------------------------------------------------------------
@pytest.fixture
def model_and_source(translator):
    return translator.model, np.asarray([translator.tokenizer.encode("the cat sat")], dtype=np.int64)


@pytest.mark.parametrize("search", [greedy_decode, beam_search])
@pytest.mark.parametrize("max_len", [0, -1])
def test_a_max_len_below_one_is_refused(model_and_source, search, max_len):
    """max_len 0 used to generate one token all the same."""
    model, src = model_and_source
    with pytest.raises(ValueError, match="max_len must be >= 1"):
        search(model, src, 1, 2, max_len=max_len)


def test_beam_search_refuses_n_best_below_one(model_and_source):
    model, src = model_and_source
    with pytest.raises(ValueError, match="n_best must be >= 1"):
        beam_search(model, src, 1, 2, n_best=0)


@pytest.mark.parametrize("alpha", [math.nan, math.inf])
def test_beam_search_refuses_a_length_penalty_that_is_not_a_number(model_and_source, alpha):
    model, src = model_and_source
    with pytest.raises(ValueError, match="alpha must be a finite number"):
        beam_search(model, src, 1, 2, alpha=alpha)


@pytest.mark.parametrize("search", [greedy_decode, beam_search])
def test_a_source_that_is_not_a_batch_is_named(model_and_source, search):
    """A (S,) vector used to fail with numpy's "axis 1 is out of bounds"."""
    model, src = model_and_source
    with pytest.raises(ValueError, match=r"src_ids must be a \(batch, length\) array of ids, got shape"):
        search(model, src[0], 1, 2)


# -- the Translator ---------------------------------------------------------------------------------------
def test_translate_refuses_one_string_rather_than_translating_its_characters(translator):
    """translate("the cat sat") used to translate "t", "h", "e", ... one sentence per character."""
    with pytest.raises(TypeError, match=r"a list of sentences, not one string; write translate\(\[sentence\]\)"):
        translator.translate("the cat sat")
    assert len(translator.translate(["the cat sat"], beam_size=1)) == 1


def test_translate_names_a_sentence_that_is_not_a_string(translator):
    with pytest.raises(TypeError, match="sentence 2 is NoneType, not a string"):
        translator.translate(["the cat sat", None])


# -- checkpoints -------------------------------------------------------------------------------------------
def _saved(tmp_path, translator):
    model = translator.model
    return ckpt.save_final(tmp_path, model.state_dict(), {"config": dataclasses.asdict(model.config)},
                           translator.tokenizer.to_dict())


@pytest.mark.parametrize("field, value, reason", [
    ("version", "one", "format version 'one' is not a number"),
    ("sha256", ["model.npz"], "the checksums are not a table"),
])
def test_a_hand_edited_state_file_is_refused_with_its_reason(tmp_path, translator, field, value, reason):
    """These used to crash inside (int('one'), list.get)."""
    folder = _saved(tmp_path, translator)
    state = json.loads((folder / "state.json").read_text())
    state[field] = value
    (folder / "state.json").write_text(json.dumps(state))
    with pytest.raises(ckpt.CheckpointError, match=reason):
        ckpt.load_checkpoint(folder)


# -- the command line ---------------------------------------------------------------------------------------
@pytest.mark.parametrize("command", ["translate", "evaluate"])
@pytest.mark.parametrize("alpha", ["nan", "inf"])
def test_the_cli_refuses_a_length_penalty_that_is_not_a_number(command, alpha, capsys):
    from minitransformer.__main__ import build_parser

    with pytest.raises(SystemExit) as exit_info:
        build_parser().parse_args([command, "--alpha", alpha])
    assert exit_info.value.code == 2
    assert "--alpha: must be a finite number" in capsys.readouterr().err


@pytest.mark.parametrize("command", ["translate", "evaluate"])
@pytest.mark.parametrize("flags", [["--greedy", "--beam", "3"], ["--beam", "2", "--greedy"]])
def test_greedy_with_another_beam_is_refused_rather_than_dropping_the_beam(command, flags, monkeypatch, capsys):
    """``--greedy --beam 3`` used to search greedily and ignore --beam without a word."""
    import minitransformer.__main__ as cli

    def load(args):
        raise AssertionError("the model was loaded for a command that contradicts itself")

    monkeypatch.setenv("MINITRANSFORMER_MALLOC", "0")
    monkeypatch.setattr(cli, "_load_translator", load)
    argv = [command, "--checkpoint", "nowhere", *flags] + (["the cat"] if command == "translate" else [])
    assert cli.main(argv) == 2
    beam = flags[flags.index("--beam") + 1]
    err = capsys.readouterr().err
    assert err == (f"python -m minitransformer {command}: error: --greedy and --beam {beam} contradict each other "
                   "(--greedy is --beam 1); give one of them\n")


@pytest.mark.parametrize("flags, beam", [([], 4), (["--greedy"], 1), (["--greedy", "--beam", "1"], 1),
                                         (["--beam", "1", "--greedy"], 1), (["--beam", "3"], 3), (["--beam", "1"], 1)])
def test_greedy_and_beam_that_agree_keep_working(flags, beam, monkeypatch, capsys):
    """(evaluate: tests/test_cli.py, with a trained run.)"""
    import minitransformer.__main__ as cli

    searched = []

    class Recorder:
        model = SimpleNamespace(config=SimpleNamespace(tgt_vocab_size=100))   # the beam is held to its vocabulary

        def translate(self, sentences, beam_size, alpha):
            searched.append(beam_size)
            return ["x"] * len(sentences)

    monkeypatch.setenv("MINITRANSFORMER_MALLOC", "0")
    monkeypatch.setattr(cli, "_load_translator", lambda args: Recorder())
    assert cli.main(["translate", *flags, "the cat"]) == 0
    assert searched == [beam] and capsys.readouterr().out == "x\n"


def test_train_refuses_a_length_penalty_that_is_not_a_number(capsys):
    from minitransformer.__main__ import build_parser

    with pytest.raises(SystemExit):
        build_parser().parse_args(["train", "--alpha", "nan"])
    assert "--alpha: must be a finite number" in capsys.readouterr().err


# -- corpora and batches -------------------------------------------------------------------------------------
def test_iterate_batches_refuses_no_examples_instead_of_searching_forever():
    """Every epoch of no examples is empty: the stream used to rebuild empty epochs without end."""
    from minitransformer.data.batching import iterate_batches

    with pytest.raises(ValueError, match="at least one example"):
        next(iterate_batches([], max_tokens=10, pad_id=0, seed=0))


def test_iterate_batches_refuses_a_negative_start_step():
    """start_step=-1 used to yield the epoch's last batch, numbered -1."""
    from minitransformer.data.batching import iterate_batches

    with pytest.raises(ValueError, match="start_step must be >= 0, got -1"):
        next(iterate_batches([([4], [5]), ([4, 6], [5])], max_tokens=1, pad_id=0, seed=0, start_step=-1))


def test_pad_sequences_names_a_sequence_longer_than_the_length():
    from minitransformer.data.batching import pad_sequences

    with pytest.raises(ValueError, match="a sequence has 3 ids, more than length=2"):
        pad_sequences([[1, 2, 3]], 0, length=2)
    assert pad_sequences([[1, 2]], 0, length=3).tolist() == [[1, 2, 0]]


def test_a_negative_limit_is_refused_rather_than_dropping_pairs_from_the_end(tmp_path):
    """limit=-1 used to slice [:-1]: every pair but the last."""
    from minitransformer.data.loaders import CorpusError, load_corpus, read_lines, read_tsv

    for split in ("train", "dev", "test"):
        (tmp_path / f"{split}.en").write_text("the cat\nthe dog\n", encoding="utf-8")
        (tmp_path / f"{split}.ja").write_text("猫\n犬\n", encoding="utf-8")
        (tmp_path / f"{split}.tsv").write_text("the cat\t猫\nthe dog\t犬\n", encoding="utf-8")
    for read in (lambda: load_corpus(tmp_path, limit=-1), lambda: read_lines(tmp_path / "train.en", limit=-1),
                 lambda: read_tsv(tmp_path / "train.tsv", limit=-1)):
        with pytest.raises(CorpusError, match="limit must be a number of pairs >= 0, got -1"):
            read()
    for split in ("train", "dev", "test"):
        (tmp_path / f"{split}.tsv").unlink()        # a folder of two layouts is refused (test_corpus_files.py)
    assert load_corpus(tmp_path, limit=1).sizes()["train"] == 1


# -- training options given in Python --------------------------------------------------------------------------
@pytest.mark.parametrize("name, value, reason", [
    ("max_tokens", 0, "--max-tokens must be positive, got 0"),       # a 0 used to be replaced by the preset's value
    ("vocab_size", 0, "--vocab-size must be positive, got 0"),
    ("save_every", 0, "--save-every must be positive, got 0"),
    ("limit", -1, "--limit must be positive, got -1"),               # was "n_train must be >= 0", deep inside
    ("attention_window", 0, "--attention-window must be positive, got 0"),
    ("alpha", math.nan, "--alpha must be a finite number from -10 to 10, got nan"),  # was found only after training, at the test BLEU
])
def test_train_options_refuse_invalid_values_before_training(name, value, reason):
    from minitransformer.training.options import TrainingError, TrainOptions, resolve_options

    with pytest.raises(TrainingError, match=reason):
        resolve_options(TrainOptions(**{name: value}), saved=None)
    chosen = resolve_options(TrainOptions(), saved=None)
    assert chosen.max_tokens > 0 and chosen.vocab_size > 0 and chosen.save_every > 0


@pytest.mark.parametrize("layer", [1, -2])
def test_cross_attention_names_a_layer_that_does_not_exist(translator, layer):
    """The model has one decoder layer; this used to fail with "list index out of range"."""
    with pytest.raises(ValueError, match=f"layer {layer} does not exist; the decoder has 1 layers"):
        translator.cross_attention("the cat sat", layer=layer)


@pytest.mark.parametrize("token_id", [-1, 10_000])
def test_display_tokens_refuses_an_id_outside_the_vocabulary(translator, token_id):
    """-1 used to show the last token of the vocabulary; 10000 failed with "list index out of range"."""
    with pytest.raises(ValueError, match=f"token id {token_id} is outside the vocabulary"):
        translator.display_tokens([token_id])


def test_a_checkpoint_of_a_negative_step_is_refused(tmp_path):
    """It used to be saved as step--00001, which sorts before every real checkpoint."""
    with pytest.raises(ValueError, match="step must be >= 0, got -1"):
        ckpt.save_checkpoint(tmp_path, -1, {"w": np.ones(2, np.float32)}, {})
    assert not (tmp_path / "latest").exists()


def test_saving_refuses_the_arrays_that_loading_would_refuse(tmp_path):
    """A complex array used to be saved, and then the checkpoint could not be loaded."""
    with pytest.raises(TypeError, match="'w' must be a NumPy array of numbers, got ndarray of complex128"):
        ckpt.save_checkpoint(tmp_path, 1, {"w": np.ones(2, complex)}, {})
    assert ckpt.list_checkpoints(tmp_path) == []


# -- empty paths: Path("") is the current folder ---------------------------------------------------------------
def test_training_refuses_an_empty_out_instead_of_filling_the_current_folder(tmp_path, monkeypatch):
    """train --out '' used to write its checkpoints, final model and pictures into the current folder."""
    from minitransformer.training.options import TrainingError, TrainOptions
    from minitransformer.training.run_folder import open_run_folder

    monkeypatch.chdir(tmp_path)
    with pytest.raises(TrainingError, match="--out is empty"):
        open_run_folder(TrainOptions(out=""))
    assert list(tmp_path.iterdir()) == []


def test_an_empty_checkpoint_path_is_refused_not_read_as_the_current_folder(tmp_path, monkeypatch, translator):
    _saved(tmp_path, translator)
    monkeypatch.chdir(tmp_path)          # a run folder: translate --checkpoint '' used to load it
    with pytest.raises(ckpt.CheckpointError, match="the checkpoint path is empty"):
        Translator.load("")


def test_attention_refuses_an_empty_out(monkeypatch, capsys):
    from minitransformer.__main__ import main

    monkeypatch.setenv("MINITRANSFORMER_MALLOC", "0")
    assert main(["attention", "the cat", "--checkpoint", "nowhere", "--out", ""]) == 2
    assert "--out is empty" in capsys.readouterr().err


@pytest.mark.parametrize("pairs", [["the cat sat", "the dog sat"], [("the cat sat", "猫", "extra")], ["ab"]])
def test_translator_bleu_names_what_is_not_a_pair(translator, pairs):
    """A list of sentences used to fail with "too many values to unpack", and ["ab"] scored "a" against "b"."""
    with pytest.raises(TypeError, match="pair 1 is .*; bleu\\(\\) takes \\(source, reference\\) pairs"):
        translator.bleu(pairs, beam_size=1)
