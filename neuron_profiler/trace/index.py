"""Where the chunks of a trace file are: the footer's index, checked against the file before it is trusted, or
a scan of the record frames (files whose writer did not finish). The writer builds the footer here
(``build_footer``, its step 5); the reader reads and checks it.

An index is trusted only when it is consistent: entries in file order without overlaps, each pointing at a
chunk frame of its table and length, and per table row ranges that start at 0, follow each other without gap
or overlap and add up to the footer's row count. Anything else (a chunk listed twice, a chunk removed with
its entry) makes the reader scan the file instead and report what the index claimed.
"""
from __future__ import annotations

import mmap
from collections.abc import Callable, Iterable, Mapping
from dataclasses import dataclass
from typing import Any, NamedTuple

from neuron_profiler.trace import framing
from neuron_profiler.trace.columns import STRINGS_TABLE, TABLE_IDS, TABLE_NAMES, TIME_COLUMNS
from schemas import pb

#: Row ids stay below this (so first_row + rows never overflows int64); a larger first_row is corruption.
MAX_ROW_ID = 1 << 62


class Frame(NamedTuple):
    """The fixed 12 bytes in front of a record's payload."""

    length: int
    rtype: int
    codec: int
    table_id: int
    check: int  # CRC-8 of the 7 bytes before it (2.2+; 0 in 2.0/2.1 files)
    crc: int


@dataclass
class ChunkRef:
    """Where a chunk sits in the file; rows/first_row are -1 until known (footer entry or the chunk's head)."""

    table_id: int
    offset: int
    length: int
    codec: int = -1
    first_row: int = -1
    rows: int = -1
    min_ts: int = 0
    max_end_ts: int = 0

    @property
    def end_row(self) -> int:
        return self.first_row + self.rows


_TIME_TABLE_IDS = frozenset(TABLE_IDS[t] for t in TIME_COLUMNS)


def build_footer(chunks: Iterable[ChunkRef], table_rows: Mapping[str, int], dropped_events: Mapping[str, int],
                 metadata: Mapping[str, Any]) -> pb.Footer:
    """The footer of a written file: its chunks in file order, rows per table, dropped-event counts, metadata
    (values as str) and the time span of the chunks of tables with time (0, 0 when there are none)."""
    ft = pb.Footer()
    lo: int | None = None
    hi: int | None = None
    for c in chunks:
        ft.chunks.add(table_id=c.table_id, offset=c.offset, length=c.length, first_row=c.first_row, rows=c.rows,
                      min_ts=c.min_ts, max_end_ts=c.max_end_ts)
        if c.table_id in _TIME_TABLE_IDS:
            lo = c.min_ts if lo is None else min(lo, c.min_ts)
            hi = c.max_end_ts if hi is None else max(hi, c.max_end_ts)
    for t, n in table_rows.items():
        ft.table_rows[t] = n
    for k, v in dropped_events.items():
        ft.dropped_events[k] = int(v)
    for key, value in metadata.items():
        ft.metadata[key] = str(value)
    ft.min_ts = lo or 0
    ft.max_ts = hi or 0
    return ft


def read_frame(buf: bytes | mmap.mmap, size: int, pos: int) -> Frame | None:
    """The frame at ``pos``, None when the file ends inside it."""
    if pos < 0 or pos + framing.FRAME.size > size:
        return None
    return Frame(*framing.FRAME.unpack_from(buf, pos))


def frame_problem(fr: Frame, require_check: bool) -> str | None:
    """What is wrong with a frame's fixed fields (None when they are valid); the payload CRC is checked on read.
    ``require_check``: the file is 2.2+, whose frames carry the CRC-8 check byte (older ones hold 0 there, or the
    check written by a newer writer)."""
    check = framing.frame_check(fr.length, fr.rtype, fr.codec, fr.table_id)
    if fr.check != check and (require_check or fr.check != 0):
        return f"frame check byte mismatch (0x{fr.check:02x}, expected 0x{check:02x}): the frame is corrupt"
    if fr.rtype not in framing.RECORD_TYPES:
        return f"unknown record type {fr.rtype}"
    if fr.codec not in framing.CODECS.values():
        return f"unknown codec {fr.codec}"
    if fr.length > framing.MAX_RECORD_BYTES:
        return f"declared record length {fr.length} exceeds the {framing.MAX_RECORD_BYTES}-byte limit"
    return None


def table_name(table_id: int) -> str:
    return TABLE_NAMES.get(table_id, f"table {table_id}")


