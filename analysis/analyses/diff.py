"""``diff(a, b)``: align two traces by op, module and input shape and explain each op's time delta.

The delta of an aligned op is split into three parts that add up to it:
  more_calls_ns           = (calls_b − calls_a) × per_call_a
  slower_per_call_ns      = calls_b × (per_call_b − per_call_a)   when the op stays on the same side of the ridge
  moved_across_roofline_ns = calls_b × (per_call_b − per_call_a)  when it changed bound (memory <-> compute)
Works across devices (e.g. an imported GPU trace vs a simulated Trainium trace): each side is judged
against its own device's roof. Device time and the bound rule are the ones of :mod:`analysis.core.devicetime`
(the same as ``hot_ops`` and ``roofline``).
"""
from __future__ import annotations

import numpy as np
import pandas as pd

from .. import metrics as M
from ..core.devicetime import bound
from ..core.tables import row_positions
from ..registry import Column, register
from .activity import invocation_group_time
from .summary import primary_device
from .work import instruction_work

KEYS = ("op", "module", "shape")
DIFF_SPEC = (
    Column("calls_a", "count", "Calls (a)"), Column("calls_b", "count", "Calls (b)"),
    Column("device_time_a_ns", "ns", "Device time (a)"), Column("device_time_b_ns", "ns", "Device time (b)"),
    Column("per_call_a_ns", "ns", "Per call (a)"), Column("per_call_b_ns", "ns", "Per call (b)"),
    Column("delta_ns", "ns", "Delta", "b − a"),
    Column("more_calls_ns", "ns", "From more calls", "(calls_b − calls_a) × per_call_a"),
    Column("slower_per_call_ns", "ns", "From slower calls", "calls_b × (per_call_b − per_call_a), same bound"),
    Column("moved_across_roofline_ns", "ns", "From a change of bound", "the same, when the bound changed"),
    Column("bound_a", "", "Bound (a)"), Column("bound_b", "", "Bound (b)"),
    Column("arithmetic_intensity_a", "FLOP/byte", "Arithmetic intensity (a)"),
    Column("arithmetic_intensity_b", "FLOP/byte", "Arithmetic intensity (b)"),
    Column("achieved_flops_per_s_a", "FLOP/s", "Achieved FLOP/s (a)"),
    Column("achieved_flops_per_s_b", "FLOP/s", "Achieved FLOP/s (b)"))
DIFF_COLUMNS = [c.name for c in DIFF_SPEC]


def op_profile(trace, keys: tuple[str, ...] = KEYS) -> pd.DataFrame:
    """Per (keys) device totals of one trace. Index: the keys. Columns: calls (distinct launching host ops,
    else device rows), device_time_ns (device time, :mod:`analysis.core.devicetime`), flops (FLOP), hbm_bytes,
    arithmetic_intensity (FLOP/byte), achieved_flops_per_s, bound ("memory" | "compute" | "unknown" vs this
    trace's device roof)."""
    bad = [k for k in keys if k not in KEYS]
    if bad:
        raise ValueError(f"unknown diff keys {bad}; valid: {', '.join(KEYS)}")
    w = instruction_work(trace)
    cols = {}
    for k in keys:
        if k == "shape":
            ho = trace.whole_table("host_ops", ["input_shapes"])
            fo = w["framework_op"].to_numpy()
            if len(ho):
                sh = ho["input_shapes"].astype(str).to_numpy()
                pos = row_positions(ho.index, fo)
                cols[k] = np.where(pos >= 0, sh[np.where(pos >= 0, pos, 0)], "")
            else:
                cols[k] = np.full(len(w), "", dtype=object)
        else:
            cols[k] = w[k].astype(str).to_numpy()
    df = pd.DataFrame(cols)
    df["f"] = w["flops"].to_numpy()
    df["b"] = w["hbm_bytes"].to_numpy()
    df["bu"] = ~w["bytes_known"].to_numpy()
    df["fo"] = w["framework_op"].to_numpy()
    df["mm"] = w["is_matmul"].to_numpy()
    df["dtype"] = w["dtype"].astype(str).to_numpy()
    df["engine"] = w["engine"].astype(str).to_numpy()
    g = df.groupby(list(keys), sort=False)  # groups in order of first appearance, as ngroup() numbers them
    out = g.agg(flops=("f", "sum"), hbm_bytes=("b", "sum"), unknown=("bu", "sum"), rows=("f", "size"),
                mm=("mm", "max"), dtype=("dtype", "first"), eng=("engine", "first"))
    out["hbm_bytes"] = out["hbm_bytes"].where(out["unknown"] == 0)
    out["device_time_ns"] = invocation_group_time(trace, w, g.ngroup().to_numpy().astype(np.int64), g.ngroups)
    launched = df[df["fo"] >= 0].groupby(list(keys), sort=False)["fo"].nunique()
    out["calls"] = launched.reindex(out.index).fillna(0).astype("int64")
    out["calls"] = out["calls"].where(out["calls"] > 0, out["rows"])
    out["arithmetic_intensity"] = M.arithmetic_intensity(out["flops"].to_numpy(), out["hbm_bytes"].to_numpy())
    out["achieved_flops_per_s"] = M.rate_per_s(out["flops"].to_numpy(), out["device_time_ns"].to_numpy())
    _, peaks, _ = primary_device(trace, w)
    ridge = np.array([M.ridge_point(peaks.compute_peak(bool(mm), dt, eng), peaks.memory_roof)
                      if peaks is not None else np.nan
                      for mm, dt, eng in zip(out["mm"], out["dtype"], out["eng"])], dtype=float)
    out["bound"] = bound(out["flops"].to_numpy(), out["hbm_bytes"].to_numpy(), ridge)
    return out[["calls", "device_time_ns", "flops", "hbm_bytes", "arithmetic_intensity", "achieved_flops_per_s",
                "bound"]]


