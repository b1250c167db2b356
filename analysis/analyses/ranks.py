"""Load balance across the ranks of one run: who computes longer, who idles, who makes the others wait."""
from __future__ import annotations

from collections.abc import Iterable

import numpy as np
import pandas as pd

from ..core.intervals import coarsen, merge
from ..core.runs import group_runs, run_key, run_label
from ..registry import Column, register
from .activity import COMMUNICATION, COMPUTATION, MEMORY, OTHER, kernel_type_mask, trace_activity
from .breakdown import comm_comp_overlap, temporal_breakdown
from .collectives import collective_time_ns, collectives_across_ranks, straggler_ranks
from .steps import steps
from .summary import summary_dict

RANK_BALANCE_SPEC = (
    Column("rank", "count", "Rank"), Column("window", "count", "Window"), Column("trace", "", "Trace"),
    Column("run", "", "Run", "The run the trace belongs to (analysis.core.runs)"),
    Column("span_ns", "ns", "Analysed time"), Column("step_count", "count", "Steps"),
    Column("step_time_mean_ns", "ns", "Step time (mean)"), Column("step_time_max_ns", "ns", "Step time (max)"),
    Column("device_active_percent", "percent", "Device busy"),
    Column("mfu_estimated_percent", "percent", "MFU (estimated)"),
    Column("compute_time_ns", "ns", "Compute"), Column("non_compute_time_ns", "ns", "Non-compute"),
    Column("idle_time_ns", "ns", "Idle"), Column("kernel_time_ns", "ns", "Device span"),
    Column("collective_time_ns", "ns", "Collective time", "Union of the rank's collectives"),
    Column("comp_comm_overlap_pctg", "percent", "Communication overlapped"),
    Column("times_last", "count", "Times last", "Collectives where the rank arrived last"),
    Column("mean_arrival_delay_ns", "ns", "Mean arrival delay"),
    Column("total_wait_caused_ns", "ns", "Wait caused", "Waiting the rank caused the others by arriving last"),
    Column("step_time_vs_median", "", "Step time vs median"), Column("compute_time_vs_median", "", "Compute vs median"))
RANK_BALANCE_COLUMNS = [c.name for c in RANK_BALANCE_SPEC]


@register("rank_balance", columns=RANK_BALANCE_SPEC, figure="rank_balance_figure", subject="traces")
def rank_balance(traces: Iterable) -> pd.DataFrame:
    """One row per trace (rank and window) of a multi-rank run, sorted by rank then window.

    ``traces``: a ``TraceSet`` or an iterable of ``Trace``. Columns:

    - ``rank``, ``window`` (profiler window index), ``trace`` (name), ``run`` (the run it belongs to: traces
      of different runs are never compared as ranks of one job; straggling is computed within each run)
    - ``span_ns`` (analysed time span), ``step_count``, ``step_time_mean_ns``, ``step_time_max_ns`` (ns;
      NaN without ProfilerStep annotations), ``device_active_percent``, ``mfu_estimated_percent`` (percent;
      from :func:`analysis.summary`)
    - ``compute_time_ns``, ``non_compute_time_ns``, ``idle_time_ns``, ``kernel_time_ns`` (ns; HTA temporal
      breakdown of the device span), ``collective_time_ns`` (union of the rank's collectives, ns),
      ``comp_comm_overlap_pctg`` (percent of communication time overlapped by computation)
    - ``times_last``, ``mean_arrival_delay_ns``, ``total_wait_caused_ns`` (collectives matched across ranks,
      :func:`analysis.straggler_ranks`: how often the rank arrived last, its mean lateness and the waiting
      it caused the others, ns; 0 / NaN when no collective is seen by two ranks)
    - ``step_time_vs_median``, ``compute_time_vs_median`` (this rank's value / the median over the rows;
      1.0 is balanced, 1.2 means 20% above the typical rank)
    """
    traces = list(traces)
    rows, parts = [], []
    for group in group_runs(traces):
        label = run_label(run_key(group[0]))
        for t in group:
            rows.append(_rank_row(t, label))
        strag = straggler_ranks(collectives_across_ranks(group)) if len({t.rank for t in group}) > 1 else None
        if strag is not None and len(strag):
            parts.append(strag.assign(run=label))
    df = pd.DataFrame(rows, columns=RANK_BALANCE_COLUMNS[:RANK_BALANCE_COLUMNS.index("times_last")])
    if parts:
        df = df.merge(pd.concat(parts, ignore_index=True), on=["run", "rank"], how="left")
        df["times_last"] = df["times_last"].fillna(0).astype("int64")
        df["total_wait_caused_ns"] = df["total_wait_caused_ns"].fillna(0.0)
    else:
        df["times_last"] = 0
        df["mean_arrival_delay_ns"] = np.nan
        df["total_wait_caused_ns"] = 0.0
    for col, base in (("step_time_vs_median", "step_time_mean_ns"), ("compute_time_vs_median", "compute_time_ns")):
        med = df.groupby("run")[base].transform("median") if len(df) else df[base]
        df[col] = np.where((med > 0) & np.isfinite(med), df[base] / med.where(med > 0, 1.0), np.nan)
    return df[RANK_BALANCE_COLUMNS].sort_values(["run", "rank", "window"]).reset_index(drop=True)


