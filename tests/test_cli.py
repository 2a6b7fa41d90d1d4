"""The command line, run as a user runs it: `python -m minitransformer ...` in a subprocess.

Every refusal must be one clear line on stderr and a non-zero exit status, never a traceback.
"""
from __future__ import annotations

import json
import os
import re
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]
TINY_RUN = ["--preset", "toy", "--limit", "20", "--average", "2"]


def run_cli(*args, stdin: str | None = None, timeout: float = 120, pythonpath: str | None = None
            ) -> subprocess.CompletedProcess:
    """``pythonpath`` goes first on the path (a folder that shadows a module, e.g. a CuPy that is not there)."""
    path = [p for p in (pythonpath, str(ROOT), os.environ.get("PYTHONPATH")) if p]
    env = dict(os.environ, PYTHONPATH=os.pathsep.join(path), MPLBACKEND="Agg")
    return subprocess.run([sys.executable, "-m", "minitransformer", *map(str, args)], input=stdin,
                          capture_output=True, text=True, timeout=timeout, env=env, cwd=ROOT)


def refused(result: subprocess.CompletedProcess, *needles: str) -> None:
    assert result.returncode != 0, result.stdout
    assert "Traceback" not in result.stderr, result.stderr
    for needle in needles:
        assert needle in result.stderr, result.stderr


@pytest.fixture(scope="module")
def run_dir(tmp_path_factory) -> Path:
    """One tiny run, trained through the command line, shared by the tests below."""
    out = tmp_path_factory.mktemp("cli") / "run"
    result = run_cli("train", "--out", out, "--steps", "4", *TINY_RUN)
    assert result.returncode == 0, result.stderr
    assert "test (unseen sentences): BLEU" in result.stdout
    assert "test_heldout (word combinations never seen in training): BLEU" in result.stdout
    assert "Traceback" not in result.stderr
    return out


def test_train_writes_a_complete_run(run_dir):
    for name in ("config.json", "tokenizer.json", "latest", "results.json", "attention.png", "final/model.npz",
                 "final/state.json", "final/tokenizer.json"):
        assert (run_dir / name).is_file(), name
    results = json.loads((run_dir / "results.json").read_text())
    # the scores' values are checked by test_evaluate_reproduces_the_scores_of_the_training_run
    assert results["steps"] == 4 and {"test_bleu", "test_chrf", "test_heldout_bleu"} <= set(results)
    assert len(results["examples"]) == 5
    assert (run_dir / "attention.png").read_bytes()[:8] == b"\x89PNG\r\n\x1a\n"


def test_train_resume_continues_the_run(run_dir, tmp_path):
    copy = tmp_path / "run"
    shutil.copytree(run_dir, copy)
    result = run_cli("train", "--out", copy, "--steps", "6", "--resume", "--no-eval", "--average", "1")
    assert result.returncode == 0, result.stderr
    assert "resuming" in result.stdout and "step 4" in result.stdout
    assert json.loads((copy / "results.json").read_text())["steps"] == 6


def test_translate_arguments_and_stdin(run_dir):
    result = run_cli("translate", "--checkpoint", run_dir, "the cat ate the fish .", "mary is a cook .")
    assert result.returncode == 0, result.stderr
    assert len(result.stdout.splitlines()) == 2
    piped = run_cli("translate", "--checkpoint", run_dir, "--greedy", stdin="the cat ate the fish .\n")
    assert piped.returncode == 0 and len(piped.stdout.splitlines()) == 1


def test_translate_survives_odd_input(run_dir):
    result = run_cli("translate", "--checkpoint", run_dir, "", "☃ 𝄞 zzqx", " ".join(["the cat"] * 200))
    assert result.returncode == 0, result.stderr
    lines = result.stdout.split("\n")
    assert lines[0] == ""                                     # the empty sentence: an empty translation
    assert "empty sentence" in result.stderr
    assert "truncated" in result.stderr                       # the over-long one: cut to the model's max_len
    assert "Traceback" not in result.stderr


def test_translate_accepts_a_checkpoint_folder(run_dir):
    folder = run_dir / (run_dir / "latest").read_text().strip()
    result = run_cli("translate", "--checkpoint", folder, "--beam", "2", "the cat ate the fish .")
    assert result.returncode == 0, result.stderr


def test_evaluate_prints_bleu(run_dir):
    result = run_cli("evaluate", "--checkpoint", run_dir, "--split", "test_heldout", "--limit", "5", "--greedy")
    assert result.returncode == 0, result.stderr
    assert "builtin test_heldout (en-ja, 5 sentences, greedy): BLEU " in result.stdout   # scores: tests below


@pytest.mark.parametrize("command", ["translate", "evaluate"])
def test_greedy_with_another_beam_is_refused_in_one_line(command, tmp_path):
    """It used to search greedily and drop --beam 3 without a word; the refusal comes before any model is read."""
    sentence = ["the cat"] if command == "translate" else []
    result = run_cli(command, "--checkpoint", tmp_path / "nowhere", "--greedy", "--beam", "3", *sentence)
    refused(result, "--greedy and --beam 3 contradict each other")
    assert len(result.stderr.strip().splitlines()) == 1, result.stderr


