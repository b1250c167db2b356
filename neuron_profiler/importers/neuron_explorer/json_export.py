"""Reading a Neuron Explorer JSON export into Explorer tables (then converted like a Parquet profile).

Explorer calls its JSON output "legacy ... less complete, less organized, and less scalable" and documents
little of it, so this reader accepts the shapes public material names, all mapped onto schema 7.4.0 tables
(``shared/reference/neuron-explorer-data-model.md`` section 5.2; field names there, units ns and bytes):

- table-keyed: a top-level object whose keys are schema table names (``Instruction``, ``DmaPacketAggregated``,
  ``CcOp``, ``Metadata``, ``Summary``...; any case, with or without underscores) holding a list of row objects,
  a single object (``Metadata``, ``Summary``) or an object of column lists, fields named as in the Parquet
  schema;
- the ``neuron-profile`` JSON: ``summary`` (list of one object) and ``instruction`` rows with ``timestamp``,
  ``duration``, ``label`` (the timeline track, e.g. ``TensorMatrix``), ``hlo_name``, ``opcode``, ``operands``;
- the per-core session export: ``profile_info`` (Metadata), ``summary``, ``dma`` rows (``variable``,
  ``transfer_size``, ``source``/``dest`` lists, ``timestamp``, ``duration``, ``subgraph``);
- the system profile: ``Neuron_Runtime_API_Event`` / ``Framework_Event`` rows (``timestamp``, ``duration``,
  ``name``, ``process_id``, ``thread_id``, ``instance_id``, ``lnc_idx``, ...) become ``SystemProfileEvents``.

Keys the reader does not know are listed in ``header.metadata["neuron_explorer.unmapped_json_keys"]``.
"""
from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pandas as pd

from neuron_profiler.importers.neuron_explorer.schema import TABLES
from neuron_profiler.trace.errors import NotATraceError, TraceFormatError

_MAX_DEPTH_HINT = "the JSON nests too deeply"


def _norm(k: str) -> str:
    return "".join(c for c in k.lower() if c.isalnum())


_TABLE_KEYS = {_norm(t): t for t in TABLES} | {
    "instructions": "Instruction", "dma": "DmaPacketAggregated", "dmapackets": "DmaPacket",
    "profileinfo": "Metadata", "metadata": "Metadata", "summary": "Summary", "ccops": "CcOp",
    "semaphoreupdates": "SemaphoreUpdate", "flows": "Flow", "systemprofileevents": "SystemProfileEvents",
}
#: JSON key -> (table, trace_event_source) for the system profile's event lists
_SYSTEM_KEYS = {"neuronruntimeapievent": "neuron_rt", "frameworkevent": "framework"}
#: per-table field aliases of the legacy exports -> schema 7.4.0 names
_ALIASES = {
    "Instruction": {"timestamp": "start_ts", "duration": "duration_ns", "label": "timeline_track"},
    "DmaPacketAggregated": {"timestamp": "start_ts", "duration": "duration_ns", "transfer_size": "transfer_bytes"},
    "DmaPacket": {"timestamp": "start_ts", "duration": "duration_ns", "transfer_size": "transfer_bytes"},
    "SystemProfileEvents": {"timestamp": "start_ts", "duration": "duration_ns", "lnc_idx": "nc_idx"},
}


def _load(path: Path) -> Any:
    from neuron_profiler.importers.kineto.read import read_bytes

    raw = read_bytes(path)
    try:
        import orjson

        try:
            return orjson.loads(raw)
        except orjson.JSONDecodeError:
            pass
        return json.loads(raw.decode("utf-8"))
    except (ValueError, UnicodeDecodeError) as exc:
        raise NotATraceError(f"{path}: not valid JSON ({exc}); expected a Neuron Explorer JSON export") from exc
    except RecursionError:
        raise NotATraceError(f"{path}: {_MAX_DEPTH_HINT}; expected a Neuron Explorer JSON export") from None


def _column(values: list[Any]) -> Any:
    """One column: exact nullable int64 for integers (a float64 round trip would move ns timestamps),
    float64 for numbers, objects otherwise."""
    types = set(map(type, values)) - {type(None)}
    if types <= {int} and types:
        try:
            return pd.array(values, dtype="Int64")
        except (OverflowError, TypeError, ValueError):
            return pd.array(values, dtype=object)
    if types <= {int, float} and types:
        return pd.array([float("nan") if v is None else float(v) for v in values], dtype="float64")
    return pd.array(values, dtype=object)


def _columns_frame(cols: dict[str, list[Any]]) -> pd.DataFrame:
    return pd.DataFrame({str(k): _column(v) for k, v in cols.items()})


def _frame(value: Any, where: str) -> pd.DataFrame:
    if isinstance(value, dict):
        if value and all(isinstance(v, list) for v in value.values()) and len({len(v) for v in value.values()}) == 1:
            return _columns_frame(value)  # an object of column lists
        value = [value]
    if isinstance(value, list):
        rows = [r for r in value if isinstance(r, dict)]
        if len(rows) != len(value):
            raise TraceFormatError(f"{where}: expected a list of row objects, found "
                                   f"{len(value) - len(rows)} items that are not objects")
        keys: dict[str, None] = {}
        for r in rows:
            keys.update(dict.fromkeys(r))
        return _columns_frame({k: [r.get(k) for r in rows] for k in keys})
    raise TraceFormatError(f"{where}: expected a list of row objects or an object, found a JSON "
                           f"{type(value).__name__}")


def _rename(table: str, df: pd.DataFrame) -> pd.DataFrame:
    alias = {k: v for k, v in _ALIASES.get(table, {}).items() if k in df.columns and v not in df.columns}
    return df.rename(columns=alias) if alias else df


def read_export(path: Path) -> tuple[dict[str, pd.DataFrame], dict[str, str]]:
    """(tables by schema name, extra header metadata) of the JSON export at ``path``."""
    doc = _load(path)
    if not isinstance(doc, dict):
        raise NotATraceError(f"{path}: expected a JSON object (a Neuron Explorer export), found a JSON "
                             f"{type(doc).__name__}")
    tables: dict[str, list[pd.DataFrame]] = {}
    unmapped: list[str] = []
    for key, value in doc.items():
        nk = _norm(str(key))
        if nk in _SYSTEM_KEYS:
            df = _rename("SystemProfileEvents", _frame(value, f"{path}: {key}"))
            df["trace_event_source"] = _SYSTEM_KEYS[nk]
            tables.setdefault("SystemProfileEvents", []).append(df)
        elif nk in _TABLE_KEYS:
            t = _TABLE_KEYS[nk]
            tables.setdefault(t, []).append(_rename(t, _frame(value, f"{path}: {key}")))
        else:
            unmapped.append(str(key))
    if not tables:
        keys = ", ".join(sorted(map(str, doc))[:8]) or "none"
        raise NotATraceError(f"{path}: no Neuron Explorer tables in this JSON (found keys: {keys}); expected "
                             f"keys such as Instruction, DmaPacketAggregated, CcOp, Metadata, Summary")
    out = {t: (pd.concat(v, ignore_index=True) if len(v) > 1 else v[0]) for t, v in tables.items()}
    extra = {"neuron_explorer.unmapped_json_keys": json.dumps(sorted(unmapped))} if unmapped else {}
    return out, extra
