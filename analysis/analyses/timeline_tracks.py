"""Derived timeline tracks (Neuron Explorer's hierarchy view, DMA engine tracks and cumulative counters).

- :func:`op_hierarchy`: the framework hierarchy on the device timeline, module levels -> op, from the data the
  trace holds: each device instruction's launching host op (``framework_op``) and that op's ``nn.Module`` path
  (``module``, recorded with ``with_modules=True``). An op's span is its instructions' extent on one core; a
  module instance's span is the extent of a run of consecutive ops (by device start) under that module.
- :func:`dma_engines`: the DMA engine each transfer ran on (``DMA-E<n>`` tracks, per core), a partition of the
  DMA table.
- :func:`cumulative_utilization`: Neuron Explorer's "Estimated Cumulative MFU" and "Cumulative DMA Throughput"
  counters: model FLOPs and DMA bytes done since the analysed span's start, as MFU (the summary's one MFU
  definition, :func:`analysis.metrics.mfu_pct`, with the summary's model FLOPs and peak) and bytes/s.
"""
from __future__ import annotations

import math

import numpy as np
import pandas as pd

from .. import metrics as M
from ..registry import Column, register
from .activity import analysis_span
from .summary import _flop_totals, primary_device
from .work import instruction_work, work_source

HIERARCHY_SPEC = (
    Column("level", "count", "Level", "0 = outermost module level shown; the op level is the last"),
    Column("kind", "", "Kind", "module or op"),
    Column("name", "", "Name", "Module path (nn.Module names joined by '.'), or the op's name"),
    Column("core", "count", "Core track", "Track id of the core (GPU: device) the spans are on; -1 unknown"),
    Column("start_ts", "ns", "Start", "First instruction start of the span"),
    Column("end_ts", "ns", "End", "Last instruction end of the span"),
    Column("host_op", "count", "Host op row", "The op's host_ops row (op level); -1 for modules"),
    Column("ops", "count", "Ops", "Launching ops in the span"),
    Column("instructions", "count", "Instructions", "Device instructions in the span"),
)
DMA_ENGINE_SPEC = (
    Column("row", "count", "DMA row", "Row id in the dma table"),
    Column("core", "count", "Core track", "Track id of the queue's parent (the core); -1 unknown"),
    Column("engine", "count", "DMA engine", "dma_engine of the transfer; -1 unknown"),
    Column("engine_track", "", "Engine track", "DMA-E<n>, or 'DMA engine unknown'"),
)
CUMULATIVE_SPEC = (
    Column("ts", "ns", "Time", "End of the bin (absolute ns)"),
    Column("elapsed_ns", "ns", "Elapsed", "ts − start of the analysed span"),
    Column("model_flops", "FLOP", "Model FLOPs done", "Model FLOPs of matrix work up to ts (spread over each "
           "instruction's duration)"),
    Column("mfu_percent", "percent", "Cumulative MFU", "model_flops / (matrix peak × active cores × elapsed)"),
    Column("dma_bytes", "bytes", "DMA bytes done", "DMA bytes moved up to ts (spread over each transfer)"),
    Column("dma_throughput_bytes_per_s", "bytes/s", "Cumulative DMA throughput", "dma_bytes / elapsed"),
)
HIERARCHY_COLUMNS = [c.name for c in HIERARCHY_SPEC]
DMA_ENGINE_COLUMNS = [c.name for c in DMA_ENGINE_SPEC]
CUMULATIVE_COLUMNS = [c.name for c in CUMULATIVE_SPEC]
MAX_MODULE_LEVELS = 8


def _parents(trace, tracks: np.ndarray) -> np.ndarray:
    """Parent track id of each track id in ``tracks`` (-1 unknown); a lookup table, no sort of ``tracks``."""
    tr = trace.whole_table("tracks", ["parent"])
    if not len(tr) or not len(tracks):
        return np.full(len(tracks), -1, dtype=np.int64)
    ids = tr.index.to_numpy(dtype=np.int64)
    lut = np.full(int(max(ids.max(), tracks.max())) + 2, -1, dtype=np.int64)
    lut[ids] = tr["parent"].to_numpy(dtype=np.int64)
    return lut[np.where(tracks >= 0, tracks, len(lut) - 1)]


