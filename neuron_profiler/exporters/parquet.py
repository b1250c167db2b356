"""Trace or multi-rank run -> one Parquet dataset per table, hive-partitioned by rank (needs pyarrow:
``pip install 'neuron-profiler[parquet]'``).

    out/<table>/rank=<R>/part-<window>.parquet

One file per trace (a rank's profiler window ``header.window_index``), written row group by row group with
bounded memory. Columns keep the trace's names and units (int64 ns, bytes; string columns dictionary-encoded)
plus ``row``, the row id that REF columns refer to; in ``tracks`` the track's own ``rank`` column is stored as
``track_rank`` (the partition key ``rank`` is the trace's rank). Each file's key-value metadata holds its trace's
header (``neuron_profiler.header``: ``MessageToDict`` JSON), format version, source file and loss report.
DuckDB: ``read_parquet('out/instructions/*/*.parquet', hive_partitioning = true)``; pyarrow:
``pyarrow.dataset.dataset('out/instructions', partitioning='hive')``.
"""
from __future__ import annotations

import contextlib
import json
import os
from collections.abc import Iterable
from pathlib import Path

import numpy as np
import pandas as pd

from neuron_profiler.exporters.common import BATCH_ROWS, MissingExtraError, opened
from neuron_profiler.trace import TABLES, TraceFile, TraceFormatError, simulation_note
from neuron_profiler.trace.columns import columns_of
from neuron_profiler.trace.files import atomic_output

#: The tracks table's own rank column is renamed so it does not clash with the partition key.
TRACK_RANK = "track_rank"


def _pyarrow():
    try:
        import pyarrow as pa
        import pyarrow.parquet as pq
    except ImportError:
        raise MissingExtraError("Parquet export needs pyarrow: pip install 'neuron-profiler[parquet]'") from None
    return pa, pq


def trace_files(src: str | os.PathLike | TraceFile | Iterable[str | os.PathLike | TraceFile]) -> list:
    """The traces of ``src``: one trace (path or ``TraceFile``), a directory of ``*.nprof`` (a run, searched
    recursively), or a list of paths or ``TraceFile`` objects."""
    if isinstance(src, TraceFile):
        return [src]
    if isinstance(src, (str, os.PathLike)):
        p = Path(src)
        if p.is_dir():
            files = sorted(q for q in p.rglob("*.nprof") if q.is_file())
            if not files:
                raise TraceFormatError(f"{p}: no .nprof traces in this directory")
            return files
        return [p]
    return list(src)


def export_parquet(src: str | os.PathLike | TraceFile | Iterable[str | os.PathLike | TraceFile],
                   out_dir: str | os.PathLike) -> list[Path]:
    """Write every table of every trace of ``src`` (see ``trace_files``) into ``out_dir`` as datasets partitioned
    by rank; returns the files written. Two traces with the same rank and window raise ``TraceFormatError``."""
    _pyarrow()
    out = Path(out_dir)
    made: list[Path] = []  # the folders this call created: removed again (when left empty) if it fails
    written: list[Path] = []
    try:
        _mkdirs(out, made)
        seen: dict[tuple[int, int], tuple[str, str]] = {}
        for f in trace_files(src):
            with opened(f) as tf:
                key = (int(tf.header.rank), int(tf.header.window_index))
                if key in seen:
                    raise TraceFormatError(f"{tf.path}: rank {key[0]} window {key[1]} is already exported from "
                                           f"{seen[key][0]} (run {seen[key][1]!r}, this one {tf.header.run_id!r}); "
                                           f"a dataset holds one run: export each run to its own directory")
                seen[key] = (str(tf.path), tf.header.run_id)
                _export_trace(tf, out, made, written)
    except BaseException:  # a full disk, Ctrl-C, a bad trace: nothing of this run stays (a partial dataset
        for p in written:  # would pass for the whole run)
            with contextlib.suppress(OSError):
                p.unlink()
        for d in sorted(made, key=lambda d: len(d.parts), reverse=True):
            with contextlib.suppress(OSError):
                d.rmdir()  # only when empty: never what was there before
        raise
    return written


def _mkdirs(path: Path, made: list[Path]) -> None:
    """``path.mkdir(parents=True, exist_ok=True)``, recording in ``made`` the folders it creates."""
    missing = []
    p = path
    while not p.exists() and p != p.parent:
        missing.append(p)
        p = p.parent
    for d in reversed(missing):
        d.mkdir(exist_ok=True)
        made.append(d)


def _metadata(tf: TraceFile) -> dict[bytes, bytes]:
    from google.protobuf.json_format import MessageToDict

    meta = {"neuron_profiler.header": json.dumps(MessageToDict(tf.header), sort_keys=True),
            "neuron_profiler.format_version": tf.format_version, "neuron_profiler.source": str(tf.path)}
    if tf.header.simulated:  # which model, target and assumptions made the device events (the header has them all)
        meta["neuron_profiler.simulation"] = f"device events {simulation_note(tf.header)}"
    return {k.encode(): v.encode() for k, v in meta.items()}


def _schema(table: str, meta: dict[bytes, bytes]):
    pa, _ = _pyarrow()
    fields = [pa.field("row", pa.int64())]
    for name, c in columns_of(table).items():
        name = TRACK_RANK if table == "tracks" and name == "rank" else name
        typ = {"string": pa.dictionary(pa.int32(), pa.string()), "float": pa.float64()}.get(c.kind, pa.int64())
        fields.append(pa.field(name, typ))
    return pa.schema(fields, metadata=meta)


def _batch(table: str, df: pd.DataFrame, schema):
    pa, _ = _pyarrow()
    arrays = [pa.array(df.index.to_numpy(dtype=np.int64))]
    for name, c in columns_of(table).items():
        s = df[name]
        if c.kind == "string":
            cats = pa.array(np.asarray(s.cat.categories, dtype=object), type=pa.string())
            arrays.append(pa.DictionaryArray.from_arrays(s.cat.codes.to_numpy().astype(np.int32), cats))
        else:
            arrays.append(pa.array(s.to_numpy()))
    return pa.Table.from_arrays(arrays, schema=schema)


def _export_trace(tf: TraceFile, out: Path, made: list[Path], written: list[Path]) -> None:
    _, pq = _pyarrow()
    meta = _metadata(tf)
    rank, window = int(tf.header.rank), int(tf.header.window_index)
    for table in TABLES:
        path = out / table / f"rank={rank}" / f"part-{window:05d}.parquet"
        _mkdirs(path.parent, made)
        schema = _schema(table, meta)
        with atomic_output(path, [tf.path]) as tmp:
            with pq.ParquetWriter(tmp, schema) as w:
                for df in tf.iter_table(table, batch_rows=BATCH_ROWS):
                    w.write_table(_batch(table, df, schema))
                w.add_key_value_metadata({"neuron_profiler.loss": tf.loss_report() or ""})  # known once read
        written.append(path)
