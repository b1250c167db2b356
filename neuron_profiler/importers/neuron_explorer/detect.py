"""Recognising Neuron Explorer output by content: Parquet profile directories and JSON exports."""
from __future__ import annotations

import re
from pathlib import Path

from neuron_profiler.importers.neuron_explorer.schema import TABLES

#: table names of schema 7.4.0 (a profile directory holds ``<Table>.parquet`` or ``<Table>_<n>.parquet``)
TABLE_NAMES = frozenset(TABLES)
_PART = re.compile(r"^(?P<table>[A-Za-z]+?)(?:_(?P<part>\d+))?\.parquet$")
#: keys that only a Neuron Explorer / neuron-profile JSON export has at its top level or in its records
_EXPORT_MARKERS = re.compile(
    rb'"(?:Instruction|DmaPacketAggregated|DmaPacket|CcOp|CcInstruction|SemaphoreUpdate|ActiveTime|'
    rb'SystemProfileEvents|FrameworkInstruction|HloInstruction|system_profile_metadata|device_profile_list|'
    rb'profile_info|layer_summary|summary_groups|instruction|profile_schema_version|Neuron_Runtime_API_Event|'
    rb'Framework_Event)"\s*:')


def table_of(path: Path) -> str | None:
    """The Explorer table a Parquet file holds (``Instruction_3.parquet`` -> ``Instruction``), or None."""
    m = _PART.match(path.name)
    if m and m.group("table") in TABLE_NAMES:
        return m.group("table")
    return None


def is_profile_dir(path: Path) -> bool:
    """True when ``path`` directly holds Parquet files named after Explorer tables (at least one of the
    device-profile tables: Instruction, Metadata, Summary, DmaPacket(Aggregated), CcOp, SystemProfileEvents)."""
    key = {"Instruction", "Metadata", "Summary", "DmaPacket", "DmaPacketAggregated", "CcOp", "SystemProfileEvents"}
    try:
        return any(p.is_file() and table_of(p) in key for p in path.iterdir())
    except OSError:
        return False


def find_profiles(root: Path, limit: int = 1000) -> list[Path]:
    """Explorer profile directories at or below ``root`` (sorted; at most ``limit``)."""
    found: list[Path] = []
    if is_profile_dir(root):
        return [root]
    try:
        dirs = sorted(p for p in root.rglob("*") if p.is_dir())
    except OSError:
        return []
    for d in dirs:
        if is_profile_dir(d):
            found.append(d)
            if len(found) >= limit:
                break
    return found


def looks_like_export(head: bytes) -> bool:
    """True when the first bytes of a JSON object look like a Neuron Explorer JSON export (a table or
    export-only key) rather than a Chrome/Kineto trace (which would have ``traceEvents`` or ``ph``)."""
    return _EXPORT_MARKERS.search(head) is not None
