"""Table and column definitions, read from the proto descriptors (the proto is the one source of truth).

Every table is a ``*Columns`` message inside ``Chunk.columns``; each field is a column whose encoding,
unit and referenced table are field options (see ``schemas/neuron_trace.proto``).
"""
from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from types import MappingProxyType

import numpy as np
from google.protobuf.descriptor import FieldDescriptor

from schemas import pb

#: Current format version written by this package; readers accept any minor of the same major.
FORMAT_MAJOR = 2
FORMAT_MINOR = 3
FORMAT_VERSION = f"{FORMAT_MAJOR}.{FORMAT_MINOR}"

STRINGS_TABLE = "strings"

#: value of an unwritten row, by column kind (integer kinds use the column's ``int_default``)
_KIND_DEFAULTS: dict[str, int | float | str] = {"string": "", "ref": -1, "float": 0.0}


@dataclass(frozen=True)
class Column:
    """One column of a table: its proto field and how it is encoded."""

    name: str
    number: int
    kind: str  # "delta" | "string" | "ref" | "int" | "uint" | "float"
    unit: str
    ref_table: str
    int_default: int = 0
    wire_dtype: type = np.int64  # numpy dtype of the packed field's elements

    @property
    def max_wire_value(self) -> int:
        """Largest value the packed field holds (writers check against it)."""
        return int(np.iinfo(self.wire_dtype).max)

    @property
    def default(self) -> int | float | str:
        """Value of a row whose column was never written."""
        return _KIND_DEFAULTS.get(self.kind, self.int_default)


def _column(field: FieldDescriptor) -> Column:
    opts = field.GetOptions()
    enc = opts.Extensions[pb.encoding]
    if enc == pb.DELTA:
        kind = "delta"
    elif enc == pb.STRING:
        kind = "string"
    elif enc == pb.REF:
        kind = "ref"
    elif field.type in (FieldDescriptor.TYPE_DOUBLE, FieldDescriptor.TYPE_FLOAT):
        kind = "float"
    elif field.type in _UNSIGNED:
        kind = "uint"
    else:
        kind = "int"
    if field.type not in _WIRE_DTYPES:
        raise TypeError(f"column {field.full_name} has proto type {field.type}; columns must be fixed-width "
                        "(fixed32, fixed64, sfixed64, double) so they parse at memory-copy speed")
    return Column(field.name, field.number, kind, opts.Extensions[pb.unit], opts.Extensions[pb.ref_table],
                  opts.Extensions[pb.default_value], _WIRE_DTYPES[field.type])


_UNSIGNED = (FieldDescriptor.TYPE_FIXED64, FieldDescriptor.TYPE_FIXED32)
_WIRE_DTYPES = {FieldDescriptor.TYPE_FIXED32: np.uint32, FieldDescriptor.TYPE_FIXED64: np.uint64,
                FieldDescriptor.TYPE_SFIXED64: np.int64, FieldDescriptor.TYPE_DOUBLE: np.float64}


_ONEOF = pb.Chunk.DESCRIPTOR.oneofs_by_name["columns"]

#: table name -> table id (the oneof field number, also stored in each record frame)
TABLE_IDS: dict[str, int] = {f.name: f.number for f in _ONEOF.fields}
TABLE_NAMES: dict[int, str] = {v: k for k, v in TABLE_IDS.items()}

#: event tables -> their columns, in field order (the internal ``strings`` table is not listed)
TABLES: dict[str, tuple[Column, ...]] = {
    f.name: tuple(_column(c) for c in f.message_type.fields)
    for f in _ONEOF.fields
    if f.name != STRINGS_TABLE
}

#: the timestamp column of each table (start_ts or ts) and its duration column ("" when none)
TIME_COLUMNS: dict[str, tuple[str, str]] = {}
for _name, _cols in TABLES.items():
    _names = {c.name for c in _cols}
    if "start_ts" in _names:
        TIME_COLUMNS[_name] = ("start_ts", "duration_ns")
    elif "ts" in _names:
        TIME_COLUMNS[_name] = ("ts", "")


#: table -> its columns by name, read-only (built once: the writer looks them up for every batch and chunk)
_BY_NAME: dict[str, Mapping[str, Column]] = {t: MappingProxyType({c.name: c for c in cols})
                                             for t, cols in TABLES.items()}


def columns_of(table: str) -> Mapping[str, Column]:
    """Columns of ``table`` by name (a read-only mapping, in field order); ValueError naming the valid tables
    for an unknown one."""
    try:
        return _BY_NAME[table]
    except KeyError:
        raise ValueError(f"unknown table {table!r}; valid tables: {', '.join(TABLES)}") from None
