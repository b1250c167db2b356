"""The one writer of the trace format: streams chunks with bounded memory.

A write, top to bottom; this module runs each step in order and the modules it names are leaves (none calls back):

1. tables: ``append`` checks a batch and interns its strings into the writer's ``strings.StringTable``
   (``encode.prepare``) and buffers it;
2. encode: once a table holds a chunk's rows, they are cut off its buffer (``encode.take_rows``) and serialized
   (``encode.encode_rows``), after the strings chunk they need (``encode.encode_strings``);
3. frame: the chunk is compressed when that makes it smaller and framed (``framing.chunk_record``; on worker
   threads, ``workers.submit``, when a call writes several chunks) and written in order;
4. index: each record's place is noted (``index.ChunkRef``);
5. footer: ``close`` writes the footer built from those notes (``index.build_footer``) and the trailer.

The header is the first record, written when the writer opens. The file is written under a temporary name beside
the target and renamed to it by ``close()`` once the footer is on disk, so a file under its final name is always
complete; an exception (Ctrl-C included) inside ``with TraceWriter(...)`` removes the temporary file and leaves
the target as it was. Each chunk is flushed as soon as it is complete and interned strings are written before
the first chunk that uses them, so the temporary file of a killed process (``partial_path``) still reads back
every complete chunk.
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
from neuron_profiler.trace.columns import FORMAT_MAJOR, FORMAT_MINOR, STRINGS_TABLE, TABLE_IDS
from neuron_profiler.trace.encode import NormalizedBatch, encode_rows, encode_strings, prepare, take_rows
from neuron_profiler.trace.files import create_partial, discard, output_target
from neuron_profiler.trace.index import ChunkRef, build_footer
from neuron_profiler.trace.strings import StringTable
from neuron_profiler.trace.workers import submit
from schemas import pb

DEFAULT_CHUNK_ROWS = 65536
MAX_CHUNK_ROWS = framing.MAX_CHUNK_ROWS
#: Chunks compressed on worker threads (lz4, zstd and zlib release the GIL) while the caller fills the next
#: ones; also the most finished-but-unwritten chunks held in memory.
_COMPRESS_THREADS = 2

__all__ = ["TraceWriter", "NormalizedBatch", "DEFAULT_CHUNK_ROWS", "MAX_CHUNK_ROWS"]


class TraceWriter:
    """Write a trace file incrementally.

    >>> with TraceWriter("run.nprof", make_header(producer="me")) as w:
    ...     w.append("instructions", {"track": 0, "start_ts": ts, "duration_ns": d, "engine": "Tensor"})

    ``append`` takes a mapping (or DataFrame) of column name -> array; scalars broadcast; string columns
    accept str, sequences of str, pandas Categoricals or ``strings.CodedStrings``. It returns the row id of the
    batch's first row.
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
        self._pending: dict[str, list[dict[str, np.ndarray]]] = {}  # step 1's buffers
        self._pending_rows: dict[str, int] = {}
        self._chunks: list[ChunkRef] = []  # step 4's notes, in file order
        self._pool: ThreadPoolExecutor | None = None
        self._inflight: deque[tuple[Future[bytes], ChunkRef]] = deque()
        header = _checked_header(header)
        self._target = output_target(self.path)
        self.partial_path, fd = create_partial(self._target)
        self._f: BinaryIO | None = os.fdopen(fd, "wb")
        try:
            self._f.write(framing.MAGIC)
            self._write_record(framing.encode_frame(framing.HEADER, header.SerializeToString()))
        except BaseException:
            self.abort()
            raise

    # -- public API -------------------------------------------------------------------------------
    def append(self, table: str, columns: Mapping[str, Any]) -> int:
        """Buffer one batch of rows for ``table``; full chunks are written immediately. Returns first row id."""
        if self._f is None:
            raise ValueError(f"trace writer for {self.path} is closed")
        n, cols = prepare(table, columns, self.strings.intern_array)  # a TraceBuilder's batch is not checked again
        first = self.rows[table] + self._pending_rows.get(table, 0)
        if n == 0:
            return first
        self._pending.setdefault(table, []).append(cols)
        self._pending_rows[table] = self._pending_rows.get(table, 0) + n
        if self._pending_rows[table] >= self.chunk_rows:  # a full chunk (else nothing to write yet)
            with self._pipeline(self._pending_rows[table] // self.chunk_rows, self._pending_rows[table]):
                while self._pending_rows[table] >= self.chunk_rows:
                    self._write_rows(table, self.chunk_rows)
        return first

    def flush(self) -> None:
        """Write every buffered row (possibly as short chunks)."""
        with self._pipeline(sum(-(-r // self.chunk_rows) for r in self._pending_rows.values()),
                            sum(self._pending_rows.values())):
            for table in list(self._pending):
                while self._pending_rows.get(table, 0):
                    self._write_rows(table, min(self.chunk_rows, self._pending_rows[table]))
            self._write_strings()

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

    def __enter__(self) -> TraceWriter:
        return self

    def __exit__(self, exc_type: type[BaseException] | None, *exc: object) -> None:
        if exc_type is None:
            self.close()
        else:  # an error or Ctrl-C while writing: the trace is incomplete, never leave it under its name
            self.abort()

    # -- the steps, in the order a write runs them ---------------------------------------------------
    def _write_rows(self, table: str, n: int) -> None:
        """Steps 2-4 for the next ``n`` buffered rows of ``table``: cut them off (rows that fail to encode are
        dropped, not retried), encode, write its strings, then the chunk."""
        head, self._pending[table] = take_rows(table, self._pending[table], self._pending_rows[table], n)
        self._pending_rows[table] -= n
        raw, lo, hi = encode_rows(table, self.rows[table], n, head)
        self._write_strings()  # strings first: a cut file never holds a chunk without its strings
        self._write_chunk(ChunkRef(TABLE_IDS[table], -1, -1, -1, self.rows[table], n, lo, hi), raw)
        self.rows[table] += n

    def _write_strings(self) -> None:
        """Step 2 for the strings interned since the last strings chunk (none: nothing is written)."""
        new = self.strings.pending()
        if new:
            first = len(self.strings.values) - len(new)
            self._write_chunk(ChunkRef(TABLE_IDS[STRINGS_TABLE], -1, -1, -1, first, len(new)),
                              encode_strings(first, new))

    def _write_chunk(self, ref: ChunkRef, raw: bytes) -> None:
        """Step 3: frame ``raw`` and write it (framed on a worker thread inside a multi-chunk batch)."""
        if self._pool is None:
            self._write_indexed(ref, framing.chunk_record(raw, self.codec, self.level, ref.table_id))
            return
        self._inflight.append((submit(self._pool, framing.chunk_record, raw, self.codec, self.level,
                                      ref.table_id), ref))
        if len(self._inflight) > _COMPRESS_THREADS:
            self._write_next()

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

    def _write_next(self) -> None:
        fut, ref = self._inflight.popleft()
        self._write_indexed(ref, fut.result())

    def _write_indexed(self, ref: ChunkRef, record: bytes) -> None:
        """Step 4: write a chunk's record and note where it went."""
        ref.offset, ref.length = self._write_record(record), len(record)
        self._chunks.append(ref)

    def _write_record(self, record: bytes) -> int:
        """Append one framed record to the file and flush it; returns its offset (the one place bytes are
        written after the magic)."""
        assert self._f is not None
        offset = self._f.tell()
        self._f.write(record)
        self._f.flush()
        return offset

    def _finish(self) -> None:
        """Step 5: the last rows, the footer and the trailer; closes the file."""
        assert self._f is not None
        self.flush()
        footer = build_footer(self._chunks, self.rows, self.dropped_events, self.footer_metadata)
        offset = self._write_record(framing.encode_frame(framing.FOOTER, footer.SerializeToString()))
        self._f.write(framing.TRAILER.pack(offset, framing.END_MAGIC))
        f, self._f = self._f, None
        f.close()


def _checked_header(header: pb.Header) -> pb.Header:
    if not isinstance(header, pb.Header):
        raise TypeError(f"header must be a schemas.pb.Header, got {type(header).__name__}")
    h = pb.Header()
    h.CopyFrom(header)
    h.format_major, h.format_minor = FORMAT_MAJOR, FORMAT_MINOR  # the layout this writer produces
    return h
