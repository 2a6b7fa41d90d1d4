"""The training loop: exact resume, refusals, the loss, and the pieces training/trainer.py is made of."""
from __future__ import annotations

import json
from types import SimpleNamespace

import numpy as np
import pytest

import minitransformer as mt
import minitransformer.functional as F
from minitransformer import checkpoint as ckpt
from minitransformer.nn.transformer import Transformer, TransformerConfig
from minitransformer.presets import MODELS, PRESETS
from minitransformer.training.progress import ProgressBar
from minitransformer.training.trainer import (TrainingError, TrainOptions, batch_loss, dropout_generators, rng_state,
                                              set_rng_state, train)


def _options(out, **overrides) -> TrainOptions:
    # 60 training pairs in batches of <= 400 tokens: a handful of batches per epoch
    settings = dict(out=str(out), preset="toy", limit=60, average=1, evaluate=False, quiet=True)
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
    with pytest.raises(TrainingError, match="already holds a training run with other settings "
                                            r"\(steps 2 there, 3 now\).*--resume.*--overwrite"):
        train(_options(tmp_path / "run", steps=3))
    assert train(_options(tmp_path / "run", steps=3, overwrite=True))["steps"] == 3


def test_the_same_command_again_finds_its_finished_run_and_trains_nothing(tmp_path):
    """The README's first command can be run twice: the second `train` returns the first one's results."""
    first = train(_options(tmp_path / "run", steps=2))
    lines = []
    again = train(_options(tmp_path / "run", steps=2), log=lines.append)
    assert again["already_trained"] and again["steps"] == first["steps"] == 2
    assert lines == [f"{tmp_path / 'run'} already holds this run, finished: nothing to train "
                     f"(--overwrite trains it again)"]


def test_an_unfinished_run_is_not_taken_for_a_finished_one(tmp_path):
    train(_options(tmp_path / "run", steps=2))
    (tmp_path / "run" / "results.json").unlink()          # as if killed before the end
    with pytest.raises(TrainingError, match="did not finish; pass --resume"):
        train(_options(tmp_path / "run", steps=2))


def test_overwrite_leaves_nothing_of_the_earlier_run(tmp_path):
    """Run A saves more (and later) checkpoints than run B: none of them may survive into B."""
    out = tmp_path / "run"
    train(_options(out, steps=6, save_every=1, average=2))
    b = train(_options(out, steps=3, save_every=1, average=2, overwrite=True))
    assert [p.name for p in ckpt.list_checkpoints(out)] == ["step-000002", "step-000003"]
    final = json.loads((out / "final" / "state.json").read_text())
    assert final["step"] == 3 and b["steps"] == 3
    assert "step-000006" not in json.dumps(b)


def test_overwrite_with_another_preset_replaces_the_final_model(tmp_path):
    out = tmp_path / "run"
    train(_options(out, steps=4, save_every=1, average=3))
    train(_options(out, steps=2, preset="quick", overwrite=True, average=3))
    final = ckpt.load_checkpoint(out)
    assert final.path == out / "final" and final.config["d_model"] == MODELS["tiny"]["d_model"]
    assert json.loads((out / "config.json").read_text())["training"]["preset"] == "quick"
    assert all(c.name == "step-000002" for c in ckpt.list_checkpoints(out))


def test_overwrite_deletes_only_what_the_run_wrote(tmp_path):
    out = tmp_path / "run"
    train(_options(out, steps=2))
    (out / "notes.txt").write_text("mine")
    train(_options(out, steps=2, overwrite=True))
    assert (out / "notes.txt").read_text() == "mine"
    (out / "final" / "my-model.npz").write_text("mine too")
    before = sorted(p.relative_to(out) for p in out.rglob("*"))
    with pytest.raises(TrainingError, match=r"my-model\.npz was not written by a training run"):
        train(_options(out, steps=2, overwrite=True))
    assert sorted(p.relative_to(out) for p in out.rglob("*")) == before     # refused before deleting anything


def test_a_folder_that_holds_files_of_the_same_names_but_no_run_is_refused(tmp_path):
    out = tmp_path / "mine"
    out.mkdir()
    (out / "config.json").write_text('{"colour": "blue"}')
    for overwrite in (False, True):
        with pytest.raises(TrainingError, match="holds config.json but no training run"):
            train(_options(out, steps=1, overwrite=overwrite))
    assert (out / "config.json").read_text() == '{"colour": "blue"}'