def _rank_row(t, run: str) -> dict:
    s = summary_dict(t)
    tb = temporal_breakdown(t).iloc[0]
    ov = comm_comp_overlap(t).iloc[0]
    return {"rank": int(t.rank), "window": int(t.header.window_index), "trace": t.name, "run": run,
            "span_ns": float(s.get("total_time", np.nan)), "step_count": float(s.get("step_count", 0)),
            "step_time_mean_ns": float(s.get("step_time_mean_ns", np.nan)),
            "step_time_max_ns": float(s.get("step_time_max_ns", np.nan)),
            "device_active_percent": float(s.get("device_active_percent", np.nan)),
            "mfu_estimated_percent": float(s.get("mfu_estimated_percent", np.nan)),
            "compute_time_ns": int(tb["compute_time_ns"]), "non_compute_time_ns": int(tb["non_compute_time_ns"]),
            "idle_time_ns": int(tb["idle_time_ns"]), "kernel_time_ns": int(tb["kernel_time_ns"]),
            "collective_time_ns": collective_time_ns(t), "comp_comm_overlap_pctg": float(ov["comp_comm_overlap_pctg"])}


#: lanes of :func:`rank_timeline`, top to bottom within a rank, and the device kernel types each one holds
RANK_LANES = {"steps": (), "compute": (COMPUTATION,), "communication": (COMMUNICATION,), "memory": (MEMORY, OTHER)}
RANK_TIMELINE_SPEC = (Column("rank", "count", "Rank"), Column("window", "count", "Window"),
                      Column("lane", "", "Lane", "steps, compute, communication or memory"),
                      Column("start_ts", "ns", "Start"), Column("end_ts", "ns", "End"),
                      Column("busy_ns", "ns", "Busy", "Real activity inside the (merged) interval"),
                      Column("label", "", "Label"))
RANK_TIMELINE_COLUMNS = [c.name for c in RANK_TIMELINE_SPEC]


@register("rank_timeline", columns=RANK_TIMELINE_SPEC, figure="rank_timeline_figure", subject="traces")
def rank_timeline(traces: Iterable, *, max_intervals: int = 1000) -> pd.DataFrame:
    """Every rank of a run on one time axis, coarse enough to draw hundreds of ranks: per trace (rank and
    window), the lanes of ``RANK_LANES``: ``steps`` (one interval per ProfilerStep, label "step N") and the
    device time by kernel type (``compute``, ``communication``, ``memory``: the union of the trace's device
    activity of those types, as in :func:`analysis.temporal_breakdown`).

    Device intervals closer than the resolution (the run's span / ``max_intervals``) are merged, so a lane
    holds at most about ``max_intervals`` intervals. Columns: ``rank``, ``window``, ``lane``, ``start_ts``,
    ``end_ts`` (ns; all ranks assumed on one clock, as on one host), ``busy_ns`` (ns of real activity inside
    the interval: equal to its length when nothing was merged), ``label``."""
    if max_intervals < 1:
        raise ValueError(f"max_intervals must be >= 1, got {max_intervals}")
    traces = list(traces)
    spans = [t.time_range for t in traces]
    spans = [s for s in spans if s is not None and s[1] > s[0]]
    resolution = (max(s[1] for s in spans) - min(s[0] for s in spans)) / max_intervals if spans else 1.0
    parts = []
    for t in traces:
        key = {"rank": int(t.rank), "window": int(t.header.window_index)}
        st = steps(t)
        if len(st):
            parts.append(pd.DataFrame({**key, "lane": "steps", "start_ts": st["start_ts"].to_numpy(),
                                       "end_ts": st["end_ts"].to_numpy(),
                                       "busy_ns": (st["end_ts"] - st["start_ts"]).to_numpy(),
                                       "label": [f"step {n}" for n in st["step"]]}))
        act = trace_activity(t)
        for lane, types in RANK_LANES.items():
            if not types:
                continue
            m = kernel_type_mask(act, *types)
            if not m.any():
                continue
            s, e, busy = coarsen(*merge(act["start_ts"].to_numpy()[m], act["end_ts"].to_numpy()[m],
                                        sorted_by_start=True), resolution)
            parts.append(pd.DataFrame({**key, "lane": lane, "start_ts": s, "end_ts": e, "busy_ns": busy,
                                       "label": lane}))
    if not parts:
        return pd.DataFrame({c: pd.Series(dtype=object if c in ("lane", "label") else "int64")
                             for c in RANK_TIMELINE_COLUMNS})
    df = pd.concat(parts, ignore_index=True)[RANK_TIMELINE_COLUMNS]
    order = {lane: i for i, lane in enumerate(RANK_LANES)}
    return df.sort_values(["rank", "window", "lane", "start_ts"], key=lambda c: c.map(order) if c.name == "lane"
                          else c, kind="stable").reset_index(drop=True)