@pytest.mark.parametrize("command", ["translate", "evaluate"])
def test_a_beam_wider_than_the_vocabulary_is_refused_naming_the_limit(command, run_dir):
    """--beam 100000 seemed to hang (every step scored 100,000 × V continuations); the vocabulary is the limit."""
    from minitransformer.translator import Translator

    vocab = Translator.load(run_dir).model.config.tgt_vocab_size
    sentence = ["the cat"] if command == "translate" else ["--limit", "2"]
    result = run_cli(command, "--checkpoint", run_dir, "--beam", "100000", *sentence, timeout=60)
    refused(result, f"--beam 100000 is wider than the model's vocabulary ({vocab:,} tokens)",
            f"the widest beam searched is {vocab:,}")
    assert len(result.stderr.strip().splitlines()) == 1, result.stderr
    if command == "translate":       # the limit itself is searched
        result = run_cli(command, "--checkpoint", run_dir, "--beam", str(vocab), *sentence)
        assert result.returncode == 0 and len(result.stdout.splitlines()) == 1, result.stderr


def test_train_refuses_a_beam_wider_than_its_vocabulary_before_the_run_starts(tmp_path):
    out = tmp_path / "run"
    result = run_cli("train", "--out", out, "--steps", "1", "--beam", "100000", *TINY_RUN)
    refused(result, "--beam 100000 is wider than the model's vocabulary (", "the widest beam searched is ")
    assert not (out / "config.json").exists() and not (out / "results.json").exists()


def test_a_missing_checkpoint_is_refused(tmp_path):
    refused(run_cli("translate", "--checkpoint", tmp_path / "nothing", "hello"), "no such file or directory")
    refused(run_cli("evaluate", "--checkpoint", tmp_path), "no checkpoint here")


def test_a_truncated_checkpoint_is_refused(run_dir, tmp_path):
    copy = tmp_path / "run"
    shutil.copytree(run_dir, copy)
    weights = copy / "final" / "model.npz"
    weights.write_bytes(weights.read_bytes()[:1000])
    refused(run_cli("translate", "--checkpoint", copy, "hello"), "model.npz", "truncated")


def test_a_checkpoint_of_another_configuration_is_refused(run_dir, tmp_path):
    copy = tmp_path / "run"
    shutil.copytree(run_dir, copy)
    state_file = copy / "final" / "state.json"
    state = json.loads(state_file.read_text())
    state["config"]["d_model"] = 48
    state_file.write_text(json.dumps(state))
    refused(run_cli("translate", "--checkpoint", copy, "hello"), "another model configuration", ", 32)")


def test_a_foreign_file_is_refused(tmp_path):
    junk = tmp_path / "model.npz"
    junk.write_text("not a zip file")
    refused(run_cli("translate", "--checkpoint", junk, "hello"), "state.json")
    (tmp_path / "state.json").write_text("{\"hello\": 1}")
    refused(run_cli("translate", "--checkpoint", tmp_path, "hello"), "not a minitransformer checkpoint")


def test_train_refusals(run_dir, tmp_path):
    refused(run_cli("train", "--out", run_dir, "--steps", "1"), "already holds a training run")
    refused(run_cli("train", "--out", tmp_path / "x", "--data", tmp_path / "no-corpus", "--steps", "1"),
            "corpus folder not found")
    refused(run_cli("train", "--out", tmp_path / "y", "--resume"), "no run to resume")
    refused(run_cli("train", "--steps", "0"), "must be positive")
    refused(run_cli("train", "--preset", "gigantic"), "unknown preset 'gigantic'; choose one of toy, quick, small")
    refused(run_cli("train", "--preset", "tiny", "--out", tmp_path / "z"), "the preset 'tiny' is now called 'toy'")
    (tmp_path / "afile").write_text("x")
    refused(run_cli("train", "--out", tmp_path / "afile" / "sub"), "cannot be a folder", "afile is a file")


def test_the_same_train_command_twice_is_not_an_error(run_dir):
    """The README's first command runs twice in a row: the second `train` finds its finished run."""
    result = run_cli("train", "--out", run_dir, "--steps", "4", *TINY_RUN)
    assert result.returncode == 0, result.stderr
    assert "already holds this run, finished" in result.stdout and "nothing to train" in result.stdout


def test_every_training_option_has_a_flag():
    """The train subcommand is built from TrainOptions: each field has a flag, with the same default."""
    import dataclasses

    from minitransformer.__main__ import build_parser
    from minitransformer.training.trainer import TrainOptions

    parser = build_parser()
    args = parser.parse_args(["train"])
    parsed = {f.name: getattr(args, f.name) for f in dataclasses.fields(TrainOptions)}
    assert parsed == dataclasses.asdict(TrainOptions())
    args = parser.parse_args(["train", "--alpha", "0.8", "--no-plot", "--no-eval", "--save-every", "7"])
    assert (args.alpha, args.plot, args.evaluate, args.save_every) == (0.8, False, False, 7)


def test_a_run_without_a_complete_final_model_is_never_used_silently(run_dir, tmp_path):
    copy = tmp_path / "run"
    shutil.copytree(run_dir, copy)
    (copy / "final" / "state.json").unlink()
    refused(run_cli("translate", "--checkpoint", copy, "the cat ate the fish ."), "final model is incomplete")
    refused(run_cli("evaluate", "--checkpoint", copy, "--limit", "2"), "final model is incomplete")
    shutil.rmtree(copy / "final")                             # an unfinished run: its latest checkpoint, said aloud
    result = run_cli("translate", "--checkpoint", copy, "the cat ate the fish .")
    assert result.returncode == 0, result.stderr
    assert "has no final model" in result.stderr and "step-000004" in result.stderr


