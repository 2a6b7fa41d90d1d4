"""minitransformer._malloc: glibc's thresholds are raised only where that is possible and wanted."""
import platform

import pytest

from minitransformer import _malloc

ON_GLIBC = platform.system() == "Linux" and platform.libc_ver()[0] == "glibc"


def test_opting_out_leaves_malloc_alone(monkeypatch):
    monkeypatch.setenv("MINITRANSFORMER_MALLOC", "0")
    assert _malloc.keep_freed_memory() is False


@pytest.mark.parametrize("variable", ["MALLOC_MMAP_THRESHOLD_", "MALLOC_TRIM_THRESHOLD_", "GLIBC_TUNABLES"])
def test_the_users_own_malloc_settings_win(monkeypatch, variable):
    monkeypatch.delenv("MINITRANSFORMER_MALLOC", raising=False)
    monkeypatch.setenv(variable, "65536" if variable != "GLIBC_TUNABLES" else "glibc.malloc.trim_threshold=65536")
    assert _malloc.keep_freed_memory() is False


@pytest.mark.skipif(not ON_GLIBC, reason="mallopt thresholds exist on Linux with glibc only")
def test_glibc_accepts_the_thresholds(monkeypatch):
    for name in ("MINITRANSFORMER_MALLOC", *_malloc._USER_SETTINGS):
        monkeypatch.delenv(name, raising=False)
    assert _malloc.keep_freed_memory() is True


def test_elsewhere_it_is_a_no_op(monkeypatch):
    for name in ("MINITRANSFORMER_MALLOC", *_malloc._USER_SETTINGS):
        monkeypatch.delenv(name, raising=False)
    monkeypatch.setattr(_malloc.platform, "system", lambda: "Darwin")
    assert _malloc.keep_freed_memory() is False
