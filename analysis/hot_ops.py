"""``hot_ops``: where the device time goes, grouped by op, module path, python stack or engine."""
from __future__ import annotations

import numpy as np
import pandas as pd

from . import metrics as M
from .flops import _module_from_stack, instruction_work
from .summary import analysis_span

GROUPINGS = ("op", "module", "stack", "engine")
HOT_OPS_COLUMNS = ["calls", "instructions", "device_time_self_ns", "device_time_total_ns", "device_time_mean_ns",
                   "flops", "hbm_bytes", "achieved_flops_per_s", "achieved_bandwidth_bytes_per_s",
                   "share_of_step_time_percent", "host_time_ns", "host_launch_time_ns"]


def host_op_parents(trace) -> np.ndarray:
    """Parent host-op row of every host op (same order as the full host_ops table; -1 = top level), by
    interval nesting per track. Cached. One pass over host ops (not device events)."""
    sh = trace._shared
    if "host_parents" in sh:
        return sh["host_parents"]
    ho = trace._full_table("host_ops")
    n = len(ho)
    parent = np.full(n, -1, dtype=np.int64)
    if n:
        start = ho["start_ts"].to_numpy()
        end = start + ho["duration_ns"].to_numpy()
        track = ho["track"].to_numpy()
        order = np.lexsort((-end, start, track))
        stack: list[int] = []
        cur_track = None
        s_l, e_l, t_l = start.tolist(), end.tolist(), track.tolist()
        for i in order.tolist():
            if t_l[i] != cur_track:
                stack, cur_track = [], t_l[i]
            while stack and e_l[stack[-1]] <= s_l[i]:
                stack.pop()
            if stack and e_l[i] <= e_l[stack[-1]]:
                parent[i] = stack[-1]
            stack.append(i)
    sh["host_parents"] = parent
    return parent


def _subtree_sum(values: np.ndarray, parent: np.ndarray) -> np.ndarray:
    """values[i] + values of all descendants of i (vectorised per depth level)."""
    total = values.astype(float).copy()
    cur = parent.copy()
    src = np.arange(len(values))
    live = cur >= 0
    while live.any():
        np.add.at(total, cur[live], values[src[live]])
        cur = np.where(live, parent[np.where(live, cur, 0)], -1)
        live = cur >= 0
    return total


def _prefix_totals(keys: pd.Index, self_vals: np.ndarray, sep: str) -> np.ndarray:
    """Total of each key = Σ self of keys equal to it or starting with it + sep (module / stack prefixes)."""
    s = pd.Series(self_vals, index=keys.astype(str))
    acc: dict[str, float] = {}
    for k, v in s.items():
        if not k:
            continue
        parts = k.split(sep)
        for i in range(1, len(parts) + 1):
            p = sep.join(parts[:i])
            acc[p] = acc.get(p, 0.0) + v
    return np.array([acc.get(k, v) if k else v for k, v in s.items()], dtype=float)


