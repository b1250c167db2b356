"""Shared fixtures. Data locations and helpers live in ``realdata.py``."""
from __future__ import annotations

import os
from pathlib import Path

import pytest

from realdata import REALTRACES

os.environ.setdefault("KINETO_LOG_LEVEL", "6")


@pytest.fixture(scope="session")
def realtraces_dir() -> Path:
    """The folder of real traces; skips the test with a clear message when it is absent."""
    if not REALTRACES.is_dir():
        pytest.skip(f"real traces folder {REALTRACES} is absent (set NEURON_PROFILER_REALTRACES to it)")
    return REALTRACES


