"""Edge cases nobody meets on a good day: checkpoint refusals, a diverging run, decoding and BPE at their
boundaries, BLEU with an empty reference. Each names what it guards against."""
from __future__ import annotations

import json
import math

import numpy as np
import pytest

from minitransformer import checkpoint as ckpt
from minitransformer.checkpoint import CheckpointError
from minitransformer.data.bpe import BPETokenizer
from minitransformer.training.trainer import TrainingError, TrainOptions, train


def _weights(rng):
    return {"encoder.w": rng.standard_normal((3, 4)).astype(np.float32)}


def _save(out, rng, step=1):
    return ckpt.save_checkpoint(out, step, _weights(rng), {"config": {"d_model": 4}})


# -- checkpoints ----------------------------------------------------------------------------------
def test_a_checkpoint_from_a_newer_format_is_refused(tmp_path, rng):
    folder = _save(tmp_path, rng)
    state = json.loads((folder / "state.json").read_text())
    state["version"] = ckpt.VERSION + 1
    (folder / "state.json").write_text(json.dumps(state))
    with pytest.raises(CheckpointError, match=rf"format version {ckpt.VERSION + 1} is newer than this code"):
        ckpt.load_checkpoint(tmp_path)


def test_an_empty_latest_pointer_is_refused(tmp_path, rng):
    _save(tmp_path, rng)
    (tmp_path / "latest").write_text("")
    with pytest.raises(CheckpointError, match=r"latest: the pointer file is empty"):
        ckpt.load_checkpoint(tmp_path)


def test_weights_changed_in_place_at_the_same_size_are_refused(tmp_path, rng):
    """A flipped byte keeps the file's size and may keep it a valid .npz: only the checksum sees it."""
    folder = _save(tmp_path, rng)
    weights = folder / "model.npz"
    data = bytearray(weights.read_bytes())
    data[-200] ^= 0x01                     # inside the array data, before the zip directory
    weights.write_bytes(bytes(data))
    with pytest.raises(CheckpointError, match=r"model\.npz: checksum mismatch"):
        ckpt.load_checkpoint(tmp_path)


def _tiny_run(out, **overrides) -> TrainOptions:
    settings = dict(out=str(out), preset="toy", limit=20, average=1, evaluate=False, quiet=True, steps=2)
    settings.update(overrides)
    return TrainOptions(**settings)


@pytest.fixture(scope="module")
def trained(tmp_path_factory):
    out = tmp_path_factory.mktemp("run") / "run"
    train(_tiny_run(out))
    return out


def _copy(trained, tmp_path):
    import shutil
    copy = tmp_path / "run"
    shutil.copytree(trained, copy)
    return copy, ckpt.resolve_checkpoint(copy, prefer_final=False)


def test_resuming_without_the_optimizer_state_is_refused(trained, tmp_path):
    copy, latest = _copy(trained, tmp_path)
    (latest / "optimizer.npz").unlink()
    with pytest.raises(TrainingError, match=r"has no optimizer\.npz, so training cannot resume exactly"):
        train(_tiny_run(copy, steps=3, resume=True))


def test_resuming_with_an_optimizer_state_of_another_model_is_refused(trained, tmp_path):
    copy, latest = _copy(trained, tmp_path)
    state = json.loads((latest / "state.json").read_text())
    moments = ckpt.read_npz(latest / "optimizer.npz")
    moments["exp_avg.0"] = np.zeros((2, 2), moments["exp_avg.0"].dtype)          # the wrong shape
    state["sha256"]["optimizer.npz"] = ckpt._write_npz(latest / "optimizer.npz", moments)
    (latest / "state.json").write_text(json.dumps(state))
    with pytest.raises(TrainingError, match=r"optimiser state does not fit.*'exp_avg\.0' has shape \(2, 2\)"):
        train(_tiny_run(copy, steps=3, resume=True))