@pytest.mark.parametrize("command", ["train", "translate", "evaluate"])
def test_every_subcommand_has_help(command):
    result = run_cli(command, "--help")
    assert result.returncode == 0 and "usage:" in result.stdout and "--" in result.stdout


def test_no_command_prints_help_and_fails():
    result = run_cli()
    assert result.returncode != 0 and "COMMAND" in result.stderr


# -- every option of every subcommand is exercised ------------------------------------------------
def _in_process(monkeypatch, *argv):
    """main(argv) in this process (a refusal returns its exit status and prints one line on stderr)."""
    from minitransformer.__main__ import main

    monkeypatch.setenv("MINITRANSFORMER_MALLOC", "0")       # leave the test process's malloc alone
    return main([str(a) for a in argv])


# a non-default value for every field of TrainOptions, as flags, and what the field must then hold
TRAIN_FLAGS = {
    "out": (["--out", "elsewhere/run"], "elsewhere/run"),
    "data": (["--data", "corpora/enja"], "corpora/enja"),
    "direction": (["--direction", "ja-en"], "ja-en"),
    "model": (["--model", "lstm"], "lstm"),
    "preset": (["--preset", "small"], "small"),
    "seed": (["--seed", "7"], 7),
    "max_tokens": (["--max-tokens", "300"], 300),
    "vocab_size": (["--vocab-size", "150"], 150),
    "tokenizer": (["--tokenizer", "raw"], "raw"),
    "attention": (["--attention", "local"], "local"),
    "attention_window": (["--attention-window", "4"], 4),
    "attention_score": (["--attention-score", "dot"], "dot"),
    "input_feeding": (["--no-input-feeding"], False),
    "minutes": (["--minutes", "0.5"], 0.5),
    "epochs": (["--epochs", "3"], 3),
    "steps": (["--steps", "9"], 9),
    "save_every": (["--save-every", "2"], 2),
    "cooldown": (["--cooldown", "0.2"], 0.2),
    "device": (["--device", "cuda"], "cuda"),
    "resume": (["--resume"], True),
    "overwrite": (["--overwrite"], True),
    "average": (["--average", "3"], 3),
    "choose_average": (["--choose-average"], True),
    "beam": (["--beam", "2"], 2),
    "alpha": (["--alpha", "0.8"], 0.8),
    "choose_alpha": (["--choose-alpha"], True),
    "limit": (["--limit", "11"], 11),
    "evaluate": (["--no-eval"], False),
    "plot": (["--no-plot"], False),
    "quiet": (["--quiet"], True),
    "distributed": (["--distributed"], True),
}


def test_each_train_flag_sets_its_training_option(monkeypatch):
    import dataclasses

    import minitransformer.training.trainer as training
    from minitransformer.training.trainer import TrainOptions

    assert set(TRAIN_FLAGS) == {f.name for f in dataclasses.fields(TrainOptions)}, "a new option needs a row here"
    received = []
    monkeypatch.setattr(training, "train", lambda options: received.append(options))
    defaults = TrainOptions()
    for name, (flags, value) in TRAIN_FLAGS.items():
        assert getattr(defaults, name) != value, name          # the test value is not the default
        assert _in_process(monkeypatch, "train", *flags) == 0
        options = received.pop()
        assert getattr(options, name) == value, name
        others = {f.name for f in dataclasses.fields(TrainOptions)} - {name}
        assert all(getattr(options, o) == getattr(defaults, o) for o in others), name   # and nothing else
    assert _in_process(monkeypatch, "train", "--quick") == 0
    assert received.pop().preset == "quick"


def test_quick_refuses_another_preset(monkeypatch, capsys):
    assert _in_process(monkeypatch, "train", "--quick", "--preset", "toy") == 2
    assert "--quick is the preset 'quick'; do not combine it with --preset" in capsys.readouterr().err


def test_the_final_model_is_chosen_on_dev_and_the_choice_is_recorded(tmp_path, monkeypatch, capsys):
    out = tmp_path / "run"
    status = _in_process(monkeypatch, "train", "--out", out, "--preset", "toy", "--limit", "20", "--steps", "4",
                         "--save-every", "2", "--average", "2", "--no-eval", "--no-plot", "--quiet")
    assert status == 0, capsys.readouterr().err
    results = json.loads((out / "results.json").read_text())
    choice = results["final_choice"]                                      # the two dev scores it chose between
    assert choice["averaged_checkpoints"] == 2 and choice["dev_sentences"] > 0
    assert {"dev_bleu_last_checkpoint", "dev_bleu_average"} <= set(choice)
    kept_average = choice["dev_bleu_average"] >= choice["dev_bleu_last_checkpoint"]   # ties keep the average (§6.1)
    assert results["final_model"] == ("average of the last 2 checkpoints" if kept_average
                                      else "last checkpoint (the average scored lower on dev)")


