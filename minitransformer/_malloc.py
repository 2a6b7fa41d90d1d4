"""Let glibc's malloc keep freed memory, so each training step reuses the last step's pages (Linux).

A NumPy model allocates a fresh array for almost every intermediate result, and
frees it a moment later. glibc hands blocks above its *mmap threshold* (128 KiB
at start, raised automatically only up to 32 MiB) straight back to the kernel
with ``munmap``, and gives back the top of the heap whenever more than the *trim
threshold* is free. The next step asks for arrays of the same sizes again and
gets brand-new pages: the kernel zero-fills every 4 KiB page on first touch (a
page fault each), which can cost more than the arithmetic of an elementwise op
(chapter 10 quotes the faults per step that benchmarks/speed/train_step.py counts).

Raising both thresholds keeps freed blocks inside the process, where the next
allocation of that size picks them up warm. The price: memory is not returned to
the operating system until the process ends (the resident set stays at its peak).
PyTorch on the CPU allocates through the same malloc and takes the same kind of
faults (benchmarks/speed/train_step.py counts them per step for both). The same
settings can be given from outside, before Python starts:

    MALLOC_MMAP_THRESHOLD_=1073741824 MALLOC_TRIM_THRESHOLD_=1073741824 python my_training_script.py

``python -m minitransformer`` applies them itself; set ``MINITRANSFORMER_MALLOC=0``
to opt out. Elsewhere (macOS, Windows, musl) ``keep_freed_memory`` does nothing.
"""
from __future__ import annotations

import ctypes
import ctypes.util
import os
import platform

OPT_OUT_VARIABLE = "MINITRANSFORMER_MALLOC"
THRESHOLD = 1 << 30                 # 1 GiB: larger than any array a step allocates
_M_TRIM_THRESHOLD = -1              # mallopt parameter numbers, from glibc's <malloc.h>
_M_MMAP_THRESHOLD = -3
_USER_SETTINGS = ("MALLOC_MMAP_THRESHOLD_", "MALLOC_TRIM_THRESHOLD_", "GLIBC_TUNABLES")


def keep_freed_memory(threshold: int = THRESHOLD) -> bool:
    """Raise glibc's mmap and trim thresholds to ``threshold`` bytes; True if that was done.

    Does nothing (returns False) when not on glibc, when ``MINITRANSFORMER_MALLOC=0``,
    or when the user already chose malloc settings through the environment.
    """
    if os.environ.get(OPT_OUT_VARIABLE, "1") == "0" or any(name in os.environ for name in _USER_SETTINGS):
        return False
    if platform.system() != "Linux" or platform.libc_ver()[0] != "glibc":
        return False
    try:
        libc = ctypes.CDLL(ctypes.util.find_library("c") or "libc.so.6")
        mallopt = libc.mallopt
    except (OSError, AttributeError):
        return False
    mallopt.argtypes, mallopt.restype = (ctypes.c_int, ctypes.c_int), ctypes.c_int
    value = min(int(threshold), 2**31 - 1)
    return mallopt(_M_MMAP_THRESHOLD, value) == 1 and mallopt(_M_TRIM_THRESHOLD, value) == 1
