"""bubblewrap's command line for running a student's code: what the sandbox sees, and nothing else.

Standard library only, so that an nbgrader course can carry a copy of this file next to its
nbgrader_config.py (nbgrader.py) and sandbox its kernels without the teacher's package.

The sandbox sees, read-only: the system's libraries (/usr, /lib...), the Python runtime, and whatever
the caller binds (the graded package, a notebook's folder). Installed packages: for a kernel (an nbgrader
course) the folders the runtime imports them from, with an installed copy of ``minitransformer`` hidden
(it would hold every solution); for ``grade`` only the packages it names (NumPy: ``GRADING_PACKAGES``),
bound in a folder of their own, while every site-packages and dist-packages folder of the runtime, of the
base interpreter behind a virtual environment and of /usr is an empty folder. It has no network, no other
process, no capabilities, its own small /tmp; any folder the caller names as secret that a bound folder
happens to hold is hidden too. ``grade``'s cases and an nbgrader course's kernels also load a seccomp
filter that refuses new processes (fork, vfork, clone without CLONE_THREAD): a case, or a kernel, is one
process, so its memory limit is the submission's.
"""
from __future__ import annotations

import functools
import glob
import os
import platform
import struct
import shutil
import subprocess
import sys
import sysconfig
from pathlib import Path

SYSTEM = ("/usr", "/bin", "/lib", "/lib32", "/lib64", "/libx32", "/etc/alternatives", "/etc/ld.so.cache")
HIDDEN_PACKAGES = ("minitransformer",)
GRADING_PACKAGES = ("numpy",)      # what a graded case may import besides the standard library and the package
PACKAGES_INSIDE = "/sandbox/site"  # where they are bound


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


def package_folders() -> list[str]:
    """Every folder installed packages can be imported from: the runtime's (site_directories), the base
    interpreter's behind a virtual environment, and /usr's (Debian's dist-packages), whether on sys.path or not."""
    found = list(site_directories())
    for prefix in {*runtime_folders(), sys.base_prefix, sys.prefix, "/usr", "/usr/local"}:
        for pattern in ("lib/python3*/site-packages", "lib/python3*/dist-packages", "lib/python3/dist-packages",
                        "lib64/python3*/site-packages", "local/lib/python3*/site-packages",
                        "local/lib/python3*/dist-packages"):
            for folder in glob.glob(os.path.join(prefix, pattern)):
                if os.path.isdir(folder) and folder not in found:
                    found.append(folder)
    return found


def package_binds(names) -> list[tuple[str, str]]:
    """(source, inside) for each of the top-level packages ``names`` (and a wheel's ``NAME.libs`` beside it),
    from the first folder of site_directories() that holds it; inside, all in PACKAGES_INSIDE."""
    binds = []
    for name in names:
        for site in site_directories():
            if os.path.isdir(os.path.join(site, name)):
                for entry in (name, name + ".libs"):
                    if os.path.isdir(os.path.join(site, entry)):
                        binds.append((os.path.join(site, entry), f"{PACKAGES_INSIDE}/{entry}"))
                break
        else:
            raise RuntimeError(f"the grader needs the package {name!r}, which is not installed here")
    return binds


# -- seccomp: no new processes in a case (classic BPF on struct seccomp_data: nr at 0, arch at 4, args at 16)
_ARCHES = {"x86_64": (0xC000003E, {"clone": 56, "fork": 57, "vfork": 58, "clone3": 435}),
           "aarch64": (0xC00000B7, {"clone": 220, "clone3": 435})}
_LD, _JEQ, _JSET, _JGE, _RET = 0x20, 0x15, 0x45, 0x35, 0x06
_ALLOW, _KILL, _ERRNO = 0x7FFF0000, 0x80000000, 0x00050000
_EPERM, _ENOSYS, _CLONE_THREAD = 1, 38, 0x00010000