def test_a_loss_that_becomes_nan_stops_the_run_with_advice(tmp_path, monkeypatch):
    import minitransformer.training.trainer as training

    real = training.batch_loss
    monkeypatch.setattr(training, "batch_loss", lambda model, batch, **kw: real(model, batch, **kw) * math.nan)
    with pytest.raises(TrainingError, match=r"the loss became nan at step 1; lower the learning rate"):
        train(_tiny_run(tmp_path / "run"))


# -- decoding --------------------------------------------------------------------------------------
@pytest.fixture
def markov():
    import sys
    from pathlib import Path
    sys.path.insert(0, str(Path(__file__).parent))
    import test_decode
    yield test_decode
    sys.path.remove(str(Path(__file__).parent))


def test_decoding_edge_cases(markov):
    from minitransformer.decode import beam_search, greedy_decode

    t = markov
    stops_at_once = t.MarkovModel({t.BOS: {t.EOS: 1.0}})
    src = t._src([2, 3])
    with pytest.raises(ValueError, match="beam_size must be >= 1, got 0"):
        beam_search(stops_at_once, src, t.BOS, t.EOS, beam_size=0)
    empty = np.zeros((0, 3), dtype=np.int64)
    assert greedy_decode(stops_at_once, empty, t.BOS, t.EOS) == []
    assert beam_search(stops_at_once, empty, t.BOS, t.EOS, beam_size=2) == []
    assert greedy_decode(stops_at_once, src, t.BOS, t.EOS) == [[], []]             # eos first: empty outputs
    first = beam_search(stops_at_once, src, t.BOS, t.EOS, beam_size=2)
    assert [[(h.tokens, h.finished, h.log_prob) for h in hs] for hs in first] == [[([], True, 0.0)]] * 2
    # n_best larger than the beam: the beam holds at most beam_size results, best first, all different
    results = beam_search(t.MarkovModel(t.TRAP), t._src([2]), t.BOS, t.EOS, beam_size=2, n_best=3)[0]
    assert [h.tokens for h in results] == [[t.B], [t.A, t.C]]
    assert results[0].score >= results[1].score


# -- BPE -----------------------------------------------------------------------------------------
def test_bpe_edge_cases():
    tokenizer = BPETokenizer.train(["the cat sat", "the dog"], 30)
    assert tokenizer.encode("") == [] and tokenizer.encode("   ") == [] and tokenizer.decode([]) == ""
    assert tokenizer.decode([tokenizer.unk_id]) == ""                         # unk decodes to nothing
    cat = tokenizer.encode("cat")
    assert tokenizer.decode([tokenizer.bos_id, *cat, tokenizer.unk_id, tokenizer.eos_id, tokenizer.pad_id]) == "cat"
    with pytest.raises(ValueError, match="token id 999 is outside the vocabulary"):
        tokenizer.decode([999])


def test_a_word_that_spells_the_end_of_word_marker_round_trips():
    """'x</w>y' could merge into the token 'x</w>', which means 'x' ending a word: training crashed with
    'duplicate tokens', or decoding put a space inside the word."""
    text = ["x</w>y x</w>q x</w>r x x x"] * 3
    tokenizer = BPETokenizer.train(text, 23)
    for sentence in ("x</w>y", "x</w>r x", "x x</w>q"):
        assert tokenizer.decode(tokenizer.encode(sentence)) == sentence


# -- BLEU with an empty reference -------------------------------------------------------------------
@pytest.mark.parametrize("hypotheses,references", [
    (["a b c"], [""]), ([""], [""]), ([""], ["a b"]),
    (["the cat sat on the mat", "a b c"], ["the cat sat on the mat", ""]),
], ids=["empty-reference", "both-empty", "empty-hypothesis", "one-of-two-empty"])
def test_bleu_with_empty_sentences_agrees_with_sacrebleu(hypotheses, references):
    from minitransformer.bleu import corpus_bleu

    sacrebleu = pytest.importorskip("sacrebleu")     # in requirements.txt: the check runs wherever tests do
    expected = sacrebleu.corpus_bleu(hypotheses, [references]).score
    assert corpus_bleu(hypotheses, references) == pytest.approx(expected, abs=1e-9)