def test_an_out_below_a_file_is_refused_before_any_work(tmp_path):
    (tmp_path / "afile").write_text("x")
    lines = []
    with pytest.raises(TrainingError, match=r"--out .*afile/sub: cannot be a folder \(.*afile is a file\)"):
        train(_options(tmp_path / "afile" / "sub", steps=1), log=lines.append)
    assert lines == []                                       # refused before the tokenizer was trained


def test_resume_refuses_other_settings_and_missing_runs(tmp_path):
    train(_options(tmp_path / "run", steps=2))
    with pytest.raises(TrainingError, match=r"preset: 'toy' in the saved run, 'quick' requested"):
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
    with pytest.raises(TrainingError, match="unknown preset 'huge'; choose one of toy, quick, small"):
        train(_options(tmp_path / "a", preset="huge"))
    with pytest.raises(TrainingError, match="the preset 'tiny' is now called 'toy'"):
        train(_options(tmp_path / "a", preset="tiny"))
    with pytest.raises(TrainingError, match="built-in corpus is English–Japanese"):
        train(_options(tmp_path / "b", direction="en-fr", steps=1))


@pytest.mark.parametrize("direction", ["", "-", "en", "en-", "en ja", "EN-JA", "en-ja-fr"])
def test_a_direction_that_is_no_pair_of_languages_is_refused(tmp_path, direction):
    """--direction '' used to be taken as en-ja."""
    with pytest.raises(TrainingError, match=rf"--direction must be two language codes joined by '-'.*"
                                            rf"got {direction!r}"):
        train(_options(tmp_path / "run", direction=direction, steps=1))
    assert not (tmp_path / "run").exists()


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
    batch = SimpleNamespace(src=src, tgt_in=tgt_in, tgt_out=tgt_out)
    assert batch_loss(model, batch).item() == pytest.approx(expected, rel=1e-10)   # the loss training uses
    unsmoothed = -log_p[np.arange(3), tgt_out[0]].mean()
    assert batch_loss(model, batch, label_smoothing=0.0).item() == pytest.approx(unsmoothed, rel=1e-10)
    padded = SimpleNamespace(src=src, tgt_in=np.array([[1, 7, 8, 2]]), tgt_out=np.array([[7, 8, 2, 0]]))
    logits = model(src, padded.tgt_in).numpy().reshape(-1, 11)[:3]     # the pad position is not counted
    log_p = logits - logits.max(-1, keepdims=True)
    log_p -= np.log(np.exp(log_p).sum(-1, keepdims=True))
    assert batch_loss(model, padded).item() == pytest.approx(-(target * log_p).sum(-1).mean(), rel=1e-10)


@pytest.mark.parametrize("cooldown", [0.0, 0.5])
def test_cooldown_lowers_eq_3_over_the_last_part_of_the_run_and_not_before(tmp_path, monkeypatch, cooldown):
    import minitransformer.training.trainer as training

    rates, real_step = [], training.FastAdam.step

    def step(self):
        rates.append(self.lr)
        return real_step(self)

    monkeypatch.setattr(training.FastAdam, "step", step)
    summary = train(_options(tmp_path / "run", steps=10, cooldown=cooldown))
    assert summary["options"]["cooldown"] == cooldown
    warmup, d_model = PRESETS["toy"]["warmup"], MODELS["toy"]["d_model"]
    eq_3 = [PRESETS["toy"]["factor"] * d_model ** -0.5 * min(k ** -0.5, k * warmup ** -1.5) for k in range(1, 11)]
    # step k is taken when k - 1 of 10 steps are done: the last half falls as 5/5, 4/5, ..., 1/5 of eq. 3
    expected = eq_3 if cooldown == 0 else [rate * min(1.0, (11 - k) / 5) for k, rate in enumerate(eq_3, 1)]
    assert rates == pytest.approx(expected, rel=1e-12)
    assert cooldown == 0 or rates[-1] < rates[-2] < rates[5]


