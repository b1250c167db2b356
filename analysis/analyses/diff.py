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

from concurrent.futures import ThreadPoolExecutor

import numpy as np
import pandas as pd

from .. import metrics as M
from ..core.categorical import as_cat, category_names
from ..core.devicetime import bound
from ..core.intervals import first_rows
from ..core.tables import row_positions
from ..registry import Column, register
from .activity import invocation_group_time
from .opunits import unit_profile
from .summary import primary_device
from .work import instruction_work

KEYS = ("op", "module", "shape")
#: what a diff row counts: not Hot ops' "Calls" (every host op of the op, with device work or not)
_LAUNCHES = "host ops of the group that launched device work (device rows where no launching op is known)"
DIFF_SPEC = (
    Column("calls_a", "count", "Launches (a)", _LAUNCHES), Column("calls_b", "count", "Launches (b)", _LAUNCHES),
    Column("device_time_a_ns", "ns", "Device time (a)"), Column("device_time_b_ns", "ns", "Device time (b)"),
    Column("per_call_a_ns", "ns", "Per launch (a)"), Column("per_call_b_ns", "ns", "Per launch (b)"),
    Column("delta_ns", "ns", "Delta", "b − a"),
    Column("more_calls_ns", "ns", "From more launches", "(calls_b − calls_a) × per_call_a"),
    Column("slower_per_call_ns", "ns", "From slower launches", "calls_b × (per_call_b − per_call_a), same bound"),
    Column("moved_across_roofline_ns", "ns", "From a change of bound", "the same, when the bound changed"),
    Column("bound_a", "", "Bound (a)"), Column("bound_b", "", "Bound (b)"),
    Column("arithmetic_intensity_a", "FLOP/byte", "Arithmetic intensity (a)"),
    Column("arithmetic_intensity_b", "FLOP/byte", "Arithmetic intensity (b)"),
    Column("achieved_flops_per_s_a", "FLOP/s", "Achieved FLOP/s (a)"),
    Column("achieved_flops_per_s_b", "FLOP/s", "Achieved FLOP/s (b)"))
DIFF_COLUMNS = [c.name for c in DIFF_SPEC]


def op_profile(trace, keys: tuple[str, ...] = KEYS) -> pd.DataFrame:
    """Per (keys) device totals of one trace (memoised per trace and keys). Index: the keys, groups in order
    of first appearance. Columns: calls (distinct launching host ops, else device rows), device_time_ns
    (device time, :mod:`analysis.core.devicetime`), flops (FLOP), hbm_bytes, arithmetic_intensity
    (FLOP/byte), achieved_flops_per_s, bound ("memory" | "compute" | "unknown" vs this trace's device roof).
    Rows whose key value is missing form no group."""
    bad = [k for k in keys if k not in KEYS]
    if bad:
        raise ValueError(f"unknown diff keys {bad}; valid: {', '.join(KEYS)}")
    return trace.memo(("op_profile", tuple(keys)), lambda: _op_profile(trace, tuple(keys)))


def _key_codes(trace, w: pd.DataFrame, key: str) -> tuple[np.ndarray, np.ndarray]:
    """(row codes into labels, -1 missing; labels: distinct str) of one alignment key over ``w``'s rows,
    computed on the categories, never on millions of strings."""
    if key == "shape":
        ho = trace.whole_table("host_ops", ["input_shapes"])
        if not len(ho):
            return np.zeros(len(w), np.int64), np.array([""], dtype=object)
        hcodes, huniq = pd.factorize(ho["input_shapes"].astype(str))  # one per host op, not per row
        pos = row_positions(ho.index, w["framework_op"].to_numpy())
        codes = np.where(pos >= 0, hcodes[np.where(pos >= 0, pos, 0)], len(huniq))  # no launching op: ""
        labels = np.append(np.asarray(huniq, dtype=object), "")
    else:
        cat = as_cat(w[key]).array
        codes, labels = np.asarray(cat.codes, np.int64), category_names(cat)
    lc, uniq = pd.factorize(labels)  # equal labels share one code
    return np.where(codes >= 0, np.append(lc, -1)[codes], -1), np.asarray(uniq, dtype=object)


def _group_ids(parts: list[tuple[np.ndarray, np.ndarray]]) -> np.ndarray:
    """One group id per row of the combined key codes, numbered in order of first appearance (-1 missing)."""
    keep = np.logical_and.reduce([c >= 0 for c, _ in parts])
    combined = np.zeros(len(keep), np.int64)
    room = 1
    for codes, labels in parts:
        if room * max(len(labels), 1) >= 1 << 62:  # re-number first, so the product never overflows
            combined, room = pd.factorize(combined)[0].astype(np.int64), len(combined)
        combined = combined * len(labels) + np.where(keep, codes, 0)
        room *= max(len(labels), 1)
    gid = np.full(len(keep), -1, np.int64)
    gid[keep] = _first_appearance_ids(combined[keep] if not keep.all() else combined, room)
    return gid


def _first_appearance_ids(keys: np.ndarray, space: int) -> np.ndarray:
    """``pd.factorize(keys)[0]`` (ids in order of first appearance) of non-negative keys below ``space``:
    a linear dense lookup when the key space is small, else a hash."""
    if not len(keys) or space > 4 * len(keys) + 1024:
        return pd.factorize(keys)[0].astype(np.int64)
    present, first = first_rows(keys)  # distinct keys ascending, the row of each one's first appearance
    lut = np.empty(int(present[-1]) + 1, np.int64)
    lut[present[np.argsort(first, kind="stable")]] = np.arange(len(present))
    return lut[keys]


