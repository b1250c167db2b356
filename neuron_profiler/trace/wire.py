"""Protobuf wire-format helpers: varints (written by the trace writer and the Perfetto exporter), and a
zero-copy view of a table chunk's packed fixed-width columns, read straight from the wire bytes.

A ``Chunk`` of an event table is ``first_row``, ``rows`` and one ``*Columns`` message whose fields are packed
fixed-width arrays, i.e. little-endian bytes behind a length. Walking those few field headers and handing the
bytes to ``np.frombuffer`` skips upb's parse, which copies every column while holding the GIL. Anything this
walker does not expect (an unknown or repeated field, a non-packed encoding, a malformed header) returns None
and the reader falls back to the full protobuf parser, so files from any conforming writer still read.
"""
from __future__ import annotations

from dataclasses import dataclass

import numpy as np

_LEN, _VARINT = 2, 0
_CHUNK_FIRST_ROW, _CHUNK_ROWS = 1, 2
#: A chunk's top level holds first_row, rows and one table message; the Python walkers look at no more fields
#: than this (each at most once), so their work is bounded whatever the decompressed bytes hold; anything else
#: goes to the protobuf parser (C)
_MAX_TOP_FIELDS = 4


class RepeatedFieldError(ValueError):
    """A chunk whose top level holds field 0, a field twice, or more fields than a chunk has. Protobuf parsers
    accept a repeated scalar (the last one wins), but no writer produces one and a compressed run of them (``08 00``
    x 16M: 32 MB from a 120 KB chunk) costs the C parser 0.4 s per read: the chunk is corrupt, found in the first
    bytes."""


@dataclass
class ChunkView:
    """Where each column of one chunk sits in ``buf``: ``fields`` maps field number -> (offset, length)."""

    buf: bytes
    first_row: int
    rows: int
    table_field: int
    fields: dict[int, tuple[int, int]]

    def array(self, number: int, dtype: type) -> np.ndarray | None:
        """Column ``number`` as a read-only little-endian array over ``buf`` (no copy), empty when the chunk
        does not store it; None when its byte length is not a whole number of elements (corruption)."""
        if number not in self.fields:
            return np.zeros(0, dtype=dtype)
        off, n = self.fields[number]
        dt = np.dtype(dtype).newbyteorder("<")
        if n % dt.itemsize:
            return None
        return np.frombuffer(self.buf, dtype=dt, count=n // dt.itemsize, offset=off)


def encode_varint(v: int) -> bytes:
    """``v`` as a protobuf varint (negative values as their 64-bit two's complement)."""
    v &= (1 << 64) - 1
    out = bytearray()
    while v > 0x7F:
        out.append((v & 0x7F) | 0x80)
        v >>= 7
    out.append(v)
    return bytes(out)


def _varint(buf: bytes, pos: int, end: int) -> tuple[int, int]:
    result = shift = 0
    while pos < end and shift < 64:
        b = buf[pos]
        pos += 1
        result |= (b & 0x7F) << shift
        if b < 0x80:
            return result, pos
        shift += 7
    raise ValueError("truncated or overlong varint")


def leading_head(buf: bytes) -> tuple[int, int]:
    """(first_row, rows) from the first bytes of a serialized ``Chunk``: the varint fields before its first
    length-delimited field (the table's columns), which protobuf serializers write first (fields in number
    order; a field left out is 0). ValueError when the bytes cannot start a chunk (field number 0, a bad wire
    type, the prefix ends before the columns begin)."""
    first_row = rows = 0
    pos, end = 0, len(buf)
    seen: set[int] = set()
    while pos < end:
        key, pos = _varint(buf, pos, end)
        number, wtype = key >> 3, key & 7
        if wtype == _LEN and number not in (_CHUNK_FIRST_ROW, _CHUNK_ROWS) and number > 0:
            return first_row, rows
        if number in seen:
            raise ValueError(f"chunk repeats field {number} before its columns")
        seen.add(number)
        if wtype != _VARINT or number not in (_CHUNK_FIRST_ROW, _CHUNK_ROWS):
            raise ValueError(f"chunk starts with field {number} of wire type {wtype}, not its row range and columns")
        value, pos = _varint(buf, pos, end)
        if number == _CHUNK_FIRST_ROW:
            first_row = value
        else:
            rows = value
    raise ValueError("chunk ends before its columns begin")


def chunk_head(buf: bytes) -> tuple[int, int] | None:
    """(first_row, rows) of a serialized ``Chunk`` without parsing its columns; None when the top-level fields
    are malformed (the protobuf parser then gives the error); ``RepeatedFieldError`` for a field 0 or a field
    given twice."""
    first_row = rows = 0
    pos, end = 0, len(buf)
    seen: set[int] = set()
    try:
        while pos < end:
            key, pos = _varint(buf, pos, end)
            number, wtype = key >> 3, key & 7
            if number == 0 or number in seen or len(seen) >= _MAX_TOP_FIELDS:
                raise RepeatedFieldError(f"chunk cannot be decoded: it holds field {number} "
                                         f"{'(invalid)' if number == 0 else 'twice or more fields than a chunk has'}")
            seen.add(number)
            if wtype == _VARINT:
                value, pos = _varint(buf, pos, end)
                if number == _CHUNK_FIRST_ROW:
                    first_row = value
                elif number == _CHUNK_ROWS:
                    rows = value
            elif wtype == _LEN:
                n, pos = _varint(buf, pos, end)
                pos += n
            elif wtype in (1, 5):  # fixed64, fixed32
                pos += 8 if wtype == 1 else 4
            else:
                return None
        return (first_row, rows) if pos == end else None
    except RepeatedFieldError:
        raise
    except (ValueError, IndexError):
        return None


def scan_chunk(buf: bytes, column_fields: frozenset[int]) -> ChunkView | None:
    """The view of a serialized ``Chunk`` whose table message holds only the packed fields
    ``column_fields``, each at most once; None when the full parser is needed; ``RepeatedFieldError`` when a
    top-level field is given twice."""
    try:
        first_row = rows = 0
        table: tuple[int, int, int] | None = None
        pos, end = 0, len(buf)
        seen: set[int] = set()
        while pos < end:
            key, pos = _varint(buf, pos, end)
            number, wtype = key >> 3, key & 7
            if number in seen:  # a repeated field (e.g. runs of ``08 00``): corrupt, and never walked further
                raise RepeatedFieldError(f"chunk cannot be decoded: it holds field {number} twice")
            seen.add(number)
            if wtype == _VARINT and number in (_CHUNK_FIRST_ROW, _CHUNK_ROWS):
                value, pos = _varint(buf, pos, end)
                if number == _CHUNK_FIRST_ROW:
                    first_row = value
                else:
                    rows = value
            elif wtype == _LEN and table is None and number not in (_CHUNK_FIRST_ROW, _CHUNK_ROWS):
                n, pos = _varint(buf, pos, end)
                if pos + n > end:
                    return None
                table = (number, pos, pos + n)
                pos += n
            else:
                return None
        if table is None:
            return None
        fields: dict[int, tuple[int, int]] = {}
        number, pos, end = table
        while pos < end:
            key, pos = _varint(buf, pos, end)
            field, wtype = key >> 3, key & 7
            if wtype != _LEN or field not in column_fields or field in fields:
                return None
            n, pos = _varint(buf, pos, end)
            if pos + n > end:
                return None
            fields[field] = (pos, n)
            pos += n
        return ChunkView(buf, first_row, rows, number, fields)
    except RepeatedFieldError:
        raise
    except (ValueError, IndexError):
        return None