def test_run_progress_is_the_nearest_end_of_steps_epochs_and_minutes():
    from minitransformer.training.trainer import run_progress

    state = SimpleNamespace(step=30)
    assert run_progress(SimpleNamespace(steps=120, epochs=None, minutes=None), state, 10, 0.0) == 0.25
    assert run_progress(SimpleNamespace(steps=None, epochs=2, minutes=None), state, 20, 0.0) == 0.75
    assert run_progress(SimpleNamespace(steps=None, epochs=None, minutes=2.0), state, 20, 90.0) == 0.75
    assert run_progress(SimpleNamespace(steps=120, epochs=None, minutes=2.0), state, 20, 60.0) == 0.5   # the nearer
    assert run_progress(SimpleNamespace(steps=20, epochs=None, minutes=None), state, 20, 0.0) == 1.0    # at most 1


def test_the_training_step_uses_the_papers_settings(tmp_path, monkeypatch):
    """Label smoothing 0.1 (§5.4), Adam β = (0.9, 0.98), ε = 1e-9 (§5.3), gradients clipped to norm 1."""
    import minitransformer.training.trainer as training

    seen = {"smoothing": [], "clip": [], "adam": []}
    real_loss, real_clip, real_step = training.Transformer.loss, training.clip_grad_norm, training.FastAdam.step

    def loss(self, *args, **kwargs):
        seen["smoothing"].append(kwargs.get("label_smoothing"))
        return real_loss(self, *args, **kwargs)

    def clip(params, max_norm):
        seen["clip"].append(max_norm)
        return real_clip(params, max_norm)

    def step(self):
        seen["adam"].append((self.betas, self.eps))
        return real_step(self)

    monkeypatch.setattr(training.Transformer, "loss", loss)
    monkeypatch.setattr(training, "clip_grad_norm", clip)
    monkeypatch.setattr(training.FastAdam, "step", step)
    train(_options(tmp_path / "run", steps=2))
    assert seen["smoothing"] == [0.1, 0.1]
    assert seen["clip"] == [1.0, 1.0]
    assert seen["adam"] == [((0.9, 0.98), 1e-9)] * 2


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


def test_the_early_list_format_of_the_dropout_state_is_refused_saying_what_to_do(tmp_path):
    """Early checkpoints listed the generators' states in module order; resuming one is refused in one line
    that names the way out (the version that wrote it, or --overwrite), not a KeyError from deep inside."""
    config = TransformerConfig.tiny(9, d_model=8, n_heads=2, d_ff=8, n_layers=1, dropout=0.5, max_len=8)
    model = Transformer(config)
    legacy = [{"seed": state["seed"], "cpu": state["cpu"]} for state in model.rng_state_dict().values()]
    with pytest.raises(TrainingError, match="early versions.*--overwrite"):
        set_rng_state(model, json.loads(json.dumps(legacy)), step=1)
    with pytest.raises(TrainingError, match="does not fit"):
        set_rng_state(model, {"encoder.nothing.generator": {"seed": 1}}, step=1)
    out = tmp_path / "run"
    train(_options(out, steps=2))
    state_file = ckpt.list_checkpoints(out)[-1] / ckpt.STATE_FILE
    state = json.loads(state_file.read_text())
    state["rng"] = list(state["rng"].values())
    state_file.write_text(json.dumps(state))
    with pytest.raises(TrainingError, match=r"--resume: .*state\.json.*early versions.*--overwrite"):
        train(_options(out, steps=3, resume=True))


def test_the_status_line_fits_80_columns_and_shows_an_eta():
    import io
    stream = io.StringIO()
    bar = ProgressBar(total=100_000, initial=52_000, stream=stream)
    bar.update(52_001, 100_000, epoch=377, loss=12.345, tokens_per_second=123_456, lr=3.14e-3)
    bar.close()
    lines = [line for line in stream.getvalue().replace("\n", "\r").split("\r") if line]
    assert lines and all(len(line) < 80 for line in lines)
    last = lines[-1]
    assert "52001/100000" in last and "<" in last                    # steps, then [elapsed<remaining]
    for piece in ("ep 377", "loss 12.345", "123.5k tok/s", "lr 3.1e-03"):
        assert piece in last
    quiet_stream = io.StringIO()
    quiet = ProgressBar(total=10, stream=quiet_stream, enabled=False)
    quiet.update(1, 10, epoch=1, loss=1.0, tokens_per_second=1.0, lr=1.0)
    quiet.close()
    assert quiet_stream.getvalue() == ""


