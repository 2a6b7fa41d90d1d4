"""Shared test settings: the gpu marker skips cleanly where CuPy sees no device."""
from __future__ import annotations

import numpy as np
import pytest

import minitransformer as mt


def pytest_collection_modifyitems(config, items):
    if mt.cuda_available():
        return
    skip = pytest.mark.skip(reason="needs CuPy and a CUDA GPU (pip install cupy-cuda12x or cupy-cuda13x)")
    for item in items:
        if "gpu" in item.keywords:
            item.add_marker(skip)


@pytest.fixture
def rng():
    """A seeded generator, so every test draws the same numbers on every run."""
    return np.random.default_rng(0)
