"""Explorer tables that link others: the framework/HLO/Penguin/BIR hierarchy (host_ops that instructions
point at), ``SystemProfileEvents`` (host_ops + dependency flows), ``Flow``, CC triggers, and the header report
(``Summary`` numbers, what is missing, what is not imported)."""
from __future__ import annotations

import json
import warnings
from typing import Any

import numpy as np
import pandas as pd

from neuron_profiler.importers.neuron_explorer.columns import _dumps, _plain, args_json, durations, integer, text
from neuron_profiler.importers.neuron_explorer.device import engine_name
from neuron_profiler.importers.neuron_explorer.mapping import COUNTER_TABLES, MAPPING, REQUIRED_TABLES
from neuron_profiler.importers.neuron_explorer.schema import TABLES

#: hierarchy level -> (category, name field, track name, own id field, parent level and its id field)
_LEVELS = {
    "FrameworkNode": ("framework_node", "node_name", "Framework hierarchy", None, None),
    "FrameworkInstruction": ("framework", "framework_name", "Framework layers", "raw_framework_id", None),
    "HloInstruction": ("hlo", "hlo_name", "HLO", "raw_hlo_id", ("FrameworkInstruction", "raw_framework_id")),
    "PenguinInstruction": ("penguin", "penguin_name", "Penguin", "raw_penguin_id", ("HloInstruction", "raw_hlo_id")),
    "BirInstruction": ("bir", "bir_name", "BIR", "raw_bir_id", ("PenguinInstruction", "raw_penguin_id")),
}
_SOURCE_ORDER = {"framework": 0, "neuron_rt": 1, "neuron_hw": 2}
_FLOW_TABLES = {"instruction": ("instructions", "Instruction"), "instructions": ("instructions", "Instruction"),
                "dmablock": ("dma", "DmaPacketAggregated"), "dmapacketaggregated": ("dma", "DmaPacketAggregated"),
                "dmapacket": ("dma", "DmaPacket"), "dma": ("dma", "DmaPacket"), "ccop": ("collectives", "CcOp"),
                "collective": ("collectives", "CcOp")}


def _node_paths(names: np.ndarray, parents: np.ndarray) -> np.ndarray:
    parent_of = dict(zip(names.tolist(), parents.tolist()))
    out = []
    for n in names.tolist():
        chain, cur, seen = [n], parent_of.get(n, ""), {n}
        while cur and cur not in seen and len(chain) < 64:
            chain.append(cur)
            seen.add(cur)
            cur = parent_of.get(cur, "")
        out.append(".".join(reversed(chain)))
    return np.asarray(out + [None], dtype=object)[:-1]


def hierarchy(ctx: Any) -> None:
    """One host_ops row per hierarchy node (category framework_node / framework / hlo / penguin / bir), on one
    track per level under the device; ``hierarchy`` flows parent level -> child level by raw ids."""
    ctx.level_rows = {}
    for table, (cat, name_field, track_name, id_field, parent) in _LEVELS.items():
        df = ctx.table(table)
        if df is None:
            continue
        names = text(df, name_field)
        cols: dict[str, Any] = {
            "track": ctx.tracks.device_child("thread", track_name), "name": names, "category": cat,
            "start_ts": integer(df, "start_ts"), "duration_ns": durations(df),
            "args": args_json(df, [f for f in df.columns if f not in ("start_ts", "end_ts", name_field)])}
        if table == "FrameworkNode":
            cols["module"] = _node_paths(names, text(df, "parent_name"))
        first = ctx.b.add_rows("host_ops", cols)
        if id_field is not None and id_field in df.columns:
            ids = integer(df, id_field, -1)
            s = pd.Series(np.arange(first, first + len(df), dtype=np.int64), index=ids)
            ctx.level_rows[table] = s[~s.index.duplicated()]
            if parent is not None and parent[0] in ctx.level_rows and parent[1] in df.columns:
                src = ctx.level_rows[parent[0]].reindex(integer(df, parent[1], -1)).to_numpy()
                ok = ~np.isnan(src)
                ctx.b.add_flows("host_ops", src[ok].astype(np.int64), "host_ops",
                                np.arange(first, first + len(df))[ok], kind="hierarchy")


def framework_ops(ctx: Any, instr: pd.DataFrame) -> np.ndarray:
    """Host row each instruction belongs to: its FrameworkInstruction (raw_framework_id), else its
    HloInstruction (raw_hlo_id); -1 when neither is known."""
    out = np.full(len(instr), -1, dtype=np.int64)
    for table, field in (("HloInstruction", "raw_hlo_id"), ("FrameworkInstruction", "raw_framework_id")):
        rows = ctx.level_rows.get(table)
        if rows is not None and field in instr.columns:
            got = rows.reindex(integer(instr, field, -1)).to_numpy()
            ok = ~np.isnan(got)
            out[ok] = got[ok].astype(np.int64)
    return out


