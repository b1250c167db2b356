"""Shared fixtures. Data locations and helpers live in ``realdata.py``."""
from __future__ import annotations

import os
from pathlib import Path

import pytest
from realdata import REALTRACES

os.environ.setdefault("KINETO_LOG_LEVEL", "6")


@pytest.fixture(scope="session")
def realtraces_dir() -> Path:
    """The folder of real traces (tests/data/realtraces, or NEURON_PROFILER_REALTRACES); fails when absent."""
    assert REALTRACES.is_dir(), f"real traces folder {REALTRACES} is missing (set NEURON_PROFILER_REALTRACES to it)"
    return REALTRACES




@pytest.fixture(autouse=True, scope="session")
def _import_cache_dir(tmp_path_factory):
    """Imports (analysis.load, the explorer, neuron-trace import) cache into a folder of the test session,
    not the user's cache directory."""
    from neuron_profiler.importers import cache

    old = os.environ.get(cache.ENV_VAR)
    os.environ[cache.ENV_VAR] = str(tmp_path_factory.mktemp("import_cache"))
    yield
    if old is None:
        os.environ.pop(cache.ENV_VAR, None)
    else:
        os.environ[cache.ENV_VAR] = old
