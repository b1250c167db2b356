"""The one reader of the trace format: lazy, per-table and per-time-window loads into pandas.

Robust to bad input: every problem raises a ``TraceFormatError`` subclass naming the file, the byte
offset and what was expected. A file cut short (a killed writer) reads back every complete chunk and
reports the lost bytes; a corrupt chunk raises unless ``strict=False``, which skips it and counts it.
"""
from __future__ import annotations

import mmap
import os
import threading
import zlib
from dataclasses import dataclass
from pathlib import Path
from concurrent.futures import ThreadPoolExecutor
from typing import Iterable, Iterator

import numpy as np
import pandas as pd
from google.protobuf.message import DecodeError

from neuron_profiler.trace import framing
from neuron_profiler.trace.columns import (FORMAT_MAJOR, FORMAT_MINOR, STRINGS_TABLE, TABLE_IDS, TABLE_NAMES,
                                           TABLES, TIME_COLUMNS, columns_of)
from neuron_profiler.trace.decode import ChunkError, decode_chunk, parse_chunk
from neuron_profiler.trace.encode import column_dtype
from neuron_profiler.trace.errors import (CorruptTraceError, NotATraceError, TraceFormatError,
                                          TruncatedTraceError, UnsupportedVersionError)
from neuron_profiler.trace.strings import categorical_from_ids
from neuron_profiler.trace.workers import submit
from schemas import pb

#: Threads that checksum, decompress and decode chunks (two: this project's machines have two cores).
_DECODE_THREADS = 2


@dataclass
class ChunkRef:
    """Where a chunk sits in the file; rows/first_row/ts bounds are -1 when only known after decoding."""

    table_id: int
    offset: int
    length: int
    codec: int = -1
    first_row: int = -1
    rows: int = -1
    min_ts: int = 0
    max_end_ts: int = 0


