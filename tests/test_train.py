"""The training loop: exact resume, refusals, the loss, and the pieces train.py is made of."""
from __future__ import annotations

import json

import numpy as np
import pytest

import minitransformer as mt
import minitransformer.functional as F
from minitransformer import checkpoint as ckpt
from minitransformer.nn.transformer import Transformer, TransformerConfig
from minitransformer.train import (PRESETS, ProgressBar, TrainingError, TrainOptions, dropout_generators, rng_state,
                                   set_rng_state, train)


def _options(out, **overrides) -> TrainOptions:
    # 60 training pairs in batches of <= 400 tokens: a handful of batches per epoch
    settings = dict(out=str(out), preset="tiny", limit=60, average=1, evaluate=False, quiet=True)
    settings.update(overrides)
    return TrainOptions(**settings)


def test_a_resumed_run_computes_exactly_the_losses_of_an_uninterrupted_one(tmp_path):
    straight = train(_options(tmp_path / "straight", steps=14))
    assert len(straight["losses"]) == 14
    assert straight["epochs"] > 2            # the runs cross epoch boundaries (batch order is per epoch)
    assert len(straight["history"]) >= 2     # and evaluate the dev set at each epoch's end

    first = train(_options(tmp_path / "resumed", steps=6))
    second = train(_options(tmp_path / "resumed", steps=14, resume=True))
    assert first["losses"] + second["losses"] == straight["losses"]   # bit-identical, dropout included
    a = ckpt.load_checkpoint(tmp_path / "straight", prefer_final=False)
    b = ckpt.load_checkpoint(tmp_path / "resumed", prefer_final=False)
    assert a.step == b.step == 14
    for name in a.weights:
        np.testing.assert_array_equal(a.weights[name], b.weights[name])
    for name in a.optimizer:
        np.testing.assert_array_equal(a.optimizer[name], b.optimizer[name])


def test_resume_without_the_dropout_state_would_differ(tmp_path):
    """The RNG state matters: restarting the generators changes the losses (so the test above has teeth)."""
    straight = train(_options(tmp_path / "straight", steps=8))
    train(_options(tmp_path / "resumed", steps=4))
    latest = ckpt.resolve_checkpoint(tmp_path / "resumed", prefer_final=False)
    state = json.loads((latest / "state.json").read_text())
    for generator_state in state["rng"].values():
        generator_state["cpu"] = None                       # forget where the streams were
    (latest / "state.json").write_text(json.dumps(state))
    second = train(_options(tmp_path / "resumed", steps=8, resume=True))
    assert second["losses"] != straight["losses"][4:]


def test_training_lowers_the_loss(tmp_path):
    summary = train(_options(tmp_path / "run", steps=30, limit=40))
    losses = summary["losses"]
    assert np.mean(losses[-5:]) < np.mean(losses[:5]) - 0.5


def test_an_existing_run_is_not_overwritten_by_accident(tmp_path):
    train(_options(tmp_path / "run", steps=2))
    with pytest.raises(TrainingError, match="already holds a training run.*--resume.*--overwrite"):
        train(_options(tmp_path / "run", steps=2))
    assert train(_options(tmp_path / "run", steps=2, overwrite=True))["steps"] == 2


def test_resume_refuses_other_settings_and_missing_runs(tmp_path):
    train(_options(tmp_path / "run", steps=2))
    with pytest.raises(TrainingError, match=r"preset: 'tiny' in the saved run, 'quick' requested"):
        train(_options(tmp_path / "run", steps=4, resume=True, preset="quick"))
    with pytest.raises(TrainingError, match="no run to resume"):
        train(_options(tmp_path / "empty", steps=4, resume=True))


def test_resume_refuses_a_checkpoint_of_another_model_configuration(tmp_path):
    train(_options(tmp_path / "run", steps=2))
    latest = ckpt.resolve_checkpoint(tmp_path / "run", prefer_final=False)
    state = json.loads((latest / "state.json").read_text())
    state["config"]["d_model"] = 64
    (latest / "state.json").write_text(json.dumps(state))
    with pytest.raises(TrainingError, match="d_model: 64 in the checkpoint, 32 requested"):
        train(_options(tmp_path / "run", steps=4, resume=True))


def test_resume_refuses_a_truncated_checkpoint(tmp_path):
    train(_options(tmp_path / "run", steps=2))
    latest = ckpt.resolve_checkpoint(tmp_path / "run", prefer_final=False)
    weights = latest / "model.npz"
    weights.write_bytes(weights.read_bytes()[:200])
    with pytest.raises(TrainingError, match=r"model\.npz.*truncated"):
        train(_options(tmp_path / "run", steps=4, resume=True))


def test_a_missing_corpus_folder_is_a_clear_error(tmp_path):
    with pytest.raises(TrainingError, match="corpus folder not found"):
        train(_options(tmp_path / "run", steps=1, data=str(tmp_path / "nowhere")))


def test_bad_option_values_are_refused(tmp_path):
    with pytest.raises(TrainingError, match="unknown preset 'huge'"):
        train(_options(tmp_path / "a", preset="huge"))
    with pytest.raises(TrainingError, match="built-in corpus is English–Japanese"):
        train(_options(tmp_path / "b", direction="en-fr", steps=1))