def test_choose_average_tries_each_window_on_dev_and_keeps_the_best(tmp_path, monkeypatch, capsys):
    out = tmp_path / "run"
    status = _in_process(monkeypatch, "train", "--out", out, "--preset", "toy", "--limit", "20", "--steps", "10",
                         "--save-every", "2", "--average", "5", "--choose-average", "--no-eval", "--no-plot", "--quiet")
    assert status == 0, capsys.readouterr().err
    results = json.loads((out / "results.json").read_text())
    assert len(list((out / "checkpoints").iterdir())) == 5                # --average 5 keeps five
    choice = results["final_choice"]
    by_window = choice["dev_bleu_by_window"]
    assert list(by_window) == ["1", "2", "4", "5"]                        # the last one, then 2, 4 and --average
    assert by_window["1"] == choice["dev_bleu_last_checkpoint"]
    best = max(by_window[k] for k in ("2", "4", "5"))
    widest_best = max(int(k) for k in ("2", "4", "5") if by_window[k] == best)      # ties keep the wider average
    assert choice["averaged_checkpoints"] == widest_best and choice["dev_bleu_average"] == best
    assert results["final_model"] == (f"average of the last {widest_best} checkpoints" if best >= by_window["1"]
                                      else "last checkpoint (the average scored lower on dev)")
    assert results["options"]["choose_average"] is True


def _train_choosing_alpha(monkeypatch, capsys, out, scored, steps: int) -> dict:
    """A toy `train --choose-alpha` whose BLEU is `scored` (a stand-in for trainer.bleu_of); its alpha_choice."""
    import minitransformer.training.trainer as training

    monkeypatch.setattr(training, "bleu_of", scored)
    status = _in_process(monkeypatch, "train", "--out", out, "--preset", "toy", "--limit", "20", "--steps",
                         str(steps), "--average", "1", "--choose-alpha", "--no-plot", "--quiet")
    assert status == 0, capsys.readouterr().err
    return json.loads((out / "results.json").read_text())["alpha_choice"]


def test_choose_alpha_keeps_the_best_alpha_on_dev_and_the_test_translate_and_evaluate_use_it(
        tmp_path, monkeypatch, capsys):
    from types import SimpleNamespace

    from minitransformer.translator import Translator

    dev_scores = {0.0: 30.0, 0.3: 31.0, 0.6: 32.0, 1.0: 33.5, 1.5: 33.5, 2.0: 33.0}   # a tie: 1 is nearer 0.6
    calls = []

    def scored(model, tokenizer, pairs, beam, alpha=0.6, tokenize=None):
        calls.append((beam, alpha, len(pairs)))
        score = dev_scores.get(alpha, 0.0) if beam > 1 else 1.0
        return SimpleNamespace(score=score, tokenize="none"), ["x"] * len(pairs)

    out = tmp_path / "run"
    choice = _train_choosing_alpha(monkeypatch, capsys, out, scored, steps=4)
    assert choice["dev_bleu_by_alpha"] == {"0": 30.0, "0.3": 31.0, "0.6": 32.0, "1": 33.5, "1.5": 33.5, "2": 33.0}
    assert choice["alpha"] == 1.0 and choice["beam"] == 4 and choice["dev_sentences"] == 20
    assert [alpha for beam, alpha, _ in calls if beam == 4][:6] == sorted(dev_scores)   # the dev grid, first
    test_calls = calls[-3:]            # then test and test_heldout with the chosen α, and test at --alpha (a report)
    assert [alpha for _, alpha, _ in test_calls] == [1.0, 1.0, 0.6]
    assert choice["given_alpha"] == 0.6 and choice["test_bleu_at_given_alpha"] == dev_scores[0.6]
    assert json.loads((out / "final" / "state.json").read_text())["alpha"] == 1.0
    assert Translator.load(out).alpha == 1.0             # translate and evaluate use it unless told
    monkeypatch.undo()
    assert _in_process(monkeypatch, "evaluate", "--checkpoint", out, "--split", "dev") == 0
    assert "beam 4, α 1)" in capsys.readouterr().out
    assert _in_process(monkeypatch, "evaluate", "--checkpoint", out, "--split", "dev", "--alpha", "0.3") == 0
    assert "beam 4, α 0.3)" in capsys.readouterr().out


@pytest.mark.parametrize("peak, expected_tried", [
    (3.0, [2.5, 3.0, 3.5]),                          # past the edge until a larger α no longer wins
    (99.0, [2.5, 3.0, 3.5, 4.0, 4.5, 5.0]),          # ... and no further than ALPHA_LIMIT
])
def test_choose_alpha_looks_past_the_grid_while_its_largest_alpha_wins(tmp_path, monkeypatch, capsys, peak,
                                                                       expected_tried):
    from types import SimpleNamespace

    import minitransformer.training.trainer as training

    def scored(model, tokenizer, pairs, beam, alpha=0.6, tokenize=None):   # dev BLEU rises to α = peak
        score = 30.0 - abs(alpha - peak) if beam > 1 else 1.0
        return SimpleNamespace(score=score, tokenize="none"), ["x"] * len(pairs)

    choice = _train_choosing_alpha(monkeypatch, capsys, tmp_path / "run", scored, steps=2)
    tried = [float(alpha) for alpha in choice["dev_bleu_by_alpha"]]
    assert tried == [*training.ALPHA_GRID, *expected_tried]
    assert choice["alpha"] == min(peak, training.ALPHA_LIMIT)


