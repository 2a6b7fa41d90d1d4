"""bubblewrap's command line for running a student's code: what the sandbox sees, and nothing else.

Standard library only, so that an nbgrader course can carry a copy of this file next to its
nbgrader_config.py (nbgrader.py) and sandbox its kernels without the teacher's package.

The sandbox sees, read-only: the system's libraries (/usr, /lib...), the Python runtime and the
folders it imports installed packages from, and whatever the caller binds (the graded package, a
notebook's folder). It has no network, no other process, no capabilities, its own small /tmp; an
installed copy of ``minitransformer`` in site-packages is hidden (it would hold every solution), and
so is any folder the caller names as secret that a bound folder happens to hold.
"""
from __future__ import annotations

import functools
import os
import shutil
import subprocess
import sys
import sysconfig
from pathlib import Path

SYSTEM = ("/usr", "/bin", "/lib", "/lib32", "/lib64", "/libx32", "/etc/alternatives", "/etc/ld.so.cache")
HIDDEN_PACKAGES = ("minitransformer",)


def python() -> str:
    return os.path.realpath(sys.executable)


def site_directories() -> list[str]:
    """The folders installed packages are imported from (NumPy, ipykernel...)."""
    paths = []
    for kind in ("purelib", "platlib"):
        path = sysconfig.get_paths().get(kind)
        if path and os.path.isdir(path) and path not in paths:
            paths.append(path)
    for path in sys.path:     # e.g. a base interpreter's site-packages seen through a venv
        if path.endswith(("site-packages", "dist-packages")) and os.path.isdir(path) and path not in paths:
            paths.append(path)
    return paths


def runtime_folders() -> list[str]:
    """The Python runtime itself: its prefixes (stdlib, lib-dynload, a venv's pyvenv.cfg) and its binary's folder."""
    folders = {sys.base_prefix, sys.prefix, os.path.dirname(python())}
    return sorted(f for f in folders if f and os.path.isdir(f))


@functools.lru_cache(maxsize=1)
def problem() -> str | None:
    """None when bubblewrap runs here; else why not, in words."""
    if shutil.which("bwrap") is None:
        return "bubblewrap (bwrap) is not installed: apt-get install bubblewrap (Debian, Ubuntu) or dnf install bubblewrap"
    try:
        probe = subprocess.run(["bwrap", "--unshare-all", "--die-with-parent", "--cap-drop", "ALL",
                                "--ro-bind", "/", "/", "--", "true"], capture_output=True, text=True, timeout=30)
    except (OSError, subprocess.TimeoutExpired) as error:
        return f"bubblewrap does not start: {error}"
    if probe.returncode != 0:
        return f"bubblewrap cannot make a sandbox here: {probe.stderr.strip()[:300]} (user namespaces may be off)"
    return None


def arguments(read_only: list[tuple[str, str]] = (), writable: list[tuple[str, str]] = (), secrets=(),
              environment: dict[str, str] | None = None, tmp_bytes: int = 64 * 2 ** 20,
              chdir: str = "/tmp") -> list[str]:
    """bwrap's arguments up to (and with) ``--``: binds (source, inside) read-only and writable, a clean environment."""
    args = ["bwrap", "--unshare-all", "--die-with-parent", "--new-session", "--cap-drop", "ALL",
            "--hostname", "sandbox", "--clearenv"]
    for system in SYSTEM:
        args += ["--ro-bind-try", system, system]
    # The sandbox's own /tmp first, and the runtime bound after it: a runtime that lives under /tmp (a clone
    # in /tmp with its .venv) must show through, not be hidden by the empty tmpfs.
    args += ["--proc", "/proc", "--dev", "/dev", "--size", str(tmp_bytes), "--tmpfs", "/tmp"]
    bound = [*SYSTEM, *runtime_folders(), *site_directories()]
    for folder in runtime_folders() + site_directories():
        args += ["--ro-bind", folder, folder]
    for source, inside in read_only:
        args += ["--ro-bind", str(source), str(inside)]
    for source, inside in writable:
        args += ["--bind", str(source), str(inside)]
    for site in site_directories():
        for name in HIDDEN_PACKAGES:
            if os.path.isdir(os.path.join(site, name)):
                args += ["--tmpfs", os.path.join(site, name)]
    for secret in secrets:
        secret = Path(secret).resolve()
        if secret.exists() and any(secret.is_relative_to(Path(b).resolve()) for b in bound if os.path.exists(b)):
            args += ["--tmpfs", str(secret)]
    for name, value in (environment or {}).items():
        args += ["--setenv", name, value]
    return args + ["--chdir", chdir, "--"]


LIMIT = ("import os, resource, sys\n"
         "for name, value in zip(('CPU', 'AS', 'FSIZE', 'CORE', 'NOFILE'), map(int, sys.argv[1:6])):\n"
         "    resource.setrlimit(getattr(resource, 'RLIMIT_' + name), (value, value + 5 * (name == 'CPU')))\n"
         "os.execv(sys.argv[6], sys.argv[6:])\n")


def limited(command: list[str], cpu_seconds: int, memory_bytes: int, file_bytes: int) -> list[str]:
    """``command`` run under resource limits (set by a small Python that then becomes the command)."""
    return [python(), "-S", "-c", LIMIT, str(cpu_seconds), str(memory_bytes), str(file_bytes), "0", "256", *command]