def seccomp_program() -> bytes | None:
    """A seccomp filter (as bwrap --seccomp reads it) that refuses new processes: fork and vfork fail with
    EPERM, clone unless it makes a thread (CLONE_THREAD) too, clone3 says ENOSYS (so that the C library
    falls back to clone, whose flags a filter can read). None on an architecture it does not know."""
    known = _ARCHES.get(platform.machine())
    if known is None:
        return None
    arch, numbers = known
    ins = []

    def op(code, k, jt=0, jf=0):
        ins.append((code, jt, jf, k))

    refused = [numbers[n] for n in ("fork", "vfork") if n in numbers]
    # 0: arch check; 2: load nr; then one jump per refused call, clone3, clone; then the verdicts
    op(_LD, 4)
    op(_JEQ, arch, 1, 0)
    op(_RET, _KILL)
    op(_LD, 0)
    if platform.machine() == "x86_64":
        op(_JGE, 0x40000000, 0, 1)                  # the x32 ABI's numbers: refused wholesale
        op(_RET, _ERRNO | _EPERM)
    for number in refused:
        op(_JEQ, number, 0, 1)
        op(_RET, _ERRNO | _EPERM)
    op(_JEQ, numbers["clone3"], 0, 1)
    op(_RET, _ERRNO | _ENOSYS)
    op(_JEQ, numbers["clone"], 0, 1 + 3)
    op(_LD, 16)                                     # clone's flags (the low word of its first argument)
    op(_JSET, _CLONE_THREAD, 0, 1)
    op(_RET, _ALLOW)
    op(_RET, _ERRNO | _EPERM)
    op(_RET, _ALLOW)
    return b"".join(struct.pack("<HBBI", *i) for i in ins)


def seccomp_file() -> int | None:
    """An inheritable file descriptor holding seccomp_program(), for bwrap --seccomp (None where unknown)."""
    program = seccomp_program()
    if program is None:
        return None
    fd = os.memfd_create("mt-seccomp", 0)
    os.write(fd, program)
    os.lseek(fd, 0, os.SEEK_SET)
    os.set_inheritable(fd, True)
    return fd


def arguments(read_only: list[tuple[str, str]] = (), writable: list[tuple[str, str]] = (), secrets=(),
              environment: dict[str, str] | None = None, tmp_bytes: int = 64 * 2 ** 20,
              chdir: str = "/tmp", packages=None, seccomp_fd: int | None = None) -> list[str]:
    """bwrap's arguments up to (and with) ``--``: binds (source, inside) read-only and writable, a clean environment.

    ``packages``: None, every installed package the runtime sees (a kernel's ipykernel...); or the names of the
    only ones the sandbox sees (in PACKAGES_INSIDE, which the caller puts on PYTHONPATH). ``seccomp_fd``: a
    file descriptor from seccomp_file() (the caller passes it on to bwrap)."""
    args = ["bwrap", "--unshare-all", "--die-with-parent", "--new-session", "--cap-drop", "ALL",
            "--hostname", "sandbox", "--clearenv"]
    for system in SYSTEM:
        args += ["--ro-bind-try", system, system]
    # The sandbox's own /tmp first, and the runtime bound after it: a runtime that lives under /tmp (a clone
    # in /tmp with its .venv) must show through, not be hidden by the empty tmpfs.
    args += ["--proc", "/proc", "--dev", "/dev", "--size", str(tmp_bytes), "--tmpfs", "/tmp"]
    bound = [*SYSTEM, *runtime_folders(), *site_directories()]
    for folder in runtime_folders() + ([] if packages is not None else site_directories()):
        args += ["--ro-bind", folder, folder]
    if packages is not None:
        for folder in package_folders():
            if any(Path(folder).resolve().is_relative_to(Path(b).resolve()) for b in bound if os.path.exists(b)):
                args += ["--tmpfs", folder]
        for source, inside in package_binds(packages):
            args += ["--ro-bind", source, inside]
    for source, inside in read_only:
        args += ["--ro-bind", str(source), str(inside)]
    for source, inside in writable:
        args += ["--bind", str(source), str(inside)]
    if packages is None:
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
    if seccomp_fd is not None:
        args += ["--seccomp", str(seccomp_fd)]
    return args + ["--chdir", chdir, "--"]


LIMIT = ("import os, resource, sys\n"
         "for name, value in zip(('CPU', 'AS', 'FSIZE', 'CORE', 'NOFILE'), map(int, sys.argv[1:6])):\n"
         "    resource.setrlimit(getattr(resource, 'RLIMIT_' + name), (value, value + 5 * (name == 'CPU')))\n"
         "os.execv(sys.argv[6], sys.argv[6:])\n")


def limited(command: list[str], cpu_seconds: int, memory_bytes: int, file_bytes: int) -> list[str]:
    """``command`` run under resource limits (set by a small Python that then becomes the command)."""
    return [python(), "-S", "-c", LIMIT, str(cpu_seconds), str(memory_bytes), str(file_bytes), "0", "256", *command]
