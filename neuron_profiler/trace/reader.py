"""The one reader of the trace format: lazy, per-table and per-time-window loads into pandas.

Robust to bad input: every problem raises a ``TraceFormatError`` subclass naming the file, the byte offset and
what was expected; nothing else escapes (no ``zlib.error``, ``OverflowError`` or ``MemoryError`` from a file's
bytes). Memory is bounded by the file's size (``decode.decode_limit``), checked before allocating. A file cut
short (a killed writer) reads back every complete chunk; a corrupt chunk raises unless ``strict=False``, which
skips it. ``loss_report()`` says in one line what a file is missing, or None when nothing is.
"""
from __future__ import annotations

import mmap
import os
import threading
import zlib
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path
from typing import Iterable, Iterator

import numpy as np
import pandas as pd
from google.protobuf.message import DecodeError

from neuron_profiler.trace import framing
from neuron_profiler.trace.columns import (FORMAT_MAJOR, FORMAT_MINOR, STRINGS_TABLE, TABLE_IDS, TABLE_NAMES,
                                           TABLES, TIME_COLUMNS, columns_of)
from neuron_profiler.trace.decode import (ChunkError, DecodeBudget, decode_chunk, decode_limit, max_chunk_bytes,
                                          parse_chunk, row_bytes)
from neuron_profiler.trace.encode import column_dtype
from neuron_profiler.trace.errors import (CorruptTraceError, NotATraceError, TraceFormatError,
                                          TruncatedTraceError, UnsupportedVersionError)
from neuron_profiler.trace.files import map_regular_file
from neuron_profiler.trace.index import (MAX_ROW_ID, ChunkRef, Frame, check_spans, chunks_from_footer,
                                         describe_gaps, frame_problem, read_frame, table_name)
from neuron_profiler.trace.strings import categorical_from_ids
from neuron_profiler.trace.wire import chunk_head, leading_head
from neuron_profiler.trace.workers import submit
from schemas import pb

#: Threads that checksum, decompress and decode chunks (two: this project's machines have two cores).
_DECODE_THREADS = 2
#: Footer metadata key under which a copy of a partial trace keeps its source's loss report.
LOSS_KEY = "source_loss_report"
#: Python bytes per interned string beyond its text (object header, list slot): the strings table's budget.
_STRING_OVERHEAD = 64
#: Decompressed bytes that always hold a chunk's first_row and rows (two keyed varints and the next key).
_HEAD_BYTES = 32