def test_a_saved_alpha_that_is_not_a_number_is_refused(tmp_path, monkeypatch, capsys):
    import shutil as files

    out = tmp_path / "run"
    status = _in_process(monkeypatch, "train", "--out", out, *TINY_RUN, "--steps", "2", "--no-eval", "--quiet")
    assert status == 0, capsys.readouterr().err          # a student edition's error names the exercise
    state_file = out / "final" / "state.json"
    state = json.loads(state_file.read_text())
    assert "alpha" not in state                          # without --choose-alpha nothing is saved: 0.6 (§6.1)
    from minitransformer.translator import Translator
    assert Translator.load(out).alpha == 0.6
    broken = tmp_path / "broken"
    files.copytree(out, broken)
    (broken / "final" / "state.json").write_text(json.dumps({**state, "alpha": "long"}))
    assert _in_process(monkeypatch, "evaluate", "--checkpoint", broken, "--split", "dev") != 0
    assert "the saved length penalty alpha is 'long', not a finite number" in capsys.readouterr().err


def test_the_train_options_shape_the_run(tmp_path, monkeypatch, capsys):
    out = tmp_path / "run"
    status = _in_process(monkeypatch, "train", "--out", out, "--preset", "toy", "--limit", "20", "--direction", "ja-en",
                         "--seed", "3", "--max-tokens", "300", "--vocab-size", "200", "--tokenizer", "words",
                         "--epochs", "1", "--save-every", "1", "--average", "1", "--beam", "2", "--alpha", "0.8",
                         "--no-plot", "--quiet")
    printed = capsys.readouterr()
    assert status == 0, printed.err
    assert printed.out == ""                                              # --quiet
    training = json.loads((out / "config.json").read_text())["training"]
    assert {k: training[k] for k in ("direction", "seed", "max_tokens", "vocab_size", "tokenizer")} == \
        {"direction": "ja-en", "seed": 3, "max_tokens": 300, "vocab_size": 200, "tokenizer": "words"}
    assert len(json.loads((out / "tokenizer.json").read_text())["vocab"]) == 200          # the preset has 300
    results = json.loads((out / "results.json").read_text())
    assert results["epochs"] == 1.0                                       # --epochs 1: exactly one pass
    assert not (out / "attention.png").exists() and "attention_png" not in results   # --no-plot
    saved = sorted(p.name for p in (out / "checkpoints").iterdir())
    assert saved[-1] == f"step-{results['steps']:06d}" and len(saved) >= min(results["steps"], 2)  # --save-every 1
    assert results["final_model"] == "last checkpoint"                    # --average 1: no averaging
    assert results["final_choice"] == {}                                  # nothing compared on dev

    # --overwrite replaces the run; --minutes stops this invocation's training on time, long before 50 epochs
    status = _in_process(monkeypatch, "train", "--out", out, "--preset", "toy", "--limit", "20", "--overwrite",
                         "--minutes", "0.0001", "--epochs", "50", "--no-eval", "--average", "1")
    printed = capsys.readouterr()
    assert status == 0, printed.err
    assert "stopped after 0.0001 minutes" in printed.out
    assert json.loads((out / "config.json").read_text())["training"]["seed"] == 0
    assert 1 <= json.loads((out / "results.json").read_text())["steps"] < 20      # 6 ms of steps, not 50 epochs


def test_a_minutes_budget_spent_before_the_first_step_still_trains_one_step(tmp_path, monkeypatch, capsys):
    """--minutes counts from the loop's start, and setting up the first batch takes time too: on a loaded
    machine a tiny budget could run out before any step. A budget stops training after a step, as on
    several ranks (where the time travels with each step's all-reduce), never before the first."""
    import minitransformer.training.trainer as training

    clock = iter(range(0, 10**6, 60))          # every look at the clock finds another minute gone
    monkeypatch.setattr(training.time, "monotonic", lambda: float(next(clock)))
    status = _in_process(monkeypatch, "train", "--out", tmp_path / "run", "--preset", "toy", "--limit", "20",
                         "--minutes", "0.5", "--epochs", "5", "--no-eval", "--average", "1", "--quiet")
    assert status == 0, capsys.readouterr().err
    assert json.loads((tmp_path / "run" / "results.json").read_text())["steps"] == 1


def test_device_cuda_without_cupy_is_refused_in_one_line(run_dir, tmp_path):
    fake = tmp_path / "no_cupy" / "cupy"
    fake.mkdir(parents=True)
    (fake / "__init__.py").write_text("raise ModuleNotFoundError(\"No module named 'cupy'\", name='cupy')\n")
    env_path = str(fake.parent)
    for args in (["train", "--out", tmp_path / "run", "--device", "cuda", "--steps", "1", *TINY_RUN],
                 ["translate", "--checkpoint", run_dir, "--device", "cuda", "hello"],
                 ["evaluate", "--checkpoint", run_dir, "--device", "cuda", "--limit", "2"]):
        result = run_cli(*args, pythonpath=env_path)
        refused(result, "device 'cuda' needs CuPy, which is not installed", "pip install cupy-cuda12x")
        assert len(result.stderr.strip().splitlines()) == 1, result.stderr


def test_translate_passes_beam_alpha_and_device_to_the_translator(run_dir, monkeypatch, capsys):
    from minitransformer.translator import Translator

    calls = []
    real_load = Translator.load
    monkeypatch.setattr(Translator, "load", classmethod(
        lambda cls, path, device="cpu": calls.append(("load", device)) or real_load.__func__(cls, path, device=device)))
    monkeypatch.setattr(Translator, "translate", lambda self, sentences, beam_size, alpha: calls.append(
        ("translate", beam_size, alpha)) or ["x"] * len(sentences))
    assert _in_process(monkeypatch, "translate", "--checkpoint", run_dir, "--beam", "3", "--alpha", "1.5",
                       "--device", "cpu", "the cat .") == 0
    assert _in_process(monkeypatch, "translate", "--checkpoint", run_dir, "--greedy", "the cat .") == 0
    assert calls == [("load", "cpu"), ("translate", 3, 1.5), ("load", "cpu"), ("translate", 1, 0.6)]
    assert capsys.readouterr().out == "x\nx\n"


