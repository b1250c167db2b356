"""In-memory trace construction for capture, importers and the simulator: add tracks and rows, write once."""
from __future__ import annotations

import os
from collections.abc import Mapping
from pathlib import Path
from typing import Any

import numpy as np
import pandas as pd

from neuron_profiler.trace import framing
from neuron_profiler.trace.columns import TABLES, columns_of
from neuron_profiler.trace.encode import NormalizedBatch, normalize
from neuron_profiler.trace.files import check_not_input
from neuron_profiler.trace.reader import LOSS_KEY, TraceFile, read_trace
from neuron_profiler.trace.strings import CodedStrings, categorical_from_values
from neuron_profiler.trace.writer import DEFAULT_CHUNK_ROWS, TraceWriter
from schemas import pb


class TraceBuilder:
    """Accumulates tables in memory; ``write(path)`` streams them through ``TraceWriter``.

    Row ids are assigned in add order, so a returned id can be stored in REF columns (``framework_op``,
    ``track``, ``parent``) of rows added later or earlier.
    """

    def __init__(self, header: pb.Header) -> None:
        self.header = header
        self.dropped_events: dict[str, int] = {}
        self.footer_metadata: dict[str, str] = {}
        self._batches: dict[str, list[tuple[int, dict[str, Any]]]] = {t: [] for t in TABLES}
        self._rows: dict[str, int] = {t: 0 for t in TABLES}
        self._new_tracks: list[tuple[Any, ...]] = []  # add_track rows after the tracks' batches (rows() counts them)

    def rows(self, table: str) -> int:
        """Rows added to ``table`` so far."""
        columns_of(table)
        return self._rows[table] + (len(self._new_tracks) if table == "tracks" else 0)

    def add_rows(self, table: str, columns: Mapping[str, Any] | pd.DataFrame) -> int:
        """Add a batch (column -> array; scalars broadcast); returns the row id of its first row."""
        if table == "tracks":
            self._batch_new_tracks()
        n, cols = normalize(table, columns)
        spec = columns_of(table)
        for name, v in cols.items():
            if spec[name].kind == "string":
                cols[name] = _string_values(v)
        first = self._rows[table]
        if n:
            self._batches[table].append((n, NormalizedBatch(n, cols)))
            self._rows[table] += n
        return first

    def set_columns(self, table: str, columns: Mapping[str, Any]) -> None:
        """Replace whole numeric columns of the rows added so far (one value per row, in row order), e.g.
        the simulated runtime writing the projected host timeline next to the measured one."""
        if table == "tracks":
            self._batch_new_tracks()
        n, cols = normalize(table, columns)
        if n != self._rows[table]:
            raise ValueError(f"set_columns({table!r}): {n} values for {self._rows[table]} rows")
        spec = columns_of(table)
        for name in cols:
            if spec[name].kind == "string":
                raise ValueError(f"set_columns({table!r}): {name!r} is a string column")
        at = 0
        for m, batch in self._batches[table]:
            for name, arr in cols.items():
                batch[name] = arr[at:at + m]
            at += m

    def add_track(self, kind: str, name: str, parent: int = -1, *, device: int = -1, nc_idx: int = -1,
                  pid: int = 0, tid: int = 0, rank: int = 0, sort_index: int | None = None,
                  unit: str = "") -> int:
        """Add one timeline track; returns its id (for ``parent`` and the events' ``track`` column)."""
        tid_ = self.rows("tracks")
        row = (parent, kind, name, device, nc_idx, pid, tid, rank, tid_ if sort_index is None else sort_index, unit)
        ints = (parent, device, nc_idx, pid, tid, rank, row[8])
        if not (all(type(v) is int and -(2**63) <= v < 2**63 for v in ints) and parent >= -1
                and type(kind) is str and type(name) is str and type(unit) is str):
            normalize("tracks", {f: [v] for f, v in zip(_TRACK_FIELDS, row)})  # raises now on bad values
        self._new_tracks.append(row)
        return tid_

    def _batch_new_tracks(self) -> None:
        """Turn the rows of ``add_track`` calls since the last batch into one batch (validated as any batch):
        an importer adds its tracks one by one, and a batch per track cost ~40 us each."""
        if not self._new_tracks:
            return
        rows, self._new_tracks = self._new_tracks, []
        self.add_rows("tracks", dict(zip(_TRACK_FIELDS, map(list, zip(*rows)))))

    def add_flows(self, src_table: str, src_rows: Any, dst_table: str, dst_rows: Any, kind: str) -> int:
        """Add links src event -> dst event (e.g. host op -> instruction, kind "launch")."""
        for t in (src_table, dst_table):
            columns_of(t)
        return self.add_rows("flows", {"src_table": src_table, "src_row": np.asarray(src_rows, dtype=np.int64),
                                       "dst_table": dst_table, "dst_row": np.asarray(dst_rows, dtype=np.int64),
                                       "kind": kind})

    def table(self, name: str) -> pd.DataFrame:
        """The rows added so far as a DataFrame with the reader's conventions (index = row id)."""
        self._batch_new_tracks()
        spec = columns_of(name)
        batches = self._batches[name]
        data: dict[str, Any] = {}
        for col, c in spec.items():
            if c.kind == "string":
                parts = [_string_column(b[col], n) if col in b else _default(c, n) for n, b in batches]
                vals = np.concatenate(parts) if parts else np.zeros(0, dtype=object)
                data[col] = categorical_from_values(vals)
            else:
                parts = [b[col] if col in b else _default(c, n) for n, b in batches]
                dtype = np.float64 if c.kind == "float" else np.int64
                data[col] = np.concatenate(parts).astype(dtype) if parts else np.zeros(0, dtype=dtype)
        return pd.DataFrame(data, index=pd.RangeIndex(self._rows[name], name="row"),
                            columns=pd.Index(list(spec), dtype=object))

    def write(self, path: str | os.PathLike, *, chunk_rows: int = DEFAULT_CHUNK_ROWS,
              compression: str = framing.DEFAULT_COMPRESSION) -> Path:
        """Write the whole trace to ``path`` (parent directories are created)."""
        self._batch_new_tracks()
        path = Path(path)
        if not path.parent.is_dir():  # one stat; mkdir(exist_ok=True) of an existing folder fails and stats
            path.parent.mkdir(parents=True, exist_ok=True)
        with TraceWriter(path, self.header, chunk_rows=chunk_rows, compression=compression) as w:
            for table, batches in self._batches.items():
                for _, cols in batches:
                    w.append(table, cols)
            w.dropped_events.update(self.dropped_events)
            w.footer_metadata.update(self.footer_metadata)
        return path



