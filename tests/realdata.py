"""Where the tests find real data: the shared real torch.profiler traces and the bundled sample traces.

Import from test modules as ``from realdata import real_trace`` (not from ``conftest``: several
conftest modules exist, and which one ``import conftest`` finds depends on the order of collection).
"""
from __future__ import annotations

import os
import shutil
from pathlib import Path

import pytest

REPO = Path(__file__).resolve().parents[1]
#: The 12 real traces ship with the repository (tests/data/realtraces, SOURCES.md there gives sources and licences);
#: NEURON_PROFILER_REALTRACES points the tests at another folder with the same layout.
REALTRACES = Path(os.environ.get("NEURON_PROFILER_REALTRACES", REPO / "tests" / "data" / "realtraces"))
SAMPLE_TRACES = REPO / "sample_traces"

#: The 12 real traces described in tests/data/realtraces/SOURCES.md, relative to that folder.
REAL_TRACE_FILES = (
    "kineto/docs_traces/after_fix_trace.json",
    "kineto/docs_traces/before_fix_trace.json",
    "TraceLens/h100/gaunernst_bert-small-uncased__1016001.json.gz",
    "TraceLens/torch_compile_triton/trace.json.gz",
    "HolisticTraceAnalysis/critical_path/alexnet/benchmark_result_2869224_1695835535_trace.json.gz",
    "HolisticTraceAnalysis/trace_filter/sampled_rank-0.json.gz",
    "HolisticTraceAnalysis/trace_filter/sampled_rank-1.json.gz",
    "HolisticTraceAnalysis/nccl_parser_config/nccl_data.json.gz",
    "HolisticTraceAnalysis/mtia_inference_trace/mtia_inference_rank_0.json.gz",
    "HolisticTraceAnalysis/df_index_resolver/df_index_resolver.json.gz",
    "HolisticTraceAnalysis/cpu_only/rank-34.Jul_15_10_52_41.1074.pt.trace.json.gz",
    "HolisticTraceAnalysis/triton_example/triton_example.json.gz",
)

#: The largest real trace (216k events): its whole-trace tests take over 5 s, so they carry the slow marker.
LARGEST_REAL_TRACE = "HolisticTraceAnalysis/df_index_resolver/df_index_resolver.json.gz"

#: REAL_TRACE_FILES as parameters (same ids), the largest one marked slow.
REAL_TRACE_PARAMS = tuple(pytest.param(rel, id=rel, marks=pytest.mark.slow if rel == LARGEST_REAL_TRACE else ())
                          for rel in REAL_TRACE_FILES)


def real_trace(relpath: str) -> Path:
    """Path of one real trace; fails (not skips) when missing, since they ship with the repo."""
    p = REALTRACES / relpath
    assert p.is_file(), f"real trace {p} is missing (tests/data/realtraces/SOURCES.md; NEURON_PROFILER_REALTRACES)"
    return p


def sample_trace(name: str) -> Path:
    """Path of a bundled sample trace; fails (not skips) when missing, since they ship with the repo."""
    p = SAMPLE_TRACES / name
    assert p.is_file(), f"bundled sample trace {p} is missing; run `python sample_traces/regenerate.py`"
    return p


def chromium_path() -> str:
    """Debian's Chromium for browser tests. In CI (CI=true) its absence is a failure, locally a skip."""
    exe = shutil.which("chromium") or ("/usr/bin/chromium" if Path("/usr/bin/chromium").exists() else None)
    if exe is None:
        if os.environ.get("CI") == "true":
            pytest.fail("chromium is not installed; .ci/run must install Debian's chromium package")
        pytest.skip("chromium is not installed (apt-get install -y chromium) - browser tests skipped")
    return exe


def explorer_fixture():
    """The Neuron Explorer profile fixture module of the importer tests (``tests/neuron_profiler/
    explorer_fixture.py``, written from the published schema 7.4.0), loaded once by path: that folder is
    not on every test directory's import path."""
    import importlib.util
    import sys

    if "explorer_fixture" in sys.modules:
        return sys.modules["explorer_fixture"]
    path = Path(__file__).resolve().parent / "neuron_profiler" / "explorer_fixture.py"
    spec = importlib.util.spec_from_file_location("explorer_fixture", path)
    mod = importlib.util.module_from_spec(spec)
    sys.modules["explorer_fixture"] = mod
    spec.loader.exec_module(mod)
    return mod
