"""Neuron Explorer tables (schema 7.4.0, as pandas frames from Parquet or JSON) -> one ``TraceBuilder``.

Where each table and field goes: ``mapping.MAPPING``. Device-side tables (``Instruction``, DMA, ``CcOp``,
counters) are converted here; the hierarchy, system events, ``Flow`` and the report of what is missing in
``convert_links``. Times are int64 ns as Explorer writes them; sizes bytes.
"""
from __future__ import annotations

from typing import Any

import numpy as np
import pandas as pd

from neuron_profiler.importers.neuron_explorer import convert_links as links
from neuron_profiler.importers.neuron_explorer import memory, units
from neuron_profiler.importers.neuron_explorer.columns import args_json, durations, integer, number, text
from neuron_profiler.importers.neuron_explorer.device import Tracks, engine_name, make_device, metadata_row
from neuron_profiler.importers.neuron_explorer.mapping import COUNTER_TABLES, MAPPING

PRODUCER = "neuron_profiler.importers.neuron_explorer"
_INSTR_COLUMNS = {"opcode": "opcode", "hlo_name": "name", "tensor_instruction_type": "tensor_instruction_type"}
_INSTR_INTS = ("raw_flops", "hbm_read_bytes", "hbm_write_bytes", "sbuf_read_bytes", "sbuf_write_bytes",
               "psum_read_bytes", "psum_write_bytes")
_INSTR_USED = {"start_ts", "end_ts", "duration_ns", "engine", "timeline_track", "pcore_idx", *_INSTR_COLUMNS,
               *_INSTR_INTS}


class Context:
    """State shared by the conversion steps: the builder, the tracks, and Explorer id -> our row maps."""

    def __init__(self, builder: Any, tables: dict[str, pd.DataFrame], tracks: Tracks, source: str) -> None:
        self.b, self.tables, self.tracks, self.source = builder, tables, tracks, source
        self.rows: dict[str, pd.Series] = {}  # "Instruction" -> Series(explorer id -> instructions row)
        self.notes: list[str] = []
        self.starts: dict[str, pd.Series] = {t: pd.Series([], dtype=np.int64) for t in
                                             ("instructions", "dma", "collectives")}
        self.units = units.SchemaUnits(tables.get("SchemaFields"))
        #: instructions added (track, start_ts, row), None before: collective triggers are matched against them
        self.instr: pd.DataFrame | None = None

    def table(self, name: str) -> pd.DataFrame | None:
        df = self.tables.get(name)
        return df if df is not None and len(df) else None

    def added(self, table: str, first_row: int, start: np.ndarray) -> None:
        """Remember the start times of rows just added (``Flow`` orients its edges with them)."""
        self.starts[table] = pd.Series(start, index=np.arange(first_row, first_row + len(start)))

    def id_map(self, table: str, df: pd.DataFrame, first_row: int, field: str = "id") -> None:
        if field in df.columns:
            ids = integer(df, field, -1)
            s = pd.Series(np.arange(first_row, first_row + len(df), dtype=np.int64), index=ids)
            self.rows[table] = s[~s.index.duplicated()]


def build_profile(tables: dict[str, pd.DataFrame], *, source: str, source_format: str, run_id: str = "",
                  builder: Any = None, extra_metadata: dict[str, str] | None = None) -> Any:
    """Convert Explorer tables into ``builder`` (a new ``TraceBuilder`` when None) and return it.

    Header metadata written: ``profile_schema_version``, ``neuron_explorer.summary`` (the Summary row as a
    JSON object, Explorer's field names), ``neuron_explorer.missing`` (data-model tables and fields the profile
    lacks), ``neuron_explorer.not_imported`` (tables present but outside the mapping) and notes. Warns (one
    ``UserWarning``) when tables or fields are missing."""
    from neuron_profiler.trace import TraceBuilder, make_header

    row = metadata_row(tables.get("Metadata"))
    dev, notes = make_device(row, len(builder.header.devices) if builder is not None else 0)
    if builder is None:
        hdr = make_header(PRODUCER, source_format=source_format, simulated=dev.simulated, source_path=source,
                          run_id=run_id, instance_id="",
                          metadata={"profile_schema_version": str(row.get("profile_schema_version", ""))})
        builder = TraceBuilder(hdr)
    elif "profile_schema_version" in row:
        builder.header.metadata["profile_schema_version"] = str(row["profile_schema_version"])
    dev_idx = len(builder.header.devices)
    builder.header.devices.append(dev)
    tracks = Tracks(builder, dev_idx, dev.name, int(row.get("neuroncore_idx", 0) or 0))
    ctx = Context(builder, tables, tracks, source)
    ctx.notes.extend(notes)
    links.hierarchy(ctx)              # host_ops of the framework/HLO/... levels (targets of framework_op)
    _instructions(ctx)
    _dma(ctx)
    _collectives(ctx)
    _counters(ctx)
    memory.allocations(ctx)
    memory.hbm_usage(ctx)
    links.system_events(ctx)
    links.flows(ctx)
    links.summary_and_report(ctx, extra_metadata or {})
    return builder