RUN_REC_SPEC = (Column("run", "", "Run"), Column("rank", "count", "Rank", "The rank the finding is about"),
                Column("rule", "", "Rule"), Column("severity", "", "Severity", "high >= 10% of the run's span lost"),
                Column("title", "", "Finding"), Column("evidence", "", "Evidence"),
                Column("est_time_saved_ns", "ns", "Time lost",
                       "Time the other ranks spent waiting for this one (at most the run's span)"),
                Column("action", "", "What to change"))
RUN_REC_COLUMNS = [c.name for c in RUN_REC_SPEC]
#: a straggler is reported when the waits it causes exceed this share of the run's span
STRAGGLER_MIN_SHARE = 0.01


@register("run_recommendations", columns=RUN_REC_SPEC, subject="traces")
def run_recommendations(traces: Iterable) -> pd.DataFrame:
    """Findings across the ranks of each run (:mod:`analysis.core.runs`): stragglers, the ranks that arrive
    last at collectives and make the others wait. One row per straggler whose caused waits exceed 1% of the
    run's span. Columns: run, rank, rule ("straggler"), severity, title, evidence (who waited, how often),
    est_time_saved_ns (the time lost: Σ over the collectives it arrived last at of the arrival skew, capped to
    the run's span; the others cannot gain more than they waited), action. Empty for single traces and for
    runs whose ranks share no collective."""
    rows = []
    for group in group_runs(list(traces)):
        if len({t.rank for t in group}) < 2:
            continue
        matched = collectives_across_ranks(group)
        strag = straggler_ranks(matched)
        spans = [t.time_range for t in group]
        span = max(s[1] for s in spans) - min(s[0] for s in spans)
        label = run_label(run_key(group[0]))
        left = float(span)
        for r in strag.itertuples(index=False):
            lost = min(float(r.total_wait_caused_ns), left)
            if lost <= STRAGGLER_MIN_SHARE * span:
                continue
            left -= lost
            seen = matched[(matched["last_arrival_rank"] == r.rank) & (matched["rank"] != r.rank)]
            waiters = seen.groupby("rank")["wait_ns"].sum().sort_values(ascending=False)
            who = ", ".join(f"rank {int(k)} {v / 1e6:.3f} ms" for k, v in waiters.head(4).items())
            rows.append({"run": label, "rank": int(r.rank), "rule": "straggler",
                         "severity": "high" if lost >= 0.10 * span else "medium" if lost >= 0.02 * span else "low",
                         "title": f"Rank {int(r.rank)} arrives last at {int(r.times_last)} collectives; the others "
                                  f"wait {lost / 1e6:.3f} ms for it",
                         "evidence": f"mean arrival delay {r.mean_arrival_delay_ns / 1e3:.1f} µs; waits: {who}",
                         "est_time_saved_ns": lost,
                         "action": f"Find what delays rank {int(r.rank)} before its collectives (host work, data "
                                   "loading, uneven shards: compare its hot ops and idle time with the others)."})
    df = pd.DataFrame(rows, columns=RUN_REC_COLUMNS)
    return df.sort_values("est_time_saved_ns", ascending=False, kind="stable").reset_index(drop=True)
