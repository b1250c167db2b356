"""``hot_ops``: where the device time goes, grouped by op, module path, python stack or engine.

Device time is the one definition of :mod:`analysis.core.devicetime` (per invocation, the union of its
instructions and the DMA / collectives tied to it), the share of step time is the group's *exclusive* share
of the steps' wall time (concurrent rows split the time), so shares lie within 0-100 % and add up to at most
100 %; achieved rates that would exceed the device's peaks are NaN with the reason in ``note``.
"""
from __future__ import annotations

import numpy as np
import pandas as pd

from .. import metrics as M
from ..core.categorical import cat_values
from ..core.devicetime import exclusive_ns, group_sum, group_time, physical
from ..core.intervals import clip, first_rows, merge
from ..core.tables import row_positions
from ..registry import Column, register
from .activity import DMA, INSTRUCTIONS, analysis_span, invocation_time, trace_activity
from .ceilings import group_bounds, row_kinds
from .steps import steps
from .unpriced import unpriced_reason
from .work import instruction_work, module_from_stack, work_source

GROUPINGS = ("op", "module", "stack", "engine")
HOT_OPS_SPEC = (
    Column("calls", "count", "Calls", "Host ops of that op / launching host ops / instructions for an engine"),
    Column("instructions", "count", "Device rows", "Instructions (kernels) of the group"),
    Column("device_time_self_ns", "ns", "Device time (self)",
           "Σ over invocations of the union of the group's instructions and their DMA / collectives"),
    Column("device_time_total_ns", "ns", "Device time (total)",
           "Self time plus that of nested host ops (op) / sub-modules (module) / callee stacks (stack)"),
    Column("device_time_mean_ns", "ns", "Device time per call", "self / calls"),
    Column("flops", "FLOP", "FLOPs", "NaN when unknown for every row of the group"),
    Column("hbm_bytes", "bytes", "HBM traffic", "NaN when unknown for every row of the group"),
    Column("achieved_flops_per_s", "FLOP/s", "Achieved FLOP/s", "flops / self time (NaN above the device peak)"),
    Column("achieved_bandwidth_bytes_per_s", "bytes/s", "Achieved bandwidth",
           "hbm_bytes / self time (NaN above the memory roof)"),
    Column("share_of_step_time_percent", "percent", "Share of step time",
           "Exclusive share of the steps' wall time (concurrent rows split it); all groups add up to <= 100 %"),
    Column("host_time_ns", "ns", "Host time", "Σ host duration of the group's host ops"),
    Column("host_launch_time_ns", "ns", "Launch time",
           "Σ duration of the distinct host events that launched the group's device rows"),
    Column("note", "", "Note", "Why a value is NaN"),
)
HOT_OPS_COLUMNS = [c.name for c in HOT_OPS_SPEC]


def host_op_parents(trace) -> np.ndarray:
    """Parent host-op row position of every host op (same order as the whole host_ops table; -1 = top
    level), by interval nesting per track. Memoised with the trace. One pass over host ops."""
    return trace.memo("host_parents", lambda: _parents(trace.whole_table("host_ops", ["track", "start_ts",
                                                                                      "duration_ns"])), shared=True)


def _parents(ho: pd.DataFrame) -> np.ndarray:
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
    acc: dict[str, float] = {}
    for k, v in zip(keys.astype(str), self_vals):
        if not k:
            continue
        parts = k.split(sep)
        for i in range(1, len(parts) + 1):
            p = sep.join(parts[:i])
            acc[p] = acc.get(p, 0.0) + v
    return np.array([acc.get(k, v) if k else v for k, v in zip(keys.astype(str), self_vals)], dtype=float)


