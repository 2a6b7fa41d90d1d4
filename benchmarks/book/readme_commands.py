"""Run the README's two commands as a newcomer would, and time them.

    python benchmarks/book/readme_commands.py                  # both commands, in a fresh clone of HEAD
    python benchmarks/book/readme_commands.py --only main      # the first one (install, train, translate)
    python benchmarks/book/readme_commands.py --keep /tmp/mt   # leave the clone there afterwards
    python benchmarks/book/readme_commands.py --isa avx2       # as on a machine with AVX2 only (see below)

The script clones the committed tree (HEAD) into an empty folder, takes the first two ```bash blocks
of the clone's README.md (the two commands the README opens with) and runs each with bash in the
clone, exactly as written: a fresh virtual environment, the install from PyPI, then the job. It
records the wall time, the exit code and the machine's load average before and after in
benchmarks/book/results/readme_commands.json, which the README quotes. The main command's run folder
is copied to runs/readme-enja (ignored by git) so that

    python tools/quoted_numbers.py record-run runs/readme-enja

refreshes the default run's figures (default_run.json) from the same run.

The record names the machine kind: the CPU, its vector extensions (AVX2, AVX-512) and the OpenBLAS
kernel NumPy picks (benchmarks/common.py). ``--isa avx2`` runs both commands with NumPy's OpenBLAS on
its Haswell kernel (and PyTorch, where the tests load it, capped at AVX2): on an AVX-512 machine, the
times of the AVX2-only kind (NumPy's own loops capped too: common.ISA_CAPS); its record goes to
readme_commands_avx2.json.
"""
from __future__ import annotations

import argparse
import json
import os
import re
import shutil
import subprocess
import sys
import tempfile
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))   # benchmarks/: common.py

from common import ISA_CAPS, apply_isa, machine_record  # noqa: E402

ROOT = Path(__file__).resolve().parents[2]
RESULTS = Path(__file__).resolve().parent / "results" / "readme_commands.json"
NAMES = ("main", "tests")     # the order in which the README gives them


def readme_commands(readme: Path) -> dict[str, str]:
    blocks = re.findall(r"```bash\n(.*?)```", readme.read_text(encoding="utf-8"), flags=re.S)
    if len(blocks) < 2:
        raise SystemExit(f"{readme}: expected two ```bash blocks at the top, found {len(blocks)}")
    return {name: block.strip() for name, block in zip(NAMES, blocks)}


def run(command: str, cwd: Path, log: Path) -> dict:
    load_before = os.getloadavg()[0]
    started = time.monotonic()
    with log.open("w", encoding="utf-8") as out:
        code = subprocess.run(["bash", "-c", command], cwd=cwd, stdout=out, stderr=subprocess.STDOUT,
                              env={k: v for k, v in os.environ.items() if k not in ("PYTHONPATH", "VIRTUAL_ENV")}
                              ).returncode
    seconds = time.monotonic() - started
    lines = [line for line in log.read_text(encoding="utf-8", errors="replace").splitlines() if line.strip()]
    return {"command": command, "exit_code": code, "last_line": lines[-1][-200:] if lines else "",
            "seconds": round(seconds, 1),
            "minutes": round(seconds / 60, 1), "load_before": round(load_before, 2),
            "load_after": round(os.getloadavg()[0], 2)}


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--only", choices=NAMES, help="run one of the two commands")
    parser.add_argument("--keep", type=Path, help="clone into this (new) folder and keep it")
    parser.add_argument("--results", type=Path, default=None,
                        help=f"default {RESULTS.relative_to(ROOT)} (with --isa avx2: readme_commands_avx2.json)")
    parser.add_argument("--isa", choices=tuple(ISA_CAPS), default="native",
                        help="avx2: cap NumPy's OpenBLAS (and PyTorch) at AVX2, the AVX2-only machine kind")
    args = parser.parse_args(argv)
    if args.results is None:
        args.results = RESULTS if args.isa == "native" else RESULTS.with_name(f"{RESULTS.stem}_{args.isa}.json")
    apply_isa(args.isa)

    scratch = None
    if args.keep is None:
        scratch = tempfile.TemporaryDirectory(prefix="mt-readme-")
        clone = Path(scratch.name) / "minitransformer"
    else:
        clone = args.keep
        if clone.exists():
            raise SystemExit(f"--keep {clone}: exists already; name a new folder")
    subprocess.run(["git", "clone", "-q", str(ROOT), str(clone)], check=True)
    commit = subprocess.run(["git", "rev-parse", "--short", "HEAD"], cwd=clone, capture_output=True,
                            text=True, check=True).stdout.strip()
    commands = readme_commands(clone / "README.md")
    previous = json.loads(args.results.read_text(encoding="utf-8")) if args.results.is_file() else {}
    record = {"source": "python benchmarks/book/readme_commands.py" + (f" --isa {args.isa}" if args.isa != "native" else ""),
              "commit": commit, "cpus": os.cpu_count(), "python": sys.version.split()[0], "isa": args.isa,
              "machine": machine_record(), **{k: v for k, v in previous.items() if k in NAMES}}
    failed = False
    for name in NAMES:
        if args.only not in (None, name):
            continue
        print(f"running the README's {name} command in {clone} ...", flush=True)
        log = clone.parent / f"{clone.name}-readme-{name}.log"     # beside the clone: the clone stays as cloned
        record[name] = {**run(commands[name], clone, log), "kind": record["machine"]["kind"]}
        print(f"  exit {record[name]['exit_code']} after {record[name]['seconds']:.0f} s "
              f"(load {record[name]['load_before']} -> {record[name]['load_after']}); log: {log}", flush=True)
        if record[name]["exit_code"] != 0:
            failed = True
            print(log.read_text(encoding="utf-8")[-3000:])
        if name == "main" and (clone / "runs" / "enja" / "results.json").is_file():
            target = ROOT / "runs" / "readme-enja"
            shutil.rmtree(target, ignore_errors=True)
            shutil.copytree(clone / "runs" / "enja", target)
            print(f"  run folder copied to {target}: python tools/quoted_numbers.py record-run runs/readme-enja")
    args.results.parent.mkdir(parents=True, exist_ok=True)
    args.results.write_text(json.dumps(record, indent=1) + "\n", encoding="utf-8")
    print(f"wrote {args.results}")
    if scratch is not None and not failed:
        scratch.cleanup()
    return 1 if failed else 0


if __name__ == "__main__":
    sys.exit(main())
