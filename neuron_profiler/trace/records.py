"""A trace file as records: the file's bytes, the header, the chunk index and what is known to be wrong with them.

``RecordFile`` opens a file (regular files only, read with positional reads and never mapped, so a file truncated
under a reader is a ``TruncatedTraceError``, not a SIGBUS), checks every frame it reads (check byte, length,
payload CRC; the decompressed size bounded by what the chunk's rows can hold), trusts a footer index
only when it is consistent (else it scans the frames), and keeps track of what is missing (truncation, an
unusable footer, unreadable chunks, row ranges no chunk holds) for ``loss_report()``. ``TraceFile`` (the
reader) builds tables on it. Every problem is a ``TraceFormatError`` naming the file and byte offset.
"""
from __future__ import annotations

import os
import threading
import zlib
from pathlib import Path

from google.protobuf.message import DecodeError

from neuron_profiler.trace import framing
from neuron_profiler.trace.columns import FORMAT_MAJOR, FORMAT_MINOR, STRINGS_TABLE, TABLE_IDS, TABLE_NAMES, TABLES
from neuron_profiler.trace.decode import ChunkError, decode_limit, max_chunk_bytes, parse_chunk
from neuron_profiler.trace.errors import (
    CorruptTraceError,
    NotATraceError,
    TraceFormatError,
    TruncatedTraceError,
    UnsupportedVersionError,
)
from neuron_profiler.trace.files import open_regular_file
from neuron_profiler.trace.index import (
    MAX_ROW_ID,
    ChunkRef,
    Frame,
    check_spans,
    chunks_from_footer,
    describe_gaps,
    frame_problem,
    read_frame,
    table_name,
)
from neuron_profiler.trace.wire import RepeatedFieldError, chunk_head, leading_head
from schemas import pb

#: Footer metadata key under which a copy of a partial trace keeps its source's loss report.
LOSS_KEY = "source_loss_report"
#: A footer decompresses to at most this many times the bytes before it, plus ``_FOOTER_ALLOWANCE``: its index
#: holds one entry (< 80 bytes) per chunk of the file (>= 12 bytes each), its metadata is small beside the data
#: (0.2-17 % of it in the sample traces). More is corruption; parsed, a compressed run of empty index entries
#: would take ~75 bytes of memory per 2 bytes (a 32 MB run: 1.2 GB).
_FOOTER_RATIO = 16
_FOOTER_ALLOWANCE = 2 << 20
#: Decompressed bytes that always hold a chunk's first_row and rows (two keyed varints and the next key).
_HEAD_BYTES = 32


class RecordFile:
    """The records of one trace file (see the module docstring); ``max_decoded_bytes`` bounds what one read may
    materialise (default ``decode.decode_limit(size)``: 256x the file size + 64 MiB)."""

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
        self._file = open_regular_file(self.path)  # positional reads: a file truncated under it is an error
        self.size = self._file.size
        self.max_decoded_bytes = decode_limit(self.size) if max_decoded_bytes is None else int(max_decoded_bytes)
        try:
            self._check_magic()
            self.header, pos = self._read_header()
            self._require_crc = (self.header.format_major, self.header.format_minor) >= framing.CHECK_SINCE
            self._newer_minor = self.header.format_minor > FORMAT_MINOR
            self.footer: pb.Footer | None = None
            self.lost_bytes = 0
            self._chunks = self._index(pos)
        except BaseException:
            self.close()
            raise

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
    def footer_metadata(self) -> dict[str, str]:
        return dict(self.footer.metadata) if self.footer is not None else {}

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

    def close(self) -> None:
        f = getattr(self, "_file", None)  # absent when __init__ failed before opening the file
        if f is not None:
            f.close()

    def __enter__(self):
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
        head = self._file.read(0, len(framing.MAGIC))
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
        if pos < 0 or pos + framing.FRAME.size > self.size:
            return None
        return read_frame(self._file.read(pos, framing.FRAME.size), framing.FRAME.size, 0)

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
        data = self._file.read(start, fr.length)
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
            limit = min(self.max_decoded_bytes, _FOOTER_RATIO * self.size + _FOOTER_ALLOWANCE)  # as for the footer
            h.ParseFromString(self._record(pos, fr, limit, "header"))
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
        limit = min(self.max_decoded_bytes, _FOOTER_RATIO * off + _FOOTER_ALLOWANCE)
        try:
            return pb.Footer.FromString(self._record(off, fr, limit, "footer"))
        except TraceFormatError as e:
            self._issue(f"the footer is unreadable ({e.detail}); the file was scanned")  # type: ignore[attr-defined]
        except DecodeError as e:
            self._issue(f"the footer at byte {off} cannot be decoded ({e}); the file was scanned")
        return None

    def _index_from_footer(self, data_start: int) -> list[ChunkRef] | None:
        trailer_at = self.size - framing.TRAILER.size
        if trailer_at < data_start:
            return None
        off, magic = framing.TRAILER.unpack(self._file.read(trailer_at, framing.TRAILER.size))
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
        footer: tuple[int, Frame] | None = None  # a footer frame without a valid trailer: (its offset, frame)
        stop: str | None = None
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
                footer, pos = (pos, fr), self.size  # a footer without a valid trailer: no event data was lost
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
        elif footer is not None and not self._issues:  # the trailer is missing: the footer was not examined
            footer_at, fr = footer
            if footer_at + framing.FRAME.size + fr.length > self.size:
                self._issue(f"truncated at byte {self.size:,} inside the footer (every chunk before it was read)")
            else:
                ft = self._parse_footer(footer_at, fr)
                if ft is not None:
                    self._issue("the trailer is missing (the file was cut in its last 16 bytes); the file was scanned")
                    self._claimed_rows = {t: int(n) for t, n in ft.table_rows.items() if t in TABLES}
        elif footer is None and not self._issues:
            self._issue(f"no footer: the writer did not close the file (it ends after {len(chunks)} complete chunks)")
        return chunks

    # -- chunks ----------------------------------------------------------------------------------
    def _mark_unreadable(self, c: ChunkRef, e: TraceFormatError) -> None:
        # kept without its traceback and context: their frames hold the chunk's decompressed bytes
        e.__traceback__, e.__context__, e.__cause__ = None, None, None
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
            raise self._err(CorruptTraceError, c.offset, f"chunk declares {rows} rows (at most "
                            f"{framing.MAX_CHUNK_ROWS})")
        if first + rows > MAX_ROW_ID:
            raise self._err(CorruptTraceError, c.offset, f"chunk declares first row {first} (row ids stay below 2^62)")
        return first, rows

    def _check_head(self, c: ChunkRef, raw: bytes) -> tuple[int, int]:
        """(first_row, rows) of chunk ``c`` from its bytes, checked against the index and the size limits."""
        try:
            head = chunk_head(raw)
        except RepeatedFieldError as e:
            raise self._err(CorruptTraceError, c.offset, str(e)) from None
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

