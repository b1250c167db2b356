"""Column arrays <-> packed proto fields. Only the reader and writer use this module.

The writer's steps 1 and 2 (see ``writer``): ``prepare`` checks a batch and interns its strings, ``take_rows`` cuts
a chunk's rows off a table's buffered batches, ``encode_rows`` serializes them (``encode_strings``: a chunk of the
strings table). ``normalize`` is the check alone (``TraceBuilder`` keeps its batches so)."""
from __future__ import annotations

from collections.abc import Callable, Mapping
from typing import Any

import numpy as np
import pandas as pd

from neuron_profiler.trace.columns import TABLE_IDS, TABLES, TIME_COLUMNS, Column, columns_of
from neuron_profiler.trace.wire import encode_varint
from schemas import pb

#: the columns of each table, looked up once: the write path checks a table's name once, in ``prepare``
_SPECS: dict[str, Mapping[str, Column]] = {t: columns_of(t) for t in TABLES}
_NUMPY_KIND = {"delta": np.int64, "ref": np.int64, "int": np.int64, "uint": np.int64, "float": np.float64}


def column_length(columns: Mapping[str, Any]) -> int:
    """Row count of a column mapping (scalars broadcast); ValueError when lengths disagree."""
    n = None
    for name, v in columns.items():
        if _is_scalar(v):
            continue
        m = len(v)
        if n is None:
            n = m
        elif m != n:
            raise ValueError(f"column {name!r} has {m} rows, expected {n} like the other columns")
    if n is None:
        raise ValueError("at least one column must be an array (scalars only broadcast)")
    return n


def _is_scalar(v: Any) -> bool:
    return v is None or isinstance(v, (str, bytes, int, float, np.generic))


class NormalizedBatch(dict):
    """A batch of ``rows`` rows already through ``normalize`` (``TraceBuilder`` keeps its batches so):
    ``prepare`` takes it without validating and converting it again."""

    def __init__(self, rows: int, columns: dict[str, Any]) -> None:
        super().__init__(columns)
        self.rows = rows


def prepare(table: str, columns: Mapping[str, Any] | pd.DataFrame,
            intern: Callable[[Any, int], np.ndarray]) -> tuple[int, dict[str, Any]]:
    """The writer's step 1 for one batch: ``normalize`` it (unless it is a ``NormalizedBatch``), then replace each
    string column by its uint32 ids from ``intern(values, rows)`` (e.g. ``StringTable.intern_array``), in column
    order. Returns (rows, {column: array})."""
    spec = columns_of(table)
    if type(columns) is NormalizedBatch:
        n, cols = columns.rows, dict(columns)
    else:
        n, cols = _normalize(table, spec, columns)
    for name, v in cols.items():
        if spec[name].kind == "string":
            cols[name] = intern(v, n)
    return n, cols


def normalize(table: str, columns: Mapping[str, Any] | pd.DataFrame) -> tuple[int, dict[str, Any]]:
    """Validate column names and lengths; numeric columns become numpy arrays, string columns stay as given.

    Returns (rows, {column: array or string-like}). Unknown columns raise ValueError naming the valid ones.
    """
    return _normalize(table, columns_of(table), columns)


def _normalize(table: str, spec: Mapping[str, Column],
               columns: Mapping[str, Any] | pd.DataFrame) -> tuple[int, dict[str, Any]]:
    if isinstance(columns, pd.DataFrame):
        columns = {k: columns[k] for k in columns.columns}
    unknown = [k for k in columns if k not in spec]
    if unknown:
        raise ValueError(f"table {table!r} has no column(s) {unknown}; valid columns: {', '.join(spec)}")
    n = column_length(columns)
    out: dict[str, Any] = {}
    for name, v in columns.items():
        col = spec[name]
        if col.kind == "string":
            out[name] = v
            continue
        dtype = _NUMPY_KIND[col.kind]
        arr = np.full(n, v, dtype=dtype) if _is_scalar(v) else np.asarray(v)
        if arr.dtype != dtype:
            if col.kind != "float" and arr.dtype.kind == "f":
                if not np.isfinite(arr).all():
                    raise ValueError(f"column {table}.{name} holds NaN/inf; integer columns need finite values")
            arr = arr.astype(dtype)
        if col.kind == "uint" and len(arr) and arr.min() < 0:
            raise ValueError(f"column {table}.{name} must be >= 0, found {arr.min()}")
        if col.kind == "ref" and len(arr) and arr.min() < -1:
            raise ValueError(f"column {table}.{name} holds row ids, found {arr.min()} (use -1 for none)")
        out[name] = arr
    return n, out