def test_the_dev_loss_uses_the_tokenizers_bos_and_eos():
    """evaluate_loss must build the decoder's input and output with the tokenizer's ids, as training does."""
    from types import SimpleNamespace

    from minitransformer.data.batching import make_batches
    from minitransformer.training.trainer import batch_loss, evaluate_loss

    config = TransformerConfig.tiny(12, d_model=8, n_heads=2, d_ff=8, n_layers=1, dropout=0.0, max_len=16)
    model = Transformer(config).to(np.float64)
    examples = [([4, 5, 6], [7, 8]), ([9, 4], [10, 11, 5])]
    tokenizer = SimpleNamespace(bos_id=3, eos_id=11)      # not the 1 and 2 of the batching defaults
    expected = []
    for ids in ((3, 11), (1, 2)):
        (batch,) = make_batches(examples, 100, pad_id=0, shuffle=False, bos_id=ids[0], eos_id=ids[1])
        expected.append(batch_loss(model, batch, label_smoothing=0.0).item())
    assert expected[0] != pytest.approx(expected[1])
    assert evaluate_loss(model, examples, 100, tokenizer) == pytest.approx(expected[0], rel=1e-12)


def test_one_table_of_presets():
    """A name means one model: TransformerConfig's presets, the training recipes and their sizes agree."""
    from minitransformer.presets import RENAMED_PRESETS
    for name, sizes in MODELS.items():
        config = TransformerConfig.preset(name, 100)
        assert {key: getattr(config, key) for key in sizes} == sizes
    for name in ("tiny", "small", "base", "big"):
        assert getattr(TransformerConfig, name)(100) == TransformerConfig.preset(name, 100)
    for name, recipe in PRESETS.items():
        assert recipe["model"] in MODELS.values()
        if name in MODELS:                                   # a recipe named after a model trains that model
            assert recipe["model"] == MODELS[name]
    assert PRESETS["small"]["model"] == MODELS["small"] and PRESETS["quick"]["model"] == MODELS["tiny"]
    assert set(RENAMED_PRESETS.values()) <= set(PRESETS) and not set(RENAMED_PRESETS) & set(PRESETS)
    with pytest.raises(ValueError, match="unknown model size 'huge'; choose one of toy, tiny, small"):
        TransformerConfig.preset("huge", 100)


def test_a_run_saved_under_an_old_preset_name_still_resumes(tmp_path):
    out = tmp_path / "run"
    train(_options(out, steps=2))
    config = json.loads((out / "config.json").read_text())
    config["training"]["preset"] = "tiny"                    # what earlier versions wrote for this model
    (out / "config.json").write_text(json.dumps(config))
    assert train(_options(out, steps=3, preset=None, resume=True))["steps"] == 3


LOOP_LINES = 80     # issue 46: the loop chapter 10 quotes is read whole, top to bottom


@pytest.mark.parametrize("chapter", ["chapters/10-training.md", "chapters/ja/10-training.md"])
def test_chapter_10_quotes_the_loop_that_runs_whole_and_it_stays_short(chapter):
    """The loop chapter 10 quotes is the function ``train`` calls, quoted whole (every line, no elision), and at most
    LOOP_LINES lines: the several processes, the clock, the bar and the checkpoints join it through named calls,
    so it cannot grow back silently nor the chapter quote a loop that no longer runs."""
    import ast
    import inspect
    import sys
    from pathlib import Path

    from minitransformer.training import trainer

    root = Path(__file__).resolve().parents[2]
    sys.path.insert(0, str(root / "tools"))
    import listings

    quoted = [listing for listing in listings.listings_in(root / chapter)
              if listing.file.endswith("training/trainer.py") and listing.name == "train_loop"]
    assert len(quoted) == 1, f"{chapter} quotes train_loop {len(quoted)} times, not once"
    called = {node.func.id for node in ast.walk(ast.parse(inspect.getsource(trainer._train)))
              if isinstance(node, ast.Call) and isinstance(node.func, ast.Name)}
    assert "train_loop" in called                                  # the loop quoted is the loop that runs
    source = inspect.getsource(trainer.train_loop).rstrip("\n").split("\n")
    assert len(source) <= LOOP_LINES, f"train_loop has grown to {len(source)} lines (at most {LOOP_LINES})"
    shown = [line.rstrip() for line in quoted[0].lines]
    while shown and not shown[-1]:
        shown.pop()
    assert shown == [line.rstrip() for line in source]             # whole: every line, in order, nothing left out
