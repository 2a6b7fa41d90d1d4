"""The command line, run as a user runs it: `python -m minitransformer ...` in a subprocess.

Every refusal must be one clear line on stderr and a non-zero exit status, never a traceback.
"""
from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]
TINY_RUN = ["--preset", "toy", "--limit", "20", "--average", "2"]


def run_cli(*args, stdin: str | None = None, timeout: float = 120) -> subprocess.CompletedProcess:
    env = dict(os.environ, PYTHONPATH=str(ROOT) + os.pathsep + os.environ.get("PYTHONPATH", ""), MPLBACKEND="Agg")
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
    assert results["steps"] == 4 and 0.0 <= results["test_bleu"] <= 100.0
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
    assert "builtin test_heldout" in result.stdout and "BLEU" in result.stdout


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
    from minitransformer.train import TrainOptions

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