def test_training_on_a_corpus_folder(tmp_path):
    folder = tmp_path / "corpus"
    folder.mkdir()
    pairs = [("a cat .", "un chat ."), ("a dog .", "un chien ."), ("the cat .", "le chat ."),
             ("the dog .", "le chien .")] * 5
    for split in ("train", "dev", "test"):
        (folder / f"{split}.en").write_text("\n".join(p[0] for p in pairs) + "\n")
        (folder / f"{split}.fr").write_text("\n".join(p[1] for p in pairs) + "\n")
    summary = train(_options(tmp_path / "run", steps=3, data=str(folder), direction="en-fr", limit=None,
                             evaluate=True, plot=False))
    assert summary["steps"] == 3 and "test_bleu" in summary and "test_heldout_bleu" not in summary


def test_the_loss_is_the_label_smoothed_cross_entropy_of_section_5_4():
    assert PRESETS["small"]["model"]["dropout"] == 0.1
    config = TransformerConfig.tiny(11, d_model=8, n_heads=2, d_ff=16, n_layers=1, dropout=0.0, max_len=16)
    model = Transformer(config).to(np.float64)
    src = np.array([[4, 5, 6, 0]])
    tgt_in, tgt_out = np.array([[1, 7, 8]]), np.array([[7, 8, 2]])
    logits = model(src, tgt_in).numpy().reshape(-1, 11)
    log_p = logits - logits.max(-1, keepdims=True)
    log_p -= np.log(np.exp(log_p).sum(-1, keepdims=True))
    target = np.full((3, 11), 0.1 / 10)       # ε spread over the classes other than pad
    target[:, 0] = 0.0
    target[np.arange(3), tgt_out[0]] += 0.9
    expected = -(target * log_p).sum(-1).mean()
    got = F.cross_entropy(model(src, tgt_in).reshape(-1, 11), tgt_out.reshape(-1), label_smoothing=0.1,
                          ignore_index=0).item()
    assert got == pytest.approx(expected, rel=1e-10)


def test_gradcheck_of_the_training_loss_through_a_tiny_model():
    config = TransformerConfig.tiny(9, d_model=4, n_heads=2, d_ff=8, n_layers=1, dropout=0.0, max_len=8)
    model = Transformer(config).to(np.float64)
    src, tgt_in, tgt_out = np.array([[3, 4, 0]]), np.array([[1, 5]]), np.array([[5, 2]])
    weight = model.embedding.weight    # shared by both embeddings and the output projection (§3.4)

    def loss(weight):                  # gradcheck perturbs weight.data in place, so the model sees it
        return F.cross_entropy(model(src, tgt_in).reshape(-1, 9), tgt_out.reshape(-1), label_smoothing=0.1,
                               ignore_index=0)
    assert mt.gradcheck(loss, [weight], atol=1e-6)
    w_q = model.decoder.layers[0].cross_attn.w_q.weight
    assert mt.gradcheck(loss, [w_q], atol=1e-6)


def test_rng_state_round_trip_restores_the_dropout_streams():
    config = TransformerConfig.tiny(9, d_model=8, n_heads=2, d_ff=8, n_layers=1, dropout=0.5, max_len=8)
    model = Transformer(config)
    model.train()
    src, tgt = np.array([[3, 4, 5]]), np.array([[1, 5, 6]])
    model(src, tgt)                                    # draw from every stream once
    saved = json.loads(json.dumps(rng_state(model)))   # through JSON, as in a checkpoint
    after = model(src, tgt).numpy()
    model(src, tgt)                                    # advance further
    set_rng_state(model, saved, step=1)
    np.testing.assert_array_equal(model(src, tgt).numpy(), after)
    assert len(dropout_generators(model)) >= 3


def test_the_older_list_format_of_the_dropout_state_still_resumes():
    """Checkpoints once held a list: the Dropout layers' generators in module order, then a global one."""
    config = TransformerConfig.tiny(9, d_model=8, n_heads=2, d_ff=8, n_layers=1, dropout=0.5, max_len=8)
    model = Transformer(config)
    src, tgt = np.array([[3, 4, 5]]), np.array([[1, 5, 6]])
    model(src, tgt)
    saved = model.rng_state_dict()
    legacy = [{"seed": state["seed"], "cpu": state["cpu"]} for name, state in saved.items()
              if not name.endswith("attn.generator")] + [{"seed": 0, "cpu": None}]
    after = model(src, tgt).numpy()
    set_rng_state(model, json.loads(json.dumps(legacy)), step=1)
    np.testing.assert_array_equal(model(src, tgt).numpy(), after)
    with pytest.raises(TrainingError, match="older format"):
        set_rng_state(model, legacy[1:], step=1)
    with pytest.raises(TrainingError, match="does not fit"):
        set_rng_state(model, {"encoder.nothing.generator": {"seed": 1}}, step=1)


def test_progress_bar_prints_lines_when_not_a_terminal(capsys):
    import io
    stream = io.StringIO()
    bar = ProgressBar(stream=stream, interval=0.0)
    bar.update(0.5, "loss 1.0")
    bar.message("epoch 1 done")
    text = stream.getvalue()
    assert "[##########..........]  50% loss 1.0\n" in text and "epoch 1 done\n" in text
    quiet = ProgressBar(stream=stream, enabled=False)
    quiet.update(1.0, "nothing")
    assert "nothing" not in stream.getvalue()
