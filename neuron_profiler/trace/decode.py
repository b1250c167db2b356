"""Decoding of one decompressed chunk into numpy columns, independent of where the chunk sits in a file.

Every problem raises :class:`ChunkError` with a message that does not name the file; the reader adds the file
and byte offset. Only the reader uses this module.
"""
from __future__ import annotations

import numpy as np
from google.protobuf.message import DecodeError

from neuron_profiler.trace import framing
from neuron_profiler.trace.columns import TABLE_IDS, TABLE_NAMES, TABLES, columns_of
from neuron_profiler.trace.encode import read_columns
from neuron_profiler.trace.wire import scan_chunk
from schemas import pb

#: A chunk with no stored column may declare at most this many (all-default) rows.
MAX_DEFAULT_ROWS = 1 << 20
#: Field numbers of each table's columns (what the wire view accepts in a chunk).
_COLUMN_FIELDS = {t: frozenset(c.number for c in cols) for t, cols in TABLES.items()}


class ChunkError(ValueError):
    """A chunk whose bytes do not hold what its frame says (the reader reports it as corruption)."""


def _table_name(table_id: int) -> str:
    return TABLE_NAMES.get(table_id, f"field {table_id}")


def parse_chunk(raw: bytes, table_id: int) -> pb.Chunk:
    """The protobuf message of a chunk whose frame says table ``table_id``."""
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
    view = scan_chunk(raw, _COLUMN_FIELDS[table])
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
