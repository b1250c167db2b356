"""Reading a Neuron Explorer Parquet profile directory: ``<Table>.parquet`` or its split parts
``<Table>_0.parquet``, ``<Table>_1.parquet``... (``neuron-explorer view --output-format parquet``)."""
from __future__ import annotations

import os
from pathlib import Path

import pandas as pd

from neuron_profiler.importers.neuron_explorer.detect import find_profiles, table_of
from neuron_profiler.trace.errors import NotATraceError, TraceFormatError


def _pyarrow():
    try:
        import pyarrow as pa
        import pyarrow.parquet as pq
    except ImportError:
        raise TraceFormatError("reading a Neuron Explorer Parquet profile needs pyarrow: "
                               "pip install 'neuron-profiler[parquet]'") from None
    return pa, pq


def profile_dir(path: str | os.PathLike) -> Path:
    """The profile directory at or below ``path`` (exactly one is expected)."""
    root = Path(path)
    found = find_profiles(root)
    if not found:
        raise NotATraceError(f"{root}: no Neuron Explorer Parquet profile (expected <Table>.parquet files such "
                             f"as Instruction.parquet, Metadata.parquet of schema 7.4.0)")
    if len(found) > 1:
        names = ", ".join(str(p.relative_to(root)) for p in found[:5])
        raise TraceFormatError(f"{root}: {len(found)} Neuron Explorer profiles ({names}...); open one of them")
    return found[0]


def _read(pq, pa, files: list[Path]) -> pd.DataFrame:
    """Concatenate the parts; integer columns stay exact int64 (nullable when they have nulls)."""
    def ints(t: pa.DataType):
        return pd.Int64Dtype() if pa.types.is_integer(t) else None
    frames = []
    for f in files:
        try:
            frames.append(pq.read_table(f).to_pandas(types_mapper=ints))
        except (OSError, pa.ArrowException) as exc:
            raise TraceFormatError(f"{f}: unreadable Parquet file ({exc})") from exc
    return pd.concat(frames, ignore_index=True) if len(frames) > 1 else frames[0]


def read_tables(path: str | os.PathLike) -> dict[str, pd.DataFrame]:
    """Every Explorer table of the profile at ``path``, by name (parts in numeric order)."""
    pa, pq = _pyarrow()
    d = profile_dir(path)
    parts: dict[str, list[tuple[int, Path]]] = {}
    for f in d.iterdir():
        t = table_of(f)
        if t is not None and f.is_file():
            stem = f.name[: -len(".parquet")]
            idx = int(stem[len(t) + 1:]) if stem != t else -1
            parts.setdefault(t, []).append((idx, f))
    return {t: _read(pq, pa, [f for _, f in sorted(fs)]) for t, fs in sorted(parts.items())}


def read_table(path: str | os.PathLike, table: str) -> pd.DataFrame | None:
    """One Explorer table of the profile at ``path``, or None when absent."""
    pa, pq = _pyarrow()
    d = profile_dir(path)
    files = sorted((int(f.stem[len(table) + 1:]) if f.stem != table else -1, f) for f in d.iterdir()
                    if f.is_file() and table_of(f) == table)
    return _read(pq, pa, [f for _, f in files]) if files else None
