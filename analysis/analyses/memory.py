"""Memory over time: on-chip SBUF/PSUM buffers (the ``allocations`` table) and HBM held (counters).

- :func:`memory_allocations`: one row per buffer a core held, with its place (partitions, byte range inside each
  partition), what it held and whether it was spilled;
- :func:`memory_occupancy`: the bytes held per core and memory over time, the sum of the live buffers, beside
  the memory's capacity from the trace's hardware spec;
- :func:`hbm_usage`: HBM held over time, in total and by kind (weights, gradients, optimizer state,
  activations), from the ``HBM Usage`` counters (simulated runtime), or the device's ``Total Allocated``
  counter of a Kineto trace recorded with ``profile_memory=True``; beside the device's HBM capacity;
- :func:`memory_summary`: peaks against capacity, spill bytes, and whether each part was recorded at all
  (a trace without allocation events says "not recorded" and why, instead of showing zeros).
"""
from __future__ import annotations

import numpy as np
import pandas as pd

from ..registry import Column, register

ALLOCATION_SPEC = (
    Column("core", "", "Core", "the core track holding the buffer (nc0, ...)"),
    Column("buffer", "", "Memory", "SBUF or PSUM"),
    Column("start_ts", "ns", "Allocated"), Column("end_ts", "ns", "Freed"), Column("duration_ns", "ns", "Held"),
    Column("partition", "count", "First partition"), Column("num_partitions", "count", "Partitions"),
    Column("start_address", "bytes", "Start address", "byte offset inside each partition"),
    Column("end_address", "bytes", "End address", "exclusive"),
    Column("bytes", "bytes", "Bytes", "num_partitions x (end_address - start_address)"),
    Column("tensor_name", "", "Tensor"), Column("tensor_kind", "", "Kind", "tiles, resident, accumulator"),
    Column("spill", "", "Spilled", "holds data spilled to HBM and reloaded, or did not fit"),
    Column("op", "", "Op", "the host op that allocated it"),
)
OCCUPANCY_SPEC = (
    Column("core", "", "Core"), Column("buffer", "", "Memory", "SBUF or PSUM"),
    Column("ts", "ns", "Time", "the level holds from ts until the next row's ts"),
    Column("bytes", "bytes", "Held", "sum of the buffers live at ts"),
    Column("capacity_bytes", "bytes", "Capacity", "per core, from the hardware spec; NaN unknown"),
    Column("percent", "percent", "Occupancy", "bytes / capacity_bytes"),
)
HBM_SPEC = (
    Column("device", "", "Device"), Column("kind", "", "Held as", "total, weights, gradients, optimizer state, "
                                                                 "activations, allocated (Kineto)"),
    Column("ts", "ns", "Time", "the level holds from ts until the next row's ts"),
    Column("bytes", "bytes", "Held"),
    Column("capacity_bytes", "bytes", "Capacity", "the device's HBM capacity; NaN unknown"),
    Column("percent", "percent", "Usage", "bytes / capacity_bytes"),
)
SUMMARY_SPEC = (
    Column("metric", "", "Metric"), Column("label", "", "Label"), Column("value", "", "Value", "NaN unknown"),
    Column("unit", "", "Unit"), Column("note", "", "Note", "what the number is, or why it is unknown"),
)
ALLOCATION_COLUMNS = [c.name for c in ALLOCATION_SPEC]
OCCUPANCY_COLUMNS = [c.name for c in OCCUPANCY_SPEC]
HBM_COLUMNS = [c.name for c in HBM_SPEC]
SUMMARY_COLUMNS = [c.name for c in SUMMARY_SPEC]
BUFFERS = ("SBUF", "PSUM")
HBM_COUNTER = "HBM Usage"
_KINETO_COUNTER = "Total Allocated"


def _tracks(trace) -> pd.DataFrame:
    return trace.whole_table("tracks", ["name", "kind", "device"])