@register("diff", columns=DIFF_SPEC, figure="diff_figure", subject="pair", memo=False)
def diff(a, b, keys: tuple[str, ...] = KEYS) -> pd.DataFrame:
    """Align ``a`` (baseline) and ``b`` by ``keys`` (default op, module, input shape). Index: the keys.

    Columns: calls_a, calls_b, device_time_a_ns, device_time_b_ns, per_call_a_ns, per_call_b_ns, delta_ns
    (b − a), more_calls_ns, slower_per_call_ns, moved_across_roofline_ns (the three add up to delta_ns; see
    module docstring), bound_a, bound_b ("memory" | "compute" | "unknown" | "" when absent),
    arithmetic_intensity_a/_b (FLOP/byte), achieved_flops_per_s_a/_b. Ops present on one side only have
    0 calls on the other. Sorted by |delta_ns|, largest first.
    """
    pa, pb = op_profile(a, keys), op_profile(b, keys)
    j = pa.merge(pb, how="outer", left_index=True, right_index=True, suffixes=("_a", "_b"))
    for c in ("calls", "device_time_ns", "flops"):
        for s in ("_a", "_b"):
            j[c + s] = j[c + s].fillna(0)
    for s in ("_a", "_b"):
        j["bound" + s] = j["bound" + s].astype(object).fillna("")  # all-NaN (float) when one side is empty
    ca, cb = j["calls_a"].to_numpy(float), j["calls_b"].to_numpy(float)
    ta, tb = j["device_time_ns_a"].to_numpy(float), j["device_time_ns_b"].to_numpy(float)
    pca, pcb = M._div(ta, ca), M._div(tb, cb)
    pca_eff = np.where(ca > 0, pca, pcb)
    pcb_eff = np.where(cb > 0, pcb, pca)
    more = (cb - ca) * np.nan_to_num(pca_eff)
    per_call = cb * np.nan_to_num(pcb_eff - pca_eff)
    moved = (j["bound_a"].to_numpy() != j["bound_b"].to_numpy()) & (ca > 0) & (cb > 0) \
        & np.isin(j["bound_a"].to_numpy(), ["memory", "compute"]) \
        & np.isin(j["bound_b"].to_numpy(), ["memory", "compute"])
    out = pd.DataFrame({"calls_a": ca.astype(np.int64), "calls_b": cb.astype(np.int64),
                        "device_time_a_ns": ta, "device_time_b_ns": tb, "per_call_a_ns": pca, "per_call_b_ns": pcb,
                        "delta_ns": tb - ta, "more_calls_ns": more,
                        "slower_per_call_ns": np.where(moved, 0.0, per_call),
                        "moved_across_roofline_ns": np.where(moved, per_call, 0.0),
                        "bound_a": j["bound_a"].to_numpy(), "bound_b": j["bound_b"].to_numpy(),
                        "arithmetic_intensity_a": j["arithmetic_intensity_a"].to_numpy(),
                        "arithmetic_intensity_b": j["arithmetic_intensity_b"].to_numpy(),
                        "achieved_flops_per_s_a": j["achieved_flops_per_s_a"].to_numpy(),
                        "achieved_flops_per_s_b": j["achieved_flops_per_s_b"].to_numpy()}, index=j.index)
    order = np.argsort(-np.abs(out["delta_ns"].to_numpy()), kind="stable")
    return out.iloc[order]
