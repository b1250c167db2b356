"""Re-import of this project's own Chrome JSON export: ``nprof -> chrome -> nprof`` keeps event kinds, counts,
tracks, flows, devices and the simulated flag.

The contract with ``neuron_profiler.exporters.chrome`` (version 1):

- the document has a top-level ``"neuronProfiler"`` = ``{"version": 1, "header": <the trace Header as
  google.protobuf.json_format.MessageToDict>, "tracks": [one object per tracks-table row with its columns and
  "row": its row id], "flows": [{"src_table", "src_row", "dst_table", "dst_row", "kind"}]}``;
- every exported event that came from a table carries ``args["nprof.table"]`` (host_ops, instructions, dma,
  collectives, counters), ``args["nprof.row"]`` (its row id) and ``args["nprof.track"]`` (its track row id),
  and the table's other columns in ``args`` under their column names; counter samples ("C" events) carry the
  three ``nprof.*`` keys on the event beside ``args`` (viewers plot every numeric arg as a series).

A column absent from ``args`` is taken from the event itself (``name`` / ``cat``, ``ts`` + ``dur`` in
microseconds from ``baseTimeNanoseconds``), else its default. Other args keys are the row's ``args`` JSON.
Rows are put back in their row order; when some are missing, references (``framework_op``, ``instruction``,
``parent``, ``track``, flows) are renumbered and those pointing at a missing row become -1 (flows dropped),
counted in the footer metadata. Events without ``nprof.table`` (e.g. metadata events) are not imported.
"""
from __future__ import annotations

import json
import math
import warnings
from collections.abc import Iterable
from typing import Any

import msgspec
import numpy as np

from neuron_profiler.importers.kineto.decode import EXPORT_KEY, Event
from neuron_profiler.trace.errors import NotATraceError

KEY = EXPORT_KEY
VERSION = 1
EVENT_TABLES = ("host_ops", "instructions", "dma", "collectives", "allocations", "counters")
#: the column an exported event's own ``name`` / ``cat`` carries, per table
_NAME_COLUMN = {"host_ops": "name", "instructions": "name", "dma": "variable", "collectives": "operation",
                "allocations": "tensor_name"}
_CAT_COLUMN = {"host_ops": "category"}
_META = ("nprof.table", "nprof.row", "nprof.track")


def embedded(doc: dict[str, Any]) -> dict[str, Any] | None:
    """The ``neuronProfiler`` object of a document when it is one this reader understands (version 1), else
    None (a newer version is imported as plain Kineto JSON, with a warning)."""
    v = doc.get(KEY)
    if not isinstance(v, dict):
        return None
    if v.get("version") != VERSION or not isinstance(v.get("header"), dict) or not isinstance(v.get("tracks"), list):
        warnings.warn(f"'{KEY}' version {str(v.get('version'))[:20]} is not one this reader understands "
                      f"(version {VERSION}): imported as plain Kineto JSON", stacklevel=3)
        return None
    return v


class Collector:
    """Gathers the events that came from a table, slice by slice (``add``)."""

    def __init__(self) -> None:
        self.rows: dict[str, list[tuple[int, int, dict[str, Any], dict[str, Any]]]] = {t: [] for t in EVENT_TABLES}
        self.other = 0

    def add(self, events: Iterable[Any]) -> None:
        for ev in events:
            if not isinstance(ev, Event):  # ``decode`` gives an ``ExportEvent``
                self.other += 1
                continue
            e = msgspec.to_builtins(ev)  # the keys the event has (``nprof.*`` beside a counter's args)
            a = e.get("args")
            a = a if type(a) is dict else {}
            meta = a if "nprof.table" in a else e  # counter samples carry the nprof.* keys beside args
            t = meta.get("nprof.table")
            if t not in self.rows:
                self.other += 1
                continue
            row, track = meta.get("nprof.row"), meta.get("nprof.track")
            if type(row) is not int or type(track) is not int:
                self.other += 1
                continue
            self.rows[t].append((row, track, e, a))


