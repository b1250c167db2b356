"""The one reader of the trace format: lazy, per-table and per-time-window loads into pandas.

Robust to bad input: every problem raises a ``TraceFormatError`` subclass naming the file, the byte offset and
what was expected; nothing else escapes (no ``zlib.error``, ``OverflowError`` or ``MemoryError`` from a file's
bytes). Memory is bounded by the file's size (``decode.decode_limit``), checked before allocating. A file cut
short (a killed writer) reads back every complete chunk; a corrupt chunk raises unless ``strict=False``, which
skips it. ``loss_report()`` says in one line what a file is missing, or None when nothing is.
"""
from __future__ import annotations

import os
from collections.abc import Iterable, Iterator
from concurrent.futures import ThreadPoolExecutor

import numpy as np
import pandas as pd

from neuron_profiler.trace import framing
from neuron_profiler.trace.columns import (
    FORMAT_MAJOR,
    FORMAT_MINOR,
    STRINGS_TABLE,
    TABLE_IDS,
    TABLES,
    TIME_COLUMNS,
    columns_of,
)
from neuron_profiler.trace.decode import ChunkError, DecodeBudget, decode_chunk, row_bytes
from neuron_profiler.trace.encode import column_dtype
from neuron_profiler.trace.errors import CorruptTraceError, TraceFormatError
from neuron_profiler.trace.index import ChunkRef
from neuron_profiler.trace.records import LOSS_KEY, RecordFile
from neuron_profiler.trace.strings import categorical_from_ids
from neuron_profiler.trace.workers import submit

#: Threads that checksum, decompress and decode chunks (two: this project's machines have two cores).
_DECODE_THREADS = 2
#: Python bytes per interned string beyond its text (object header, list slot): the strings table's budget.
_STRING_OVERHEAD = 64