@register("memory_allocations", columns=ALLOCATION_SPEC, figure="memory_allocations_figure")
def memory_allocations(trace, top: int | None = None) -> pd.DataFrame:
    """One row per SBUF/PSUM buffer (the trace's ``allocations`` table), in allocation order; with ``top``, the
    ``top`` buffers holding the most byte-time (bytes x duration_ns), most first. Columns: core, buffer,
    start_ts, end_ts, duration_ns, partition, num_partitions, start_address, end_address (bytes inside each
    partition), bytes (num_partitions x address range), tensor_name, tensor_kind, spill (bool), op (host op
    name, "" none). Empty (same columns) when the trace has no allocation events."""
    a = trace.table("allocations")
    if not len(a):
        return pd.DataFrame({c: [] for c in ALLOCATION_COLUMNS})
    tr = _tracks(trace)
    names = tr["name"].astype(str).reindex(a["track"].to_numpy()).fillna("").to_numpy()
    ops = trace.whole_table("host_ops", ["name"])["name"].astype(str)
    fo = a["framework_op"].to_numpy()
    op = np.where(fo >= 0, ops.reindex(fo).fillna("").to_numpy(), "")
    start = a["start_ts"].to_numpy(np.int64)
    dur = a["duration_ns"].to_numpy(np.int64)
    lo, hi = a["start_address"].to_numpy(np.int64), a["end_address"].to_numpy(np.int64)
    parts = a["num_partitions"].to_numpy(np.int64)
    out = pd.DataFrame({"core": names, "buffer": a["buffer"].astype(str).to_numpy(), "start_ts": start,
                        "end_ts": start + dur, "duration_ns": dur, "partition": a["partition"].to_numpy(np.int64),
                        "num_partitions": parts, "start_address": lo, "end_address": hi,
                        "bytes": parts * np.maximum(hi - lo, 0), "tensor_name": a["tensor_name"].astype(str).to_numpy(),
                        "tensor_kind": a["tensor_kind"].astype(str).to_numpy(),
                        "spill": a["spill"].to_numpy() != 0, "op": op})
    out = out.sort_values(["start_ts", "core", "buffer"], kind="stable").reset_index(drop=True)
    if top is not None:
        out = out.loc[(out["bytes"] * out["duration_ns"]).nlargest(max(int(top), 0)).index].reset_index(drop=True)
    return out


def _capacity(trace, buffer: str, device: int) -> float:
    spec = trace.device_spec(device)
    if spec is None:
        return float("nan")
    v = spec.sbuf_bytes_per_core if buffer == "SBUF" else spec.psum_bytes_per_core
    return float(v) if v else float("nan")


