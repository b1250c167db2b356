"""Load balance across the ranks of one run: who computes longer, who idles, who makes the others wait."""
from __future__ import annotations

from collections.abc import Iterable

import numpy as np
import pandas as pd

from ..registry import Column, register
from .collectives import SLOW_LINK_COLUMNS, SLOW_LINK_SPEC, match_collectives, slow_link_groups, straggler_ranks
from .cross_rank import RANK_LANES, gather, labelled_runs

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
def rank_balance(traces: Iterable, *, engine: str = "pandas", scheduler=None,
                 workers: int | None = None) -> pd.DataFrame:
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

    ``engine``: "pandas" (this process, the reference) or "dask" (one task per trace file, same numbers;
    ``scheduler`` an address or a ``distributed.Client``, default a LocalCluster of ``workers`` processes:
    :mod:`analysis.distributed`).
    """
    runs = labelled_runs(traces)
    parts = gather(runs, ("balance", "collectives"), engine=engine, scheduler=scheduler, workers=workers)
    return _balance(runs, parts, _matched(runs, parts))


def _by_run(runs: list[tuple[str, list]], parts: list[dict]) -> list[tuple[str, list, list[dict]]]:
    """(label, traces, their parts) per run, the parts in the order of :func:`gather`."""
    out, i = [], 0
    for label, g in runs:
        out.append((label, g, parts[i:i + len(g)]))
        i += len(g)
    return out


def _matched(runs: list[tuple[str, list]], parts: list[dict]) -> dict[str, pd.DataFrame]:
    """Collectives matched across the ranks of each run of two ranks or more (by run label)."""
    return {label: match_collectives([p["collectives"] for p in ps]) for label, g, ps in _by_run(runs, parts)
            if len({t.rank for t in g}) > 1}


def _balance(runs, parts, matched: dict[str, pd.DataFrame]) -> pd.DataFrame:
    rows = [p["balance"] for p in parts]
    strag = [straggler_ranks(m).assign(run=label) for label, m in matched.items()]
    strag = [s for s in strag if len(s)]
    df = pd.DataFrame(rows, columns=RANK_BALANCE_COLUMNS[:RANK_BALANCE_COLUMNS.index("times_last")])
    if strag:
        df = df.merge(pd.concat(strag, ignore_index=True), on=["run", "rank"], how="left")
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


RANK_TIMELINE_SPEC = (Column("rank", "count", "Rank"), Column("window", "count", "Window"),
                      Column("lane", "", "Lane", "steps, compute, communication or memory"),
                      Column("start_ts", "ns", "Start"), Column("end_ts", "ns", "End"),
                      Column("busy_ns", "ns", "Busy", "Real activity inside the (merged) interval"),
                      Column("label", "", "Label"))
RANK_TIMELINE_COLUMNS = [c.name for c in RANK_TIMELINE_SPEC]


@register("rank_timeline", columns=RANK_TIMELINE_SPEC, figure="rank_timeline_figure", subject="traces")
def rank_timeline(traces: Iterable, *, max_intervals: int = 1000, engine: str = "pandas", scheduler=None,
                  workers: int | None = None) -> pd.DataFrame:
    """Every rank of a run on one time axis, coarse enough to draw hundreds of ranks: per trace (rank and
    window), the lanes of ``RANK_LANES``: ``steps`` (one interval per ProfilerStep, label "step N") and the
    device time by kernel type (``compute``, ``communication``, ``memory``: the union of the trace's device
    activity of those types, as in :func:`analysis.temporal_breakdown`).

    Device intervals closer than the resolution (the run's span / ``max_intervals``) are merged, so a lane
    holds at most about ``max_intervals`` intervals. Columns: ``rank``, ``window``, ``lane``, ``start_ts``,
    ``end_ts`` (ns; all ranks assumed on one clock, as on one host), ``busy_ns`` (ns of real activity inside
    the interval: equal to its length when nothing was merged), ``label``. ``engine``, ``scheduler``,
    ``workers``: as :func:`rank_balance`."""
    runs, resolution = labelled_runs(traces), _resolution(traces, max_intervals)
    parts = gather(runs, ("timeline",), engine=engine, scheduler=scheduler, workers=workers, resolution=resolution)
    return _timeline(parts)


def _resolution(traces: Iterable, max_intervals: int) -> float:
    """The timeline's merge resolution (ns): the traces' span / ``max_intervals`` (spans from the headers)."""
    if max_intervals < 1:
        raise ValueError(f"max_intervals must be >= 1, got {max_intervals}")
    spans = [t.time_range for t in traces]
    spans = [s for s in spans if s is not None and s[1] > s[0]]
    return (max(s[1] for s in spans) - min(s[0] for s in spans)) / max_intervals if spans else 1.0


def _timeline(parts: list[dict]) -> pd.DataFrame:
    frames = [p["timeline"] for p in parts if len(p["timeline"])]
    if not frames:
        return pd.DataFrame({c: pd.Series(dtype=object if c in ("lane", "label") else "int64")
                             for c in RANK_TIMELINE_COLUMNS})
    df = pd.concat(frames, ignore_index=True)[RANK_TIMELINE_COLUMNS]
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
def run_recommendations(traces: Iterable, *, engine: str = "pandas", scheduler=None,
                        workers: int | None = None) -> pd.DataFrame:
    """Findings across the ranks of each run (:mod:`analysis.core.runs`): stragglers (:func:`stragglers`: the
    ranks that arrive last at collectives and make the others wait more than 1% of the run's span) and slow
    links (:func:`slow_links`: a process group whose transfers take 1.5x those of comparable groups). Columns:
    run, rank (the straggler; -1 for a slow link), rule ("straggler", "slow_link"), severity, title, evidence,
    est_time_saved_ns (straggler: Σ over the collectives it arrived last at of the arrival skew, capped to the
    run's span, as the others cannot gain more than they waited; slow link: Σ of its collectives' transfer
    time above the comparable groups' median), action. Empty for single traces and for runs whose ranks share
    no collective. ``engine``, ``scheduler``, ``workers``: as :func:`rank_balance`."""
    runs = labelled_runs(traces)
    parts = gather(runs, ("collectives",), engine=engine, scheduler=scheduler, workers=workers)
    matched = _matched(runs, parts)
    return _recommendations(runs, matched, _stragglers(runs, matched), _slow_links(matched))


def _span(group: list) -> int:
    spans = [t.time_range for t in group]
    return int(max(s[1] for s in spans) - min(s[0] for s in spans))


def _recommendations(runs, matched: dict[str, pd.DataFrame], strag: pd.DataFrame, slow: pd.DataFrame) -> pd.DataFrame:
    rows = []
    for label, group in runs:
        if label not in matched:
            continue
        m, span = matched[label], _span(group)
        left = float(span)
        for r in strag[strag["run"] == label].itertuples(index=False):
            lost = min(float(r.total_wait_caused_ns), left)
            if lost <= STRAGGLER_MIN_SHARE * span:
                continue
            left -= lost
            seen = m[(m["last_arrival_rank"] == r.rank) & (m["rank"] != r.rank)]
            waiters = seen.groupby("rank")["wait_ns"].sum().sort_values(ascending=False)
            who = ", ".join(f"rank {int(k)} {v / 1e6:.3f} ms" for k, v in waiters.head(4).items())
            rows.append({"run": label, "rank": int(r.rank), "rule": "straggler", "severity": _severity(lost, span),
                         "title": f"Rank {int(r.rank)} arrives last at {int(r.times_last)} collectives; the others "
                                  f"wait {lost / 1e6:.3f} ms for it",
                         "evidence": f"mean arrival delay {r.mean_arrival_delay_ns / 1e3:.1f} µs; waits: {who}",
                         "est_time_saved_ns": lost,
                         "action": f"Find what delays rank {int(r.rank)} before its collectives (host work, data "
                                   "loading, uneven shards: compare its hot ops and idle time with the others)."})
        for r in slow[(slow["run"] == label) & slow["slow_link"]].itertuples(index=False):
            lost = float(r.excess_transfer_ns)
            rows.append({"run": label, "rank": -1, "rule": "slow_link", "severity": _severity(lost, span),
                         "title": f"Process group {r.process_group} (ranks {r.ranks}) transfers "
                                  f"{r.slowdown_vs_peers:.2f}x slower than comparable groups",
                         "evidence": f"{int(r.collectives)} {r.operation} of {r.size_bytes / 1e6:.2f} MB over "
                                     f"{int(r.group_size)} ranks: median transfer {r.transfer_median_ns / 1e3:.1f} µs "
                                     f"vs {r.peer_transfer_median_ns / 1e3:.1f} µs in {int(r.peer_groups)} other "
                                     "group(s)",
                         "est_time_saved_ns": lost,
                         "action": f"Check the links between ranks {r.ranks} (a degraded link or a rank placed on "
                                   "another node) and the collective algorithm of this group."})
    df = pd.DataFrame(rows, columns=RUN_REC_COLUMNS)
    return df.sort_values("est_time_saved_ns", ascending=False, kind="stable").reset_index(drop=True)


def _severity(lost: float, span: float) -> str:
    return "high" if lost >= 0.10 * span else "medium" if lost >= 0.02 * span else "low"


STRAGGLERS_SPEC = (Column("run", "", "Run"), Column("rank", "count", "Rank"),
                   Column("times_last", "count", "Times last", "Collectives where the rank arrived last"),
                   Column("mean_arrival_delay_ns", "ns", "Mean arrival delay"),
                   Column("total_wait_caused_ns", "ns", "Wait caused",
                          "Σ skew of the collectives it arrived last at"),
                   Column("wait_caused_percent", "percent", "Wait caused (share of run)",
                          "Wait caused / the run's span"),
                   Column("straggler", "", "Straggler", "Wait caused above 1% of the run's span"))
STRAGGLERS_COLUMNS = [c.name for c in STRAGGLERS_SPEC]


@register("stragglers", columns=STRAGGLERS_SPEC, subject="traces")
def stragglers(traces: Iterable, *, engine: str = "pandas", scheduler=None, workers: int | None = None) -> pd.DataFrame:
    """Per rank of each run of two ranks or more, who makes the others wait (:func:`analysis.straggler_ranks`
    on :func:`collectives_across_ranks`), worst first within a run. Columns: run, rank, times_last,
    mean_arrival_delay_ns, total_wait_caused_ns (ns), wait_caused_percent (of the run's span), straggler (True
    when the wait caused exceeds ``STRAGGLER_MIN_SHARE`` of the span). ``engine``, ``scheduler``, ``workers``:
    as :func:`rank_balance`."""
    runs = labelled_runs(traces)
    parts = gather(runs, ("collectives",), engine=engine, scheduler=scheduler, workers=workers)
    return _stragglers(runs, _matched(runs, parts))


def _stragglers(runs, matched: dict[str, pd.DataFrame]) -> pd.DataFrame:
    frames = []
    for label, group in runs:
        if label not in matched:
            continue
        s = straggler_ranks(matched[label])
        if not len(s):
            continue
        span = _span(group)
        share = s["total_wait_caused_ns"] / span * 100 if span > 0 else np.nan
        frames.append(s.assign(run=label, wait_caused_percent=share,
                               straggler=s["total_wait_caused_ns"] > STRAGGLER_MIN_SHARE * span))
    if not frames:
        return pd.DataFrame({c: pd.Series(dtype=object if c == "run" else bool if c == "straggler" else float)
                             for c in STRAGGLERS_COLUMNS})
    df = pd.concat(frames, ignore_index=True)[STRAGGLERS_COLUMNS]
    df["straggler"] = df["straggler"].astype(bool)
    return df.reset_index(drop=True)


@register("slow_links", columns=SLOW_LINK_SPEC, subject="traces")
def slow_links(traces: Iterable, *, engine: str = "pandas", scheduler=None, workers: int | None = None) -> pd.DataFrame:
    """Per run, :func:`analysis.analyses.collectives.slow_link_groups` of its matched collectives: each process
    group's transfer time (once all ranks arrived) against comparable groups (same operation, group size and
    message size); ``slow_link`` flags 1.5x or more. Columns: run and those of ``SLOW_LINK_SPEC``.
    ``engine``, ``scheduler``, ``workers``: as :func:`rank_balance`."""
    runs = labelled_runs(traces)
    parts = gather(runs, ("collectives",), engine=engine, scheduler=scheduler, workers=workers)
    return _slow_links(_matched(runs, parts))


def _slow_links(matched: dict[str, pd.DataFrame]) -> pd.DataFrame:
    frames = [slow_link_groups(m).assign(run=label) for label, m in matched.items()]
    frames = [f for f in frames if len(f)]
    if not frames:
        return slow_link_groups(pd.DataFrame()).assign(run=pd.Series(dtype=object))[SLOW_LINK_COLUMNS]
    return pd.concat(frames, ignore_index=True)[SLOW_LINK_COLUMNS]


STEP_RANKS_SPEC = (
    Column("run", "", "Run"), Column("step", "count", "Step"), Column("ranks", "count", "Ranks"),
    Column("step_time_median_ns", "ns", "Step time (median)"), Column("step_time_max_ns", "ns", "Step time (max)"),
    Column("slowest_rank", "count", "Slowest rank", "Rank with the longest step (lowest rank on ties)"),
    Column("slowest_vs_median", "", "Slowest vs median"),
    Column("last_arrival_rank", "count", "Made the others wait most",
           "Rank whose late arrivals at this step's collectives cost the most wait (-1 none)"),
    Column("wait_caused_ns", "ns", "Wait caused", "Σ skew of this step's collectives that rank arrived last at"))
STEP_RANKS_COLUMNS = [c.name for c in STEP_RANKS_SPEC]


@register("slowest_ranks_per_step", columns=STEP_RANKS_SPEC, subject="traces")
def slowest_ranks_per_step(traces: Iterable, *, engine: str = "pandas", scheduler=None,
                           workers: int | None = None) -> pd.DataFrame:
    """One row per (run, step) of each run of two ranks or more with ProfilerStep annotations: the step time
    over the ranks (median, max), the slowest rank and the rank that made the others wait most in the step
    (a collective belongs to the step of its last arrival's rank that contains its start). ``engine``,
    ``scheduler``, ``workers``: as :func:`rank_balance`."""
    runs = labelled_runs(traces)
    parts = gather(runs, ("steps", "collectives"), engine=engine, scheduler=scheduler, workers=workers)
    return _slowest_per_step(runs, parts, _matched(runs, parts))


def _slowest_per_step(runs, parts, matched: dict[str, pd.DataFrame]) -> pd.DataFrame:
    frames = []
    for label, _, ps in _by_run(runs, parts):
        st = pd.concat([p["steps"] for p in ps], ignore_index=True) if ps else pd.DataFrame()
        if label not in matched or not len(st):
            continue
        st = st.sort_values(["step", "duration_ns", "rank"], ascending=[True, False, True], kind="stable")
        g = st.groupby("step", sort=True)
        out = g.agg(ranks=("rank", "nunique"), step_time_median_ns=("duration_ns", "median"),
                    step_time_max_ns=("duration_ns", "max"), slowest_rank=("rank", "first")).reset_index()
        out["slowest_vs_median"] = out["step_time_max_ns"] / out["step_time_median_ns"].where(
            out["step_time_median_ns"] > 0)
        waits = _step_waits(matched[label], st)
        out = out.merge(waits, on="step", how="left").fillna({"last_arrival_rank": -1, "wait_caused_ns": 0.0})
        frames.append(out.assign(run=label, last_arrival_rank=out["last_arrival_rank"].astype("int64")))
    if not frames:
        return pd.DataFrame({c: pd.Series(dtype=object if c == "run" else float) for c in STEP_RANKS_COLUMNS})
    return pd.concat(frames, ignore_index=True)[STEP_RANKS_COLUMNS]


def _step_waits(m: pd.DataFrame, st: pd.DataFrame) -> pd.DataFrame:
    """Per step, the rank whose last arrivals caused the most wait, and that wait (ns)."""
    last = m[(m["ranks_seen"] >= 2) & (m["rank"] == m["last_arrival_rank"])].drop_duplicates("collective")
    if not len(last):
        return pd.DataFrame({"step": pd.Series(dtype="int64"), "last_arrival_rank": pd.Series(dtype="int64"),
                             "wait_caused_ns": pd.Series(dtype=float)})
    left = last[["rank", "start_ts", "arrival_skew_ns"]].astype({"rank": "int64"}).sort_values("start_ts")
    right = st[["rank", "step", "start_ts", "end_ts"]].astype({"rank": "int64"}).sort_values("start_ts")
    j = pd.merge_asof(left, right, on="start_ts", by="rank", direction="backward")
    j = j[j["step"].notna() & (j["start_ts"] < j["end_ts"])]
    per = j.groupby(["step", "rank"], as_index=False)["arrival_skew_ns"].sum()
    per = per.sort_values(["step", "arrival_skew_ns", "rank"], ascending=[True, False, True], kind="stable")
    best = per.drop_duplicates("step")
    return pd.DataFrame({"step": best["step"].astype("int64").to_numpy(),
                         "last_arrival_rank": best["rank"].to_numpy(),
                         "wait_caused_ns": best["arrival_skew_ns"].astype(float).to_numpy()})


def cross_rank_report(traces: Iterable, *, engine: str = "pandas", scheduler=None, workers: int | None = None,
                      max_intervals: int = 1000, timeline: bool = True, progress: bool = False,
                      keep_loaded: bool = True) -> dict[str, pd.DataFrame]:
    """Every cross-rank analysis of ``traces`` from one pass over the ranks (each trace reduced once, on
    ``engine``): a dict of frames ``rank_balance``, ``rank_timeline`` (when ``timeline``),
    ``collectives_across_ranks`` (of the run when there is one run), ``stragglers``, ``slow_links``,
    ``slowest_ranks_per_step``, ``run_recommendations``; each equal to the function of that name.
    ``progress`` prints "k/n ranks reduced" to stderr; ``keep_loaded=False`` reduces each rank from a fresh
    read of its file, one at a time (:func:`analysis.analyses.cross_rank.gather`)."""
    traces = list(traces)
    runs = labelled_runs(traces)
    want = ("balance", "collectives", "steps") + (("timeline",) if timeline else ())
    parts = gather(runs, want, engine=engine, scheduler=scheduler, workers=workers,
                   resolution=_resolution(traces, max_intervals) if timeline else None, progress=progress,
                   keep_loaded=keep_loaded)
    matched = _matched(runs, parts)
    strag, slow = _stragglers(runs, matched), _slow_links(matched)
    out = {"rank_balance": _balance(runs, parts, matched), "stragglers": strag, "slow_links": slow,
           "slowest_ranks_per_step": _slowest_per_step(runs, parts, matched),
           "run_recommendations": _recommendations(runs, matched, strag, slow),
           "collectives_across_ranks": match_collectives([p["collectives"] for p in parts],
                                                         multi_run=len(runs) > 1)}
    if timeline:
        out["rank_timeline"] = _timeline(parts)
    return out
