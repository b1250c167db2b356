"""Load balance across the ranks of one run: who computes longer, who idles, who makes the others wait."""
from __future__ import annotations

from typing import Iterable

import numpy as np
import pandas as pd

from .collectives import collectives_across_ranks, straggler_ranks
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