def _op_spans(trace) -> pd.DataFrame:
    """Per (core, launching op): first start, last end and count of its instructions, by start. The table is
    cut into runs of one (track, op) in table order (a capture writes an op's instructions together: 96k runs
    for 5M instructions), each run reduced in place, then the runs merged per (core, op); a table in no such
    order is hashed by (track, op) instead."""
    ins = trace.table("instructions", ["track", "start_ts", "duration_ns", "framework_op"])
    fop = ins["framework_op"].to_numpy(dtype=np.int64)
    if not len(fop) or int(fop.max()) < 0:
        return pd.DataFrame({c: pd.Series(dtype=np.int64) for c in ("core", "host_op", "start_ts", "end_ts",
                                                                    "instructions")})
    m = int(fop.max()) + 2
    trk = ins["track"].to_numpy(dtype=np.int64)
    s = ins["start_ts"].to_numpy(dtype=np.int64)
    e = s + ins["duration_ns"].to_numpy(dtype=np.int64)
    brk = trk[1:] != trk[:-1]  # boolean temporaries only: no 5M-row key unless the runs are short
    brk |= fop[1:] != fop[:-1]
    idx = np.flatnonzero(brk) + 1
    del brk
    if len(idx) < len(fop) // 4:
        idx = np.concatenate(([0], idx))
        keys, first, last = trk[idx] * m + fop[idx] + 1, np.minimum.reduceat(s, idx), np.maximum.reduceat(e, idx)
        count = np.diff(np.append(idx, len(fop)))
    else:
        codes, uniq = pd.factorize(trk * m + fop + 1)
        keys = np.asarray(uniq, dtype=np.int64)
        first = np.full(len(keys), np.iinfo(np.int64).max, dtype=np.int64)
        last = np.full(len(keys), np.iinfo(np.int64).min, dtype=np.int64)
        np.minimum.at(first, codes, s)
        np.maximum.at(last, codes, e)
        count = np.bincount(codes, minlength=len(keys))
    df = pd.DataFrame({"core": _parents(trace, keys // m), "host_op": keys % m - 1, "start_ts": first,
                       "end_ts": last, "instructions": count})
    df = df[df["host_op"] >= 0]
    g = df.groupby(["core", "host_op"], sort=False)
    out = g.agg(start_ts=("start_ts", "min"), end_ts=("end_ts", "max"), instructions=("instructions", "sum"))
    return out.reset_index().sort_values(["core", "start_ts", "host_op"], kind="stable").reset_index(drop=True)


def _module_runs(ops: pd.DataFrame, paths: list[list[str]], depth: int) -> pd.DataFrame:
    """Module instances at ``depth`` (0-based): runs of consecutive ops (per core, by start) whose module path
    has the same first ``depth + 1`` names; ops with a shorter path break runs and belong to none."""
    names = [".".join(p[: depth + 1]) if len(p) > depth else "" for p in paths]
    code, uniq = pd.factorize(np.asarray(names, dtype=object))
    core = ops["core"].to_numpy()
    brk = np.ones(len(ops), dtype=bool)
    brk[1:] = (code[1:] != code[:-1]) | (core[1:] != core[:-1])
    first = np.flatnonzero(brk)
    keep = np.asarray(uniq, dtype=object)[code[first]] != ""
    if not keep.any():
        return pd.DataFrame(columns=HIERARCHY_COLUMNS)
    ends = np.maximum.reduceat(ops["end_ts"].to_numpy(), first)  # ops are sorted by start within a core
    n_ins = np.add.reduceat(ops["instructions"].to_numpy(), first)
    n_ops = np.diff(np.append(first, len(ops)))
    return pd.DataFrame({"name": np.asarray(uniq, dtype=object)[code[first]][keep], "core": core[first][keep],
                         "start_ts": ops["start_ts"].to_numpy()[first][keep], "end_ts": ends[keep],
                         "ops": n_ops[keep], "instructions": n_ins[keep]}).assign(level=depth, kind="module",
                                                                                 host_op=-1)


def _common_levels(paths: list[list[str]]) -> int:
    """How many leading module names every op with a module shares while some op goes deeper (the model's root,
    ``DistributedDataParallel.module``): those levels would be one span per forward and are left out."""
    k = 0
    with_mod = [p for p in paths if p]
    while with_mod and all(len(p) > k for p in with_mod) and len({p[k] for p in with_mod}) == 1 \
            and any(len(p) > k + 1 for p in with_mod):
        k += 1
    return k


@register("op_hierarchy", columns=HIERARCHY_SPEC)
def op_hierarchy(trace) -> pd.DataFrame:
    """The hierarchy view's spans on the device timeline: module levels (outermost first) then ops.

    Columns: level (0 = the outermost module level shown: leading module names every op with a module shares,
    e.g. ``GPT`` or ``DistributedDataParallel.module``, are left out), kind ("module" / "op"), name (module
    path / op name), core (track id of the core or GPU device), start_ts, end_ts (ns: an op's span is its
    instructions' extent on that core, a module instance's span the extent of its ops), host_op (the op's
    host_ops row, -1 for modules), ops, instructions. Sorted by (level, core, start_ts). Ops without a module
    are on the op level only; a trace without launching ops (framework_op) has no rows. At most 8 module
    levels."""
    ops = _op_spans(trace)
    if not len(ops):
        return pd.DataFrame({c: pd.Series(dtype=object if c in ("kind", "name") else np.int64)
                             for c in HIERARCHY_COLUMNS})
    host = trace.whole_table("host_ops", ["name", "module"])
    pos = host.index.get_indexer(ops["host_op"].to_numpy())
    names = host["name"].astype(str).to_numpy(dtype=object)
    mods = host["module"].astype(str).to_numpy(dtype=object) if "module" in host.columns else \
        np.full(len(host), "", dtype=object)
    op_name = np.where(pos >= 0, names[np.maximum(pos, 0)], "(unknown op)")
    op_mod = np.where(pos >= 0, mods[np.maximum(pos, 0)], "")
    paths = [m.split(".") if m else [] for m in op_mod.tolist()]
    skip = _common_levels(paths)
    prefix = ".".join(next(p for p in paths if p)[:skip]) + "." if skip else ""
    paths = [p[skip:] if len(p) > skip else [] for p in paths]
    depth = min(max((len(p) for p in paths), default=0), MAX_MODULE_LEVELS)
    parts = []
    for d in range(depth):
        runs = _module_runs(ops, paths, d)
        if len(runs):
            parts.append(runs.assign(name=prefix + runs["name"].astype(str)))
    levels = len(parts)
    parts.append(ops.assign(level=levels, kind="op", name=op_name, ops=1))
    out = pd.concat([p[HIERARCHY_COLUMNS] for p in parts], ignore_index=True)
    for c in ("level", "core", "start_ts", "end_ts", "host_op", "ops", "instructions"):
        out[c] = out[c].astype(np.int64)
    return out.sort_values(["level", "core", "start_ts"], kind="stable").reset_index(drop=True)


@register("dma_engines", columns=DMA_ENGINE_SPEC)
def dma_engines(trace) -> pd.DataFrame:
    """The DMA engine track of every DMA transfer (Neuron Explorer's ``DMA-E<n>`` rows, per core): one row per
    row of the dma table, in its order. Columns: row (dma row id), core (track id of the queue's parent),
    engine (``dma_engine``, -1 unknown), engine_track ("DMA-E<n>" or "DMA engine unknown")."""
    dma = trace.table("dma")
    if not len(dma):
        return pd.DataFrame({"row": pd.Series(dtype=np.int64), "core": pd.Series(dtype=np.int64),
                             "engine": pd.Series(dtype=np.int64), "engine_track": pd.Series(dtype=object)})
    eng = dma["dma_engine"].to_numpy(dtype=np.int64) if "dma_engine" in dma.columns else \
        np.full(len(dma), -1, dtype=np.int64)
    einv, uniq = pd.factorize(eng, sort=True)
    labels = [f"DMA-E{e}" if e >= 0 else "DMA engine unknown" for e in np.asarray(uniq).tolist()]
    return pd.DataFrame({"row": dma.index.to_numpy(dtype=np.int64),
                         "core": _parents(trace, dma["track"].to_numpy(dtype=np.int64)), "engine": eng,
                         "engine_track": pd.Categorical.from_codes(einv, categories=labels)})


def _spread(start: np.ndarray, end: np.ndarray, amount: np.ndarray, edges: np.ndarray) -> np.ndarray:
    """``amount`` per bin of ``edges``, each item spread uniformly over [start, end) (clipped to the edges, so
    the bins hold the whole amount); zero-length items fall into the bin of their start."""
    nb = len(edges) - 1
    # times relative to the first edge before they become floats (absolute ns near 2**60 lose 8 bits)
    s = (np.clip(start, edges[0], edges[-1]) - edges[0]).astype(np.float64)
    e = (np.clip(end, edges[0], edges[-1]) - edges[0]).astype(np.float64)
    edges = (edges - edges[0]).astype(np.float64)
    a = amount.astype(np.float64)
    # cumulative amount done by each edge = Σ a · clip((edge − s) / (e − s), 0, 1); as a difference of ramps:
    # the ramp of an item rises from s to e; bins get the amount of the ramp's part inside them
    b0 = np.clip(np.searchsorted(edges, s, side="right") - 1, 0, nb - 1)
    b1 = np.clip(np.searchsorted(edges, e, side="left") - 1, 0, nb - 1)
    b1 = np.maximum(b1, b0)
    dur = e - s
    out = np.zeros(nb)
    out += np.bincount(b0[b0 == b1], weights=a[b0 == b1], minlength=nb)  # (an empty bincount is int64)
    sp = b0 != b1
    if sp.any():
        s0, e0, r = s[sp], e[sp], a[sp] / dur[sp]
        f, last = b0[sp], b1[sp]
        out += np.bincount(f, weights=r * (edges[f + 1] - s0), minlength=nb)
        out += np.bincount(last, weights=r * (e0 - edges[last]), minlength=nb)
        rate = np.bincount(f + 1, weights=r, minlength=nb + 1) - np.bincount(last, weights=r, minlength=nb + 1)
        out += np.cumsum(rate[:nb]) * np.diff(edges)
    return out


@register("cumulative_utilization", columns=CUMULATIVE_SPEC)
def cumulative_utilization(trace, bins: int = 1000) -> pd.DataFrame:
    """Cumulative MFU and DMA throughput over the analysed span, at ``bins`` equal steps.

    Columns: ts (end of each step, absolute ns), elapsed_ns, model_flops (model FLOPs of matrix work done by ts:
    the summary's FLOPs, each instruction's spread over its duration), mfu_percent (``metrics.mfu_pct`` of
    them over elapsed with the summary's peak × active cores: at the last step the summary's
    mfu_estimated_percent), dma_bytes (DMA bytes moved by ts, each transfer spread over its duration; at the
    last step the summary's dma_transfer_total_bytes), dma_throughput_bytes_per_s (dma_bytes / elapsed).
    Work outside the span counts at its edge. NaN where unknown: MFU without a matrix peak or when the model
    FLOPs are unknown (as in the summary). Empty when the span is empty or the trace has no device work."""
    if bins < 1:
        raise ValueError(f"bins must be >= 1, got {bins}")
    lo, hi = analysis_span(trace)
    w = instruction_work(trace)
    dma = trace.table("dma", ["start_ts", "duration_ns", "transfer_bytes"])
    if hi <= lo or not (len(w) or len(dma)):  # no device work: nothing accumulates
        return pd.DataFrame({c: pd.Series(dtype=np.int64 if c in ("ts", "elapsed_ns") else float)
                             for c in CUMULATIVE_COLUMNS})
    edges = lo + np.round(np.linspace(0, hi - lo, bins + 1)).astype(np.int64)
    edges = np.unique(edges)
    total_flops = _flop_totals(w, work_source(trace))[0]
    _, peaks, cores = primary_device(trace, w)
    peak = (peaks.matrix_peak() if peaks is not None else math.nan) * cores
    mm = w["is_matmul"].to_numpy()
    s = w["start_ts"].to_numpy()[mm]
    flops = np.cumsum(_spread(s, s + w["duration_ns"].to_numpy()[mm], w["flops"].to_numpy()[mm], edges))
    if not np.isfinite(total_flops):
        flops = np.full(len(flops), math.nan)
    ds = dma["start_ts"].to_numpy(dtype=np.int64)
    nbytes = np.cumsum(_spread(ds, ds + dma["duration_ns"].to_numpy(dtype=np.int64),
                               dma["transfer_bytes"].to_numpy(), edges)) if len(dma) else np.zeros(len(edges) - 1)
    elapsed = edges[1:] - lo
    return pd.DataFrame({"ts": edges[1:], "elapsed_ns": elapsed, "model_flops": flops,
                         "mfu_percent": M.mfu_pct(flops, elapsed, peak), "dma_bytes": nbytes,
                         "dma_throughput_bytes_per_s": M.rate_per_s(nbytes, elapsed)})