@pytest.mark.parametrize("flags, beam", [([], 4), (["--greedy"], 1), (["--greedy", "--beam", "1"], 1),
                                         (["--beam", "3"], 3)])
def test_evaluate_searches_with_the_beam_asked_for(run_dir, monkeypatch, capsys, flags, beam):
    from types import SimpleNamespace

    from minitransformer.translator import Translator

    searched = []

    def bleu(self, pairs, beam_size, alpha, tokenize):
        searched.append(beam_size)
        return SimpleNamespace(score=0.0, precisions=[0.0] * 4, bp=1.0, ratio=1.0), ["x"] * len(pairs)

    monkeypatch.setattr(Translator, "bleu", bleu)
    assert _in_process(monkeypatch, "evaluate", "--checkpoint", run_dir, "--limit", "2", *flags) == 0
    assert searched == [beam]
    assert ("greedy)" if beam == 1 else f"beam {beam}, α 0.6)") in capsys.readouterr().out


def _printed_scores(stdout: str) -> tuple[float, float]:
    bleu = float(re.search(r"BLEU (\d+\.\d\d)", stdout)[1])
    chrf = float(re.search(r"chrF2 = (\d+\.\d+)", stdout)[1])
    return bleu, chrf


def test_evaluate_reproduces_the_scores_of_the_training_run(run_dir):
    """The final test BLEU and chrF of results.json are what `evaluate` computes for the same model and split."""
    results = json.loads((run_dir / "results.json").read_text())
    result = run_cli("evaluate", "--checkpoint", run_dir, "--split", "test", "--beam", "4", "--alpha", "0.6")
    assert result.returncode == 0, result.stderr
    assert "builtin test (en-ja, 20 sentences, beam 4, α 0.6)" in result.stdout
    assert _printed_scores(result.stdout) == (round(results["test_bleu"], 2), results["test_chrf"])


def test_evaluate_scores_the_translations_it_makes(run_dir, tmp_path):
    """--data, --split, --greedy, --limit: the printed scores are those of the model's own translations."""
    from minitransformer.bleu import corpus_bleu_score, tokenization_for
    from minitransformer.chrf import corpus_chrf_score
    from minitransformer.data.run_data import load_data
    from minitransformer.presets import PRESETS
    from minitransformer.translator import Translator

    pairs = load_data(None, "en-ja", PRESETS["toy"]["corpus"], limit=20).pairs("test_heldout", "en-ja")
    data = tmp_path / "enja"
    data.mkdir()
    for split in ("train", "dev", "test"):       # an outside corpus: the held-out pairs, reversed
        (data / f"{split}.tsv").write_text("".join(f"{en}\t{ja}\n" for en, ja in pairs[::-1]), encoding="utf-8")
    result = run_cli("evaluate", "--checkpoint", run_dir, "--data", data, "--split", "dev", "--limit", "4",
                     "--greedy")
    assert result.returncode == 0, result.stderr
    assert " dev (en-ja, 4 sentences, greedy)" in result.stdout
    chosen = pairs[::-1][:4]
    hypotheses = Translator.load(run_dir).translate([en for en, _ in chosen], beam_size=1,
                                                  warn_unseen=False)
    references = [ja for _, ja in chosen]
    bleu = corpus_bleu_score(hypotheses, references, tokenize=tokenization_for("ja", references)).score
    chrf = corpus_chrf_score(hypotheses, references).score
    assert _printed_scores(result.stdout) == (round(bleu, 2), round(chrf, 2))


def test_attention_draws_only_the_kinds_asked_for(run_dir, tmp_path, monkeypatch):
    monkeypatch.setenv("MPLBACKEND", "Agg")
    out = tmp_path / "maps.png"
    assert _in_process(monkeypatch, "attention", "--checkpoint", run_dir, "--kind", "encoder", "--kind", "cross",
                       "--out", out, "--device", "cpu", "the cat ate the fish .") == 0
    assert sorted(p.name for p in tmp_path.iterdir()) == ["maps-cross.png", "maps-encoder.png"]


def test_every_option_of_every_subcommand_is_used_by_a_test():
    """A new flag without a test fails here: each option string must appear, quoted, in this file."""
    import argparse

    from minitransformer.__main__ import build_parser

    source = Path(__file__).read_text(encoding="utf-8")
    subcommands = next(a for a in build_parser()._actions if isinstance(a, argparse._SubParsersAction))
    untested = [f"{name} {flag}" for name, parser in subcommands.choices.items() for action in parser._actions
                for flag in action.option_strings if flag.startswith("--") and flag != "--help"
                and f'"{flag}"' not in source]
    assert not untested, f"options no test uses: {untested}"


# -- the attention LSTM (chapter 6) through the same commands -------------------------------------
LSTM_RUN = ["--model", "lstm", *TINY_RUN]


