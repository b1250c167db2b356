"""Roofline: per-op arithmetic intensity and achieved FLOP/s against the device ceilings.

Definitions follow XProf (``anchors.md`` §2.1): roof(AI) = min(AI × memory bandwidth, peak FLOP/s),
ridge point = peak / bandwidth, an op is memory bound when its AI is below the ridge point.
Ceilings are per core (one NeuronCore, one whole GPU). An op's time is its device elapsed time: for each
invocation (host op), the union of the intervals of all its device rows - instructions on every engine and,
on Neuron, the DMA transfers that feed it - summed over invocations. Counting only engine busy time would put
memory-bound ops above the memory roof, since on a NeuronCore the engines read SBUF while DMA moves HBM data.
The memory roof is per core: min(one HBM stack, the core's DMA bandwidth) on Neuron (Explorer's
``memory_bound_ideal`` divides DMA bytes by ``dma_ddr_bandwidth``), HBM bandwidth on GPUs. Matmul-family ops are judged against the matrix peak of their dtype,
other ops against the engine's vector peak (Vector/Scalar/GpSimd; "CUDA cores" on GPUs) when known.
"""
from __future__ import annotations

import math

import numpy as np
import pandas as pd

from . import metrics as M
from .flops import MATRIX_ENGINES, instruction_work

ROOFLINE_COLUMNS = ["op", "dtype", "engine", "device", "instructions", "device_time_ns", "flops", "hbm_bytes",
                    "arithmetic_intensity", "achieved_flops_per_s", "achieved_bandwidth_bytes_per_s",
                    "peak_flops_per_s", "bandwidth_bytes_per_s", "ridge_point", "roof_flops_per_s", "bound",
                    "efficiency_percent", "distance_to_roof", "time_at_roof_ns", "time_saved_at_roof_ns"]
CEILING_COLUMNS = ["device", "device_name", "kind", "engine", "dtype", "peak_flops_per_s", "bandwidth_bytes_per_s",
                   "ridge_point"]


def _specs(trace) -> dict[int, object]:
    return {int(d.index): d.spec for d in trace.header.devices}


def _hbm_bw(spec) -> float:
    if spec is None:
        return math.nan
    v = spec.hbm_bandwidth_per_core_bytes_per_s or spec.hbm_bandwidth_bytes_per_s
    return float(v) if v else math.nan


def _bw(spec) -> float:
    """The per-core memory roof: HBM, capped by the core's DMA bandwidth when the device has one."""
    hbm = _hbm_bw(spec)
    dma = float(spec.dma_bandwidth_per_core_bytes_per_s) if spec is not None else 0.0
    return min(hbm, dma) if dma and np.isfinite(hbm) else (dma or hbm)


def union_by_key(key: np.ndarray, start: np.ndarray, end: np.ndarray) -> pd.Series:
    """Σ of the union of [start, end) intervals per key (ns), vectorised: an int64 Series indexed by key
    (ascending)."""
    if not len(key):
        return pd.Series(dtype=float)
    key = np.asarray(key, dtype=np.int64)
    if int(key.min()) >= 0 and int(key.max()) < 4 * len(key) + 1024:
        kc, uniques = key, None  # small non-negative ids (row numbers) are their own dense codes
    else:
        codes, uniques = pd.factorize(key)
        kc = codes.astype(np.int64)
    t0 = int(min(start.min(), end.min()))
    span = int(end.max()) - t0 + 1
    packed = span * (int(kc.max()) + 1) < (1 << 62)  # (key, time) fits one int64: one sort, one running max
    order = np.argsort(kc * span + (start - t0)) if packed else np.lexsort((start, kc))
    k, s0, e0 = kc[order], start[order], end[order]
    first = np.ones(len(k), dtype=bool)
    first[1:] = k[1:] != k[:-1]
    if packed:  # running max of end within each key: key i's times shifted by i*span
        shift = k * span
        reach = np.maximum.accumulate(e0 - t0 + shift) - shift + t0
    else:
        reach = pd.Series(e0).groupby(k).cummax().to_numpy()
    prev = np.empty_like(reach)
    prev[1:] = reach[:-1]
    prev[first] = np.iinfo(np.int64).min
    covered = np.maximum(0, e0 - np.maximum(s0, prev))
    heads = np.flatnonzero(first)
    out = pd.Series(np.add.reduceat(covered, heads), index=k[heads] if uniques is None else uniques[k[heads]])
    return out if uniques is None else out.sort_index()


def _op_elapsed_ns(trace, w: pd.DataFrame) -> pd.Series:
    """Device elapsed time per invocation (``framework_op`` row): union of its instructions and DMA."""
    fop = w["framework_op"].to_numpy()
    st = w["start_ts"].to_numpy()
    en = st + w["duration_ns"].to_numpy()
    dma = trace.table("dma", columns=["framework_op", "start_ts", "duration_ns"])
    if len(dma):
        d_f = dma["framework_op"].to_numpy()
        d_s = dma["start_ts"].to_numpy()
        fop, st = np.concatenate([fop, d_f]), np.concatenate([st, d_s])
        en = np.concatenate([en, d_s + dma["duration_ns"].to_numpy()])
    linked = fop >= 0
    return union_by_key(fop[linked], st[linked], en[linked])


