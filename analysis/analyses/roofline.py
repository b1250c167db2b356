"""Roofline: per-op arithmetic intensity and achieved FLOP/s against the device ceilings.

Definitions follow XProf (``anchors.md`` §2.1): roof(AI) = min(AI × memory roof, peak FLOP/s), ridge point =
peak / memory roof, an op is memory bound when its AI is below the ridge point (:func:`analysis.core.
devicetime.bound`). Ceilings are per core (one NeuronCore, one whole GPU; :mod:`analysis.core.devices`):
the **memory roof** is min(HBM bandwidth per core, DMA bandwidth per core) on Neuron (Explorer's
``memory_bound_ideal`` divides DMA bytes by ``dma_ddr_bandwidth``), the HBM bandwidth on GPUs; matmul-family
ops are judged against the matrix peak of their dtype (float32 on a GPU with TF32: the TF32 peak), other ops
against the engine's vector peak. An op's time is its device time (:mod:`analysis.core.devicetime`: per
invocation, the union of its instructions and the DMA transfers that feed it).

No number here breaks a physical bound: where an achieved rate would exceed the peak or the memory roof (the
FLOPs or bytes are estimates that overstate the work), it is NaN with the reason in ``note``, and so are the
efficiency and the time saved that would follow from it.
"""
from __future__ import annotations

import math

import numpy as np
import pandas as pd

from .. import metrics as M
from ..core.categorical import cat_values
from ..core.devices import device_peaks
from ..core.devicetime import bound, group_sum, physical
from ..core.intervals import first_rows, union_by_key
from ..core.tables import NON_COMPUTE_ENGINES
from ..registry import Column, register
from .activity import invocation_group_time
from .unpriced import unpriced_reason
from .work import instruction_work

ROOFLINE_SPEC = (
    Column("op", "", "Op"), Column("dtype", "", "Data type"),
    Column("engine", "", "Engine", "Where the op's device time goes: the engine busiest with it (waits left out), "
           "or DMA when its transfers take longer"),
    Column("device", "count", "Device", "Position in header.devices (-1 unknown)"),
    Column("instructions", "count", "Device rows"),
    Column("device_time_ns", "ns", "Device time", "Σ over invocations of the union of instructions and DMA"),
    Column("flops", "FLOP", "FLOPs"), Column("hbm_bytes", "bytes", "HBM traffic", "NaN when unknown"),
    Column("arithmetic_intensity", "FLOP/byte", "Arithmetic intensity"),
    Column("achieved_flops_per_s", "FLOP/s", "Achieved FLOP/s", "NaN above the peak (see note)"),
    Column("achieved_bandwidth_bytes_per_s", "bytes/s", "Achieved bandwidth", "NaN above the memory roof"),
    Column("peak_flops_per_s", "FLOP/s", "Compute peak", "Per core, for the dtype / engine"),
    Column("bandwidth_bytes_per_s", "bytes/s", "Memory roof", "Per core: min(HBM, DMA) on Neuron, HBM on GPUs"),
    Column("ridge_point", "FLOP/byte", "Ridge point", "peak / memory roof"),
    Column("roof_flops_per_s", "FLOP/s", "Roof", "min(AI × memory roof, peak)"),
    Column("bound", "", "Bound", "memory, compute or unknown"),
    Column("efficiency_percent", "percent", "Efficiency", "achieved / roof (0-100)"),
    Column("distance_to_roof", "", "Distance to the roof", "1 − achieved / roof (0-1)"),
    Column("time_at_roof_ns", "ns", "Time at the roof", "max(flops / peak, bytes / memory roof)"),
    Column("time_saved_at_roof_ns", "ns", "Time saved at the roof", "device time − time at the roof (>= 0)"),
    Column("note", "", "Note", "Why a value is NaN"),
)
ROOFLINE_COLUMNS = [c.name for c in ROOFLINE_SPEC]
ROOFLINE_GROUPINGS = ("op", "module", "engine", "dtype")
CEILING_SPEC = (Column("device", "count", "Device", "Position in header.devices"),
                Column("device_name", "", "Device name"), Column("kind", "", "Kind", "compute or memory"),
                Column("engine", "", "Engine", "matrix, a vector engine, HBM, DMA or memory roof"),
                Column("dtype", "", "Data type"), Column("peak_flops_per_s", "FLOP/s", "Peak", "Per core"),
                Column("bandwidth_bytes_per_s", "bytes/s", "Bandwidth",
                       "Compute rows: the memory roof; memory rows: that memory's bandwidth per core"),
                Column("ridge_point", "FLOP/byte", "Ridge point"),
                Column("label", "", "Label", "Human name of the ceiling"))
