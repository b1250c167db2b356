"""Fixtures of the explorer tests: a small served folder with two ranks of a synthetic Neuron trace, a
broken file, and a Kineto (GPU) trace copied from the real traces (skips when they are absent)."""
from __future__ import annotations

import shutil
from pathlib import Path

import pytest
from realdata import explorer_fixture

from neuron_profiler.synthetic_trace import write_synthetic_trace

KINETO_GPU = "TraceLens/h100/gaunernst_bert-small-uncased__1016001.json.gz"


@pytest.fixture(scope="session")
def served_dir(tmp_path_factory) -> Path:
    """``run/rank0000{0,1}_window000.nprof`` (a 2-rank group), ``single.nprof``, ``empty.nprof`` (no
    events) and ``broken.nprof``."""
    d = tmp_path_factory.mktemp("served")
    (d / "run").mkdir()
    for r in range(2):
        write_synthetic_trace(d / "run" / f"rank{r:05d}_window000.nprof", 12_000, rank=r, world_size=2, seed=3)
    write_synthetic_trace(d / "single.nprof", 30_000, seed=7)
    from neuron_profiler.trace import TraceBuilder, make_header

    TraceBuilder(make_header("tests.explorer")).write(d / "empty.nprof")
    (d / "broken.nprof").write_bytes(b"\x89NTRACE\n" + b"\x00garbage" * 20)
    (d / "notes.txt").write_text("not a trace")
    return d


@pytest.fixture(scope="session")
def gpu_dir(tmp_path_factory, realtraces_dir) -> Path:
    """A folder holding a copy (outside the repo) of a real single-GPU Kineto trace (H100, bert-small)."""
    src = realtraces_dir / KINETO_GPU
    assert src.is_file(), f"real trace {src} is missing (tests/data/realtraces/SOURCES.md)"
    d = tmp_path_factory.mktemp("gpu")
    shutil.copy(src, d / src.name)
    return d


@pytest.fixture(scope="session")
def explorer_imports(tmp_path_factory) -> Path:
    """A folder with ``ne_parquet.nprof`` and ``ne_json.nprof``: the Neuron Explorer Parquet profile and its
    JSON export, each imported through ``neuron-trace import`` (the CLI's main)."""
    import warnings

    pytest.importorskip("pyarrow")
    from neuron_profiler.cli import main

    fx = explorer_fixture()
    src = tmp_path_factory.mktemp("ne-src")
    out = tmp_path_factory.mktemp("ne-served")
    profile = fx.write_parquet_profile(src / "parquet")
    export = fx.write_json_export(src / "export.json")
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")  # the fixture lacks optional fields: the importer warns about them
        for name, path in (("ne_parquet", profile), ("ne_json", export)):
            assert main(["import", str(path), "-o", str(out / f"{name}.nprof")]) == 0
    return out