def _peak_for(spec, is_matmul: bool, dtype: str, engine: str) -> float:
    if spec is None:
        return math.nan
    if is_matmul or engine in MATRIX_ENGINES:
        p = M.lookup_peak(dict(spec.peak_flops_per_s), dtype or None)
        return p if np.isfinite(p) else M.lookup_peak(dict(spec.peak_flops_per_s))
    vec = {k: float(v) for k, v in spec.vector_flops_per_s.items() if v}
    if engine in vec:
        return vec[engine]
    if vec:
        return max(vec.values())
    return M.lookup_peak(dict(spec.peak_flops_per_s))


def roofline_ceilings(trace) -> pd.DataFrame:
    """One row per ceiling. Columns: device (header index), device_name, kind ("compute" | "memory"),
    engine ("matrix" for the Tensor engine / tensor cores, else the vector engine name, "HBM"/"DMA" for
    memory roofs), dtype (canonical, '' for memory), peak_flops_per_s (FLOP/s per core; NaN for memory),
    bandwidth_bytes_per_s (per-core HBM roof; the DMA row gives the DMA roof), ridge_point (FLOP/byte =
    peak / the memory roof = min(HBM, DMA) per core). Empty when the header lists no devices."""
    rows = []
    for d in trace.header.devices:
        s = d.spec
        bw = _bw(s)
        for dt, p in sorted(s.peak_flops_per_s.items(), key=lambda kv: -kv[1]):
            if p:
                rows.append((int(d.index), d.name, "compute", "matrix", M.canonical_dtype(dt) or dt, float(p), bw,
                             M.ridge_point(p, bw)))
        for eng, p in s.vector_flops_per_s.items():
            if p:
                rows.append((int(d.index), d.name, "compute", eng, "float32", float(p), bw, M.ridge_point(p, bw)))
        rows.append((int(d.index), d.name, "memory", "HBM", "", math.nan, _hbm_bw(s), math.nan))
        if s.dma_bandwidth_per_core_bytes_per_s:
            rows.append((int(d.index), d.name, "memory", "DMA", "", math.nan,
                         float(s.dma_bandwidth_per_core_bytes_per_s), math.nan))
    return pd.DataFrame(rows, columns=CEILING_COLUMNS)


