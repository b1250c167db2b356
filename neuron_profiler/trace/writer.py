"""The one writer of the trace format: streams chunks with bounded memory.

The file is written under a temporary name beside the target and renamed to it by ``close()`` once the footer
is on disk, so a file under its final name is always complete; an exception (Ctrl-C included) inside
``with TraceWriter(...)`` removes the temporary file and leaves the target as it was. Each chunk is flushed as
soon as it is complete and interned strings are written before the first chunk that uses them, so the
temporary file of a killed process (``partial_path``) still reads back every complete chunk.
"""
from __future__ import annotations

import contextlib
import os
from collections import deque
from collections.abc import Iterator, Mapping
from concurrent.futures import Future, ThreadPoolExecutor
from pathlib import Path
from typing import Any, BinaryIO

import numpy as np

from neuron_profiler.trace import framing
from neuron_profiler.trace.columns import FORMAT_MAJOR, FORMAT_MINOR, STRINGS_TABLE, TABLE_IDS, TIME_COLUMNS, columns_of
from neuron_profiler.trace.encode import encode_chunk, normalize, time_bounds
from neuron_profiler.trace.files import create_partial, discard, output_target
from neuron_profiler.trace.strings import StringTable
from neuron_profiler.trace.workers import submit
from schemas import pb

DEFAULT_CHUNK_ROWS = 65536
MAX_CHUNK_ROWS = framing.MAX_CHUNK_ROWS
#: Chunks compressed on worker threads (lz4, zstd and zlib release the GIL) while the caller fills the next
#: ones; also the most finished-but-unwritten chunks held in memory.
_COMPRESS_THREADS = 2


class NormalizedBatch(dict):
    """A batch of ``rows`` rows already through ``encode.normalize`` (``TraceBuilder`` keeps its batches so):
    ``TraceWriter.append`` takes it without validating and converting it again."""

    def __init__(self, rows: int, columns: dict[str, Any]) -> None:
        super().__init__(columns)
        self.rows = rows