def _launch_time(trace, w: pd.DataFrame, codes: np.ndarray, k: int, cats: pd.Index) -> pd.Series:
    """Per group: Σ duration of the distinct host ops that launched its device rows (``launch`` flows)."""
    fl = trace.flows
    out = pd.Series(0.0, index=cats)
    if not len(fl) or not len(w):
        return out
    from .flops import cat_values

    m = cat_values(fl["kind"], ["launch"]) & cat_values(fl["src_table"], ["host_ops"]) \
        & cat_values(fl["dst_table"], ["instructions"])
    if not m.any():
        return out
    pos = w.index.get_indexer(fl["dst_row"].to_numpy()[m])
    src = fl["src_row"].to_numpy()[m]
    ok = pos >= 0
    ho = trace._full_table("host_ops")
    hpos = ho.index.get_indexer(src[ok])
    good = hpos >= 0
    g = codes[pos[ok]][good].astype(np.int64)
    h = hpos[good].astype(np.int64)
    pairs = np.unique(g * (len(ho) + 1) + h)
    dur = ho["duration_ns"].to_numpy()[pairs % (len(ho) + 1)]
    return pd.Series(np.bincount(pairs // (len(ho) + 1), weights=dur, minlength=k), index=cats)


def _step_time(trace) -> float:
    st = trace.steps()
    if len(st):
        return float(st["duration_ns"].sum())
    lo, hi = analysis_span(trace)
    return float(hi - lo)


def hot_ops(trace, by: str = "op", top: int | None = None) -> pd.DataFrame:
    """Device time per group, sorted by self device time (descending).

    ``by``: "op" (launching host op name, else instruction name), "module" (nn.Module path), "stack"
    (python stack, innermost last) or "engine". Index: the group key (named ``by``). Columns:
    calls (host ops of that op / launching host ops / instructions for engine), instructions (device rows),
    device_time_self_ns (Σ duration of device rows attributed directly), device_time_total_ns (incl. device
    time of nested host ops for "op", of sub-modules / callee stacks for "module"/"stack"),
    device_time_mean_ns (self / calls), flops (FLOP), hbm_bytes (bytes), achieved_flops_per_s (FLOP/s over
    self time), achieved_bandwidth_bytes_per_s (bytes/s), share_of_step_time_percent (self / Σ step
    durations, or total_time without steps), host_time_ns (Σ host duration of the group's host ops),
    host_launch_time_ns (Σ duration of the distinct host events that launched the group's device rows through
    ``launch`` flows: the runtime calls, e.g. cudaLaunchKernel, or the ops themselves on Neuron captures).
    """
    if by not in GROUPINGS:
        raise ValueError(f"unknown grouping {by!r}; valid: {', '.join(GROUPINGS)}")
    key = f"hot_ops:{by}"
    if key in trace._cache:
        out = trace._cache[key]
        return out.head(top) if top else out
    w = instruction_work(trace)
    ho = trace.host_ops
    kcat = w[by]
    cats = pd.Index(kcat.cat.categories.astype(str))
    codes = kcat.cat.codes.to_numpy()
    dur = w["duration_ns"].to_numpy()
    k = len(cats)
    self_ns = np.bincount(codes, weights=dur, minlength=k)
    n_ins = np.bincount(codes, minlength=k)
    flops = np.bincount(codes, weights=w["flops"].to_numpy(), minlength=k)
    hbm = np.bincount(codes, weights=w["hbm_bytes"].to_numpy(), minlength=k)
    fo = w["framework_op"].to_numpy()
    has = fo >= 0
    stride = int(fo.max()) + 2 if len(fo) else 1
    pairs = np.unique(codes[has].astype(np.int64) * stride + fo[has])  # distinct (group, launching host op)
    launch_calls = np.bincount(pairs // stride, minlength=k) if len(pairs) else np.zeros(k, int)
    df = pd.DataFrame({"instructions": n_ins, "device_time_self_ns": self_ns, "flops": flops,
                       "hbm_bytes": hbm, "_launch_calls": launch_calls}, index=cats)
    df = df[df["instructions"] > 0]

    host_cols = {"module": "module", "stack": "stack", "op": "name"}
    if by in host_cols and len(ho):
        if by == "module":
            hname = pd.Series(_module_from_stack(ho["module"], ho["stack"]), index=ho.index).astype(str)
        else:
            hname = ho[host_cols[by]].astype(str)
        h = pd.DataFrame({"k": hname.to_numpy(), "d": ho["duration_ns"].to_numpy()})
        h = h[h["k"] != ""]
        hg = h.groupby("k").agg(host_calls=("d", "size"), host_time_ns=("d", "sum"))
        if by == "op":
            # CPU-only ops still appear (device time 0); calls = host ops of that name.
            df = df.join(hg, how="outer")
        else:
            df = df.join(hg, how="left")
    else:
        df["host_calls"], df["host_time_ns"] = np.nan, np.nan
    df = df.fillna({"instructions": 0, "device_time_self_ns": 0.0, "flops": 0.0, "hbm_bytes": 0.0,
                    "_launch_calls": 0, "host_time_ns": 0.0})
    if by == "op":
        calls = df["host_calls"].where(df["host_calls"].notna() & (df["host_calls"] > 0), df["instructions"])
    elif by == "engine":
        calls = df["instructions"]
    else:
        calls = df["_launch_calls"].where(df["_launch_calls"] > 0, df["instructions"])
    df["calls"] = calls.astype("int64")
    df["instructions"] = df["instructions"].astype("int64")

    if by == "op" and len(ho):
        full = trace._full_table("host_ops")
        parent = host_op_parents(trace)
        per_ho = np.bincount(np.where(has, fo, 0), weights=np.where(has, dur, 0), minlength=len(full)).astype(float)
        tot = _subtree_sum(per_ho, parent)
        in_win = full.index.isin(ho.index)
        names = full["name"].astype(str).to_numpy()
        # sum only outermost occurrences of a name so recursive ops are not double counted
        pn = np.where(parent >= 0, names[np.where(parent >= 0, parent, 0)], None)
        outer = in_win & (pn != names)
        t = pd.Series(tot[outer]).groupby(names[outer]).sum()
        df["device_time_total_ns"] = np.fmax(t.reindex(df.index).fillna(0.0).to_numpy(),
                                             df["device_time_self_ns"].to_numpy())
    elif by in ("module", "stack"):
        df["device_time_total_ns"] = _prefix_totals(df.index, df["device_time_self_ns"].to_numpy(),
                                                    "." if by == "module" else "\n")
    else:
        df["device_time_total_ns"] = df["device_time_self_ns"]
    df["host_launch_time_ns"] = _launch_time(trace, w, codes, k, cats).reindex(df.index).fillna(0.0).to_numpy()
    st = _step_time(trace)
    df["device_time_mean_ns"] = M._div(df["device_time_self_ns"].to_numpy(), df["calls"].to_numpy())
    df["achieved_flops_per_s"] = M.rate_per_s(df["flops"].to_numpy(), df["device_time_self_ns"].to_numpy())
    df["achieved_bandwidth_bytes_per_s"] = M.rate_per_s(df["hbm_bytes"].to_numpy(),
                                                        df["device_time_self_ns"].to_numpy())
    df["share_of_step_time_percent"] = M._div(100.0 * df["device_time_self_ns"].to_numpy(), st)
    df["host_time_ns"] = df["host_time_ns"].astype(float)
    df.index.name = by
    out = df[HOT_OPS_COLUMNS].sort_values(["device_time_self_ns", "host_time_ns"], ascending=False)
    trace._cache[key] = out
    return out.head(top) if top else out