_TRACK_FIELDS = ("parent", "kind", "name", "device", "nc_idx", "pid", "tid", "rank", "sort_index", "unit")


def _string_values(v: Any) -> Any:
    """A string column as the builder keeps it until ``write``: a scalar (str or None) or ``CodedStrings`` as is,
    anything else as an object array (missing values are mapped to "" when interned or by ``_string_column``)."""
    if isinstance(v, str) or v is None or type(v) is CodedStrings:
        return v
    return v if isinstance(v, np.ndarray) and v.dtype == object else np.asarray(v, dtype=object)


def _string_column(v: Any, n: int) -> np.ndarray:
    """``n`` python strings ("" for missing) of a string column kept by ``_string_values``."""
    if isinstance(v, str) or v is None:
        out = np.empty(n, dtype=object)
        out[:] = v or ""
        return out
    if type(v) is CodedStrings:
        return v.strings()
    arr = v
    if len(arr) and pd.isna(arr).any():
        arr = arr.copy()
        arr[pd.isna(arr)] = ""
    return arr


def _default(c: Any, n: int) -> np.ndarray:
    if c.kind == "string":
        out = np.empty(n, dtype=object)
        out[:] = ""
        return out
    return np.full(n, c.default, dtype=np.float64 if c.kind == "float" else np.int64)


def write_trace(path: str | os.PathLike, header: pb.Header, tables: Mapping[str, Mapping[str, Any] | pd.DataFrame],
                *, dropped_events: Mapping[str, int] | None = None, chunk_rows: int = DEFAULT_CHUNK_ROWS,
                compression: str = framing.DEFAULT_COMPRESSION) -> Path:
    """One-shot: write ``tables`` (name -> DataFrame or column mapping) with ``header`` to ``path``."""
    b = TraceBuilder(header)
    for name, cols in tables.items():
        b.add_rows(name, cols)
    b.dropped_events.update(dropped_events or {})
    return b.write(path, chunk_rows=chunk_rows, compression=compression)


def rewrite_trace(src: str | os.PathLike | TraceFile, dst: str | os.PathLike, *,
                  compression: str = framing.DEFAULT_COMPRESSION, chunk_rows: int = DEFAULT_CHUNK_ROWS) -> Path:
    """Copy trace ``src`` (a path or an open ``TraceFile``) to ``dst`` with another codec (e.g. ``"zstd"`` for
    smaller archives): same header, rows, row ids, dropped-event counts and footer metadata. One table is held
    in memory at a time (streamed in batches of whole chunks). When ``src`` is partial (its ``loss_report()`` is not
    None), the copy keeps that report
    in its footer metadata (``reader.LOSS_KEY``), so it reports the loss too instead of passing for complete."""
    tf = src if isinstance(src, TraceFile) else read_trace(src)
    try:
        check_not_input(dst, [tf.path])
        with TraceWriter(dst, tf.header, chunk_rows=chunk_rows, compression=compression) as w:
            for table in TABLES:
                expected = 0  # next row id: rows missing from a partial source are filled in
                for df in tf.iter_table(table, batch_rows=chunk_rows * 4):
                    if len(df):
                        w.append(table, _fill_gaps(table, df, expected))
                        expected = int(df.index[-1]) + 1
            w.dropped_events.update(tf.dropped_events)
            w.footer_metadata.update(tf.footer_metadata)
            loss = tf.loss_report()
            if loss:
                w.footer_metadata[LOSS_KEY] = loss
    finally:
        if tf is not src:
            tf.close()
    return Path(dst)


def _fill_gaps(table: str, df: pd.DataFrame, first: int) -> pd.DataFrame | dict[str, Any]:
    """The rows ``first`` to ``df``'s last row id: ``df``, with rows a partial trace is missing (ids in a gap) filled
    with default values, so row ids, which other tables refer to, stay the same in a copy (the copy's loss report
    names the missing rows)."""
    ids = df.index.to_numpy() - first
    n = int(ids[-1]) + 1
    if n == len(df):
        return df
    out: dict[str, Any] = {}
    for name, col in columns_of(table).items():
        if col.kind == "string":
            arr = np.full(n, "", dtype=object)
            arr[ids] = df[name].astype(object).to_numpy()
        else:
            arr = np.full(n, col.default, dtype=np.float64 if col.kind == "float" else np.int64)
            arr[ids] = df[name].to_numpy()
        out[name] = arr
    return out