def level_steps(start: np.ndarray, end: np.ndarray, amount: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """(ts, level) of "sum of ``amount`` over the intervals [start, end) containing t", one point per change
    time (the level after every change at that time), ending at the last change."""
    times = np.concatenate([start, end]).astype(np.int64)
    delta = np.concatenate([amount, -np.asarray(amount)]).astype(np.float64)
    order = np.argsort(times, kind="stable")
    times, level = times[order], np.cumsum(delta[order])
    last = np.append(times[1:] != times[:-1], True)
    return times[last], np.maximum(level[last], 0.0)


@register("memory_occupancy", columns=OCCUPANCY_SPEC, figure="memory_occupancy_figure")
def memory_occupancy(trace) -> pd.DataFrame:
    """Bytes held over time per core and memory (SBUF, PSUM): a step function, the sum of the buffers of
    :func:`memory_allocations` live at each change. Columns: core, buffer, ts, bytes, capacity_bytes (per core,
    from the device's hardware spec; NaN unknown), percent. Empty without allocation events."""
    a = memory_allocations(trace)
    if not len(a):
        return pd.DataFrame({c: [] for c in OCCUPANCY_COLUMNS})
    tr = _tracks(trace)
    dev = tr["device"].to_numpy() if len(tr) else np.zeros(0, np.int64)
    core_dev = {str(n): int(d) for n, d in zip(tr["name"].astype(str), dev)}
    parts = []
    for (core, buf), g in a.groupby(["core", "buffer"], sort=True):
        ts, lv = level_steps(g["start_ts"].to_numpy(), g["end_ts"].to_numpy(), g["bytes"].to_numpy())
        cap = _capacity(trace, str(buf), core_dev.get(str(core), -1))
        parts.append(pd.DataFrame({"core": core, "buffer": buf, "ts": ts, "bytes": lv, "capacity_bytes": cap,
                                   "percent": 100.0 * lv / cap if cap == cap else np.nan}))
    return pd.concat(parts, ignore_index=True)[OCCUPANCY_COLUMNS]


def _hbm_tracks(trace) -> tuple[pd.DataFrame, str]:
    """Counter tracks of HBM held (name, device, kind) and where they come from ("simulated", "kineto", "")."""
    tr = trace.whole_table("tracks", ["name", "kind", "device", "parent"])
    if not len(tr):
        return tr.iloc[:0], ""
    own = tr["device"].to_numpy()
    par = tr["parent"].to_numpy()
    up = tr["device"].reindex(par).fillna(-1).to_numpy(np.int64)  # a counter under a device track: its device
    tr = tr.assign(device=np.where(own >= 0, own, up))
    ctr = tr[tr["kind"].astype(str) == "counter"]
    names = ctr["name"].astype(str)
    ours = ctr[names.str.startswith(HBM_COUNTER)]
    if len(ours):
        kind = ours["name"].astype(str).str.slice(len(HBM_COUNTER)).str.lstrip(": ").replace("", "total")
        return ours.assign(hbm_kind=kind.to_numpy()), "simulated"
    kin = ctr[(names == _KINETO_COUNTER) & (ctr["device"].to_numpy() >= 0)]
    return kin.assign(hbm_kind="allocated"), ("kineto" if len(kin) else "")


@register("hbm_usage", columns=HBM_SPEC, figure="hbm_usage_figure")
def hbm_usage(trace) -> pd.DataFrame:
    """HBM held over time by kind: the simulated runtime's ``HBM Usage`` counters ("total" and one kind per
    ``HBM Usage: <kind>`` counter: weights, gradients, optimizer state, activations), or a Kineto trace's
    per-device ``Total Allocated`` counter (kind "allocated"). Columns: device (its name), kind, ts, bytes,
    capacity_bytes (the device's HBM capacity, NaN unknown), percent. Empty when the trace has neither."""
    tracks, _src = _hbm_tracks(trace)
    if not len(tracks):
        return pd.DataFrame({c: [] for c in HBM_COLUMNS})
    c = trace.counters
    devs = trace.devices
    parts = []
    for tid, row in tracks.iterrows():
        g = c[c["track"] == tid].sort_values("ts", kind="stable")
        pos = int(row["device"])
        name = str(devs["name"].iloc[pos]) + f" {pos}" if 0 <= pos < len(devs) else "device"
        cap = float(devs["hbm_capacity_bytes"].iloc[pos]) if 0 <= pos < len(devs) else float("nan")
        v = g["value"].to_numpy(np.float64)
        parts.append(pd.DataFrame({"device": name, "kind": row["hbm_kind"], "ts": g["ts"].to_numpy(np.int64),
                                   "bytes": v, "capacity_bytes": cap, "percent": 100.0 * v / cap}))
    out = pd.concat(parts, ignore_index=True)
    return out[HBM_COLUMNS]


NO_ALLOCATIONS = ("not recorded: this trace has no SBUF/PSUM allocation events (the simulated Neuron runtime "
                  "writes them; Kineto imports and older traces have none)")
NO_HBM = ("not recorded: no 'HBM Usage' counter (simulated Neuron runtime) and no device 'Total Allocated' "
          "counter (Kineto, recorded with profile_memory=True)")


def _spill_reload_bytes(trace) -> float:
    """Bytes moved by DMA on spill-reload queues (``q*SpillReload*``, Neuron Explorer's spill_reload_bytes)."""
    d = trace.table("dma", ["track", "transfer_bytes"])
    if not len(d):
        return float("nan")
    names = trace.whole_table("tracks", ["name"])["name"].astype(str)
    q = names.reindex(d["track"].to_numpy()).fillna("").to_numpy()
    spill = np.char.find(q.astype(str), "SpillReload") >= 0
    return float(d["transfer_bytes"].to_numpy()[spill].sum())


@register("memory_summary", columns=SUMMARY_SPEC)
def memory_summary(trace) -> pd.DataFrame:
    """Memory in numbers: per memory (SBUF, PSUM) the peak bytes held by one core, its capacity and the peak's
    share; buffers spilled; spill-reload DMA bytes; HBM peak, capacity and share, and the peak of each kind
    held. Columns: metric, label, value (NaN unknown), unit, note (what the number is, or "not recorded: why").
    Metrics: allocations_recorded, sbuf_peak_bytes, sbuf_capacity_bytes, sbuf_peak_percent, psum_peak_bytes,
    psum_capacity_bytes, psum_peak_percent, spilled_buffers, spill_reload_bytes, hbm_recorded, hbm_peak_bytes,
    hbm_capacity_bytes, hbm_peak_percent, hbm_<kind>_peak_bytes per kind held."""
    rows: list[tuple[str, str, float, str, str]] = []
    occ = memory_occupancy(trace)
    alloc = memory_allocations(trace)
    rows.append(("allocations_recorded", "SBUF/PSUM allocations", float(len(alloc)), "count",
                 f"{len(alloc)} buffers recorded" if len(alloc) else NO_ALLOCATIONS))
    for buf in BUFFERS:
        g = occ[occ["buffer"] == buf]
        cap = float(g["capacity_bytes"].iloc[0]) if len(g) else _capacity(trace, buf, -1)
        peak = float(g["bytes"].max()) if len(g) else float("nan")
        note = "largest bytes one core held at once" if len(g) else (NO_ALLOCATIONS if not len(alloc)
                                                                       else f"no {buf} buffers recorded")
        low = buf.lower()
        rows += [(f"{low}_peak_bytes", f"{buf} peak", peak, "bytes", note),
                 (f"{low}_capacity_bytes", f"{buf} capacity", cap, "bytes", "per core, from the hardware spec"),
                 (f"{low}_peak_percent", f"{buf} peak share", 100.0 * peak / cap if cap == cap else float("nan"),
                  "percent", "peak / capacity")]
    rows.append(("spilled_buffers", "Spilled buffers", float(alloc["spill"].sum()) if len(alloc) else float("nan"),
                 "count", "buffers holding spilled data or that did not fit" if len(alloc) else NO_ALLOCATIONS))
    sr = _spill_reload_bytes(trace)
    rows.append(("spill_reload_bytes", "Spill reload bytes", sr, "bytes",
                 "DMA bytes on spill-reload queues" if sr == sr else "not recorded: no DMA transfers"))
    rows += _hbm_rows(trace)
    return pd.DataFrame(rows, columns=SUMMARY_COLUMNS)


def _hbm_rows(trace) -> list[tuple[str, str, float, str, str]]:
    h = hbm_usage(trace)
    tot = h[h["kind"].isin(["total", "allocated"])]
    if not len(tot):
        nan = float("nan")
        return [("hbm_recorded", "HBM usage", 0.0, "", NO_HBM), ("hbm_peak_bytes", "HBM peak", nan, "bytes", NO_HBM),
                ("hbm_capacity_bytes", "HBM capacity", nan, "bytes", NO_HBM),
                ("hbm_peak_percent", "HBM peak share", nan, "percent", NO_HBM)]
    src = "simulated: modelled from the op stream" if (h["kind"] == "total").any() else "Kineto 'Total Allocated'"
    peak = float(tot["bytes"].max())
    cap = float(tot["capacity_bytes"].iloc[0])
    rows = [("hbm_recorded", "HBM usage", 1.0, "", src),
            ("hbm_peak_bytes", "HBM peak", peak, "bytes", "largest bytes held at once on one device"),
            ("hbm_capacity_bytes", "HBM capacity", cap, "bytes", "the device's HBM (shared by its cores)"),
            ("hbm_peak_percent", "HBM peak share", 100.0 * peak / cap if cap == cap else float("nan"), "percent",
             "peak / capacity")]
    for kind, g in h[~h["kind"].isin(["total", "allocated"])].groupby("kind", sort=False):
        key = str(kind).replace(" ", "_")
        rows.append((f"hbm_{key}_peak_bytes", f"HBM {kind} (peak)", float(g["bytes"].max()), "bytes",
                     f"largest bytes held as {kind}"))
    return rows