def _launch_time(trace, w: pd.DataFrame, codes: np.ndarray, k: int) -> np.ndarray:
    """Per group: Σ duration of the distinct host ops that launched its device rows (``launch`` flows)."""
    fl = trace.flows
    out = np.zeros(k)
    if not len(fl) or not len(w):
        return out
    m = cat_values(fl["kind"], ["launch"]) & cat_values(fl["src_table"], ["host_ops"]) \
        & cat_values(fl["dst_table"], ["instructions"])
    if not m.any():
        return out
    pos = row_positions(w.index, fl["dst_row"].to_numpy()[m])
    src = fl["src_row"].to_numpy()[m]
    ok = pos >= 0
    ho = trace.whole_table("host_ops", ["duration_ns"])
    hpos = row_positions(ho.index, src[ok])
    good = hpos >= 0
    g = codes[pos[ok]][good].astype(np.int64)
    h = hpos[good].astype(np.int64)
    keep = g >= 0
    pairs = np.unique(g[keep] * (len(ho) + 1) + h[keep])
    dur = ho["duration_ns"].to_numpy()[pairs % (len(ho) + 1)]
    return np.bincount(pairs // (len(ho) + 1), weights=dur, minlength=k).astype(float)


def step_windows(trace) -> tuple[np.ndarray, np.ndarray]:
    """The time the step shares divide: the merged steps (clipped to a window), else the analysed span."""
    st = steps(trace)
    lo, hi = analysis_span(trace)
    if not len(st):
        return np.array([lo], np.int64), np.array([max(hi, lo)], np.int64)
    s, e = st["start_ts"].to_numpy(), st["end_ts"].to_numpy()
    if trace.window_bounds is not None:
        s, e = clip(s, e, lo, hi)
    return merge(s, e)


def exclusive_in_steps(trace) -> np.ndarray:
    """Per row of the trace's device activity: its exclusive share (ns) of the step windows."""
    def compute() -> np.ndarray:
        act = trace_activity(trace)
        return exclusive_ns(act["start_ts"].to_numpy(), act["end_ts"].to_numpy(), step_windows(trace))
    return trace.memo("exclusive_in_steps", compute)


def _host_labels(trace, by: str) -> pd.Series:
    """The ``by`` label of every host op (whole table), for DMA / collective rows tied to a host op."""
    ho = trace.whole_table("host_ops", ["name", "module", "stack"])
    if by == "module":
        return pd.Series(module_from_stack(ho["module"], ho["stack"]), index=ho.index).astype(str)
    return ho["name" if by == "op" else "stack"].astype(str)


def _activity_groups(trace, w: pd.DataFrame, by: str) -> tuple[pd.Index, np.ndarray, np.ndarray]:
    """(group labels, group code per instruction, group code per activity row; -1 = not in any group)."""
    cats = pd.Index(w[by].cat.categories.astype(str))
    codes = w[by].cat.codes.to_numpy().astype(np.int64)
    act = trace_activity(trace)
    table, row, fop = act["table"].to_numpy(), act["row"].to_numpy(), act["framework_op"].to_numpy()
    is_ins = table == INSTRUCTIONS
    if len(codes):  # one gather over every row (rows of other tables clipped, then set to -1)
        g = np.take(codes, row, mode="clip")
        if not is_ins.all():
            g[~is_ins] = -1
    else:
        g = np.full(len(act), -1, np.int64)
    other = ~is_ins & (fop >= 0)
    if by == "engine" and (table == DMA).any():  # the DMA queues are where a memory-bound op's time goes
        cats = cats.append(pd.Index(["DMA"])).unique()
        g[table == DMA] = cats.get_loc("DMA")
    if by != "engine" and other.any():
        labels = _host_labels(trace, by)
        hpos = labels.index.get_indexer(fop[other])
        lab = np.where(hpos >= 0, labels.to_numpy()[np.maximum(hpos, 0)], "")
        cats = cats.append(pd.Index(np.unique(lab[lab != ""]))).unique()
        found = cats.get_indexer(lab)
        g[np.flatnonzero(other)] = np.where(lab != "", found, -1)
    return cats, codes, g


def _launching_ops(fo: np.ndarray, codes: np.ndarray, k: int, by: str) -> np.ndarray:
    """Distinct launching host ops per group. An op / module / stack group owns all rows of its invocations,
    so a linear first-row pass counts them; engines share invocations and need the distinct pairs."""
    has = fo >= 0
    if not has.any():
        return np.zeros(k, np.int64)
    if by != "engine":
        every = bool(has.all())  # then no gathered copies
        _, first = first_rows(fo if every else fo[has])
        return np.bincount(codes[first] if every else codes[has][first], minlength=k)
    stride = int(fo.max()) + 2
    pairs = np.unique(codes[has] * stride + fo[has])  # distinct (group, launching host op)
    return np.bincount(pairs // stride, minlength=k)


def _self_time(trace, g: np.ndarray, inv: np.ndarray, s: np.ndarray, e: np.ndarray, k: int) -> np.ndarray:
    """Device time per group when every invocation belongs to one group (op, module, stack): the memoised
    time of each invocation (:func:`invocation_time`) in its group, plus the union of the rows without one."""
    t = np.zeros(k)
    linked = (inv >= 0) & (g >= 0)
    if linked.any():
        fo, first = first_rows(inv, where=linked)  # (no selected copies of the columns)
        per = invocation_time(trace)
        t += np.bincount(g[first], weights=per.reindex(fo).fillna(0.0).to_numpy(), minlength=k)
    rest = ~linked & (g >= 0)
    if rest.any():
        t += group_time(g[rest], inv[rest], s[rest], e[rest], k, sorted_by_start=True)
    return t


def _known_sum(codes: np.ndarray, values: np.ndarray, known: np.ndarray, k: int,
               dur: np.ndarray | None = None, t_all: np.ndarray | None = None) -> tuple[np.ndarray, np.ndarray]:
    """(Σ values per group, share of the group's device-row time whose value is unknown). The sum is NaN
    where it would say 0 while some of the time is unknown, or where more than half of it is unknown: an
    unknown is never shown as 0 (:func:`unknown_note` says why). ``t_all``: :func:`_row_time` of the group."""
    tot = group_sum(codes, values, k)
    unknown = ~known
    if t_all is None:
        t_all = _row_time(codes, k, dur)
    t_unk: np.ndarray = np.zeros(k)  # (the sum over no rows)
    if unknown.any():
        d = np.ones(len(codes)) if dur is None else np.maximum(dur.astype(float), 1.0)
        t_unk = np.bincount(codes[unknown], weights=d[unknown], minlength=k)
    share = M._div(t_unk, t_all)
    share = np.where(t_all > 0, share, 0.0)
    nan = (share > 0) & ((tot == 0) | (share > 0.5))
    return np.where(nan, np.nan, tot), share


def _row_time(codes: np.ndarray, k: int, dur: np.ndarray | None = None) -> np.ndarray:
    """Per group: Σ of its rows' durations, each at least 1 ns (1 per row without ``dur``)."""
    if dur is None:
        return np.bincount(codes, minlength=k).astype(np.float64) if len(codes) else np.zeros(k)
    return group_sum(codes, dur, k, at_least=1.0)  # (chunk by chunk: no n-long array of the floored durations)


def unknown_note(codes: np.ndarray, k: int, flops_share: np.ndarray, bytes_share: np.ndarray,
                 reason: pd.Series) -> np.ndarray:
    """Per group: what share of its device time has unknown FLOPs / bytes and the op model's main reason."""
    note = np.full(k, "", dtype=object)
    todo = np.flatnonzero((flops_share > 0) | (bytes_share > 0))
    if not len(todo):
        return note
    r = reason.astype(str).to_numpy()
    for g in todo:
        rs = pd.Series(r[codes == g])
        rs = rs[rs != ""]
        why = rs.value_counts().index[0] if len(rs) else "unknown"
        parts = [f"FLOPs unknown for {100 * flops_share[g]:.0f} % of its device time"] if flops_share[g] > 0 else []
        if bytes_share[g] > 0:
            parts.append(f"bytes unknown for {100 * bytes_share[g]:.0f} %")
        note[g] = "; ".join(parts) + f" ({why})"
    return note


#: the note of a group whose rates are NaN because it has no device time (host-only ops: views, metadata,
#: ops whose device work is counted under another op such as a compiled graph's)
NO_DEVICE_TIME = "no device time: rates unknown (a host-only op, or its device work is counted under another op)"


@register("hot_ops", columns=HOT_OPS_SPEC, figure="hot_ops_figure",
          index=Column("op", "", "Op / module / stack / engine"))
def hot_ops(trace, by: str = "op", top: int | None = None) -> pd.DataFrame:
    """Device time per group, sorted by self device time (descending).

    ``by``: "op" (launching host op name, else instruction name), "module" (nn.Module path), "stack"
    (python stack, innermost last) or "engine" (each engine's instructions; "DMA": the DMA transfers, counted in
    ``instructions``). Index: the group key (named ``by``). Columns (units in
    ``analysis.registry.columns_of("hot_ops")``): calls, instructions, device_time_self_ns (Σ over invocations
    of the union of the group's instructions and the DMA transfers / collectives of the same host op; for an
    engine, its own rows only), device_time_total_ns (incl. device time of nested host ops for "op", of
    sub-modules / callee stacks for "module"/"stack"), device_time_mean_ns (self / calls), flops (FLOP),
    hbm_bytes (bytes; NaN when unknown), achieved_flops_per_s, achieved_bandwidth_bytes_per_s (over self time;
    NaN where that would exceed the device's peak / what its HBM and DMA can move, :func:`.ceilings.hbm_ceiling`, see
    ``note``), share_of_step_time_percent
    (the group's exclusive share of the steps' wall time, or of the analysed span without steps: time when
    several rows run at once is split between them, so the shares add up to at most 100 %), host_time_ns
    (Σ host duration of the group's host ops), host_launch_time_ns (Σ duration of the distinct host events that
    launched the group's device rows through ``launch`` flows), note.
    """
    if by not in GROUPINGS:
        raise ValueError(f"unknown grouping {by!r}; valid: {', '.join(GROUPINGS)}")
    w = instruction_work(trace)
    cats, codes, g_act = _activity_groups(trace, w, by)
    k = len(cats)
    act = trace_activity(trace)
    s, e = act["start_ts"].to_numpy(), act["end_ts"].to_numpy()
    inv = act["framework_op"].to_numpy() if by != "engine" else np.where(act["table"].to_numpy() == INSTRUCTIONS,
                                                                         act["framework_op"].to_numpy(), -1)
    self_ns = _self_time(trace, g_act, inv, s, e, k) if by != "engine" else \
        group_time(g_act, inv, s, e, k, sorted_by_start=True)
    share_ns = group_sum(g_act, exclusive_in_steps(trace), k)
    n_ins = np.bincount(codes, minlength=k)
    if by == "engine":  # the DMA group counts its transfers
        is_dma = act["table"].to_numpy() == DMA
        n_ins += np.bincount(g_act[is_dma & (g_act >= 0)], minlength=k)
    dur = w["duration_ns"].to_numpy()
    t_all = _row_time(codes, k, dur)
    flops, f_unk = _known_sum(codes, w["flops"].to_numpy(), w["flops_known"].to_numpy(), k, dur, t_all)
    hbm, b_unk = _known_sum(codes, w["hbm_bytes"].to_numpy(), w["bytes_known"].to_numpy(), k, dur, t_all)
    unk_note = unknown_note(codes, k, f_unk, b_unk, unpriced_reason(trace))
    launch_calls = _launching_ops(w["framework_op"].to_numpy(), codes, k, by)
    df = pd.DataFrame({"instructions": n_ins, "device_time_self_ns": self_ns, "flops": flops, "hbm_bytes": hbm,
                       "_launch_calls": launch_calls, "_share_ns": share_ns, "_unknown": unk_note,
                       "host_launch_time_ns": _launch_time(trace, w, codes, k)}, index=cats)
    df = df[(df["instructions"] > 0) | (df["device_time_self_ns"] > 0)]
    df = _join_host(trace, df, by)
    _totals(trace, df, w, by)
    _rates(trace, df, w, codes, cats, by)
    windows = step_windows(trace)
    df["share_of_step_time_percent"] = M._div(100.0 * df.pop("_share_ns").to_numpy(),
                                              float((windows[1] - windows[0]).sum()))
    df.index.name = by
    out = df[HOT_OPS_COLUMNS].sort_values(["device_time_self_ns", "host_time_ns"], ascending=False)
    return out.head(top) if top else out


def _join_host(trace, df: pd.DataFrame, by: str) -> pd.DataFrame:
    """Host-side columns: host ops per group (CPU-only ops appear for by="op"), calls."""
    ho = trace.table("host_ops", ["name", "module", "stack", "duration_ns"])
    host_cols = {"module": "module", "stack": "stack", "op": "name"}
    if by in host_cols and len(ho):
        if by == "module":
            hname = pd.Series(module_from_stack(ho["module"], ho["stack"]), index=ho.index).astype(str)
        else:
            hname = ho[host_cols[by]].astype(str)
        h = pd.DataFrame({"k": hname.to_numpy(), "d": ho["duration_ns"].to_numpy()})
        h = h[h["k"] != ""]
        hg = h.groupby("k").agg(host_calls=("d", "size"), host_time_ns=("d", "sum"))
        device = df.index
        df = df.join(hg, how="outer" if by == "op" else "left")  # CPU-only ops still appear (device time 0)
        cpu_only = ~df.index.isin(device)
        df.loc[cpu_only, ["flops", "hbm_bytes"]] = 0.0
    else:
        df["host_calls"], df["host_time_ns"] = np.nan, np.nan
    df = df.fillna({"instructions": 0, "device_time_self_ns": 0.0, "_launch_calls": 0, "host_time_ns": 0.0,
                    "_share_ns": 0.0, "host_launch_time_ns": 0.0})
    if by == "op":
        calls = df["host_calls"].where(df["host_calls"].notna() & (df["host_calls"] > 0), df["instructions"])
    elif by == "engine":
        calls = df["instructions"]
    else:
        calls = df["_launch_calls"].where(df["_launch_calls"] > 0, df["instructions"])
    df["calls"] = calls.astype("int64")
    df["instructions"] = df["instructions"].astype("int64")
    df["host_time_ns"] = df["host_time_ns"].astype(float)
    return df


def _totals(trace, df: pd.DataFrame, w: pd.DataFrame, by: str) -> None:
    if by == "op" and len(trace.table("host_ops", ["start_ts"])):
        full = trace.whole_table("host_ops", ["name"])
        parent = host_op_parents(trace)
        per = invocation_time(trace)
        per_ho = np.zeros(len(full))
        pos = row_positions(full.index, per.index.to_numpy())
        per_ho[pos[pos >= 0]] = per.to_numpy()[pos >= 0]
        tot = _subtree_sum(per_ho, parent)
        in_win = full.index.isin(trace.table("host_ops", ["start_ts"]).index)
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
    df["device_time_mean_ns"] = M._div(df["device_time_self_ns"].to_numpy(), df["calls"].to_numpy())


def _rates(trace, df: pd.DataFrame, w: pd.DataFrame, codes: np.ndarray, cats: pd.Index, by: str) -> None:
    pk, rf = group_bounds(trace, w, codes, len(cats), row_kinds(trace))
    pos = cats.get_indexer(df.index)
    peak = np.where(pos >= 0, pk[np.maximum(pos, 0)], np.nan)
    roof = np.where(pos >= 0, rf[np.maximum(pos, 0)], np.nan)
    t = df["device_time_self_ns"].to_numpy()
    src = work_source(trace)
    fr, note = physical(M.rate_per_s(df["flops"].to_numpy(), t), peak,
                        "FLOPs exceed the peak of this work's dtype and engine in this time (the FLOP count "
                        "overstates the work)")
    why = ("HBM bytes from shapes exceed what memory can move in this time (data served from cache, or the "
           "shapes overstate the traffic)" if src == "shapes" else
           "HBM bytes exceed what the device's HBM and DMA can move in this time (bytes recorded on rows that do "
           "not move them, e.g. DMA counted on the engine that waits for it)")
    br, note = physical(M.rate_per_s(df["hbm_bytes"].to_numpy(), t), roof, why, note)
    df["achieved_flops_per_s"] = fr
    df["achieved_bandwidth_bytes_per_s"] = br
    unk = df["_unknown"].fillna("").astype(str).to_numpy() if "_unknown" in df else np.full(len(df), "")
    idle = np.where(t > 0, "", NO_DEVICE_TIME)  # the rates divide by device time: say why they are NaN
    df["note"] = [("; ".join(x for x in (u, n, i) if x)) for u, n, i in zip(unk, note, idle)]