CEILING_COLUMNS = [c.name for c in CEILING_SPEC]


@register("roofline_ceilings", columns=CEILING_SPEC)
def roofline_ceilings(trace) -> pd.DataFrame:
    """One row per ceiling. Columns: device (position in header.devices), device_name, kind ("compute" |
    "memory"), engine ("matrix" for the Tensor engine / tensor cores, else the vector engine name; "HBM",
    "DMA" and "memory roof" for memory rows), dtype (canonical, '' for memory), peak_flops_per_s (FLOP/s per
    core; NaN for memory), bandwidth_bytes_per_s (compute rows: the memory roof min(HBM, DMA) per core; memory
    rows: their own bandwidth per core), ridge_point (FLOP/byte = peak / memory roof), label (human text).
    Empty when the header lists no devices."""
    rows = []
    for pos, d in enumerate(trace.header.devices):
        p = device_peaks(trace, pos)
        if p is None:
            continue
        bw = p.memory_roof
        for dt, v in sorted(p.matrix.items(), key=lambda kv: -kv[1]):
            dt_c = M.canonical_dtype(dt) or dt
            rows.append((pos, d.name, "compute", "matrix", dt_c, v, bw, M.ridge_point(v, bw), f"matrix {dt_c} peak"))
        for eng, v in p.vector.items():
            rows.append((pos, d.name, "compute", eng, "float32", v, bw, M.ridge_point(v, bw), f"{eng} peak"))
        rows.append((pos, d.name, "memory", "HBM", "", math.nan, p.hbm_per_core, math.nan, "HBM bandwidth per core"))
        if np.isfinite(p.dma_per_core):
            rows.append((pos, d.name, "memory", "DMA", "", math.nan, p.dma_per_core, math.nan,
                         "DMA bandwidth per core"))
        rows.append((pos, d.name, "memory", "memory roof", "", math.nan, bw, math.nan,
                     "memory roof per core: min(HBM, DMA)" if np.isfinite(p.dma_per_core) else
                     "memory roof per core: HBM"))
    return pd.DataFrame(rows, columns=CEILING_COLUMNS)


def _kept(w: pd.DataFrame) -> np.ndarray:
    """Rows that carry FLOPs or HBM bytes, or whose FLOPs or bytes are unknown (a group with unknown work is
    a point with NaN FLOPs and the reason, never a 0-FLOP point)."""
    return ((w["flops"].to_numpy() > 0) | (w["hbm_bytes"].to_numpy() > 0) | ~w["flops_known"].to_numpy()
            | ~w["bytes_known"].to_numpy())


def _groups(w: pd.DataFrame, by: str) -> tuple[np.ndarray, np.ndarray]:
    """(group code per row of ``w``, unique combos) grouping by (op or module, dtype, device)."""
    dev = w["device"].to_numpy()
    n_dt = len(w["dtype"].cat.categories) + 1
    dmin = int(dev.min()) if len(dev) else 0
    n_dev = (int(dev.max()) - dmin + 1) if len(dev) else 1
    combo = w[by].cat.codes.to_numpy().astype(np.int64)  # (op * n_dt + dtype + 1) * n_dev + device - dmin,
    combo *= n_dt                                          # built in place in one int64 array
    combo += w["dtype"].cat.codes.to_numpy()
    combo += 1
    combo *= n_dev
    combo += dev
    combo -= dmin
    g, uniq = _factorize(combo)
    del combo
    return g, uniq


