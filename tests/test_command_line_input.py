"""The command line with input a user can give by accident: paths with ~ or a trailing slash, a closed stdin."""
from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import pytest

from minitransformer.training.trainer import train
from minitransformer.training.options import TrainOptions

ROOT = Path(__file__).resolve().parents[1]
SENTENCE = "the cat ate the fish ."


@pytest.fixture(scope="module")
def run(tmp_path_factory) -> Path:
    out = tmp_path_factory.mktemp("input") / "run"
    train(TrainOptions(out=str(out), preset="toy", limit=20, steps=2, average=1, evaluate=False, quiet=True))
    return out


def cli(*args, cwd: Path = ROOT, stdin=None, env: dict | None = None) -> subprocess.CompletedProcess:
    environment = dict(os.environ, PYTHONPATH=str(ROOT), MPLBACKEND="Agg", **(env or {}))
    return subprocess.run([sys.executable, "-m", "minitransformer", *map(str, args)], capture_output=True, text=True,
                          cwd=cwd, env=environment, timeout=300, stdin=stdin)


def _main(monkeypatch, *argv) -> int:
    from minitransformer.__main__ import main

    monkeypatch.setenv("MINITRANSFORMER_MALLOC", "0")
    monkeypatch.setenv("MPLBACKEND", "Agg")
    return main([str(a) for a in argv])


def test_attention_prints_the_files_it_wrote(run, tmp_path, monkeypatch, capsys):
    """--out att/single used to print att/single while matplotlib wrote att/single.png."""
    assert _main(monkeypatch, "attention", "--checkpoint", run, "--kind", "cross", "--out", tmp_path / "att" / "single",
                 SENTENCE) == 0
    printed = capsys.readouterr().out.split("\n")
    assert str(tmp_path / "att" / "single.png") in printed
    assert sorted(p.name for p in (tmp_path / "att").iterdir()) == ["single.png"]


def test_an_out_ending_in_a_slash_is_a_folder(run, tmp_path, monkeypatch, capsys):
    """--out att/ used to write ./att-encoder.png (and with one kind ./att.png) beside the folder."""
    monkeypatch.chdir(tmp_path)
    assert _main(monkeypatch, "attention", "--checkpoint", run, "--out", "att/", SENTENCE) == 0
    written = sorted(p.name for p in (tmp_path / "att").iterdir())
    assert written == ["attention-cross.png", "attention-decoder.png", "attention-encoder.png"]
    assert sorted(p.name for p in tmp_path.iterdir()) == ["att"]
    printed = capsys.readouterr().out
    assert all(os.path.join("att", name) in printed for name in written)
    (tmp_path / "maps").mkdir()                                  # an existing folder, named without the slash
    assert _main(monkeypatch, "attention", "--checkpoint", run, "--kind", "cross", "--out", "maps", SENTENCE) == 0
    assert sorted(p.name for p in (tmp_path / "maps").iterdir()) == ["attention-cross.png"]


def test_translate_with_stdin_closed_says_where_sentences_come_from(run):
    """`translate <&-` used to end in an AttributeError on sys.stdin.isatty()."""
    result = cli("translate", "--checkpoint", run, stdin=subprocess.DEVNULL)
    assert result.returncode == 0 and "Traceback" not in result.stderr      # an empty stdin: nothing to translate
    closed = subprocess.run(f"{sys.executable} -m minitransformer translate --checkpoint {run} <&-", shell=True,
                            capture_output=True, text=True, cwd=ROOT, timeout=300,
                            env=dict(os.environ, PYTHONPATH=str(ROOT)), executable="/bin/bash")
    assert closed.returncode == 2 and "Traceback" not in closed.stderr, closed.stderr
    assert "stdin is closed" in closed.stderr and "give the sentences as arguments" in closed.stderr


def test_a_checkpoint_path_with_a_tilde_is_the_home_folder(run, tmp_path, monkeypatch, capsys):
    home = tmp_path / "home"
    home.mkdir()
    (home / "runs").symlink_to(run.parent)
    monkeypatch.setenv("HOME", str(home))
    assert _main(monkeypatch, "translate", "--checkpoint", f"~/runs/{run.name}", SENTENCE) == 0
    assert capsys.readouterr().out.strip()


def _translate_bytes(run, data: bytes, stdout=subprocess.PIPE) -> subprocess.CompletedProcess:
    environment = dict(os.environ, PYTHONPATH=str(ROOT), MINITRANSFORMER_MALLOC="0")
    return subprocess.run([sys.executable, "-m", "minitransformer", "translate", "--checkpoint", str(run), "--greedy"],
                          input=data, stdout=stdout, stderr=subprocess.PIPE, cwd=ROOT, env=environment, timeout=300)


def test_translate_drops_a_byte_order_mark_read_from_stdin(run):
    """The corpus reader drops a BOM; translate kept it, as a character of the first word."""
    plain = _translate_bytes(run, f"{SENTENCE}\n{SENTENCE}\n".encode())
    marked = _translate_bytes(run, f"\ufeff{SENTENCE}\r\n{SENTENCE}\r\n".encode())
    assert plain.returncode == marked.returncode == 0, marked.stderr.decode()
    assert marked.stdout == plain.stdout and len(plain.stdout.decode().splitlines()) == 2
    assert marked.stderr == plain.stderr and "ufeff" not in marked.stderr.decode()   # it was named as unseen, \ufeff


@pytest.mark.parametrize("encoding,named", [("utf-16-le", "UTF-16-LE without a byte-order mark"),
                                            ("utf-16", "UTF-16-LE with a byte-order mark")])
def test_translate_refuses_stdin_in_another_encoding_naming_it(run, encoding, named):
    result = _translate_bytes(run, f"{SENTENCE}\n".encode(encoding))
    assert result.returncode == 2 and result.stdout == b"", result.stderr.decode()
    assert named in result.stderr.decode() and "Traceback" not in result.stderr.decode()


def test_translate_into_a_closed_pipe_exits_quietly(run):
    """`translate … | head -1`: the reader goes away, and a BrokenPipeError traceback used to follow."""
    read_end, write_end = os.pipe()
    os.close(read_end)                              # nobody reads: the first write fails with EPIPE
    try:
        result = _translate_bytes(run, f"{SENTENCE}\n".encode() * 3, stdout=write_end)
    finally:
        os.close(write_end)
    assert result.returncode == 141, result.stderr.decode()
    assert "Traceback" not in result.stderr.decode() and "BrokenPipe" not in result.stderr.decode()
    assert "error" not in result.stderr.decode()


def test_attention_with_an_out_inside_a_file_is_refused_before_translating(run, tmp_path, monkeypatch, capsys):
    """--out README.md/x.png translated first, then failed with FileExistsError."""
    (tmp_path / "README.md").write_text("mine\n", encoding="utf-8")
    for out in (tmp_path / "README.md" / "x.png", tmp_path / "README.md" / "deeper" / "x.png"):
        assert _main(monkeypatch, "attention", "--checkpoint", run, "--out", out, SENTENCE) == 2
        captured = capsys.readouterr()
        assert f"{tmp_path / 'README.md'} is a file, not a folder" in captured.err
        assert "output:" not in captured.out                    # refused before the model translated
    assert (tmp_path / "README.md").read_text(encoding="utf-8") == "mine\n"