class TraceWriter:
    """Write a trace file incrementally.

    >>> with TraceWriter("run.nprof", make_header(producer="me")) as w:
    ...     w.append("instructions", {"track": 0, "start_ts": ts, "duration_ns": d, "engine": "Tensor"})

    ``append`` takes a mapping (or DataFrame) of column name -> array; scalars broadcast; string columns
    accept str, sequences of str, or pandas Categoricals. It returns the row id of the batch's first row.
    Rows go to ``partial_path`` (a temporary name beside ``path``) until ``close()`` renames it to ``path``;
    ``abort()`` (or an exception leaving the ``with`` block) removes it instead.
    """

    def __init__(self, path: str | os.PathLike, header: pb.Header, *, chunk_rows: int = DEFAULT_CHUNK_ROWS,
                 compression: str = framing.DEFAULT_COMPRESSION, level: int | None = None) -> None:
        if compression not in framing.CODECS:
            raise ValueError(f"unknown compression {compression!r}; valid: {', '.join(framing.CODECS)}")
        if not 1 <= chunk_rows <= MAX_CHUNK_ROWS:
            raise ValueError(f"chunk_rows must be in [1, {MAX_CHUNK_ROWS}], got {chunk_rows}")
        self.path = Path(path)
        self.chunk_rows = chunk_rows
        self.codec = framing.CODECS[compression]
        self.level = level
        self.strings = StringTable()
        self.rows: dict[str, int] = {t: 0 for t in TABLE_IDS if t != STRINGS_TABLE}
        self.dropped_events: dict[str, int] = {}
        self.footer_metadata: dict[str, str] = {}
        self._pending: dict[str, list[dict[str, np.ndarray]]] = {}
        self._pending_rows: dict[str, int] = {}
        self._footer = pb.Footer()
        self._min_ts: int | None = None
        self._max_ts: int | None = None
        self._pool: ThreadPoolExecutor | None = None
        self._inflight: deque[tuple[Future[tuple[bytes, int]], str, int, int, int, int]] = deque()
        header = _checked_header(header)
        self._target = output_target(self.path)
        self.partial_path, fd = create_partial(self._target)
        self._f: BinaryIO | None = os.fdopen(fd, "wb")
        try:
            self._f.write(framing.MAGIC)
            self._write_record(framing.HEADER, header.SerializeToString(), framing.CODEC_NONE, 0)
        except BaseException:
            self.abort()
            raise

    # -- public API -------------------------------------------------------------------------------
    def append(self, table: str, columns: Mapping[str, Any]) -> int:
        """Buffer one batch of rows for ``table``; full chunks are written immediately. Returns first row id."""
        if self._f is None:
            raise ValueError(f"trace writer for {self.path} is closed")
        if type(columns) is NormalizedBatch:  # from TraceBuilder: validated and normalized when added
            n, cols = columns.rows, dict(columns)
        else:
            n, cols = normalize(table, columns)
        spec = columns_of(table)
        for name, v in cols.items():
            if spec[name].kind == "string":
                cols[name] = self.strings.intern_array(v, n)
        first = self.rows[table] + self._pending_rows.get(table, 0)
        if n == 0:
            return first
        self._pending.setdefault(table, []).append(cols)
        self._pending_rows[table] = self._pending_rows.get(table, 0) + n
        if self._pending_rows[table] >= self.chunk_rows:  # a full chunk (else nothing to write yet)
            with self._pipeline(self._pending_rows[table] // self.chunk_rows, self._pending_rows[table]):
                while self._pending_rows[table] >= self.chunk_rows:
                    self._flush_table(table, self.chunk_rows)
        return first

    def flush(self) -> None:
        """Write every buffered row (possibly as short chunks)."""
        with self._pipeline(sum(-(-r // self.chunk_rows) for r in self._pending_rows.values()),
                            sum(self._pending_rows.values())):
            for table in list(self._pending):
                while self._pending_rows.get(table, 0):
                    self._flush_table(table, min(self.chunk_rows, self._pending_rows[table]))
            self._flush_strings()

    def close(self) -> Path:
        """Flush, write the footer index and trailer, close the file and rename it to ``path``. Idempotent. On
        failure (e.g. the disk is full) the temporary file is removed and the error propagates."""
        if self._f is None:
            return self.path
        try:
            self._finish()
            os.replace(self.partial_path, self._target)
        except BaseException:
            self.abort()
            raise
        return self.path

    def abort(self) -> None:
        """Stop without finishing: close and remove the temporary file; nothing is written under ``path``."""
        f, self._f = self._f, None
        if f is not None:
            try:
                f.close()
            except OSError:
                pass
        discard(self.partial_path)

    def _finish(self) -> None:
        assert self._f is not None
        self.flush()
        ft = self._footer
        for t, n in self.rows.items():
            ft.table_rows[t] = n
        for k, v in self.dropped_events.items():
            ft.dropped_events[k] = int(v)
        for key, value in self.footer_metadata.items():
            ft.metadata[key] = str(value)
        ft.min_ts = self._min_ts or 0
        ft.max_ts = self._max_ts or 0
        offset = self._f.tell()
        self._write_record(framing.FOOTER, ft.SerializeToString(), framing.CODEC_NONE, 0)
        self._f.write(framing.TRAILER.pack(offset, framing.END_MAGIC))
        f, self._f = self._f, None
        f.close()

    def __enter__(self) -> TraceWriter:
        return self

    def __exit__(self, exc_type: type[BaseException] | None, *exc: object) -> None:
        if exc_type is None:
            self.close()
        else:  # an error or Ctrl-C while writing: the trace is incomplete, never leave it under its name
            self.abort()

    # -- internals --------------------------------------------------------------------------------
    def _write_record(self, rtype: int, payload: bytes, codec: int, table_id: int) -> int:
        assert self._f is not None
        offset = self._f.tell()
        self._f.write(framing.encode_frame(rtype, payload, codec, table_id))
        self._f.flush()
        return offset

    def _flush_strings(self) -> None:
        new = self.strings.pending()
        if new:
            first = len(self.strings.values) - len(new)
            chunk = pb.Chunk(first_row=first, rows=len(new))
            chunk.strings.value.extend(new)
            self._write_chunk(STRINGS_TABLE, chunk.SerializeToString(), first, len(new), 0, 0)

    def _flush_table(self, table: str, n: int) -> None:
        batches = self._pending[table]
        if len(batches) == 1 and self._pending_rows[table] == n:  # one whole batch: nothing to merge or split
            self._pending[table] = []
            self._pending_rows[table] = 0
            self._write_table_chunk(table, n, batches[0])
            return
        merged: dict[str, np.ndarray] = {}
        names = {k for b in batches for k in b}
        spec = columns_of(table)
        for name in names:
            parts = []
            for b in batches:
                rows = len(next(iter(b.values())))
                parts.append(b[name] if name in b else _default_array(spec[name], rows))
            merged[name] = np.concatenate(parts) if len(parts) > 1 else parts[0]
        head = {k: v[:n] for k, v in merged.items()}
        rest_rows = self._pending_rows[table] - n
        self._pending[table] = [{k: v[n:] for k, v in merged.items()}] if rest_rows else []
        self._pending_rows[table] = rest_rows
        self._write_table_chunk(table, n, head)

    def _write_table_chunk(self, table: str, n: int, head: Mapping[str, np.ndarray]) -> None:
        """Encode and write the next ``n`` rows of ``table`` (its strings first)."""
        spec = columns_of(table)
        raw = encode_chunk(TABLE_IDS[table], self.rows[table], n, spec, head)
        lo, hi = time_bounds(table, head)
        self._flush_strings()  # strings first: a cut file never holds a chunk without its strings
        self._write_chunk(table, raw, self.rows[table], n, lo, hi)
        self.rows[table] += n
        if table in TIME_COLUMNS:
            self._min_ts = lo if self._min_ts is None else min(self._min_ts, lo)
            self._max_ts = hi if self._max_ts is None else max(self._max_ts, hi)

    @contextlib.contextmanager
    def _pipeline(self, chunks: int, rows: int) -> Iterator[None]:
        """Around a batch of ``chunks`` chunk writes holding ``rows`` rows: with 2 or more chunks and at least
        one full chunk's worth of rows, compress them on worker threads (fewer rows compress in about the time
        it takes to start the threads and hand the work over: on a loaded box that wait was ~20 ms, most of a
        small import). Every chunk is on disk, in order, when the batch ends (also when it raises), so the
        crash-safety promise (complete chunks survive a killed process) holds at each return to the caller."""
        if chunks < 2 or rows < self.chunk_rows or self._pool is not None:
            yield
            return
        self._pool = ThreadPoolExecutor(max_workers=_COMPRESS_THREADS)
        try:
            yield
        finally:
            try:
                while self._inflight:
                    self._write_next()
            finally:
                self._pool.shutdown()
                self._pool = None

    def _write_chunk(self, table: str, raw: bytes, first_row: int, rows: int, lo: int, hi: int) -> None:
        """Compress and write one serialized chunk (on a worker thread inside a multi-chunk batch)."""
        if self._pool is None:
            self._write_compressed(table, first_row, rows, lo, hi, self._compress(raw))
            return
        self._inflight.append((submit(self._pool, self._compress, raw), table, first_row, rows, lo, hi))
        if len(self._inflight) > _COMPRESS_THREADS:
            self._write_next()

    def _write_next(self) -> None:
        fut, table, first_row, rows, lo, hi = self._inflight.popleft()
        self._write_compressed(table, first_row, rows, lo, hi, fut.result())

    def _compress(self, raw: bytes) -> tuple[bytes, int]:
        payload = framing.compress(raw, self.codec, self.level)
        return (raw, framing.CODEC_NONE) if len(payload) >= len(raw) else (payload, self.codec)

    def _write_compressed(self, table: str, first_row: int, rows: int, lo: int, hi: int,
                          packed: tuple[bytes, int]) -> None:
        payload, codec = packed
        tid = TABLE_IDS[table]
        offset = self._write_record(framing.CHUNK, payload, codec, tid)
        self._footer.chunks.add(table_id=tid, offset=offset, length=framing.FRAME.size + len(payload),
                                first_row=first_row, rows=rows, min_ts=lo, max_end_ts=hi)


def _default_array(col: Any, n: int) -> np.ndarray:
    if col.kind == "string":
        return np.zeros(n, dtype=np.uint32)
    return np.full(n, col.default, dtype=np.float64 if col.kind == "float" else np.int64)


def _checked_header(header: pb.Header) -> pb.Header:
    if not isinstance(header, pb.Header):
        raise TypeError(f"header must be a schemas.pb.Header, got {type(header).__name__}")
    h = pb.Header()
    h.CopyFrom(header)
    h.format_major, h.format_minor = FORMAT_MAJOR, FORMAT_MINOR  # the layout this writer produces
    return h