def _factorize(key: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """``pd.factorize`` of int keys (codes numbered in order of first appearance, int64; the distinct keys in
    that order), by each key's first row where the keys are small non-negative ints (no hash table)."""
    if not len(key) or int(key.min()) < 0 or int(key.max()) > 8 * len(key) + 1024:
        g, uniq = pd.factorize(key)
        return g.astype(np.int64, copy=False), np.asarray(uniq)
    present, first = first_rows(key)
    uniq = present[np.argsort(first, kind="stable")]
    lut = np.zeros(int(present[-1]) + 1, np.int64)
    lut[uniq] = np.arange(len(uniq))
    return lut[key], uniq


@register("roofline", columns=ROOFLINE_SPEC, figure="roofline_figure")
def roofline(trace, by: str = "op") -> pd.DataFrame:
    """Per (op, dtype, device): position on the roofline. Sorted by time_saved_at_roof_ns (descending).

    Columns: op, dtype, engine (the engine busiest with the group's instructions, semaphore waits left out, or
    "DMA" when its transfers take longer than any engine), device (position in header.devices, -1
    unknown), instructions, device_time_ns (device time: each invocation's union of instructions and DMA,
    counted in the group of its first row with FLOPs or bytes), flops (FLOP), hbm_bytes (bytes; NaN when
    unknown for a row of the group), arithmetic_intensity (FLOP/byte; NaN without bytes), achieved_flops_per_s,
    achieved_bandwidth_bytes_per_s, peak_flops_per_s (per-core ceiling for the dtype / engine),
    bandwidth_bytes_per_s (the memory roof per core), ridge_point (FLOP/byte), roof_flops_per_s
    (min(AI × memory roof, peak)), bound ("memory" | "compute" | "unknown"), efficiency_percent (achieved /
    roof, 0-100), distance_to_roof (1 − achieved / roof, 0-1), time_at_roof_ns (max(flops / peak, bytes /
    memory roof)), time_saved_at_roof_ns (device_time − time_at_roof, >= 0), note (why a value is NaN).
    Ops without FLOPs and bytes are left out; a group with rows of unknown FLOPs has NaN FLOPs and the op
    model's reason in ``note``. ``by``: "op", "module", "engine" or "dtype" (the first column is named ``by``;
    by "dtype" the groups are (dtype, device)).
    """
    if by not in ROOFLINE_GROUPINGS:
        raise ValueError(f"unknown grouping {by!r}; valid: {', '.join(ROOFLINE_GROUPINGS)}")
    w_all = instruction_work(trace)
    keep = _kept(w_all)
    if not keep.all():  # only the columns read here are copied
        w_all = w_all[list(dict.fromkeys([by, "dtype", "device", "engine", "start_ts", "duration_ns",
                                          "framework_op", "flops", "hbm_bytes", "flops_known", "bytes_known",
                                          "is_matmul"]))]
    w = w_all[keep] if not keep.all() else w_all
    if not len(w):
        return pd.DataFrame({c.name: pd.Series(dtype=object if c.unit == "" else float) for c in ROOFLINE_SPEC})
    g, uniq = _groups(w, by)
    k = len(uniq)
    t = invocation_group_time(trace, w, g, k)
    fl = group_sum(g, w["flops"].to_numpy(), k)  # (bincount would copy the read-only memoised columns)
    by_ = group_sum(g, w["hbm_bytes"].to_numpy(), k)
    unknown = ~w["bytes_known"].to_numpy()
    if unknown.any():  # a group with any row of unknown bytes
        by_[np.bincount(g[unknown], minlength=k) > 0] = np.nan
    f_unknown = ~w["flops_known"].to_numpy()
    if f_unknown.any():  # a group with any row of unknown FLOPs
        fl[np.bincount(g[f_unknown], minlength=k) > 0] = np.nan
    why = _unknown_reasons(trace, w, g, k, unknown | f_unknown)
    del unknown, f_unknown
    cnt = np.bincount(g, minlength=k)
    mm = np.bincount(g[w["is_matmul"].to_numpy()], minlength=k) > 0  # any matrix work
    engine, busiest = _group_engines(trace, w, g, k)
    n_dt = len(w["dtype"].cat.categories) + 1
    dev_all = w["device"].to_numpy()
    dmin = int(dev_all.min())
    n_dev = int(dev_all.max()) - dmin + 1
    u_dev = uniq % n_dev + dmin
    u_dt = (uniq // n_dev) % n_dt - 1
    op_names = np.asarray(w[by].cat.categories.astype(str), dtype=object)[uniq // n_dev // n_dt]
    dt_names = np.append(np.asarray(w["dtype"].cat.categories.astype(str), dtype=object), "")[u_dt]
    peak, bw = _ceilings(trace, u_dev, mm, dt_names, busiest)
    out = _positions(fl, by_, t, peak, bw)
    out["note"] = np.array(["; ".join(x for x in (a, b) if x) for a, b in zip(why, out["note"])], dtype=object)
    out = pd.DataFrame({"op": op_names, "dtype": dt_names, "engine": engine, "device": u_dev, "instructions": cnt,
                        "device_time_ns": t, "flops": fl, "hbm_bytes": by_, **out})
    if by == "dtype":
        out = out.drop(columns="op")
        out.insert(0, "dtype", out.pop("dtype"))
    elif by == "engine":
        out = out.drop(columns="engine").rename(columns={"op": "engine"})
    elif by == "module":
        out = out.rename(columns={"op": "module"})
    return out.sort_values("time_saved_at_roof_ns", ascending=False, na_position="last").reset_index(drop=True)


#: instructions that wait rather than work: not where an op's time goes
_WAITING = ("SemaphoreWait",)


def _group_engines(trace, w: pd.DataFrame, g: np.ndarray, k: int) -> tuple[np.ndarray, np.ndarray]:
    """Per group, (where its device time goes, the engine busiest with its instructions): the busiest compute
    engine (waits and the Sync engine's DMA triggers left out), or "DMA" when the union of its invocations'
    DMA transfers (counted in the group of an invocation's first row, as its device time) is longer than any
    engine's busy time."""
    n_eng = len(w["engine"].cat.categories)
    if not n_eng:
        return np.array([""] * k, dtype=object), np.array([""] * k, dtype=object)
    dur = w["duration_ns"].to_numpy().astype(float)
    ins = trace.analysis_table("instructions")
    if "opcode" in ins.columns and len(ins):
        opcode = ins["opcode"] if ins.index.equals(w.index) else ins["opcode"].reindex(w.index)
        dur[cat_values(opcode, _WAITING)] = 0.0
    key = g * n_eng
    key += w["engine"].cat.codes.to_numpy()
    et = np.bincount(key, weights=dur, minlength=k * n_eng).reshape(k, n_eng)
    eng_names = np.asarray(w["engine"].cat.categories.astype(str), dtype=object)
    # a DMA trigger on the Sync engine is not where the time goes, unless a group has nothing else
    compute = et * ~np.isin(eng_names, NON_COMPUTE_ENGINES)[None, :]
    pick = np.where(compute.max(axis=1) > 0, compute.argmax(axis=1), et.argmax(axis=1))
    busiest = eng_names[pick]
    engine = busiest
    dma = trace.table("dma", ["start_ts", "duration_ns", "framework_op"])
    fop = w["framework_op"].to_numpy()
    linked = fop >= 0
    if len(dma) and linked.any():
        m = dma["framework_op"].to_numpy() >= 0
        ds = dma["start_ts"].to_numpy()[m]
        per_op = union_by_key(dma["framework_op"].to_numpy()[m], ds, ds + dma["duration_ns"].to_numpy()[m])
        every = bool(linked.all())  # then no gathered copies
        inv, first_idx = first_rows(fop if every else fop[linked])
        dma_t = np.bincount(g[first_idx] if every else g[linked][first_idx],
                            weights=per_op.reindex(inv).fillna(0.0).to_numpy(), minlength=k)
        engine = np.where(dma_t > et[np.arange(k), pick], "DMA", busiest).astype(object)
    return engine, busiest


def _unknown_reasons(trace, w: pd.DataFrame, g: np.ndarray, k: int, unknown: np.ndarray) -> np.ndarray:
    """Per group: why its FLOPs or bytes are unknown (the most common reason of its rows; '' when known)."""
    out = np.full(k, "", dtype=object)
    if not unknown.any():
        return out
    reason = unpriced_reason(trace).reindex(w.index[unknown]).astype(str).to_numpy()
    s = pd.Series(reason).groupby(g[unknown]).agg(lambda x: x.value_counts().index[0])
    out[s.index.to_numpy()] = "work unknown: " + s.to_numpy().astype(object)
    return out


def _ceilings(trace, dev: np.ndarray, mm: np.ndarray, dtype: np.ndarray, engine: np.ndarray
              ) -> tuple[np.ndarray, np.ndarray]:
    k = len(dev)
    peak, bw = np.empty(k), np.empty(k)
    cache: dict = {}
    for i in range(k):  # one iteration per group (op × dtype × device), not per event
        ck = (int(dev[i]), bool(mm[i]), dtype[i], engine[i])
        if ck not in cache:
            p = device_peaks(trace, ck[0])
            cache[ck] = (math.nan, math.nan) if p is None else (p.compute_peak(ck[1], ck[2], ck[3]), p.memory_roof)
        peak[i], bw[i] = cache[ck]
    return peak, bw


def _positions(fl: np.ndarray, nbytes: np.ndarray, t: np.ndarray, peak: np.ndarray, bw: np.ndarray) -> dict:
    """The roofline columns of each group, with physically impossible values replaced by NaN + a note."""
    ai = M.arithmetic_intensity(fl, nbytes)
    raw, raw_bw = M.rate_per_s(fl, t), M.rate_per_s(nbytes, t)
    ach, note = physical(raw, peak, "achieved FLOP/s above the device peak: the FLOP count overstates the work")
    ach_bw, note = physical(raw_bw, bw, "achieved bandwidth above the memory roof: the HBM bytes overstate the "
                            "traffic (data served from cache, or bytes counted on rows that do not move them)", note)
    ridge = M.ridge_point(peak, bw)
    ai_for_roof = np.where(nbytes > 0, np.nan_to_num(ai, nan=0.0), np.where(np.isnan(nbytes), np.nan, np.inf))
    roof = M.roof_flops_per_s(ai_for_roof, peak, bw)
    impossible = (np.isfinite(raw) & np.isnan(ach)) | (np.isfinite(raw_bw) & np.isnan(ach_bw))
    eff = np.where(impossible, np.nan, M._div(100.0 * ach, roof))
    eff, note = physical(eff, np.full(len(eff), 100.0), "above the roof: the FLOPs or bytes are estimates", note)
    t_roof = np.where(impossible, np.nan, M.time_at_roof_ns(fl, np.nan_to_num(nbytes), peak, bw))
    saved = np.where(np.isfinite(t_roof), np.maximum(0.0, t - t_roof), np.nan)
    no_peak = ~np.isfinite(peak) | ~np.isfinite(bw)
    note = np.where(no_peak & (note == ""), "device peaks unknown (not in the trace header)", note)
    return {"arithmetic_intensity": ai, "achieved_flops_per_s": ach, "achieved_bandwidth_bytes_per_s": ach_bw,
            "peak_flops_per_s": peak, "bandwidth_bytes_per_s": bw, "ridge_point": ridge, "roof_flops_per_s": roof,
            "bound": bound(fl, nbytes, ridge), "efficiency_percent": eff,
            "distance_to_roof": 1.0 - np.asarray(eff, dtype=float) / 100.0, "time_at_roof_ns": t_roof,
            "time_saved_at_roof_ns": saved, "note": note}


@register("roofline_point_rows", returns="value", memo=False, method=None)
def roofline_point_rows(trace, point: int, by: str = "op") -> np.ndarray:
    """Instruction row ids behind one roofline point (row ``point`` of ``roofline(trace, by)``): the
    instructions of its (op, dtype, device) that carry FLOPs or bytes, grouped exactly as ``roofline`` does."""
    pts = roofline(trace, by)
    if point not in pts.index:
        raise ValueError(f"no roofline point {point} in this trace (it has {len(pts)})")
    p = pts.loc[point]
    w = instruction_work(trace)
    m = (w["device"].to_numpy() == int(p["device"])) & _kept(w)
    for col, val in dict.fromkeys(((by, p[by]), ("dtype", p["dtype"]))):
        m &= w[col].cat.codes.to_numpy() == w[col].cat.categories.get_indexer([val])[0]  # -1 matches ''
    return w.index.to_numpy()[m]


__all__ = ["roofline", "roofline_ceilings", "roofline_point_rows", "ROOFLINE_COLUMNS", "CEILING_COLUMNS"]