def _header(meta: dict[str, Any], source: str) -> Any:
    from google.protobuf import json_format

    from schemas import pb

    h = pb.Header()
    try:
        json_format.ParseDict(meta["header"], h, ignore_unknown_fields=True)
    except json_format.ParseError as exc:
        raise NotATraceError(f"{source}: '{KEY}.header' is not a trace header ({exc})") from exc
    h.metadata["roundtrip.imported_from"] = f"Chrome JSON export ({KEY} version {VERSION}) {source}"
    if h.source_path:
        h.metadata.setdefault("roundtrip.original_source_path", h.source_path)
    h.source_path = source
    return h


def _value(c: Any, v: Any) -> Any:
    """An args value as a column value (``None`` when it cannot be one)."""
    if c.kind == "string":
        if v is None:
            return ""
        return v if isinstance(v, str) else json.dumps(v, separators=(",", ":"))
    if c.kind == "float":
        try:
            return float(v) if type(v) in (int, float) else None
        except OverflowError:  # an int beyond float range
            return None
    if type(v) is bool or type(v) not in (int, float) or type(v) is float and not math.isfinite(v):
        return None  # NaN / Infinity (the stdlib reads them) are no ints
    v = int(v)
    return v if -(2**63) <= v < 2**63 and (c.kind not in ("uint",) or v >= 0) else None


def _table_columns(table: str, items: list[tuple[int, int, dict[str, Any], dict[str, Any]]], base_ns: int,
                   time_ns: Any) -> dict[str, list[Any]]:
    from neuron_profiler.trace.columns import columns_of

    spec = columns_of(table)
    cols: dict[str, list[Any]] = {name: [] for name in spec}
    v: int | float | str | None  # the column value (None: take the default)
    for _row, track, e, a in items:
        rest = {k: v for k, v in a.items() if k not in spec and k not in _META}
        for name, c in spec.items():
            if name == "track":
                v = track
            elif name in a and name != "args":
                v = _value(c, a[name])
            elif name == _NAME_COLUMN.get(table):
                v = _value(c, e.get("name"))
            elif name == _CAT_COLUMN.get(table):
                v = _value(c, e.get("cat"))
            elif name in ("start_ts", "ts"):
                v = time_ns(e.get("ts"), base_ns)
            elif name == "duration_ns":
                v = time_ns(e.get("dur"), 0)
            elif name == "args":
                v = a["args"] if isinstance(a.get("args"), str) else (
                    json.dumps(rest, separators=(",", ":"), default=str) if rest else "")
            elif name == "value" and table == "counters":
                nums = [x for x in (a[k] for k in a if k not in _META) if type(x) in (int, float)]
                v = float(nums[0]) if nums else None
            else:
                v = None
            cols[name].append(c.default if v is None else v)
    return cols


def _time_ns(v: Any, base: int) -> int | None:
    """An exported ``ts`` / ``dur`` (microseconds) as ns from ``base``; None when unusable."""
    from neuron_profiler.importers.kineto.events import ok_ts, us_to_ns

    return int(us_to_ns([v])[0]) + base if ok_ts(v) else None


def _remap(values: list[int], mapping: dict[int, int]) -> np.ndarray:
    """Row ids of a ref column renumbered by ``mapping`` (-1: no row, or one that was not imported)."""
    return np.asarray([mapping.get(v, -1) if v >= 0 else -1 for v in values], dtype=np.int64)


def build(meta: dict[str, Any], doc: dict[str, Any], got: Collector, source: str) -> Any:
    """The ``TraceBuilder`` of a re-imported export (see the module doc)."""
    from neuron_profiler.trace import TraceBuilder

    b = TraceBuilder(_header(meta, source))
    base = doc.get("baseTimeNanoseconds")
    base_ns = base if type(base) is int and 0 <= base < 2**62 else 0
    maps: dict[str, dict[int, int]] = {"tracks": _add_tracks(b, meta)}
    dropped: dict[str, int] = {}
    _add_event_tables(b, got, base_ns, maps, dropped)
    lost = _add_flows(b, meta, maps)
    if lost:
        dropped["flows_to_missing_rows"] = lost
    if got.other:
        b.footer_metadata["roundtrip.events_not_from_a_table"] = str(got.other)
    for k, v in dropped.items():
        b.footer_metadata[f"roundtrip.{k}"] = str(v)
    return b