def _instructions(ctx: Context) -> None:
    df = ctx.table("Instruction")
    if df is None:
        return
    n = len(df)
    pcore = integer(df, "pcore_idx")
    engine = np.asarray([engine_name(e) for e in text(df, "engine")], dtype=object)
    track_names = text(df, "timeline_track")
    track_names = np.where(track_names == "", engine, track_names)
    cols: dict[str, Any] = {"track": ctx.tracks.per_row("engine", pcore, track_names),
                            "start_ts": integer(df, "start_ts"), "duration_ns": durations(df), "engine": engine}
    for f, c in _INSTR_COLUMNS.items():
        cols[c] = text(df, f)
    for f in _INSTR_INTS:
        cols[f] = np.maximum(integer(df, f), 0)
    cols["framework_op"] = links.framework_ops(ctx, df)
    extra = [f for f in MAPPING["Instruction"] if f not in _INSTR_USED] + \
            [c for c in df.columns if c not in MAPPING["Instruction"]]
    cols["args"] = args_json(df, extra)
    first = ctx.b.add_rows("instructions", cols)
    ctx.added("instructions", first, cols["start_ts"])
    ctx.id_map("Instruction", df, first)
    ctx.instr = pd.DataFrame({"track": cols["track"], "start_ts": cols["start_ts"],
                              "row": np.arange(first, first + n)})


def _dma(ctx: Context) -> None:
    agg, pkt = ctx.table("DmaPacketAggregated"), ctx.table("DmaPacket")
    df = agg if agg is not None else pkt
    if df is None:
        return
    m = len(df)
    pcore = integer(df, "pcore_idx")
    nbytes = integer(df, "transfer_bytes", -1) if "transfer_bytes" in df.columns else integer(df, "read_bytes")
    desc, eng = np.zeros(m, dtype=np.int64), np.full(m, -1, dtype=np.int64)
    if agg is None:  # packets are the rows: each is one descriptor
        desc, eng = np.maximum(nbytes, 0), integer(df, "engine_idx", -1)
    elif pkt is not None and {"packet_aggregation_id", "transfer_bytes"} <= set(pkt.columns) and "id" in agg.columns:
        g = pd.DataFrame({"agg": integer(pkt, "packet_aggregation_id", -1), "b": integer(pkt, "transfer_bytes"),
                          "e": integer(pkt, "engine_idx", -1)}).groupby("agg")
        ids = pd.Index(integer(agg, "id", -2))
        desc = g["b"].mean().reindex(ids).fillna(0).to_numpy().astype(np.int64)
        eng = g["e"].first().reindex(ids).fillna(-1).to_numpy().astype(np.int64)
    queues = ctx.table("DmaQueuesInfo")
    if queues is not None and (eng < 0).any() and {"name", "engine_idx"} <= set(queues.columns):
        q = pd.Series(integer(queues, "engine_idx", -1), index=pd.MultiIndex.from_arrays(
            [integer(queues, "pcore_idx"), text(queues, "name")]))
        q = q[~q.index.duplicated()]
        looked = q.reindex(pd.MultiIndex.from_arrays([pcore, text(df, "queue_name")])).fillna(-1).to_numpy()
        eng = np.where(eng < 0, looked.astype(np.int64), eng)
    start = integer(df, "start_ts")
    first = ctx.b.add_rows("dma", {
        "track": ctx.tracks.per_row("dma_queue", pcore, text(df, "queue_name")),
        "start_ts": start, "duration_ns": durations(df), "transfer_bytes": np.maximum(nbytes, 0),
        "source": text(df, "source"), "dest": text(df, "dest"), "queue_type": text(df, "queue_type", "unknown"),
        "variable": text(df, "variable"), "descriptor_bytes": desc, "dma_engine": eng})
    ctx.added("dma", first, start)
    ctx.id_map("DmaPacketAggregated" if agg is not None else "DmaPacket", df, first)
    if agg is not None and pkt is not None and "packet_aggregation_id" in pkt.columns:
        # a Flow naming a packet resolves to its aggregated row
        amap = ctx.rows.get("DmaPacketAggregated")
        if amap is not None and "id" in pkt.columns:
            rows = amap.reindex(integer(pkt, "packet_aggregation_id", -1)).to_numpy()
            s = pd.Series(rows, index=integer(pkt, "id", -1)).dropna().astype(np.int64)
            ctx.rows["DmaPacket"] = s[~s.index.duplicated()]


