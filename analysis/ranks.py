"""Load balance across the ranks of one run: who computes longer, who idles, who makes the others wait."""
from __future__ import annotations

from typing import Iterable

import numpy as np
import pandas as pd

from .breakdown import COMMUNICATION, COMPUTATION, MEMORY, OTHER, merge_intervals
from .collectives import collectives_across_ranks, straggler_ranks
from .steps import steps
from .summary import summary_dict

RANK_BALANCE_COLUMNS = [
    "rank", "window", "trace", "span_ns", "step_count", "step_time_mean_ns", "step_time_max_ns",
    "device_active_percent", "mfu_estimated_percent", "compute_time_ns", "non_compute_time_ns", "idle_time_ns",
    "kernel_time_ns", "collective_time_ns", "comp_comm_overlap_pctg", "times_last", "mean_arrival_delay_ns",
    "total_wait_caused_ns", "step_time_vs_median", "compute_time_vs_median",
]


def rank_balance(traces: Iterable) -> pd.DataFrame:
    """One row per trace (rank and window) of a multi-rank run, sorted by rank then window.

    ``traces``: a ``TraceSet`` or an iterable of ``Trace``. Columns:

    - ``rank``, ``window`` (profiler window index), ``trace`` (name)
    - ``span_ns`` (analysed time span), ``step_count``, ``step_time_mean_ns``, ``step_time_max_ns`` (ns;
      NaN without ProfilerStep annotations), ``device_active_percent``, ``mfu_estimated_percent`` (percent;
      from :func:`analysis.summary`)
    - ``compute_time_ns``, ``non_compute_time_ns``, ``idle_time_ns``, ``kernel_time_ns`` (ns; HTA temporal
      breakdown of the device span), ``collective_time_ns`` (Σ duration of the rank's collectives, ns),
      ``comp_comm_overlap_pctg`` (percent of communication time overlapped by computation)
    - ``times_last``, ``mean_arrival_delay_ns``, ``total_wait_caused_ns`` (collectives matched across ranks,
      :func:`analysis.straggler_ranks`: how often the rank arrived last, its mean lateness and the waiting
      it caused the others, ns; 0 / NaN when no collective is seen by two ranks)
    - ``step_time_vs_median``, ``compute_time_vs_median`` (this rank's value / the median over the rows;
      1.0 is balanced, 1.2 means 20% above the typical rank)
    """
    traces = list(traces)
    rows = []
    for t in traces:
        s = summary_dict(t)
        tb = t.temporal_breakdown().iloc[0]
        ov = t.comm_comp_overlap().iloc[0]
        cc = t.collectives
        rows.append({
            "rank": int(t.rank), "window": int(t.header.window_index), "trace": t.name,
            "span_ns": float(s.get("total_time", np.nan)), "step_count": float(s.get("step_count", 0)),
            "step_time_mean_ns": float(s.get("step_time_mean_ns", np.nan)),
            "step_time_max_ns": float(s.get("step_time_max_ns", np.nan)),
            "device_active_percent": float(s.get("device_active_percent", np.nan)),
            "mfu_estimated_percent": float(s.get("mfu_estimated_percent", np.nan)),
            "compute_time_ns": int(tb["compute_time_ns"]), "non_compute_time_ns": int(tb["non_compute_time_ns"]),
            "idle_time_ns": int(tb["idle_time_ns"]), "kernel_time_ns": int(tb["kernel_time_ns"]),
            "collective_time_ns": int(cc["duration_ns"].sum()) if len(cc) else 0,
            "comp_comm_overlap_pctg": float(ov["comp_comm_overlap_pctg"]),
        })
    df = pd.DataFrame(rows, columns=RANK_BALANCE_COLUMNS[:RANK_BALANCE_COLUMNS.index("times_last")])
    strag = straggler_ranks(collectives_across_ranks(traces)) if len({t.rank for t in traces}) > 1 else None
    if strag is not None and len(strag):
        df = df.merge(strag, on="rank", how="left")
        df["times_last"] = df["times_last"].fillna(0).astype("int64")
        df["total_wait_caused_ns"] = df["total_wait_caused_ns"].fillna(0.0)
    else:
        df["times_last"] = 0
        df["mean_arrival_delay_ns"] = np.nan
        df["total_wait_caused_ns"] = 0.0
    for col, base in (("step_time_vs_median", "step_time_mean_ns"), ("compute_time_vs_median", "compute_time_ns")):
        med = df[base].median() if len(df) else np.nan
        df[col] = df[base] / med if med and np.isfinite(med) else np.nan
    return df[RANK_BALANCE_COLUMNS].sort_values(["rank", "window"]).reset_index(drop=True)


#: lanes of :func:`rank_timeline`, top to bottom within a rank, and the device kernel types each one holds
RANK_LANES = {"steps": (), "compute": (COMPUTATION,), "communication": (COMMUNICATION,), "memory": (MEMORY, OTHER)}
RANK_TIMELINE_COLUMNS = ["rank", "window", "lane", "start_ts", "end_ts", "busy_ns", "label"]


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
        act = t.device_activity()
        kt = act["kernel_type"].to_numpy()
        for lane, types in RANK_LANES.items():
            if not types:
                continue
            m = np.isin(kt, types)
            if not m.any():
                continue
            s, e, busy = _coarsen(*merge_intervals(act["start_ts"].to_numpy()[m], act["end_ts"].to_numpy()[m]),
                                  resolution)
            parts.append(pd.DataFrame({**key, "lane": lane, "start_ts": s, "end_ts": e, "busy_ns": busy,
                                       "label": lane}))
    if not parts:
        return pd.DataFrame({c: pd.Series(dtype=object if c in ("lane", "label") else "int64")
                             for c in RANK_TIMELINE_COLUMNS})
    df = pd.concat(parts, ignore_index=True)[RANK_TIMELINE_COLUMNS]
    order = {lane: i for i, lane in enumerate(RANK_LANES)}
    return df.sort_values(["rank", "window", "lane", "start_ts"], key=lambda c: c.map(order) if c.name == "lane"
                          else c, kind="stable").reset_index(drop=True)


def _coarsen(s: np.ndarray, e: np.ndarray, resolution: float) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """Sorted disjoint intervals merged across gaps shorter than ``resolution``: (start, end, busy ns)."""
    if not len(s):
        return s, e, np.zeros(0, np.int64)
    new = np.ones(len(s), dtype=bool)
    new[1:] = (s[1:] - e[:-1]) >= resolution
    first = np.flatnonzero(new)
    return s[first], np.maximum.reduceat(e, first), np.add.reduceat(e - s, first)