def triggers(ctx: Any, cc: pd.DataFrame, first: int) -> None:
    """``trigger`` flows: the instruction on a track of the trigger engine (any NeuronCore of the profile:
    ``CcOp`` names no core) starting at ``trigger_start_ts`` -> the collective it triggered."""
    instr = ctx.instr  # None until the instructions are added
    if instr is None or not {"trigger_engine", "trigger_start_ts"} <= set(cc.columns):
        return
    engine_tracks: dict[str, list[int]] = {}
    for key, tid in ctx.tracks._keyed.items():
        if key[0] == "engine":
            engine_tracks.setdefault(engine_name(key[2]), []).append(tid)
    want = pd.DataFrame({"engine": [engine_name(e) for e in text(cc, "trigger_engine")],
                         "start_ts": integer(cc, "trigger_start_ts", -1), "cc": np.arange(first, first + len(cc))})
    on = pd.DataFrame([(e, t) for e, ts in engine_tracks.items() for t in ts], columns=["engine", "track"])
    m = want.merge(on, on="engine").merge(instr, on=["track", "start_ts"]).drop_duplicates("cc")
    if len(m):
        ctx.b.add_flows("instructions", m["row"].to_numpy(), "collectives", m["cc"].to_numpy(), kind="trigger")
    missing = int((want["start_ts"] >= 0).sum()) - len(m)
    if missing:
        ctx.b.footer_metadata["neuron_explorer.cc_triggers_unresolved"] = str(missing)


def system_events(ctx: Any) -> None:
    """``SystemProfileEvents`` -> host_ops (category = trace_event_source) on process/thread tracks
    (``neuron_hw`` events on one track per NeuronCore under the device) and ``dependency`` flows along each
    ``flow_id`` (framework -> neuron_rt -> neuron_hw, then time order)."""
    df = ctx.table("SystemProfileEvents")
    if df is None:
        return
    src = text(df, "trace_event_source", "unknown")
    inst, pid, tid, nc = text(df, "instance_id"), integer(df, "process_id"), integer(df, "thread_id"), \
        integer(df, "nc_idx", -1)
    track = np.empty(len(df), dtype=np.int64)
    procs: dict[tuple, int] = {}
    threads: dict[tuple, int] = {}
    for i, (s, ins, p, t, c) in enumerate(zip(src.tolist(), inst.tolist(), pid.tolist(), tid.tolist(), nc.tolist())):
        if s == "neuron_hw":
            track[i] = ctx.tracks.device_child("thread", f"NC {c} hardware events" if c >= 0 else "hardware events")
            continue
        key = (ins, p)
        if key not in procs:
            procs[key] = ctx.b.add_track("process", f"{ins or 'instance'}/PID:{p}", pid=p)
        tkey = (ins, p, t, s)
        if tkey not in threads:
            threads[tkey] = ctx.b.add_track("thread", f"{s}/TID:{t}", parent=procs[key], pid=p, tid=t)
        track[i] = threads[tkey]
    extra = [f for f in df.columns if f not in ("name", "start_ts", "end_ts", "duration_ns", "trace_event_source")]
    args = args_json(df, extra)
    start = integer(df, "start_ts")
    first = ctx.b.add_rows("host_ops", {"track": track, "name": text(df, "name"), "category": src,
                                        "start_ts": start, "duration_ns": durations(df), "args": args})
    h = ctx.b.header
    if not h.instance_id and len(inst) and inst[0]:
        h.instance_id = str(inst[0])
    if not h.process_id and len(pid) and pid[0]:
        h.process_id = int(pid[0])
    h.metadata["neuron_explorer.clock_domains"] = (
        "system events (host_ops of categories framework / neuron_rt / neuron_hw) and device events "
        "(instructions, dma, collectives) come from different clocks and are not exactly aligned "
        "(Neuron Explorer troubleshooting guide)")
    if "flow_id" in df.columns:
        fid = text(df, "flow_id")
        order = pd.DataFrame({"fid": fid, "o": [_SOURCE_ORDER.get(s, 9) for s in src.tolist()], "t": start,
                              "row": np.arange(first, first + len(df))})
        order = order[(order["fid"] != "") & (order["fid"] != "0")].sort_values(["fid", "o", "t"], kind="stable")
        same = order["fid"].to_numpy()[1:] == order["fid"].to_numpy()[:-1]
        rows = order["row"].to_numpy()
        ctx.b.add_flows("host_ops", rows[:-1][same], "host_ops", rows[1:][same], kind="dependency")


def _row_map(ctx: Any, name: str) -> tuple[str, pd.Series] | None:
    key = "".join(c for c in str(name).lower() if c.isalnum())
    hit = _FLOW_TABLES.get(key)
    if hit is None:
        return None
    table, explorer = hit
    if explorer == "DmaPacket" and "DmaPacket" not in ctx.rows:
        explorer = "DmaPacketAggregated"
    if explorer == "DmaPacketAggregated" and explorer not in ctx.rows:
        explorer = "DmaPacket"
    rows = ctx.rows.get(explorer)
    return (table, rows) if rows is not None else None