def chunks_from_footer(ft: pb.Footer, frame_at: Callable[[int], Frame | None], data_start: int, footer_off: int,
                       ignore_unknown_tables: bool) -> tuple[list[ChunkRef], str | None]:
    """The chunks the footer lists and, when the index cannot be trusted, why (then the list is not used).

    ``ignore_unknown_tables``: the file has a newer minor version, whose new tables this reader skips."""
    chunks: list[ChunkRef] = []
    prev_end = data_start
    most = max(footer_off - data_start, 0) // framing.FRAME.size  # every chunk takes at least its frame
    if len(ft.chunks) > most:  # (a footer of a million empty entries is ~2 MB: never sorted nor walked)
        return [], f"it lists {len(ft.chunks):,} chunks, more than the {footer_off - data_start:,} bytes before it hold"
    for e in sorted(ft.chunks, key=lambda e: e.offset):
        if e.table_id not in TABLE_NAMES:
            if ignore_unknown_tables:
                continue
            return [], f"an entry names unknown table id {e.table_id}"
        if e.offset < prev_end:
            what = "listed twice" if any(c.offset == e.offset for c in chunks) else "overlaps the one before"
            return [], f"the chunk at byte {e.offset} is {what}"
        if e.offset + e.length > footer_off:
            return [], f"the entry at byte {e.offset} reaches past the footer"
        if e.rows > framing.MAX_CHUNK_ROWS:
            return [], (f"the entry at byte {e.offset} declares a chunk of {e.rows} rows (at most "
                        f"{framing.MAX_CHUNK_ROWS})")
        if e.first_row + e.rows > MAX_ROW_ID:
            return [], f"the entry at byte {e.offset} declares first row {e.first_row}"
        fr = frame_at(e.offset)
        if fr is None or fr.rtype != framing.CHUNK or fr.table_id != e.table_id \
                or framing.FRAME.size + fr.length != e.length:
            return [], f"the entry at byte {e.offset} does not point at a {table_name(e.table_id)} chunk of its length"
        prev_end = e.offset + e.length
        chunks.append(ChunkRef(e.table_id, e.offset, e.length, fr.codec, e.first_row, e.rows, e.min_ts,
                               e.max_end_ts))
    problem = _rows_problem(chunks, dict(ft.table_rows))
    return chunks, problem


def _rows_problem(chunks: list[ChunkRef], table_rows: dict[str, int]) -> str | None:
    """Per table, row ranges must follow each other from 0 and add up to the footer's row count."""
    end: dict[int, int] = {}
    for c in chunks:
        expected = end.get(c.table_id, 0)
        if c.first_row != expected:
            gap = "missing" if c.first_row > expected else "listed twice"
            lo, hi = sorted((expected, c.first_row))
            return f"{table_name(c.table_id)} rows {lo:,}-{hi - 1:,} are {gap}"
        end[c.table_id] = c.end_row
    for name, claimed in table_rows.items():
        tid = TABLE_IDS.get(name)
        if tid is None or name == STRINGS_TABLE:
            continue
        if end.get(tid, 0) != claimed:
            return f"the footer counts {claimed:,} {name} rows, its chunks hold {end.get(tid, 0):,}"
    for tid, rows in end.items():
        name = table_name(tid)
        if tid != TABLE_IDS[STRINGS_TABLE] and rows and name not in table_rows:
            return f"the footer has no row count for {name}, whose chunks hold {rows:,} rows"
    return None


@dataclass
class Spans:
    """The chunks of one table with known heads, checked: what to read, and what is missing or doubled."""

    kept: list[ChunkRef]
    gaps: list[tuple[int, int]]  # [first, end) row ranges no chunk holds
    overlapping: list[ChunkRef]  # chunks whose rows another chunk already holds


def check_spans(chunks: Iterable[ChunkRef]) -> Spans:
    """Walk the chunks of one table in file order (heads known, rows >= 0)."""
    out = Spans([], [], [])
    expected = 0
    for c in chunks:
        if c.first_row < expected:
            out.overlapping.append(c)
            continue
        if c.first_row > expected:
            out.gaps.append((expected, c.first_row))
        out.kept.append(c)
        expected = c.end_row
    return out


def describe_gaps(table: str, gaps: list[tuple[int, int]]) -> str:
    """"instructions rows 100-199, 300-399 missing (200 rows)" (at most three ranges spelled out)."""
    n = sum(b - a for a, b in gaps)
    ranges = ", ".join(f"{a:,}-{b - 1:,}" for a, b in gaps[:3]) + (", ..." if len(gaps) > 3 else "")
    return f"{table} rows {ranges} missing ({n:,} rows)"
