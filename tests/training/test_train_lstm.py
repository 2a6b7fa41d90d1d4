"""The attention LSTM (chapter 6) trained by the Transformer's trainer: its recipe, exact resume, refusals."""
from __future__ import annotations

import json

import numpy as np
import pytest

from minitransformer import checkpoint as ckpt
from minitransformer.nn.seq2seq import Seq2Seq, Seq2SeqConfig
from minitransformer.nn.transformer import Transformer, TransformerConfig
from minitransformer.presets import LSTM_MODELS, MODELS, PRESETS, recipe
from minitransformer.training.trainer import TrainingError, TrainOptions, prepare_run, train
from minitransformer.training.options import resolve_options


def _options(out, **overrides) -> TrainOptions:
    settings = dict(out=str(out), model="lstm", preset="toy", limit=60, average=1, evaluate=False, quiet=True)
    settings.update(overrides)
    return TrainOptions(**settings)


def test_a_resumed_lstm_run_computes_exactly_the_losses_of_an_uninterrupted_one(tmp_path):
    straight = train(_options(tmp_path / "straight", steps=10))
    assert straight["epochs"] > 1 and straight["config"]["model"] == "lstm"
    first = train(_options(tmp_path / "resumed", steps=4))
    second = train(_options(tmp_path / "resumed", steps=10, resume=True))
    assert first["losses"] + second["losses"] == straight["losses"]     # bit-identical, dropout included
    a = ckpt.load_checkpoint(tmp_path / "straight", prefer_final=False)
    b = ckpt.load_checkpoint(tmp_path / "resumed", prefer_final=False)
    for name in a.weights:
        np.testing.assert_array_equal(a.weights[name], b.weights[name])


def test_the_lstm_recipe_is_the_transformers_with_the_lstm_as_its_model(tmp_path):
    opts = resolve_options(_options(tmp_path / "run", preset="quick", attention_score="general",
                                    input_feeding=False), None)
    run = prepare_run(opts, None, lambda line: None)
    config = run.model.config
    assert type(run.model) is Seq2Seq and type(config) is Seq2SeqConfig
    assert {key: getattr(config, key) for key in LSTM_MODELS["tiny"]} == LSTM_MODELS["tiny"]   # "quick" trains tiny
    assert (config.score, config.input_feeding, config.tie_embeddings) == ("general", False, True)
    assert config.src_vocab_size == config.tgt_vocab_size == run.tokenizer.vocab_size
    warmup, factor = PRESETS["quick"]["warmup"], PRESETS["quick"]["factor"]
    assert (run.schedule.d_model, run.schedule.warmup, run.schedule.factor) == (config.d_model, warmup, factor)
    assert run.schedule.rate(warmup) == pytest.approx(factor / (config.d_model * warmup) ** 0.5, rel=1e-12)  # eq. 3
    assert {key: value for key, value in recipe("quick", "lstm").items() if key != "model"} == \
        {key: value for key, value in PRESETS["quick"].items() if key != "model"}
    assert recipe("quick") == PRESETS["quick"] and recipe("quick") is not PRESETS["quick"]
    transformer = prepare_run(resolve_options(_options(tmp_path / "t", preset="quick", model=None), None),
                              None, lambda line: None)
    assert type(transformer.model) is Transformer and transformer.schedule.d_model == MODELS["tiny"]["d_model"]


def test_each_lstm_has_about_the_parameters_of_the_transformer_of_its_name():
    """The size table's promise, checked where a test can build both models in a moment."""
    vocab = {name: PRESETS[name]["vocab_size"] for name in ("toy", "small", "medium")} | {"tiny": 600}
    for name, size in vocab.items():
        lstm = Seq2Seq(Seq2SeqConfig(size, size, **LSTM_MODELS[name])).num_parameters()
        transformer = Transformer(TransformerConfig(size, size, **MODELS[name])).num_parameters()
        assert 0.9 < lstm / transformer < 1.1, (name, lstm, transformer)
    assert set(LSTM_MODELS) <= set(MODELS)
    with pytest.raises(ValueError, match="unknown model 'gru'; choose transformer or lstm"):
        recipe("small", "gru")
    with pytest.raises(ValueError, match="unknown preset 'huge'"):
        recipe("huge", "lstm")


def test_the_command_lines_choices_are_the_packages():
    """options.py names the kinds and scores without importing the models (a light --help); they must agree."""
    from minitransformer.models import MODEL_KINDS
    from minitransformer.nn.seq2seq_attention import ATTENTION_SCORES
    from minitransformer.training.options import LSTM_SCORES, MODEL_CHOICES

    assert set(MODEL_CHOICES) == set(MODEL_KINDS) and set(LSTM_SCORES) == set(ATTENTION_SCORES)


def test_options_of_the_other_model_are_refused_before_any_work(tmp_path):
    cases = [(dict(attention="flash"), "--attention flash chooses the Transformer's self-attention"),
             (dict(attention="local", attention_window=2), "--attention local and --attention-window 2 choose"),
             (dict(attention_window=2), "--attention-window 2 chooses"),
             (dict(model=None, attention_score="dot"), "--attention-score shapes the attention LSTM"),
             (dict(model="transformer", input_feeding=False), "--no-input-feeding shapes the attention LSTM"),
             (dict(input_feeding="no"), "--input-feeding must be True or False, got 'no'"),
             (dict(model="gru"), "--model must be one of transformer, lstm, got 'gru'"),
             (dict(attention_score="cosine"), "--attention-score must be one of additive, dot, general")]
    for changes, message in cases:
        with pytest.raises(TrainingError, match=message):
            train(_options(tmp_path / "run", steps=1, **changes))
    assert not (tmp_path / "run").exists()


def test_resume_refuses_a_run_of_the_other_kind(tmp_path):
    out = tmp_path / "run"
    train(_options(out, steps=2))
    with pytest.raises(TrainingError, match="model: 'lstm' in the saved run, 'transformer' requested"):
        train(_options(out, steps=3, resume=True, model="transformer"))
    with pytest.raises(TrainingError, match="attention_score: 'additive' in the saved run, 'dot' requested"):
        train(_options(out, steps=3, resume=True, attention_score="dot"))
    config = json.loads((out / "config.json").read_text())
    config["training"]["model"] = "transformer"                  # settings that disagree with the checkpoint's model
    config["training"]["attention_score"] = config["training"]["input_feeding"] = None
    (out / "config.json").write_text(json.dumps(config))
    with pytest.raises(TrainingError, match="saved from another model configuration: .*"
                                            "model: 'lstm' in the checkpoint, 'transformer' requested"):
        train(_options(out, steps=3, resume=True, model=None))
    config["training"].update(model="lstm", attention_score="additive", input_feeding=True)
    (out / "config.json").write_text(json.dumps(config))
    assert train(_options(out, steps=3, resume=True))["steps"] == 3


def test_a_transformer_run_saved_before_the_model_option_resumes_and_is_found_finished(tmp_path):
    out = tmp_path / "run"
    first = train(_options(out, steps=2, model=None))
    for name in ("config.json", "results.json"):          # what earlier versions wrote: no model, no LSTM settings
        saved = json.loads((out / name).read_text())
        for key in ("training", "options"):
            for setting in ("model", "attention_score", "input_feeding"):
                saved.get(key, {}).pop(setting, None)
        (out / name).write_text(json.dumps(saved))
    lines = []
    again = train(_options(out, steps=2, model=None, quiet=False), log=lines.append)
    assert again["already_trained"] and again["steps"] == first["steps"] and "nothing to train" in lines[-1]
    assert train(_options(out, steps=3, model="transformer", resume=True))["steps"] == 3