class TraceFile:
    """An open trace file. Tables are decoded on demand with ``table()``."""

    def __init__(self, path: str | os.PathLike, *, strict: bool = True) -> None:
        self.path = Path(path)
        self.strict = strict
        self.warnings: list[str] = []
        self.skipped_chunks = 0
        self._lock = threading.Lock()
        try:
            size = self.path.stat().st_size
            with open(self.path, "rb") as f:
                self._buf: bytes | mmap.mmap = (mmap.mmap(f.fileno(), 0, access=mmap.ACCESS_READ)
                                                if size else b"")
        except IsADirectoryError:
            raise NotATraceError(f"{self.path}: is a directory, not a trace file") from None
        except OSError as e:
            raise TraceFormatError(f"{self.path}: cannot open: {e.strerror or e}") from None
        self.size = size
        self._check_magic()
        self.header, pos = self._read_header()
        self.footer: pb.Footer | None = None
        self.lost_bytes = 0
        self._chunks = self._index(pos)
        self._strings = self._load_strings()

    # -- properties ------------------------------------------------------------------------------
    @property
    def complete(self) -> bool:
        """True when the file was closed cleanly (footer and trailer present and valid)."""
        return self.footer is not None

    @property
    def format_version(self) -> str:
        return f"{self.header.format_major}.{self.header.format_minor}"

    @property
    def row_counts(self) -> dict[str, int]:
        """Rows per table (from the footer, else by decoding chunk headers)."""
        if self.footer is not None:
            return {t: int(self.footer.table_rows.get(t, 0)) for t in TABLES}
        counts = {t: 0 for t in TABLES}
        for c in self._chunks:
            name = TABLE_NAMES.get(c.table_id)
            if name in counts:
                self._ensure_decoded_meta(c)
                counts[name] += max(c.rows, 0)
        return counts

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
            name = names.get(fr[2], f"codec {fr[2]}") if fr is not None else "unreadable"
            out[name] = out.get(name, 0) + 1
        return out

    @property
    def strings(self) -> np.ndarray:
        return self._strings

    # -- tables ----------------------------------------------------------------------------------
    def table(self, name: str, columns: Iterable[str] | None = None, start_ns: int | None = None,
              end_ns: int | None = None) -> pd.DataFrame:
        """Decode ``name`` into a DataFrame (index = row id). With ``start_ns``/``end_ns``, only rows whose
        [start, end] overlaps the window (chunks outside it are not decoded)."""
        spec = columns_of(name)
        wanted = list(spec) if columns is None else list(columns)
        bad = [c for c in wanted if c not in spec]
        if bad:
            raise ValueError(f"table {name!r} has no column(s) {bad}; valid columns: {', '.join(spec)}")
        windowed = start_ns is not None or end_ns is not None
        tcol, dcol = TIME_COLUMNS.get(name, ("", ""))
        if windowed and not tcol:
            raise ValueError(f"table {name!r} has no time column; it cannot be read by time window")
        lo = -(1 << 62) if start_ns is None else int(start_ns)
        hi = (1 << 62) if end_ns is None else int(end_ns)
        decode_cols = list(dict.fromkeys(wanted + ([tcol] + ([dcol] if dcol else []) if windowed else [])))
        tid = TABLE_IDS[name]
        if not windowed:
            whole = self._whole_table(name, tid, wanted)
            if whole is not None:
                return whole
        parts: list[dict[str, np.ndarray]] = []
        spans: list[tuple[int, int]] = []  # (first row, rows) of each whole chunk read
        index: list[np.ndarray] = []  # row ids of each chunk after the window filter
        todo = [c for c in self._chunks if c.table_id == tid and not (
            windowed and self.footer is not None and c.rows > 0 and (c.max_end_ts < lo or c.min_ts > hi))]
        for decoded in self._decoded_chunks(todo, name, decode_cols):
            if decoded is None:
                continue
            first, rows, cols = decoded
            if windowed:
                start = cols[tcol]
                end = start + cols[dcol] if dcol else start
                keep = np.nonzero((end >= lo) & (start <= hi))[0]
                cols = {k: v[keep] for k, v in cols.items()}
                index.append(keep + first)
            spans.append((first, rows))
            parts.append(cols)
        data: dict[str, object] = {}
        for col in wanted:
            kind = spec[col].kind
            if len(parts) == 1:
                arr = parts[0][col]
            elif parts:
                arr = np.concatenate([p[col] for p in parts])
            else:
                arr = np.zeros(0, dtype=column_dtype(spec[col]))
            data[col] = self._categorical(arr, f"{name}.{col}") if kind == "string" else arr
        starts = np.cumsum([0] + [r for _, r in spans])
        if not windowed and all(f == starts[i] for i, (f, _) in enumerate(spans)):
            row_index: pd.Index = pd.RangeIndex(int(starts[-1]), name="row")  # contiguous: no index array
        else:
            if not windowed:
                index = [np.arange(f, f + r, dtype=np.int64) for f, r in spans]
            row_index = pd.Index(np.concatenate(index) if index else np.zeros(0, dtype=np.int64), name="row")
        return _frame(data, row_index)

    def _whole_table(self, name: str, tid: int, wanted: list[str]) -> pd.DataFrame | None:
        """Fast path for a whole table of a cleanly closed file: the footer gives every chunk's rows, so the
        worker threads decode straight into preallocated columns (no concatenation on the caller's thread).
        None when the fast path does not apply (no footer, lenient mode, or an index with gaps)."""
        chunks = [c for c in self._chunks if c.table_id == tid]
        if self.footer is None or not self.strict or any(c.rows < 0 for c in chunks):
            return None
        total = 0
        for c in chunks:
            if c.first_row != total:
                return None
            total += c.rows
        spec = columns_of(name)
        try:
            out = {col: np.empty(total, dtype=column_dtype(spec[col])) for col in wanted}
        except MemoryError:
            raise self._err(TraceFormatError, None, f"table {name!r} has {total:,} rows by the footer index, "
                            f"too many to load at once here: read fewer columns or a time window "
                            f"(start_ns/end_ns)") from None

        def decode_into(c: ChunkRef) -> None:
            self._decode_chunk(c, self._chunk_raw(c), name, wanted,
                               {k: v[c.first_row:c.first_row + c.rows] for k, v in out.items()})

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
        """Every table, fully decoded."""
        return {t: self.table(t) for t in TABLES}

    def close(self) -> None:
        if isinstance(self._buf, mmap.mmap):
            self._buf.close()

    def __enter__(self) -> "TraceFile":
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()

    # -- internals -------------------------------------------------------------------------------
    def _err(self, cls: type[TraceFormatError], offset: int | None, msg: str) -> TraceFormatError:
        where = f"{self.path}" + (f" at byte {offset}" if offset is not None else "")
        return cls(f"{where}: {msg}")

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

    def _frame_at(self, pos: int) -> tuple[int, int, int, int, int] | None:
        """(length, type, codec, table_id, crc) of the frame at ``pos``, None when the file ends inside it."""
        if pos + framing.FRAME.size > self.size:
            return None
        length, rtype, codec, table_id, _, crc = framing.FRAME.unpack_from(self._buf, pos)
        return length, rtype, codec, table_id, crc

    def _payload(self, pos: int, length: int, crc: int) -> bytes:
        if length > framing.MAX_RECORD_BYTES:
            raise self._err(CorruptTraceError, pos, f"declared record length {length} exceeds the "
                            f"{framing.MAX_RECORD_BYTES}-byte limit")
        start = pos + framing.FRAME.size
        if start + length > self.size:
            raise self._err(TruncatedTraceError, pos, f"record declares {length} bytes but only "
                            f"{self.size - start} remain (file truncated)")
        data = self._buf[start:start + length]
        if zlib.crc32(data) != crc:
            raise self._err(CorruptTraceError, pos, "checksum mismatch (record is corrupt)")
        return data

    def _read_header(self) -> tuple[pb.Header, int]:
        pos = len(framing.MAGIC)
        fr = self._frame_at(pos)
        if fr is None:
            raise self._err(TruncatedTraceError, pos, "file ends before the header record")
        length, rtype, codec, _, crc = fr
        if rtype != framing.HEADER:
            raise self._err(CorruptTraceError, pos, f"expected the header record (type {framing.HEADER}), "
                            f"found record type {rtype}")
        payload = self._payload(pos, length, crc)
        h = pb.Header()
        try:
            h.ParseFromString(framing.decompress(payload, codec))
        except (DecodeError, ValueError) as e:
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
        return h, pos + framing.FRAME.size + length

    def _index(self, pos: int) -> list[ChunkRef]:
        chunks = self._index_from_footer(pos)
        if chunks is not None:
            return chunks
        return self._index_by_scan(pos)

    def _index_from_footer(self, data_start: int) -> list[ChunkRef] | None:
        if self.size < data_start + framing.TRAILER.size:
            return None
        off, magic = framing.TRAILER.unpack_from(self._buf, self.size - framing.TRAILER.size)
        if magic != framing.END_MAGIC or not data_start <= off < self.size - framing.TRAILER.size:
            return None
        fr = self._frame_at(off)
        if fr is None or fr[1] != framing.FOOTER:
            return None
        try:
            payload = self._payload(off, fr[0], fr[4])
            ft = pb.Footer()
            ft.ParseFromString(framing.decompress(payload, fr[2]))
        except (TraceFormatError, DecodeError, ValueError):
            self.warnings.append(f"footer at byte {off} is unreadable; the file was scanned instead")
            return None
        chunks = []
        for e in ft.chunks:
            if e.rows > framing.MAX_CHUNK_ROWS:
                self.warnings.append(f"footer index declares a chunk of {e.rows} rows (at most "
                                     f"{framing.MAX_CHUNK_ROWS}); the file was scanned")
                return None
            if not data_start <= e.offset < off or e.offset + e.length > off:
                self.warnings.append(f"footer index entry at byte {e.offset} is out of range; the file was scanned")
                return None
            chunks.append(ChunkRef(e.table_id, e.offset, e.length, -1, e.first_row, e.rows, e.min_ts, e.max_end_ts))
        self.footer = ft
        return chunks

    def _index_by_scan(self, pos: int) -> list[ChunkRef]:
        chunks: list[ChunkRef] = []
        while pos < self.size:
            fr = self._frame_at(pos)
            if fr is None:
                break
            length, rtype, codec, table_id, _ = fr
            end = pos + framing.FRAME.size + length
            if rtype == framing.FOOTER:
                pos = self.size  # footer present but its trailer is cut: no event data was lost
                break
            if rtype != framing.CHUNK:
                raise self._err(CorruptTraceError, pos, f"expected a chunk record (type {framing.CHUNK}), "
                                f"found record type {rtype}")
            if length > framing.MAX_RECORD_BYTES:
                raise self._err(CorruptTraceError, pos, f"declared record length {length} exceeds the "
                                f"{framing.MAX_RECORD_BYTES}-byte limit")
            if end > self.size:
                break
            chunks.append(ChunkRef(table_id, pos, end - pos, codec))
            pos = end
        self.lost_bytes = self.size - pos
        if self.lost_bytes:
            self.warnings.append(f"file is truncated: the last {self.lost_bytes} bytes (an incomplete chunk) "
                                 f"were lost; {len(chunks)} complete chunks were read")
        elif pos >= self.size:
            self.warnings.append("file has no footer (the writer did not close it); all chunks were recovered")
        return chunks

    def _chunk_raw(self, c: ChunkRef) -> bytes:
        """Checked, decompressed payload of chunk ``c`` (thread-safe: zlib and crc32 release the GIL)."""
        fr = self._frame_at(c.offset)
        if fr is None or fr[1] != framing.CHUNK or fr[3] != c.table_id:
            raise self._err(CorruptTraceError, c.offset, "index points at a byte that is not the "
                            "expected chunk record")
        payload = self._payload(c.offset, fr[0], fr[4])
        try:
            return framing.decompress(payload, fr[2])
        except (ValueError, zlib.error) as e:
            raise self._err(CorruptTraceError, c.offset, f"chunk cannot be decompressed: {e}") from None

    def _parse_chunk(self, c: ChunkRef, raw: bytes) -> pb.Chunk:
        try:
            return parse_chunk(raw, c.table_id)
        except ChunkError as e:
            raise self._err(CorruptTraceError, c.offset, str(e)) from None

    def _skip_or_raise(self, e: TraceFormatError) -> None:
        if self.strict:
            raise e
        with self._lock:  # called from decode worker threads
            self.skipped_chunks += 1
            self.warnings.append(f"skipped corrupt chunk: {e}")

    def _chunk_message(self, c: ChunkRef) -> pb.Chunk | None:
        try:
            return self._parse_chunk(c, self._chunk_raw(c))
        except TraceFormatError as e:
            self._skip_or_raise(e)
            return None

    def _decode_one(self, c: ChunkRef, table: str, cols: list[str]) -> tuple[int, int, dict] | None:
        try:
            return self._decode_chunk(c, self._chunk_raw(c), table, cols)
        except TraceFormatError as e:
            self._skip_or_raise(e)
            return None

    def _decoded_chunks(self, chunks: list[ChunkRef], table: str,
                        cols: list[str]) -> Iterator[tuple[int, int, dict] | None]:
        """(first_row, rows, columns) of each chunk, in order. Chunks are checksummed, decompressed and decoded
        in worker threads: lz4/zstd/zlib, crc32 and numpy's copies release the GIL (upb's parser, used only
        as the fallback of :mod:`neuron_profiler.trace.wire`, holds it)."""
        if len(chunks) < 2:
            for c in chunks:
                yield self._decode_one(c, table, cols)
            return
        with ThreadPoolExecutor(max_workers=_DECODE_THREADS) as pool:
            futures = [submit(pool, self._decode_one, c, table, cols) for c in chunks]
            for fut in futures:
                yield fut.result()

    def _ensure_decoded_meta(self, c: ChunkRef) -> None:
        if c.rows < 0:
            msg = self._chunk_message(c)
            c.rows = msg.rows if msg is not None else 0
            c.first_row = msg.first_row if msg is not None else 0

    def _decode_chunk(self, c: ChunkRef, raw: bytes, table: str, cols: list[str],
                      out: dict[str, np.ndarray] | None = None) -> tuple[int, int, dict]:
        """:func:`neuron_profiler.trace.decode.decode_chunk` of chunk ``c``; with ``out`` (slices sized by the
        footer index) the chunk must hold the rows the index says."""
        try:
            return decode_chunk(raw, table, cols, len(self._strings), out=out,
                                expect=None if out is None else (c.first_row, c.rows))
        except ChunkError as e:
            raise self._err(CorruptTraceError, c.offset, str(e)) from None

    def _load_strings(self) -> np.ndarray:
        values: list[str] = []
        sid = TABLE_IDS[STRINGS_TABLE]
        for c in self._chunks:
            if c.table_id != sid:
                continue
            msg = self._chunk_message(c)
            if msg is None:
                continue
            if msg.first_row != len(values):
                raise self._err(CorruptTraceError, c.offset, f"string chunk starts at id {msg.first_row}, "
                                f"expected {len(values)}")
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


def read_trace(path: str | os.PathLike, *, strict: bool = True) -> TraceFile:
    """Open a trace file (tables load lazily with ``.table(name)``). Raises ``TraceFormatError`` subclasses."""
    return TraceFile(path, strict=strict)


__all__ = ["TraceFile", "read_trace", "FORMAT_MAJOR", "FORMAT_MINOR"]