def take_rows(table: str, batches: list[dict[str, np.ndarray]], rows: int,
              n: int) -> tuple[dict[str, np.ndarray], list[dict[str, np.ndarray]]]:
    """The first ``n`` of the ``rows`` rows that ``batches`` (prepared) hold, and the batches that are left.
    Columns missing from some batches get their default."""
    if len(batches) == 1 and rows == n:  # one whole batch: nothing to merge or split
        return batches[0], []
    spec = _SPECS[table]  # a table that ``prepare`` took
    merged: dict[str, np.ndarray] = {}
    for name in {k for b in batches for k in b}:
        parts = []
        for b in batches:
            m = len(next(iter(b.values())))
            parts.append(b[name] if name in b else _default_array(spec[name], m))
        merged[name] = np.concatenate(parts) if len(parts) > 1 else parts[0]
    head = {k: v[:n] for k, v in merged.items()}
    return head, [{k: v[n:] for k, v in merged.items()}] if rows > n else []


def _default_array(col: Column, n: int) -> np.ndarray:
    if col.kind == "string":
        return np.zeros(n, dtype=np.uint32)
    return np.full(n, col.default, dtype=np.float64 if col.kind == "float" else np.int64)


def encode_rows(table: str, first_row: int, rows: int, cols: Mapping[str, np.ndarray]) -> tuple[bytes, int, int]:
    """The writer's step 2: ``rows`` prepared rows of ``table`` whose first row id is ``first_row`` as a serialized
    chunk (``encode_chunk``), and their time bounds (``time_bounds``)."""
    lo, hi = time_bounds(table, cols)
    return encode_chunk(TABLE_IDS[table], first_row, rows, _SPECS[table], cols), lo, hi


def encode_strings(first_row: int, values: list[str]) -> bytes:
    """A serialized chunk of the strings table: ``values`` are the strings of ids ``first_row`` onwards."""
    chunk = pb.Chunk(first_row=first_row, rows=len(values))
    chunk.strings.value.extend(values)
    return chunk.SerializeToString()


def time_bounds(table: str, cols: Mapping[str, Any]) -> tuple[int, int]:
    """(min start, max end) of a normalized batch, (0, 0) for tables without time."""
    tc = TIME_COLUMNS.get(table)
    if not tc or tc[0] not in cols or len(cols[tc[0]]) == 0:
        return 0, 0
    ts = cols[tc[0]]
    end = ts + cols[tc[1]] if tc[1] and tc[1] in cols else ts
    return int(ts.min()), int(end.max())


def encode_chunk(table_field: int, first_row: int, rows: int, spec: Mapping[str, Column],
                 cols: Mapping[str, np.ndarray]) -> bytes:
    """Serialized ``Chunk`` (first_row, rows and the table's ``*Columns`` message at oneof field
    ``table_field``) from normalized, interned columns (string columns already uint32 ids).

    Packed fixed-width fields are written as their little-endian bytes (protobuf's wire format for them), which
    skips building a message element by element. Columns holding only defaults are left out. Raises
    ValueError naming the column when a value does not fit its field."""
    body = []
    for name, col in sorted(((n, spec[n]) for n in cols), key=lambda nc: nc[1].number):
        kind, default, wire, max_wire, key = _wire_plan(table_field, col)
        arr = cols[name]
        if kind == "delta":
            if len(arr):
                d = np.empty(len(arr), dtype=np.int64)
                d[0] = arr[0]
                np.subtract(arr[1:], arr[:-1], out=d[1:])
                arr = d
        elif kind == "ref":
            arr = arr + 1
            if not arr.any():
                continue  # all defaults (0 = none after the shift): leave the packed field empty
        elif kind == "string" or default == 0:
            if not arr.any():
                continue  # string id 0 = ""
        elif (arr == default).all():
            continue
        if max_wire is not None and arr.dtype != np.uint32 and len(arr) and int(arr.max()) > max_wire:
            raise ValueError(f"column {name!r} holds {int(arr.max())}, above the {max_wire} its "
                             f"32-bit field can store")  # (uint32 arrays, e.g. string ids, always fit)
        raw = np.ascontiguousarray(arr, dtype=wire)  # joined below through the buffer protocol: no extra copy
        body += [key, encode_varint(raw.nbytes), raw]
    payload = b"".join(body)  # type: ignore[arg-type]  # bytes and contiguous arrays (buffers)
    head = [1 << 3, first_row, 2 << 3, rows, table_field << 3 | 2, len(payload)]  # field keys and values
    return b"".join([*map(encode_varint, head), payload])