def roofline(trace, by: str = "op") -> pd.DataFrame:
    """Per (op, dtype, device): position on the roofline. Sorted by time_saved_at_roof_ns (descending).

    Columns: op, dtype, engine (engine with the most device time), device (header index, -1 unknown),
    instructions, device_time_ns (Σ over invocations of the union of the op's instruction and DMA intervals),
    flops (FLOP), hbm_bytes (bytes),
    arithmetic_intensity (FLOP/byte; NaN without bytes), achieved_flops_per_s, achieved_bandwidth_bytes_per_s,
    peak_flops_per_s (per-core ceiling for the dtype / engine), bandwidth_bytes_per_s (per-core HBM),
    ridge_point (FLOP/byte), roof_flops_per_s (min(AI × bw, peak)), bound ("memory" | "compute" | "unknown"),
    efficiency_percent (achieved / roof), distance_to_roof (1 − achieved / roof),
    time_at_roof_ns (max(flops / peak, bytes / bw)), time_saved_at_roof_ns (device_time − time_at_roof, ≥ 0).
    Ops without FLOPs and bytes are left out. ``by``: "op" or "module".
    """
    if by not in ("op", "module"):
        raise ValueError(f"unknown grouping {by!r}; valid: op, module")
    key = f"roofline:{by}"
    if key in trace._cache:
        return trace._cache[key]
    w_all = instruction_work(trace)
    elapsed = _op_elapsed_ns(trace, w_all)
    w = w_all
    keep = (w["flops"].to_numpy() > 0) | (w["hbm_bytes"].to_numpy() > 0)
    if not keep.all():
        w = w[keep]
    if not len(w):
        out = pd.DataFrame(columns=ROOFLINE_COLUMNS)
        trace._cache[key] = out
        return out
    op_c = w[by].cat.codes.to_numpy().astype(np.int64)
    dt_c = w["dtype"].cat.codes.to_numpy().astype(np.int64)
    dev = w["device"].to_numpy().astype(np.int64)
    n_dt = len(w["dtype"].cat.categories) + 1
    dmin = int(dev.min())
    n_dev = int(dev.max()) - dmin + 1
    combo = (op_c * n_dt + (dt_c + 1)) * n_dev + (dev - dmin)
    g, uniq = pd.factorize(combo)
    k = len(uniq)
    dur = w["duration_ns"].to_numpy()
    # device time: each invocation's elapsed time counted once, in the group of its first kept row;
    # rows without a host op count their own duration
    fop = w["framework_op"].to_numpy()
    first_row = np.ones(len(fop), dtype=bool)
    if len(fop):
        _, first_idx = np.unique(fop, return_index=True)
        first_row[:] = False
        first_row[first_idx] = True
    own = np.where(fop >= 0, np.where(first_row, elapsed.reindex(fop).fillna(0.0).to_numpy(), 0.0), dur)
    t = np.bincount(g, weights=own, minlength=k)
    fl = np.bincount(g, weights=w["flops"].to_numpy(), minlength=k)
    by_ = np.bincount(g, weights=w["hbm_bytes"].to_numpy(), minlength=k)
    cnt = np.bincount(g, minlength=k)
    mm = np.bincount(g, weights=w["is_matmul"].to_numpy().astype(float), minlength=k) > 0   # any matrix work
    eng_c = w["engine"].cat.codes.to_numpy().astype(np.int64)
    n_eng = len(w["engine"].cat.categories)
    et = np.bincount(g * n_eng + eng_c, weights=dur, minlength=k * n_eng).reshape(k, n_eng)
    eng_names = np.asarray(w["engine"].cat.categories.astype(str), dtype=object)
    engine = eng_names[et.argmax(axis=1)] if n_eng else np.array([""] * k, dtype=object)
    u_dev = uniq % n_dev + dmin
    u_dt = (uniq // n_dev) % n_dt - 1
    u_op = uniq // n_dev // n_dt
    op_names = np.asarray(w[by].cat.categories.astype(str), dtype=object)[u_op]
    dt_names = np.append(np.asarray(w["dtype"].cat.categories.astype(str), dtype=object), "")[u_dt]

    specs = _specs(trace)
    default_spec = trace.device_spec()
    peak = np.empty(k)
    bw = np.empty(k)
    cache: dict = {}
    for i in range(k):  # one iteration per group (op × dtype × device), not per event
        ck = (u_dev[i], bool(mm[i]), dt_names[i], engine[i])
        if ck not in cache:
            spec = specs.get(int(u_dev[i]), default_spec)
            cache[ck] = (_peak_for(spec, ck[1], ck[2], ck[3]), _bw(spec))
        peak[i], bw[i] = cache[ck]
    ai = M.arithmetic_intensity(fl, by_)
    ach = M.rate_per_s(fl, t)
    ridge = M.ridge_point(peak, bw)
    ai_for_roof = np.where(by_ > 0, np.nan_to_num(ai, nan=0.0), np.inf)
    roof = M.roof_flops_per_s(ai_for_roof, peak, bw)
    bound = np.where(~np.isfinite(ridge), "unknown",
                     np.where(np.nan_to_num(ai_for_roof, posinf=np.inf) < ridge, "memory", "compute"))
    eff = M._div(100.0 * ach, roof)
    t_roof = M.time_at_roof_ns(fl, by_, peak, bw)
    saved = np.where(np.isfinite(t_roof), np.maximum(0.0, t - t_roof), np.nan)
    out = pd.DataFrame({"op": op_names, "dtype": dt_names, "engine": engine, "device": u_dev,
                        "instructions": cnt, "device_time_ns": t, "flops": fl, "hbm_bytes": by_,
                        "arithmetic_intensity": ai, "achieved_flops_per_s": ach,
                        "achieved_bandwidth_bytes_per_s": M.rate_per_s(by_, t), "peak_flops_per_s": peak,
                        "bandwidth_bytes_per_s": bw, "ridge_point": ridge, "roof_flops_per_s": roof,
                        "bound": bound, "efficiency_percent": eff,
                        "distance_to_roof": 1.0 - np.asarray(eff, dtype=float) / 100.0,
                        "time_at_roof_ns": t_roof, "time_saved_at_roof_ns": saved})
    if by == "module":
        out = out.rename(columns={"op": "module"})
    out = out.sort_values("time_saved_at_roof_ns", ascending=False, na_position="last").reset_index(drop=True)
    trace._cache[key] = out
    return out


def roofline_point_rows(trace, point: int, by: str = "op") -> np.ndarray:
    """Instruction row ids behind one roofline point (row ``point`` of ``roofline(trace, by)``): the
    instructions of its (op, dtype, device) that carry FLOPs or bytes, grouped exactly as ``roofline`` does."""
    pts = roofline(trace, by)
    if point not in pts.index:
        raise ValueError(f"no roofline point {point} in this trace (it has {len(pts)})")
    p = pts.loc[point]
    w = instruction_work(trace)
    m = (w["device"].to_numpy() == int(p["device"])) & ((w["flops"].to_numpy() > 0) | (w["hbm_bytes"].to_numpy() > 0))
    for col, val in ((by, p[by if by == "op" else "module"]), ("dtype", p["dtype"])):
        m &= w[col].cat.codes.to_numpy() == w[col].cat.categories.get_indexer([val])[0]  # -1 matches ''
    return w.index.to_numpy()[m]