def flows(ctx: Any) -> None:
    """``Flow`` -> flows between our rows (``kind`` = dependency_type in lower case). Explorer's edge
    direction is not documented: the edge goes out -> in unless most edges then run backwards in time, in
    which case in -> out (the earlier event is the source)."""
    df = ctx.table("Flow")
    if df is None:
        return
    starts = ctx.starts
    kinds = np.asarray([k.lower() or "dependency" for k in text(df, "dependency_type")], dtype=object)
    resolved = pd.DataFrame({"in_t": text(df, "in_table"), "out_t": text(df, "out_table"),
                             "in_id": integer(df, "in_id", -1), "out_id": integer(df, "out_id", -1), "kind": kinds})
    out_rows = []
    for (in_t, out_t), g in resolved.groupby(["in_t", "out_t"], sort=False):
        a, b = _row_map(ctx, in_t), _row_map(ctx, out_t)
        if a is None or b is None:
            continue
        ri, ro = a[1].reindex(g["in_id"].to_numpy()).to_numpy(), b[1].reindex(g["out_id"].to_numpy()).to_numpy()
        ok = ~(np.isnan(ri) | np.isnan(ro))
        out_rows.append((a[0], ri[ok].astype(np.int64), b[0], ro[ok].astype(np.int64), g["kind"].to_numpy()[ok]))
    n_ok = sum(len(r[1]) for r in out_rows)
    forward = backward = 0
    for ta, ra, tb, rb, _ in out_rows:
        sa, sb = starts[ta].reindex(ra).to_numpy(), starts[tb].reindex(rb).to_numpy()
        forward += int((sb <= sa).sum())   # out starts first: out -> in
        backward += int((sa < sb).sum())
    for ta, ra, tb, rb, k in out_rows:
        src_t, src, dst_t, dst = (ta, ra, tb, rb) if backward > forward else (tb, rb, ta, ra)
        for kind in pd.unique(k):
            sel = k == kind
            ctx.b.add_flows(src_t, src[sel], dst_t, dst[sel], kind=str(kind))
    if len(df) - n_ok:
        ctx.b.footer_metadata["neuron_explorer.flows_unresolved"] = str(len(df) - n_ok)
    ctx.b.header.metadata["neuron_explorer.flow_direction"] = (
        "in -> out" if backward > forward else "out -> in") + " (Explorer does not document the direction; " \
        "chosen so that most edges run forward in time)"


def summary_and_report(ctx: Any, extra: dict[str, str]) -> None:
    """Header metadata: Explorer's Summary numbers, what the profile lacks, what was not imported, notes."""
    md = ctx.b.header.metadata
    summ = ctx.table("Summary")
    if summ is not None:
        row = {str(k): _plain(v) for k, v in summ.iloc[0].to_dict().items()}
        md["neuron_explorer.summary"] = _dumps({k: v for k, v in row.items() if v is not None})
        if len(summ) > 1:
            md["neuron_explorer.summary_rows"] = f"{len(summ)} (the first is shown)"
    missing_tables: list[str] = []
    for req in REQUIRED_TABLES:
        alts = req if isinstance(req, tuple) else (req,)
        if not any(ctx.table(t) is not None for t in alts):
            missing_tables.append(" / ".join(alts))
    fields = {t: [f for f in TABLES[t] if f not in ctx.tables[t].columns] for t in MAPPING
              if t in ctx.tables and ctx.tables[t] is not None and t in TABLES}
    fields = {t: v for t, v in fields.items() if v}
    missing = {"tables": missing_tables, "fields": fields}
    md["neuron_explorer.missing"] = json.dumps(missing, separators=(",", ":"))
    not_imported = {t: len(df) for t, df in ctx.tables.items()
                    if df is not None and t not in MAPPING and t not in COUNTER_TABLES}
    if not_imported:
        md["neuron_explorer.not_imported"] = json.dumps(not_imported, separators=(",", ":"), sort_keys=True)
    kept_not = {t: [f for f in ctx.tables[t].columns if MAPPING[t].get(f, "").startswith("not kept")]
                for t in MAPPING if ctx.tables.get(t) is not None}
    kept_not = {t: v for t, v in kept_not.items() if v}
    if kept_not:
        md["neuron_explorer.fields_not_kept"] = json.dumps(kept_not, separators=(",", ":"))
    if ctx.notes:
        md["neuron_explorer.notes"] = "; ".join(ctx.notes)
    for k, v in extra.items():
        md[k] = v
    warn_missing(ctx.source, missing)


def warn_missing(source: str, missing: dict[str, Any]) -> None:
    """One warning naming the missing data-model tables and the number of missing fields."""
    tables = missing.get("tables", [])
    fields = missing.get("fields", {})
    if not (tables or fields):
        return
    nf = sum(len(v) for v in fields.values())
    parts = []
    if tables:
        parts.append("tables " + ", ".join(tables))
    if nf:
        parts.append(f"{nf} fields of " + ", ".join(sorted(fields)))
    warnings.warn(f"{source}: the Neuron Explorer profile lacks " + "; ".join(parts) +
                  " (header metadata 'neuron_explorer.missing' lists them)", stacklevel=4)