_UINT32_MAX = int(np.iinfo(np.uint32).max)  # Column.max_wire_value of 32-bit fields, without an iinfo per column
_LE_DTYPES: dict[type, np.dtype] = {}
_PLANS: dict[tuple[int, int], tuple[Column, tuple[str, Any, np.dtype, int | None, bytes]]] = {}


def _wire_plan(table_field: int, col: Column) -> tuple[str, Any, np.dtype, int | None, bytes]:
    """(kind, default, little-endian wire dtype, largest storable value for 32-bit integer fields else None,
    field key bytes) of ``col``, computed once per column (``Column``'s properties build them on each access;
    keyed by table and field number, which hash in C, unlike the dataclass)."""
    hit = _PLANS.get((table_field, col.number))
    if hit is not None and hit[0] is col:
        return hit[1]
    wire = _LE_DTYPES.get(col.wire_dtype)
    if wire is None:
        wire = _LE_DTYPES[col.wire_dtype] = np.dtype(col.wire_dtype).newbyteorder("<")
    max_wire = _UINT32_MAX if col.kind != "float" and col.wire_dtype == np.uint32 else None
    plan = (col.kind, col.default, wire, max_wire, encode_varint(col.number << 3 | 2))
    _PLANS[(table_field, col.number)] = (col, plan)
    return plan


def read_columns(wire_of: Callable[[Column], np.ndarray | None], spec: Mapping[str, Column], rows: int,
                 wanted: list[str], out: Mapping[str, np.ndarray] | None = None) -> dict[str, np.ndarray]:
    """Decode ``wanted`` columns of one chunk into numpy arrays of ``rows`` elements.

    ``wire_of(column)`` gives the column's stored elements in its wire dtype (empty: not stored, every row
    has the default; None: unreadable). String columns come back as uint32 ids, other integers as int64,
    floats as float64. With ``out``, each column is decoded straight into ``out[column]`` (an array of
    ``rows`` elements of that dtype). Raises ValueError on a column of the wrong length."""
    res: dict[str, np.ndarray] = {}
    for name in wanted:
        col = spec[name]
        dst = None if out is None else out[name]
        wire = wire_of(col)
        if wire is None:
            raise ValueError(f"column {name!r} is not a whole number of {np.dtype(col.wire_dtype).itemsize}-byte "
                             f"values")
        if len(wire) == 0:
            if dst is None:
                dst = np.empty(rows, dtype=column_dtype(col))
            dst.fill(0 if col.kind == "string" else col.default)
            res[name] = dst
            continue
        if len(wire) != rows:
            raise ValueError(f"column {name!r} has {len(wire)} values for {rows} rows")
        if col.kind == "delta":
            res[name] = np.cumsum(wire, out=dst, dtype=np.int64)
        elif col.kind == "ref":
            res[name] = np.subtract(wire, 1, out=dst, dtype=np.int64, casting="unsafe")
        elif dst is not None:
            dst[:] = wire
            res[name] = dst
        else:  # a fresh native-order array (wire may be a read-only view of the chunk's bytes)
            res[name] = wire.astype(column_dtype(col))
    return res


def column_dtype(col: Column) -> type:
    """The numpy dtype a column decodes to: uint32 string ids, float64, else int64."""
    return np.uint32 if col.kind == "string" else (np.float64 if col.kind == "float" else np.int64)