def _op_profile(trace, keys: tuple[str, ...]) -> pd.DataFrame:
    u = unit_profile(trace, keys, _key_codes, _group_ids)  # one reduction per invocation, where it applies
    if u is not None:
        out = pd.DataFrame(u.columns, index=_group_index(u.parts, u.first_unit, keys))
        dtypes, engines, placed = u.dtypes, u.engines, u.placement
    else:
        out, dtypes, engines, placed = _rows_profile(trace, keys)
    out["arithmetic_intensity"] = M.arithmetic_intensity(out["flops"].to_numpy(), out["hbm_bytes"].to_numpy())
    out["achieved_flops_per_s"] = M.rate_per_s(out["flops"].to_numpy(), out["device_time_ns"].to_numpy())
    _, peaks, _ = primary_device(trace, placed)
    ridge = np.array([M.ridge_point(peaks.compute_peak(bool(mm), dt, eng), peaks.memory_roof)
                      if peaks is not None else np.nan
                      for mm, dt, eng in zip(out["mm"], dtypes, engines)], dtype=float)
    out["bound"] = bound(out["flops"].to_numpy(), out["hbm_bytes"].to_numpy(), ridge)
    return out[["calls", "device_time_ns", "flops", "hbm_bytes", "arithmetic_intensity", "achieved_flops_per_s",
                "bound"]]


def _rows_profile(trace, keys: tuple[str, ...]) -> tuple[pd.DataFrame, np.ndarray, np.ndarray, pd.DataFrame]:
    """The per-row path of :func:`_op_profile` on ``instruction_work``: (flops, hbm_bytes, rows, mm,
    device_time_ns, calls per group; dtypes and engines of each group's first row; the rows' placement)."""
    w = instruction_work(trace)
    parts = [_key_codes(trace, w, k) for k in keys]
    gid = _group_ids(parts)
    keep = gid >= 0
    if not keep.all():
        w, gid, parts = w[keep], gid[keep], [(c[keep], lab) for c, lab in parts]
    ng = int(gid.max()) + 1 if len(gid) else 0
    _, first = first_rows(gid)  # first row of each group, by group id
    sums = pd.DataFrame({"f": w["flops"].to_numpy(), "b": w["hbm_bytes"].to_numpy()}).groupby(gid).sum()
    out = pd.DataFrame({"flops": sums["f"].to_numpy(), "hbm_bytes": sums["b"].to_numpy(),
                        "rows": np.bincount(gid, minlength=ng),
                        "mm": np.bincount(gid, weights=w["is_matmul"].to_numpy(), minlength=ng) > 0},
                       index=_group_index(parts, first, keys))
    unknown = np.bincount(gid, weights=~w["bytes_known"].to_numpy(), minlength=ng)
    out["hbm_bytes"] = out["hbm_bytes"].where(unknown == 0)
    out["device_time_ns"] = invocation_group_time(trace, w, gid, ng)
    out["calls"] = _calls(w["framework_op"].to_numpy(), gid, ng, out["rows"].to_numpy())
    dtypes = np.asarray(w["dtype"].array.take(first), dtype=object).astype(str)
    engines = np.asarray(w["engine"].array.take(first), dtype=object).astype(str)
    return out, dtypes, engines, w


def _calls(fo: np.ndarray, gid: np.ndarray, ng: int, rows: np.ndarray) -> np.ndarray:
    """Per group: distinct launching host ops, else its row count (no row has a launching op)."""
    m = fo >= 0
    if m.any():
        _, first = first_rows(fo[m] * ng + gid[m])  # one row per distinct (host op, group)
        calls = np.bincount(gid[m][first], minlength=ng)
    else:
        calls = np.zeros(ng, np.int64)
    return np.where(calls > 0, calls, rows).astype(np.int64)


def _group_index(parts: list[tuple[np.ndarray, np.ndarray]], first: np.ndarray, keys: tuple[str, ...]) -> pd.Index:
    """The groups' key values (str), from each group's first row."""
    levels = [pd.Series(labels[codes[first]], dtype=object).astype(str) for codes, labels in parts]
    if len(keys) == 1:
        return pd.Index(levels[0], name=keys[0])
    return pd.MultiIndex.from_arrays(levels, names=list(keys))


@register("diff", columns=DIFF_SPEC, figure="diff_figure", subject="pair", memo=False)
def diff(a, b, keys: tuple[str, ...] = KEYS) -> pd.DataFrame:
    """Align ``a`` (baseline) and ``b`` by ``keys`` (default op, module, input shape). Index: the keys.

    Columns: calls_a, calls_b, device_time_a_ns, device_time_b_ns, per_call_a_ns, per_call_b_ns, delta_ns
    (b − a), more_calls_ns, slower_per_call_ns, moved_across_roofline_ns (the three add up to delta_ns; see
    module docstring), bound_a, bound_b ("memory" | "compute" | "unknown" | "" when absent),
    arithmetic_intensity_a/_b (FLOP/byte), achieved_flops_per_s_a/_b. Ops present on one side only have
    0 calls on the other. Sorted by |delta_ns|, largest first.
    """
    pa, pb = _profiles(a, b, keys)
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


def _profiles(a, b, keys: tuple[str, ...]) -> tuple[pd.DataFrame, pd.DataFrame]:
    """:func:`op_profile` of both traces, ``b``'s on a thread of its own while ``a``'s is computed here: the two
    are independent (each memoised on its trace; reading and reducing the columns is mostly numpy work, which
    runs outside the GIL), so a pair of cold traces takes about the time of the slower one on two cores."""
    if a is b:
        p = op_profile(a, keys)
        return p, op_profile(b, keys)
    with ThreadPoolExecutor(max_workers=1, thread_name_prefix="diff") as pool:
        fb = pool.submit(op_profile, b, keys)
        pa = op_profile(a, keys)
        return pa, fb.result()