@pytest.fixture(scope="module")
def lstm_run_dir(tmp_path_factory) -> Path:
    """One tiny attention LSTM, trained through the command line like the Transformer above."""
    out = tmp_path_factory.mktemp("cli-lstm") / "run"
    result = run_cli("train", "--out", out, "--steps", "4", *LSTM_RUN)
    assert result.returncode == 0, result.stderr
    assert "attention LSTM 1+1 layers, d_model 32, additive score" in result.stdout
    assert "test (unseen sentences): BLEU" in result.stdout and "Traceback" not in result.stderr
    return out


def test_train_model_lstm_writes_a_complete_run(lstm_run_dir):
    from minitransformer.presets import LSTM_MODELS

    results = json.loads((lstm_run_dir / "results.json").read_text())
    config = results["config"]
    assert config["model"] == "lstm" and config["score"] == "additive" and config["input_feeding"] is True
    assert {key: config[key] for key in LSTM_MODELS["toy"]} == LSTM_MODELS["toy"]
    assert results["training"]["model"] == "lstm" and results["steps"] == 4
    assert results["final_model"].startswith(("average of the last 2", "last checkpoint"))
    assert {"test_bleu", "test_heldout_bleu"} <= set(results) and len(results["examples"]) == 5
    assert (lstm_run_dir / "attention.png").read_bytes()[:8] == b"\x89PNG\r\n\x1a\n"
    saved = json.loads((lstm_run_dir / "final" / "state.json").read_text())
    assert saved["config"] == config


def test_an_lstm_run_resumes_translates_and_evaluates(lstm_run_dir, tmp_path):
    copy = tmp_path / "run"
    shutil.copytree(lstm_run_dir, copy)
    result = run_cli("train", "--out", copy, "--steps", "6", "--resume", "--no-eval", "--average", "1")
    assert result.returncode == 0, result.stderr
    assert "resuming" in result.stdout and "step 4" in result.stdout
    resumed = json.loads((copy / "results.json").read_text())
    assert resumed["steps"] == 6 and resumed["config"]["model"] == "lstm"
    result = run_cli("translate", "--checkpoint", lstm_run_dir, "the cat ate the fish .", "mary is a cook .")
    assert result.returncode == 0 and len(result.stdout.splitlines()) == 2, result.stderr
    results = json.loads((lstm_run_dir / "results.json").read_text())
    result = run_cli("evaluate", "--checkpoint", lstm_run_dir, "--split", "test", "--beam", "4", "--alpha", "0.6")
    assert result.returncode == 0, result.stderr
    assert _printed_scores(result.stdout) == (round(results["test_bleu"], 2), results["test_chrf"])
    greedy = run_cli("evaluate", "--checkpoint", lstm_run_dir, "--greedy", "--limit", "3")
    assert greedy.returncode == 0 and "3 sentences, greedy" in greedy.stdout, greedy.stderr


def test_the_attention_of_an_lstm_is_drawn_and_only_its_one_kind(lstm_run_dir, tmp_path, monkeypatch, capsys):
    monkeypatch.setenv("MPLBACKEND", "Agg")
    out = tmp_path / "maps.png"
    assert _in_process(monkeypatch, "attention", "--checkpoint", lstm_run_dir, "--out", out,
                       "the cat ate the fish .") == 0
    assert [p.name for p in tmp_path.iterdir()] == ["maps.png"]          # one attention: one picture, OUT itself
    assert out.read_bytes()[:8] == b"\x89PNG\r\n\x1a\n"
    assert _in_process(monkeypatch, "attention", "--checkpoint", lstm_run_dir, "--out", tmp_path / "other.png",
                       "--kind", "decoder", "the cat .") == 2
    assert "an attention LSTM has no decoder self-attention" in capsys.readouterr().err
    assert not (tmp_path / "other.png").exists()


def test_options_of_the_other_model_are_refused(lstm_run_dir, tmp_path):
    refused(run_cli("train", "--out", tmp_path / "a", "--model", "lstm", "--attention", "flash", "--steps", "1"),
            "--attention flash chooses the Transformer's self-attention", "--model lstm has none")
    refused(run_cli("train", "--out", tmp_path / "b", "--model", "lstm", "--attention", "local",
                    "--attention-window", "3"), "--attention local and --attention-window 3 choose")
    refused(run_cli("train", "--out", tmp_path / "c", "--attention-score", "dot", "--no-input-feeding"),
            "--attention-score and --no-input-feeding shape the attention LSTM", "add --model lstm")
    refused(run_cli("train", "--out", tmp_path / "d", "--model", "rnn"), "invalid choice: 'rnn'")
    refused(run_cli("train", "--out", lstm_run_dir, "--resume", "--steps", "8", "--model", "transformer"),
            "model: 'lstm' in the saved run, 'transformer' requested")
    assert not any((tmp_path / name).exists() for name in "abcd")


# -- issue 48: the corpus of evaluate, α's range, pictures not replaced silently --------------------------
def _tsv_corpus(folder: Path, sizes: dict[str, int]) -> Path:
    """A corpus folder of TSV files from the built-in corpus's sentences, ``sizes`` pairs per split."""
    from minitransformer.data.run_data import load_data
    from minitransformer.presets import PRESETS

    corpus = load_data(None, "en-ja", PRESETS["toy"]["corpus"])
    folder.mkdir(parents=True)
    for split, size in sizes.items():
        (folder / f"{split}.tsv").write_text("".join(f"{en}\t{ja}\n" for en, ja in corpus.pairs(split, "en-ja")[:size]),
                                             encoding="utf-8")
    return folder