class TraceFile(RecordFile):
    """An open trace file (header and chunk index read, checked: see ``records.RecordFile``). Tables are decoded on
    demand with ``table()`` / ``iter_table()``.

    ``max_decoded_bytes`` bounds what one ``table()`` / ``iter_table()`` / ``tables()`` call may materialise
    (default ``decode.decode_limit(size)``: 256x the file size + 64 MiB)."""

    def __init__(self, path: str | os.PathLike, *, strict: bool = True, max_decoded_bytes: int | None = None) -> None:
        super().__init__(path, strict=strict, max_decoded_bytes=max_decoded_bytes)
        try:
            self._strings = self._load_strings()
        except BaseException:
            self.close()
            raise

    # -- properties ------------------------------------------------------------------------------
    @property
    def row_counts(self) -> dict[str, int]:
        """Rows per table (from the footer, else the rows of the chunks found by scanning)."""
        if self.footer is not None:
            return {t: int(self.footer.table_rows.get(t, 0)) for t in TABLES}
        return {t: sum(c.rows for c in self._readable(TABLE_IDS[t])) for t in TABLES}

    @property
    def dropped_events(self) -> dict[str, int]:
        return dict(self.footer.dropped_events) if self.footer is not None else {}

    @property
    def time_range(self) -> tuple[int, int] | None:
        """(first start, last end) in ns over all event tables, None for a trace without events."""
        if self.footer is not None:
            if not any(self.footer.table_rows.get(t, 0) for t in TIME_COLUMNS):
                return None
            return int(self.footer.min_ts), int(self.footer.max_ts)
        lo: int | None = None
        hi: int | None = None  # both set together
        for t, (tcol, dcol) in TIME_COLUMNS.items():  # batch by batch: memory bounded by the batch
            for df in self.iter_table(t, columns=[tcol] + ([dcol] if dcol else []), batch_rows=1 << 18):
                if len(df):
                    start = df[tcol].to_numpy()
                    end = start + df[dcol].to_numpy() if dcol else start
                    lo = int(start.min()) if lo is None else min(lo, int(start.min()))
                    hi = int(end.max()) if hi is None else max(hi, int(end.max()))
        return None if lo is None or hi is None else (lo, hi)

    @property
    def codecs(self) -> dict[str, int]:
        """Chunk count per codec ("lz4", "zstd", "zlib", "none"; chunks that do not shrink are stored raw)."""
        names = {v: k for k, v in framing.CODECS.items()}
        out: dict[str, int] = {}
        for c in self._chunks:
            fr = self._frame_at(c.offset)
            name = names.get(fr.codec, f"codec {fr.codec}") if fr is not None else "unreadable"
            out[name] = out.get(name, 0) + 1
        return out

    @property
    def strings(self) -> np.ndarray:
        return self._strings

    def chunk_index(self, table: str) -> list[ChunkRef]:
        """The readable chunks of ``table`` in row order: byte offset, ``first_row``, ``rows`` and, from the
        footer index (0 without one), ``min_ts`` / ``max_end_ts``."""
        columns_of(table)
        return self._readable(TABLE_IDS[table])

    # -- tables ----------------------------------------------------------------------------------
    def table(self, name: str, columns: Iterable[str] | None = None, start_ns: int | None = None,
              end_ns: int | None = None, *, _budget: DecodeBudget | None = None) -> pd.DataFrame:
        """Decode ``name`` into a DataFrame (index = row id). With ``start_ns``/``end_ns``, only rows whose
        [start, end] overlaps the window (chunks outside it are not decoded)."""
        wanted = self._columns(name, columns)
        windowed = start_ns is not None or end_ns is not None
        tcol, dcol = TIME_COLUMNS.get(name, ("", ""))
        if windowed and not tcol:
            raise ValueError(f"table {name!r} has no time column; it cannot be read by time window")
        window = (-(1 << 62) if start_ns is None else int(start_ns), (1 << 62) if end_ns is None else int(end_ns))
        decode_cols = list(dict.fromkeys(wanted + ([tcol] + ([dcol] if dcol else []) if windowed else [])))
        lo, hi = window
        todo = [c for c in self._readable(TABLE_IDS[name], raise_strict=True) if not (
            windowed and self.footer is not None and c.rows > 0 and (c.max_end_ts < lo or c.min_ts > hi))]
        self._reserve(_budget, name, todo, decode_cols)
        if not windowed and self.footer is not None and self.strict:
            return self._whole_table(name, todo, wanted)
        return self._read_chunks(name, todo, wanted, decode_cols, window if windowed else None)

    def iter_table(self, name: str, columns: Iterable[str] | None = None, *,
                   batch_rows: int = 1 << 20) -> Iterator[pd.DataFrame]:
        """Table ``name`` as consecutive DataFrames of whole chunks, about ``batch_rows`` rows each, in row order
        (index = row id; string columns are Categoricals of each batch's strings): a table of any size streams
        in bounded memory. Unreadable chunks are handled as by ``table()``; at least one (maybe empty) frame."""
        wanted = self._columns(name, columns)
        chunks = self._readable(TABLE_IDS[name], raise_strict=True)
        self._reserve(None, name, chunks, wanted)  # the whole stream stays within what the file may expand to
        group: list[ChunkRef] = []
        rows = yielded = 0
        for c in chunks:
            group.append(c)
            rows += c.rows
            if rows >= batch_rows:
                yield self._read_chunks(name, group, wanted, wanted, None)
                group, rows, yielded = [], 0, yielded + 1
        if group or not yielded:
            yield self._read_chunks(name, group, wanted, wanted, None)

    def _columns(self, name: str, columns: Iterable[str] | None) -> list[str]:
        spec = columns_of(name)
        wanted = list(spec) if columns is None else list(columns)
        bad = [c for c in wanted if c not in spec]
        if bad:
            raise ValueError(f"table {name!r} has no column(s) {bad}; valid columns: {', '.join(spec)}")
        return wanted

    def _reserve(self, budget: DecodeBudget | None, name: str, chunks: list[ChunkRef], cols: list[str]) -> None:
        """Check, before anything is allocated, that decoding ``cols`` of ``chunks`` stays within the budget."""
        budget = budget if budget is not None else DecodeBudget(self.max_decoded_bytes)
        try:
            budget.take(sum(c.rows for c in chunks) * row_bytes(name, cols), f"table {name!r}")
        except ChunkError as e:
            raise self._err(CorruptTraceError, None, str(e)) from None

    def _read_chunks(self, name: str, chunks: list[ChunkRef], wanted: list[str], decode_cols: list[str],
                     window: tuple[int, int] | None) -> pd.DataFrame:
        """The rows of ``chunks`` (those overlapping ``window`` when given) as a DataFrame indexed by row id."""
        spec = columns_of(name)
        tcol, dcol = TIME_COLUMNS.get(name, ("", ""))
        parts: list[dict[str, np.ndarray]] = []
        spans: list[tuple[int, int]] = []  # (first row, rows) of each whole chunk read
        index: list[np.ndarray] = []  # row ids of each chunk after the window filter
        for decoded in self._decoded_chunks(chunks, name, decode_cols):
            if decoded is None:
                continue
            first, rows, cols = decoded
            if window is not None:
                start = cols[tcol]
                end = start + cols[dcol] if dcol else start
                keep = np.nonzero((end >= window[0]) & (start <= window[1]))[0]
                cols = {k: v[keep] for k, v in cols.items()}
                index.append(keep + first)
            spans.append((first, rows))
            parts.append(cols)
        data: dict[str, object] = {}
        for col in wanted:
            if len(parts) == 1:
                arr = parts[0][col]
            elif parts:
                arr = np.concatenate([p[col] for p in parts])
            else:
                arr = np.zeros(0, dtype=column_dtype(spec[col]))
            data[col] = self._categorical(arr, f"{name}.{col}") if spec[col].kind == "string" else arr
        first_row = spans[0][0] if spans else 0
        starts = first_row + np.cumsum([0] + [r for _, r in spans])
        if window is None and all(f == starts[i] for i, (f, _) in enumerate(spans)):
            row_index: pd.Index = pd.RangeIndex(first_row, int(starts[-1]), name="row")  # contiguous ids
        else:
            if window is None:
                index = [np.arange(f, f + r, dtype=np.int64) for f, r in spans]
            row_index = pd.Index(np.concatenate(index) if index else np.zeros(0, dtype=np.int64), name="row")
        return _frame(data, row_index)

    def _whole_table(self, name: str, chunks: list[ChunkRef], wanted: list[str]) -> pd.DataFrame:
        """A whole table of a cleanly closed file read strictly: the checked footer index gives every chunk's rows
        (contiguous from 0), so the worker threads decode straight into preallocated columns."""
        total = sum(c.rows for c in chunks)
        spec = columns_of(name)
        try:
            out: dict[str, np.ndarray] = {col: np.empty(total, dtype=column_dtype(spec[col])) for col in wanted}
        except MemoryError:
            raise self._err(TraceFormatError, None, f"table {name!r} has {total:,} rows by the footer index, "
                            f"too many to load at once here: read fewer columns or a time window "
                            f"(start_ns/end_ns)") from None

        def decode_into(c: ChunkRef) -> None:
            try:
                self._decode_chunk(c, self._chunk_raw(c, self._chunk_limit(c)), name, wanted,
                                   {k: v[c.first_row:c.end_row] for k, v in out.items()})
            except TraceFormatError as e:
                self._mark_unreadable(c, e)
                raise

        if len(chunks) < 2:
            for c in chunks:
                decode_into(c)
        else:
            with ThreadPoolExecutor(max_workers=_DECODE_THREADS) as pool:
                for fut in [submit(pool, decode_into, c) for c in chunks]:
                    fut.result()
        data = {col: self._categorical(arr, f"{name}.{col}") if spec[col].kind == "string" else arr
                for col, arr in out.items()}
        return _frame(data, pd.RangeIndex(total, name="row"))

    def tables(self) -> dict[str, pd.DataFrame]:
        """Every table, fully decoded (all of them together within one ``max_decoded_bytes``)."""
        budget = DecodeBudget(self.max_decoded_bytes)
        return {t: self.table(t, _budget=budget) for t in TABLES}

    def _decode_one(self, c: ChunkRef, table: str, cols: list[str]) -> tuple[int, int, dict] | None:
        try:
            return self._decode_chunk(c, self._chunk_raw(c, self._chunk_limit(c)), table, cols)
        except TraceFormatError as e:
            self._skip_or_raise(c, e)
            return None

    def _decoded_chunks(self, chunks: list[ChunkRef], table: str,
                        cols: list[str]) -> Iterator[tuple[int, int, dict] | None]:
        """(first_row, rows, columns) of each chunk, in order, decoded on worker threads (lz4/zstd/zlib, crc32 and
        numpy's copies release the GIL; upb's parser, only the fallback of ``trace.wire``, holds it)."""
        if len(chunks) < 2:
            for c in chunks:
                yield self._decode_one(c, table, cols)
            return
        with ThreadPoolExecutor(max_workers=_DECODE_THREADS) as pool:
            futures = [submit(pool, self._decode_one, c, table, cols) for c in chunks]
            for fut in futures:
                yield fut.result()

    def _decode_chunk(self, c: ChunkRef, raw: bytes, table: str, cols: list[str],
                      out: dict[str, np.ndarray] | None = None) -> tuple[int, int, dict]:
        """:func:`neuron_profiler.trace.decode.decode_chunk` of chunk ``c``, which must hold the rows the index
        says; with ``out`` (slices of preallocated columns) it decodes into them."""
        try:
            return decode_chunk(raw, table, cols, len(self._strings), out=out, expect=(c.first_row, c.rows))
        except ChunkError as e:
            raise self._err(CorruptTraceError, c.offset, str(e)) from None

    def _load_strings(self) -> np.ndarray:
        values: list[str] = []
        sid = TABLE_IDS[STRINGS_TABLE]
        budget = DecodeBudget(self.max_decoded_bytes)
        for c in self._chunks:
            if c.table_id != sid:
                continue
            try:
                self._read_head(c)  # from its first bytes, before it inflates: a run of zeros is refused here
                raw = self._chunk_raw(c, min(budget.remaining, self._chunk_limit(c)))
                first, rows = self._check_head(c, raw)
                c.first_row, c.rows = first, rows
                budget.take(len(raw) + _STRING_OVERHEAD * rows, "the string table")
                msg = self._parse_chunk(c, raw)
                if first != len(values):
                    raise self._err(CorruptTraceError, c.offset, f"string chunk starts at id {first}, expected "
                                    f"{len(values)} (a string chunk before it is missing or unreadable)")
            except ChunkError as e:
                self._skip_or_raise(c, self._err(CorruptTraceError, c.offset, str(e)))
                break
            except TraceFormatError as e:
                self._skip_or_raise(c, e)
                break  # later ids cannot be placed: chunks that use them are reported unreadable
            values.extend(msg.strings.value)
        if not values:
            values = [""]
        arr = np.empty(len(values), dtype=object)
        arr[:] = values
        return arr

    def _categorical(self, ids: np.ndarray, where: str) -> pd.Categorical:
        try:
            return categorical_from_ids(ids, self._strings)
        except ValueError:  # duplicate strings among the used ones: the string table is corrupt
            raise self._err(CorruptTraceError, None, f"the string table holds duplicate strings ({where})") from None


def _frame(data: dict[str, object], index: pd.Index) -> pd.DataFrame:
    """DataFrame over fresh arrays without copies: copy=False skips the consolidation copy, and integer keys
    skip pandas 3 inferring an Arrow string index for the column names (set afterwards, object dtype)."""
    df = pd.DataFrame(dict(enumerate(data.values())), index=index, copy=False)
    df.columns = pd.Index(list(data), dtype=object)
    return df


def read_trace(path: str | os.PathLike, *, strict: bool = True, max_decoded_bytes: int | None = None) -> TraceFile:
    """Open a trace file (tables load lazily with ``.table(name)``). Raises ``TraceFormatError`` subclasses."""
    return TraceFile(path, strict=strict, max_decoded_bytes=max_decoded_bytes)


__all__ = ["TraceFile", "read_trace", "FORMAT_MAJOR", "FORMAT_MINOR", "LOSS_KEY"]