def _add_tracks(b: Any, meta: dict[str, Any]) -> dict[int, int]:
    """Add the exported tracks in row order; returns exported row -> new row."""
    from neuron_profiler.trace.columns import columns_of

    trows = sorted((t for t in meta["tracks"] if isinstance(t, dict) and type(t.get("row")) is int),
                   key=lambda t: t["row"])
    track_map = {t["row"]: i for i, t in enumerate(trows)}
    tcols: dict[str, list[Any]] = {
        name: [c.default if _value(c, t.get(name)) is None else _value(c, t.get(name)) for t in trows]
        for name, c in columns_of("tracks").items()}
    if trows:
        tcols["parent"] = list(_remap(tcols["parent"], track_map))
        b.add_rows("tracks", tcols)
    return track_map


def _add_event_tables(b: Any, got: Collector, base_ns: int, maps: dict[str, dict[int, int]],
                      dropped: dict[str, int]) -> None:
    """Add the event tables' rows (the first of duplicate row ids kept), their refs renumbered through
    ``maps``, which receives each table's exported row -> new row; duplicates and gaps counted in ``dropped``."""
    from neuron_profiler.trace.columns import columns_of

    cols_by_table: dict[str, dict[str, list[Any]]] = {}
    for table in EVENT_TABLES:
        items = sorted(got.rows[table], key=lambda r: r[0])
        seen: dict[int, int] = {}
        uniq: list[tuple[int, int, dict[str, Any], dict[str, Any]]] = []
        for it in items:
            if it[0] not in seen:
                seen[it[0]] = len(uniq)
                uniq.append(it)
        if len(uniq) < len(items):
            dropped[f"{table}_duplicate_rows"] = len(items) - len(uniq)
        maps[table] = seen
        cols_by_table[table] = _table_columns(table, uniq, base_ns, _time_ns)
        if uniq and uniq[-1][0] + 1 != len(uniq):
            dropped[f"{table}_rows_missing"] = uniq[-1][0] + 1 - len(uniq)
    for table, cols in cols_by_table.items():  # after every map is known: refs may point at any table
        if not cols or not cols["track"]:
            continue
        out: dict[str, list[Any] | np.ndarray] = dict(cols)
        for name, c in columns_of(table).items():
            if c.kind == "ref":
                out[name] = _remap(cols[name], maps[c.ref_table])
        b.add_rows(table, out)


def _add_flows(b: Any, meta: dict[str, Any], maps: dict[str, dict[int, int]]) -> int:
    """Add the exported flows whose ends were imported; returns how many were lost."""
    fl = [f for f in meta.get("flows") or [] if isinstance(f, dict)]
    src_t, src_r, dst_t, dst_r, kinds = [], [], [], [], []
    lost = 0
    for f in fl:
        st, sr, dt, dr = f.get("src_table"), f.get("src_row"), f.get("dst_table"), f.get("dst_row")
        # a row id that is not an int (a list or an object in an edited file) points at no row: not a lookup key
        s = maps.get(st, {}).get(sr) if isinstance(st, str) and type(sr) is int else None
        d = maps.get(dt, {}).get(dr) if isinstance(dt, str) and type(dr) is int else None
        if s is None or d is None:
            lost += 1
            continue
        src_t.append(st)
        src_r.append(s)
        dst_t.append(dt)
        dst_r.append(d)
        kinds.append(str(f.get("kind", "")))
    if src_t:
        b.add_rows("flows", {"src_table": np.asarray(src_t, dtype=object), "src_row": np.asarray(src_r),
                             "dst_table": np.asarray(dst_t, dtype=object), "dst_row": np.asarray(dst_r),
                             "kind": np.asarray(kinds, dtype=object)})
    return lost