class TraceFile:
    """An open trace file. Tables are decoded on demand with ``table()``.

    ``max_decoded_bytes`` bounds what one ``table()``/``tables()`` call may materialise (default
    ``decode.decode_limit(size)``: 256x the file size + 64 MiB)."""

    def __init__(self, path: str | os.PathLike, *, strict: bool = True, max_decoded_bytes: int | None = None) -> None:
        self.path = Path(path)
        self.strict = strict
        self.warnings: list[str] = []
        self._lock = threading.Lock()
        self._issues: list[str] = []  # what the index / layout is missing (the loss report's first part)
        self._unreadable: dict[int, dict[int, TraceFormatError]] = {}  # table id -> chunk offset -> error
        self._gaps: dict[int, list[tuple[int, int]]] = {}
        self._heads_checked: set[int] = set()
        self._claimed_rows: dict[str, int] = {}  # row counts of a footer that could not be used
        self._require_crc = False
        self._buf, self.size = map_regular_file(self.path)
        self.max_decoded_bytes = decode_limit(self.size) if max_decoded_bytes is None else int(max_decoded_bytes)
        try:
            self._check_magic()
            self.header, pos = self._read_header()
            version = (self.header.format_major, self.header.format_minor)
            self._require_crc = version >= framing.CHECK_SINCE
            self._newer_minor = self.header.format_minor > FORMAT_MINOR
            self.footer: pb.Footer | None = None
            self.lost_bytes = 0
            self._chunks = self._index(pos)
            self._strings = self._load_strings()
        except BaseException:
            self.close()
            raise

    # -- properties ------------------------------------------------------------------------------
    @property
    def complete(self) -> bool:
        """True when the file was closed cleanly (footer and trailer present, valid and consistent)."""
        return self.footer is not None

    @property
    def format_version(self) -> str:
        return f"{self.header.format_major}.{self.header.format_minor}"

    @property
    def skipped_chunks(self) -> int:
        """Chunks found unreadable so far (skipped when ``strict=False``)."""
        return sum(len(v) for v in self._unreadable.values())

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
    def footer_metadata(self) -> dict[str, str]:
        return dict(self.footer.metadata) if self.footer is not None else {}

    @property
    def time_range(self) -> tuple[int, int] | None:
        """(first start, last end) in ns over all event tables, None for a trace without events."""
        if self.footer is not None:
            if not any(self.footer.table_rows.get(t, 0) for t in TIME_COLUMNS):
                return None
            return int(self.footer.min_ts), int(self.footer.max_ts)
        lo, hi = None, None
        for t, (tcol, dcol) in TIME_COLUMNS.items():
            df = self.table(t, columns=[tcol] + ([dcol] if dcol else []))
            if len(df):
                end = df[tcol] + df[dcol] if dcol else df[tcol]
                lo = int(df[tcol].min()) if lo is None else min(lo, int(df[tcol].min()))
                hi = int(end.max()) if hi is None else max(hi, int(end.max()))
        return None if lo is None else (lo, hi)

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

    # -- the loss report -------------------------------------------------------------------------
    def loss_report(self, verify: bool = False) -> str | None:
        """One line saying what this file is missing, None when it is complete and no chunk read so far (every
        chunk with ``verify=True``, which checksums and decompresses them all) was unreadable. E.g.
        "truncated at byte 51,200: no footer; ...; 2 of 14 instructions chunks unreadable"."""
        if verify:
            self._verify_chunks()
        parts = list(self._issues)
        for tid in self._table_ids():
            chunks = [c for c in self._chunks if c.table_id == tid]
            self._check_heads(tid)
            bad = self._unreadable.get(tid, {})
            if bad:
                parts.append(f"{len(bad)} of {len(chunks)} {table_name(tid)} chunks unreadable")
            if self._gaps.get(tid):
                parts.append(describe_gaps(table_name(tid), self._gaps[tid]))
        for t, claimed in self._claimed_rows.items():
            found = sum(c.rows for c in self._readable(TABLE_IDS[t]))
            if found < claimed:
                parts.append(f"{t}: {found:,} of the {claimed:,} rows the footer counts")
        source = self.footer_metadata.get(LOSS_KEY)
        if source:
            parts.append(f"copied from a partial trace ({source})")
        return "; ".join(parts) if parts else None

    def _table_ids(self) -> list[int]:
        return sorted({c.table_id for c in self._chunks} | set(self._unreadable))

    def _verify_chunks(self) -> None:
        for c in self._chunks:
            if c.offset in self._unreadable.get(c.table_id, {}):
                continue
            try:
                raw = self._chunk_raw(c, self._chunk_limit(c))
                self._check_head(c, raw)
            except TraceFormatError as e:
                self._mark_unreadable(c, e)

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
            out = {col: np.empty(total, dtype=column_dtype(spec[col])) for col in wanted}
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

    def close(self) -> None:
        if isinstance(getattr(self, "_buf", None), mmap.mmap):
            self._buf.close()

    def __enter__(self) -> "TraceFile":
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()

    # -- header and index ------------------------------------------------------------------------
    def _err(self, cls: type[TraceFormatError], offset: int | None, msg: str) -> TraceFormatError:
        where = f"{self.path}" + (f" at byte {offset}" if offset is not None else "")
        e = cls(f"{where}: {msg}")
        e.detail = msg  # type: ignore[attr-defined]  # the message without the file, for the loss report
        return e

    def _issue(self, text: str) -> None:
        self._issues.append(text)
        self.warnings.append(text)

    def _check_magic(self) -> None:
        head = bytes(self._buf[: len(framing.MAGIC)])
        if head == framing.MAGIC:
            return
        hint = ""
        if head[:2] == b"\x1f\x8b" or head.lstrip()[:1] in (b"{", b"["):
            hint = " (it looks like JSON or gzip: import a torch.profiler trace with `neuron-trace import`)"
        if len(head) < len(framing.MAGIC) and framing.MAGIC.startswith(head) and head:
            raise self._err(TruncatedTraceError, 0, f"file is {self.size} bytes, shorter than the magic bytes")
        raise self._err(NotATraceError, 0, f"not a Neuron trace: expected magic bytes {framing.MAGIC!r}, "
                        f"found {head!r}{hint}")

    def _frame_at(self, pos: int) -> Frame | None:
        """The frame at ``pos`` (length, rtype, codec, table_id, check, crc), None when the file ends inside it."""
        return read_frame(self._buf, self.size, pos)

    def _record(self, pos: int, fr: Frame, limit: int, what: str, prefix: int | None = None) -> bytes:
        """The checked (frame fields, length, CRC) and decompressed payload of the record at ``pos`` (with
        ``prefix``: only its first ``prefix`` decompressed bytes, where the codec allows)."""
        problem = frame_problem(fr, self._require_crc)
        if problem:
            raise self._err(CorruptTraceError, pos, problem)
        start = pos + framing.FRAME.size
        if start + fr.length > self.size:
            raise self._err(TruncatedTraceError, pos, f"record declares {fr.length} bytes but only "
                            f"{self.size - start} remain (file truncated)")
        data = self._buf[start:start + fr.length]
        if zlib.crc32(data) != fr.crc:
            raise self._err(CorruptTraceError, pos, f"checksum mismatch ({what} record is corrupt)")
        try:
            if prefix is not None:
                return framing.decompress_prefix(data, fr.codec, prefix, limit)
            return framing.decompress(data, fr.codec, limit)
        except ValueError as e:
            raise self._err(CorruptTraceError, pos, f"{what} cannot be decompressed: {e}") from None

    def _read_header(self) -> tuple[pb.Header, int]:
        pos = len(framing.MAGIC)
        fr = self._frame_at(pos)
        if fr is None:
            raise self._err(TruncatedTraceError, pos, "file ends before the header record")
        if fr.rtype != framing.HEADER:
            raise self._err(CorruptTraceError, pos, f"expected the header record (type {framing.HEADER}), "
                            f"found record type {fr.rtype}")
        h = pb.Header()
        try:
            h.ParseFromString(self._record(pos, fr, self.max_decoded_bytes, "header"))
        except DecodeError as e:
            raise self._err(CorruptTraceError, pos, f"header cannot be decoded: {e}") from None
        if h.format_major > FORMAT_MAJOR:
            raise self._err(UnsupportedVersionError, None, f"file has format version "
                            f"{h.format_major}.{h.format_minor}; this reader supports {FORMAT_MAJOR}.x "
                            f"(up to {FORMAT_MAJOR}.{FORMAT_MINOR}); upgrade neuron-profiler to read it")
        if h.format_major == 0:
            raise self._err(CorruptTraceError, pos, "header has format version 0.x, which was never written")
        if h.format_major < FORMAT_MAJOR:
            raise self._err(UnsupportedVersionError, None, f"file has format version "
                            f"{h.format_major}.{h.format_minor}, a pre-release layout this reader no longer "
                            f"reads (it supports {FORMAT_MAJOR}.x); re-import or re-capture the trace")
        problem = frame_problem(fr, (h.format_major, h.format_minor) >= framing.CHECK_SINCE)
        if problem:  # a 2.2+ header frame must carry its check byte (known only now that the version is)
            raise self._err(CorruptTraceError, pos, problem)
        return h, pos + framing.FRAME.size + fr.length

    def _index(self, pos: int) -> list[ChunkRef]:
        chunks = self._index_from_footer(pos)
        return chunks if chunks is not None else self._index_by_scan(pos)

    def _parse_footer(self, off: int, fr: Frame) -> pb.Footer | None:
        try:
            return pb.Footer.FromString(self._record(off, fr, self.max_decoded_bytes, "footer"))
        except TraceFormatError as e:
            self._issue(f"the footer is unreadable ({e.detail}); the file was scanned")  # type: ignore[attr-defined]
        except DecodeError as e:
            self._issue(f"the footer at byte {off} cannot be decoded ({e}); the file was scanned")
        return None

    def _index_from_footer(self, data_start: int) -> list[ChunkRef] | None:
        trailer_at = self.size - framing.TRAILER.size
        if trailer_at < data_start:
            return None
        off, magic = framing.TRAILER.unpack_from(self._buf, trailer_at)
        if magic != framing.END_MAGIC:
            return None  # no trailer: the scan says what it finds
        fr = self._frame_at(off) if data_start <= off < trailer_at else None
        if fr is None or fr.rtype != framing.FOOTER or off + framing.FRAME.size + fr.length != trailer_at:
            self._issue(f"the trailer does not point at a footer ending at byte {trailer_at}; the file was scanned")
            return None
        ft = self._parse_footer(off, fr)
        if ft is None:
            return None
        chunks, problem = chunks_from_footer(ft, self._frame_at, data_start, off, self._newer_minor)
        if problem:
            self._issue(f"the footer index is inconsistent ({problem}); the file was scanned")
            self._claimed_rows = {t: int(n) for t, n in ft.table_rows.items() if t in TABLES}
            return None
        self.footer = ft
        return chunks

    def _index_by_scan(self, pos: int) -> list[ChunkRef]:
        chunks: list[ChunkRef] = []
        footer_at = stop = None
        while pos < self.size:
            fr = self._frame_at(pos)
            if fr is None:
                break
            problem = frame_problem(fr, self._require_crc) or ("a second header record" if fr.rtype == framing.HEADER
                                                               else None)
            if problem:
                if self.strict:
                    raise self._err(CorruptTraceError, pos, f"{problem} (the file has no usable footer, so it is "
                                    f"read by scanning its records)")
                stop = problem
                break
            end = pos + framing.FRAME.size + fr.length
            if fr.rtype == framing.FOOTER:
                footer_at, pos = pos, self.size  # a footer without a valid trailer: no event data was lost
                break
            if end > self.size:
                break
            if fr.table_id in TABLE_NAMES:
                chunks.append(ChunkRef(fr.table_id, pos, end - pos, fr.codec))
            elif not self._newer_minor:  # a newer minor's tables are skipped; in this version it is corruption
                self._mark_unreadable(ChunkRef(fr.table_id, pos, end - pos, fr.codec),
                                      self._err(CorruptTraceError, pos, f"chunk of unknown table id {fr.table_id}"))
            pos = end
        self.lost_bytes = self.size - pos
        if stop is not None:
            self._issue(f"unreadable record at byte {pos} ({stop}): the last {self.lost_bytes:,} bytes were not read")
        elif self.lost_bytes:
            self._issue(f"truncated at byte {pos:,}: no footer; the last {self.lost_bytes:,} bytes (an incomplete "
                        f"record) were lost")
        elif footer_at is not None and not self._issues:  # the trailer is missing: the footer was not examined
            fr = self._frame_at(footer_at)
            if footer_at + framing.FRAME.size + fr.length > self.size:
                self._issue(f"truncated at byte {self.size:,} inside the footer (every chunk before it was read)")
            else:
                ft = self._parse_footer(footer_at, fr)
                if ft is not None:
                    self._issue("the trailer is missing (the file was cut in its last 16 bytes); the file was scanned")
                    self._claimed_rows = {t: int(n) for t, n in ft.table_rows.items() if t in TABLES}
        elif footer_at is None and not self._issues:
            self._issue(f"no footer: the writer did not close the file (it ends after {len(chunks)} complete chunks)")
        return chunks

    # -- chunks ----------------------------------------------------------------------------------
    def _mark_unreadable(self, c: ChunkRef, e: TraceFormatError) -> None:
        with self._lock:  # called from decode worker threads
            bad = self._unreadable.setdefault(c.table_id, {})
            if c.offset not in bad:
                bad[c.offset] = e
                self.warnings.append(f"unreadable chunk: {e}")

    def _skip_or_raise(self, c: ChunkRef, e: TraceFormatError) -> None:
        self._mark_unreadable(c, e)
        if self.strict:
            raise e

    def _chunk_limit(self, c: ChunkRef) -> int:
        """Most bytes chunk ``c`` may decompress to: what its rows can hold (``decode.max_chunk_bytes``); for
        strings, or while its rows are unknown, LZ4's worst ratio (255x) of its size + 1 MiB; never more than
        ``max_decoded_bytes``."""
        name = TABLE_NAMES.get(c.table_id, STRINGS_TABLE)
        if c.rows < 0 or name == STRINGS_TABLE:
            return min(self.max_decoded_bytes, (1 << 20) + 255 * (c.length - framing.FRAME.size))
        return min(self.max_decoded_bytes, max_chunk_bytes(name, c.rows))

    def _chunk_raw(self, c: ChunkRef, limit: int, prefix: int | None = None) -> bytes:
        """Checked, decompressed payload of chunk ``c`` (thread-safe: lz4/zstd/zlib and crc32 release the GIL)."""
        fr = self._frame_at(c.offset)
        if fr is None or fr.rtype != framing.CHUNK or fr.table_id != c.table_id:
            raise self._err(CorruptTraceError, c.offset, "index points at a byte that is not the expected chunk record")
        return self._record(c.offset, fr, limit, "chunk", prefix)

    def _read_head(self, c: ChunkRef) -> tuple[int, int]:
        """(first_row, rows) of a scanned chunk from its first decompressed bytes (nothing more is inflated, so a
        compression bomb is found before it expands), checked against the size limits."""
        prefix = self._chunk_raw(c, self._chunk_limit(c), prefix=_HEAD_BYTES)
        try:
            first, rows = leading_head(prefix)
        except ValueError as e:
            raise self._err(CorruptTraceError, c.offset, str(e)) from None
        if rows > framing.MAX_CHUNK_ROWS:
            raise self._err(CorruptTraceError, c.offset, f"chunk declares {rows} rows (at most {framing.MAX_CHUNK_ROWS})")
        if first + rows > MAX_ROW_ID:
            raise self._err(CorruptTraceError, c.offset, f"chunk declares first row {first} (row ids stay below 2^62)")
        return first, rows

    def _check_head(self, c: ChunkRef, raw: bytes) -> tuple[int, int]:
        """(first_row, rows) of chunk ``c`` from its bytes, checked against the index and the size limits."""
        head = chunk_head(raw)
        if head is None:
            msg = self._parse_chunk(c, raw)
            head = (msg.first_row, msg.rows)
        first, rows = head
        problem = None
        if rows > framing.MAX_CHUNK_ROWS:
            problem = f"chunk declares {rows} rows (at most {framing.MAX_CHUNK_ROWS})"
        elif first + rows > MAX_ROW_ID:
            problem = f"chunk declares first row {first} (row ids stay below 2^62)"
        elif c.rows >= 0 and (first, rows) != (c.first_row, c.rows):
            problem = f"chunk holds rows {first}+{rows}, the footer index says {c.first_row}+{c.rows}"
        elif TABLE_NAMES[c.table_id] != STRINGS_TABLE and len(raw) > max_chunk_bytes(TABLE_NAMES[c.table_id], rows):
            problem = f"chunk of {rows} rows decompresses to {len(raw):,} bytes, more than such a chunk can hold"
        if problem:
            raise self._err(CorruptTraceError, c.offset, problem)
        return head

    def _check_heads(self, tid: int) -> None:
        """Learn the rows of the table's chunks (a scanned file's chunks say it in their first bytes) and check
        their row ranges: gaps are recorded for the loss report, chunks holding rows already read are
        unreadable. Never raises."""
        if tid in self._heads_checked:
            return
        chunks = [c for c in self._chunks if c.table_id == tid]
        for c in chunks:
            if c.rows < 0:
                try:
                    c.first_row, c.rows = self._read_head(c)
                except TraceFormatError as e:
                    self._mark_unreadable(c, e)
        bad = self._unreadable.get(tid, {})
        spans = check_spans(c for c in chunks if c.rows >= 0 and c.offset not in bad)
        for c in spans.overlapping:
            self._mark_unreadable(c, self._err(CorruptTraceError, c.offset, f"chunk holds {table_name(tid)} rows "
                                               f"{c.first_row:,}-{c.end_row - 1:,}, which another chunk already holds"))
        if spans.gaps:
            self._gaps[tid] = spans.gaps
        self._heads_checked.add(tid)

    def _readable(self, tid: int, raise_strict: bool = False) -> list[ChunkRef]:
        """The table's chunks that are not known to be unreadable, rows known; with ``raise_strict`` a strict
        reader raises the first unreadable chunk's error instead."""
        self._check_heads(tid)
        bad = self._unreadable.get(tid, {})
        if raise_strict and self.strict and bad:
            raise next(iter(bad.values()))
        return [c for c in self._chunks if c.table_id == tid and c.offset not in bad and c.rows >= 0]

    def _parse_chunk(self, c: ChunkRef, raw: bytes) -> pb.Chunk:
        try:
            return parse_chunk(raw, c.table_id)
        except ChunkError as e:
            raise self._err(CorruptTraceError, c.offset, str(e)) from None

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
