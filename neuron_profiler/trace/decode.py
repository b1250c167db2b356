"""Decoding of one decompressed chunk into numpy columns, independent of where the chunk sits in a file.

Every problem raises :class:`ChunkError` with a message that does not name the file; the reader adds the file
and byte offset. Only the reader uses this module.
"""
from __future__ import annotations

import numpy as np
from google.protobuf.message import DecodeError

from neuron_profiler.trace import framing
from neuron_profiler.trace.columns import TABLE_IDS, TABLE_NAMES, TABLES, columns_of
from neuron_profiler.trace.encode import column_dtype, read_columns
from neuron_profiler.trace.index import MAX_ROW_ID
from neuron_profiler.trace.wire import RepeatedFieldError, scan_chunk
from schemas import pb

#: A chunk with no stored column may declare at most this many (all-default) rows.
MAX_DEFAULT_ROWS = 1 << 20
#: Field numbers of each table's columns (what the wire view accepts in a chunk).
_COLUMN_FIELDS = {t: frozenset(c.number for c in cols) for t, cols in TABLES.items()}
#: Packed bytes of one row with every column stored, per table.
_WIRE_ROW_BYTES = {t: sum(np.dtype(c.wire_dtype).itemsize for c in cols) for t, cols in TABLES.items()}


def max_chunk_bytes(table: str, rows: int) -> int:
    """The most bytes a valid chunk of ``rows`` rows of ``table`` decompresses to: twice its packed columns
    (room for unpacked encodings and the columns of newer minors) plus 64 KiB. More is a decompression bomb."""
    return (1 << 16) + 2 * rows * _WIRE_ROW_BYTES[table]


def row_bytes(table: str, cols: list[str]) -> int:
    """Bytes one decoded row of ``cols`` occupies (the reader's dtypes: uint32 string ids, int64, float64)."""
    spec = columns_of(table)
    return sum(np.dtype(column_dtype(spec[c])).itemsize for c in cols)


class ChunkError(ValueError):
    """A chunk whose bytes do not hold what its frame says (the reader reports it as corruption)."""


def _table_name(table_id: int) -> str:
    return TABLE_NAMES.get(table_id, f"field {table_id}")


def parse_chunk(raw: bytes, table_id: int) -> pb.Chunk:
    """The protobuf message of a chunk whose frame says table ``table_id``."""
    if raw[:1] and raw[0] < 8:  # a key of field number 0 (e.g. a run of zeros): invalid, found without the parser
        raise ChunkError("chunk cannot be decoded: it starts with field number 0 (invalid protobuf)")
    msg = pb.Chunk()
    try:
        msg.ParseFromString(raw)
    except DecodeError as e:
        raise ChunkError(f"chunk cannot be decoded: {e}") from None
    table = msg.WhichOneof("columns")
    if table is None or TABLE_IDS[table] != table_id:
        raise ChunkError(f"chunk frame says table {_table_name(table_id)!r}, payload holds {table!r}")
    return msg


def decode_chunk(raw: bytes, table: str, cols: list[str], n_strings: int, *,
                 out: dict[str, np.ndarray] | None = None,
                 expect: tuple[int, int] | None = None) -> tuple[int, int, dict[str, np.ndarray]]:
    """(first_row, rows, columns) of the chunk bytes ``raw`` of ``table``: through the zero-copy wire view
    when the chunk has the layout this package writes, else through the protobuf parser. With ``out``
    (arrays sized by the footer index, which says the chunk holds rows ``expect`` = (first_row, rows)) the
    columns are decoded into it. String ids must be below ``n_strings``."""
    spec = columns_of(table)
    table_id = TABLE_IDS[table]
    try:
        view = scan_chunk(raw, _COLUMN_FIELDS[table])
    except RepeatedFieldError as e:
        raise ChunkError(str(e)) from None
    if view is not None:
        if view.table_field != table_id:
            raise ChunkError(f"chunk frame says table {table!r}, payload holds {_table_name(view.table_field)!r}")
        first, rows, stored = view.first_row, view.rows, bool(view.fields)

        def wire_of(col):
            return view.array(col.number, col.wire_dtype)
    else:
        msg = parse_chunk(raw, table_id)
        body = getattr(msg, table)
        first, rows = msg.first_row, msg.rows
        stored = any(len(getattr(body, k)) for k in spec)

        def wire_of(col):
            return np.array(getattr(body, col.name), dtype=col.wire_dtype)
    if rows > framing.MAX_CHUNK_ROWS:
        raise ChunkError(f"chunk declares {rows} rows (at most {framing.MAX_CHUNK_ROWS})")
    if first + rows > MAX_ROW_ID:
        raise ChunkError(f"chunk declares first row {first} (row ids stay below 2^62)")
    if not stored and rows > MAX_DEFAULT_ROWS:
        raise ChunkError(f"chunk declares {rows} rows but stores no column")
    if expect is not None and (first, rows) != expect:
        raise ChunkError(f"chunk holds rows {first}+{rows}, the footer index says {expect[0]}+{expect[1]}")
    try:
        res = read_columns(wire_of, spec, rows, cols, out)
    except (ValueError, OverflowError) as e:
        raise ChunkError(f"table {table!r}: {e}") from None
    for k, v in res.items():
        if spec[k].kind == "string" and len(v) and int(v.max()) >= n_strings:
            raise ChunkError(f"column {table}.{k} refers to string id {int(v.max())}, but the file has only "
                             f"{n_strings} strings")
    return first, rows, res


#: What a trace file may expand to when read: this many times its size, plus ``DECODE_ALLOWANCE`` bytes.
#: Decompressed chunks and materialised rows are checked against it before anything is allocated, so a small
#: corrupt or hostile file (a compression bomb, chunks of millions of default rows) cannot take the memory.
#: Files this package writes decode to 8-20x their size (all columns, every table); LZ4 cannot expand more than
#: 255x, so 256x leaves room for very regular data.
DECODE_RATIO = 256
DECODE_ALLOWANCE = 64 << 20


def decode_limit(file_size: int) -> int:
    """The default ``max_decoded_bytes`` of a file of ``file_size`` bytes."""
    return DECODE_RATIO * file_size + DECODE_ALLOWANCE


class DecodeBudget:
    """Bytes one read (one ``table()`` or ``tables()`` call) may still materialise; thread-safe."""

    def __init__(self, limit: int) -> None:
        import threading

        self.limit = int(limit)
        self.used = 0
        self._lock = threading.Lock()

    @property
    def remaining(self) -> int:
        return max(self.limit - self.used, 0)

    def take(self, nbytes: int, what: str) -> None:
        """Reserve ``nbytes``; ``ChunkError`` (nothing reserved) when they exceed what is left."""
        with self._lock:
            if self.used + nbytes > self.limit:
                raise ChunkError(f"{what} would take {nbytes:,} bytes decoded, beyond the {self.limit:,} bytes this "
                                 f"file may expand to ({DECODE_RATIO}x its size + {DECODE_ALLOWANCE >> 20} MiB): the "
                                 f"file is corrupt or hostile. A real trace that large reads with fewer columns, a "
                                 f"time window (start_ns/end_ns) or read_trace(path, max_decoded_bytes=N)")
            self.used += nbytes