def _cli_in(cwd: Path, *args) -> subprocess.CompletedProcess:
    env = dict(os.environ, PYTHONPATH=os.pathsep.join(p for p in (str(ROOT), os.environ.get("PYTHONPATH")) if p),
               MPLBACKEND="Agg")
    return subprocess.run([sys.executable, "-m", "minitransformer", *map(str, args)], capture_output=True, text=True,
                          timeout=120, env=env, cwd=cwd)


def test_evaluate_data_reads_another_corpus_whole_not_under_the_runs_limit(run_dir, tmp_path):
    """A 30-pair test split of another corpus used to be scored as 20 sentences, the training run's --limit."""
    data = _tsv_corpus(tmp_path / "other", {"train": 5, "dev": 5, "test": 30})
    result = run_cli("evaluate", "--checkpoint", run_dir, "--data", data, "--greedy")
    assert result.returncode == 0, result.stderr
    assert "other test (en-ja, 30 sentences, greedy)" in result.stdout
    result = run_cli("evaluate", "--checkpoint", run_dir, "--greedy")              # the run's own corpus: its limit
    assert "builtin test (en-ja, 20 sentences, greedy)" in result.stdout, result.stderr


def test_evaluate_from_another_folder_scores_the_runs_corpus_and_warns_when_it_changed(tmp_path):
    """A relative --data was stored as typed: evaluate from another folder scored that folder's `corpus`."""
    here, elsewhere = tmp_path / "here", tmp_path / "elsewhere"
    _tsv_corpus(here / "corpus", {"train": 20, "dev": 10, "test": 12})
    _tsv_corpus(elsewhere / "corpus", {"train": 20, "dev": 10, "test": 7})
    trained = _cli_in(here, "train", "--data", "corpus", "--out", "run", "--steps", "2", "--preset", "toy",
                      "--average", "1", "--no-eval")
    assert trained.returncode == 0, trained.stderr
    result = _cli_in(elsewhere, "evaluate", "--checkpoint", here / "run", "--greedy")
    assert result.returncode == 0, result.stderr
    assert "corpus test (en-ja, 12 sentences, greedy)" in result.stdout and "warning" not in result.stderr
    with open(here / "corpus" / "test.tsv", "a", encoding="utf-8") as f:
        f.write("the cat .\tねこ 。\n")
    result = _cli_in(elsewhere, "evaluate", "--checkpoint", here / "run", "--greedy")
    assert result.returncode == 0, result.stderr
    assert "corpus test (en-ja, 13 sentences, greedy)" in result.stdout
    assert f"warning: the corpus {here / 'corpus'} is not the one" in result.stderr
    assert "test.tsv changed" in result.stderr


@pytest.mark.parametrize("alpha", ["300", "-301", "1e9", "11"])
def test_an_alpha_out_of_range_is_refused_where_it_is_parsed(run_dir, alpha):
    """--alpha 300 used to be an OverflowError (and -300 a ZeroDivisionError) of the length penalty, in train
    only after every step had run."""
    for command in (["translate", "--checkpoint", run_dir, "the cat ."], ["evaluate", "--checkpoint", run_dir],
                    ["train", "--out", run_dir.parent / "never", *TINY_RUN]):
        result = run_cli(*command, "--alpha", alpha)
        refused(result, "--alpha: must be a finite number from -10 to 10")
        assert result.returncode == 2
    assert not (run_dir.parent / "never").exists()


def test_the_length_penalty_is_finite_and_positive_at_every_alpha_and_length():
    from minitransformer import decode
    from minitransformer.decode import length_penalty

    for alpha in (-1e6, -300.0, -10.0, 0.0, 0.6, 10.0, 300.0, 1e6):
        for length in (0, 1, 255, 10 ** 6):
            penalty = length_penalty(length, alpha)
            assert 0.0 < penalty < float("inf") and -50.0 / penalty > -float("inf"), (alpha, length, penalty)
    assert length_penalty(7, 0.6) == pytest.approx(((5 + 7) / 6) ** 0.6)
    with pytest.raises(ValueError, match="alpha must be a finite number from -10 to 10"):
        decode.check_alpha(300.0)


def test_a_saved_alpha_out_of_range_is_refused_by_name(run_dir, tmp_path):
    copy = tmp_path / "run"
    shutil.copytree(run_dir, copy)
    state = json.loads((copy / "final" / "state.json").read_text())
    (copy / "final" / "state.json").write_text(json.dumps({**state, "alpha": 400.0}))
    refused(run_cli("translate", "--checkpoint", copy, "the cat ."),
            "the saved length penalty alpha must be a finite number from -10 to 10")


def test_attention_refuses_to_replace_pictures_it_did_not_name_without_overwrite(run_dir, tmp_path, monkeypatch):
    """`attention --out mine.png` replaced an existing mine-cross.png and its siblings without a word."""
    monkeypatch.setenv("MPLBACKEND", "Agg")
    (tmp_path / "mine-cross.png").write_bytes(b"my picture")
    args = ["attention", "--checkpoint", run_dir, "--out", tmp_path / "mine.png", "the cat ate the fish ."]
    result = run_cli(*args)
    refused(result, "mine-cross.png, which exists; pass --overwrite to replace it")
    assert (tmp_path / "mine-cross.png").read_bytes() == b"my picture" and "output:" not in result.stdout
    assert _in_process(monkeypatch, *args, "--overwrite") == 0
    assert (tmp_path / "mine-cross.png").read_bytes()[:4] == b"\x89PNG"