def _collectives(ctx: Context) -> None:
    from neuron_profiler.collectives import bus_factor, normalize_collective

    df = ctx.table("CcOp")
    if df is None:
        return
    stream = text(df, "stream_id", "0")
    sidx = integer(df, "stream_index", 0)
    track = np.asarray([ctx.tracks.child("cc_core", 0, f"CC stream {s}", tid=int(t)) for s, t in zip(stream, sidx)],
                       dtype=np.int64)
    start, dur = integer(df, "start_ts"), durations(df)
    insz, outsz = np.maximum(integer(df, "input_size"), 0), np.maximum(integer(df, "output_size"), 0)
    ops = np.asarray([normalize_collective(o) or o for o in text(df, "operation")], dtype=object)
    groups = text(df, "replica_group")
    gsize = np.asarray([len([x for x in str(g).replace("[", ",").replace("]", ",").split(",") if x.strip()]) or -1
                        for g in groups], dtype=np.int64)
    ours = np.where(dur > 0, np.maximum(insz, outsz) / np.maximum(dur, 1) * 1e9, 0.0)
    factor = bus_factor(ops, np.where(gsize > 0, gsize, 1).astype(float))
    algbw, note_a = units.bandwidth(ctx.units, df, "CcOp", "algorithm_bandwidth", ours)
    busbw, note_b = units.bandwidth(ctx.units, df, "CcOp", "bus_bandwidth", ours * factor)
    ctx.notes.extend(x for x in (note_a, note_b) if x)
    first = ctx.b.add_rows("collectives", {
        "track": track, "start_ts": start, "duration_ns": dur, "operation": ops, "algorithm": text(df, "algorithm"),
        "process_group": text(df, "replica_group_id"), "replica_group": groups, "group_size": gsize,
        "sequence_number": integer(df, "op_id", -1), "input_size": insz, "output_size": outsz,
        "num_elements": np.maximum(integer(df, "num_elements"), 0), "dtype": text(df, "dtype"),
        "algorithm_bandwidth": algbw, "bus_bandwidth": busbw})
    ctx.added("collectives", first, start)
    ctx.id_map("CcOp", df, first, "op_id")
    links.triggers(ctx, df, first)


def _counters(ctx: Context) -> None:
    parts: list[tuple[np.ndarray, np.ndarray, np.ndarray]] = []
    sem = ctx.table("SemaphoreUpdate")
    if sem is not None:
        names = np.asarray([f"Semaphore {s}" for s in text(sem, "id", "?")], dtype=object)
        tr = ctx.tracks.per_row("counter", integer(sem, "pcore_idx"), names, unit="count")
        parts.append((tr, integer(sem, "timestamp"), number(sem, "value")))
    act = ctx.table("ActiveTime")
    if act is not None:
        names = np.asarray([f"{engine_name(e)} active" for e in text(act, "engine", "engine")], dtype=object)
        tr = ctx.tracks.per_row("counter", integer(act, "pcore_idx"), names, unit="active (1) / idle (0)")
        start = integer(act, "start_ts")
        end = integer(act, "end_ts") if "end_ts" in act.columns else start + durations(act)
        parts += [(tr, start, np.ones(len(act))), (tr, end, np.zeros(len(act)))]
    for table, (ts_field, series) in COUNTER_TABLES.items():
        df = ctx.table(table)
        if df is None:
            continue
        for field, name, unit in series:
            if field not in df.columns:
                continue
            values = number(df, field)
            if unit == "bytes/s":  # Explorer's throughput unit is stated in SchemaFields, if at all
                stated = ctx.units.unit(table, field)
                scale = units.rate_scale(stated) if stated else None
                if scale is not None:
                    values = values * scale
                else:
                    unit = f"{stated} (as in the profile)" if stated else "unknown unit (no SchemaFields table)"
            tr = ctx.tracks.per_row("counter", integer(df, "pcore_idx"), np.full(len(df), name, dtype=object),
                                    unit=unit)
            parts.append((tr, integer(df, ts_field), values))
    if not parts:
        return
    tr, ts, v = (np.concatenate(c) for c in zip(*parts))
    order = np.lexsort((ts, tr))
    ctx.b.add_rows("counters", {"track": tr[order], "ts": ts[order], "value": v[order]})
