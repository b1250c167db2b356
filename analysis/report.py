"""A plain-text report of a trace for the terminal (``neuron-analyze``): key figures, hot ops,
recommendations and, for a run of several ranks, their load balance and cross-rank findings. A view: it only
formats what the analysis functions return. A folder holding unrelated traces is not a run: each trace is
reported on its own (:mod:`analysis.core.runs`)."""
from __future__ import annotations

import pandas as pd

from neuron_profiler.trace import simulated_by, simulation_note

from .analyses.hot_ops import hot_ops
from .analyses.pairing import identity as analysis_identity
from .analyses.ranks import cross_rank_report
from .analyses.recommend import recommendations
from .analyses.summary import summary
from .units import format_value

#: summary metrics shown by default, in this order (``all_metrics=True`` shows every row)
KEY_METRICS = ("total_time", "step_count", "step_time_mean_ns", "step_time_max_ns", "device_active_percent",
               "mfu_estimated_percent", "hfu_estimated_percent", "mbu_estimated_percent", "hbm_total_bytes",
               "dma_transfer_count", "small_dma_transfer_percent", "cc_op_count", "comm_comp_overlap_percent",
               "idle_percent", "idle_host_wait_percent")


def _section(title: str) -> list[str]:
    return ["", title, "-" * len(title)]


def _num(v: float, digits: int) -> str:
    """A rate for the text table: "n/a" when unknown (the op's note below the table says why)."""
    return "n/a" if pd.isna(v) else f"{v:.{digits}f}"


def _ms(ns) -> str:
    return "n/a" if pd.isna(ns) else f"{float(ns) / 1e6:.3f}"


def trace_report(trace, *, top: int = 10, all_metrics: bool = False) -> str:
    """The report of one ``Trace``."""
    h = trace.header
    dev = ", ".join(f"{d.kind} {d.name}" for d in h.devices) or "no device"
    what = analysis_identity(trace).describe()
    lines = [f"{trace.name}  (rank {trace.rank} of {h.world_size}; {dev}"
             f"{'; device events ' + simulated_by(h) if h.simulated else ''})"]
    if what:
        lines.append(f"  {what}")
    if h.simulated:
        lines.append(f"  Simulated: device events {simulation_note(h)}")
    s = summary(trace)
    if not all_metrics:
        s = s[s["metric"].isin(KEY_METRICS)].set_index("metric").reindex(
            [m for m in KEY_METRICS if m in set(s["metric"])]).reset_index()
    lines += _section("Summary")
    width = max((len(str(m)) for m in s["label"]), default=0)
    lines += [f"  {str(m):<{width}}  {format_value(v, str(u))}" for m, v, u in zip(s["label"], s["value"], s["unit"])]
    ho = hot_ops(trace)
    lines += _section(f"Hot ops (top {min(top, len(ho))} of {len(ho)} by device time)")
    if len(ho):
        t = ho.head(top)
        table = pd.DataFrame({"calls": t["calls"], "device ms": t["device_time_total_ns"].map(_ms),
                              "share %": t["share_of_step_time_percent"].map(lambda v: f"{v:.2f}"),
                              "TFLOP/s": (t["achieved_flops_per_s"] / 1e12).map(lambda v: _num(v, 2)),
                              "GB/s": (t["achieved_bandwidth_bytes_per_s"] / 1e9).map(lambda v: _num(v, 1))},
                             index=t.index)
        lines += ["  " + ln for ln in table.to_string().splitlines()]
        unknown = [(op, note) for op, note, f, b in zip(t.index, t["note"], t["achieved_flops_per_s"],
                                                        t["achieved_bandwidth_bytes_per_s"])
                   if (pd.isna(f) or pd.isna(b)) and isinstance(note, str) and note]
        lines += [f"  n/a {op}: {note}" for op, note in unknown]
    else:
        lines.append("  no device work linked to ops in this trace")
    rec = recommendations(trace)
    lines += _section(f"Recommendations ({len(rec)})")
    for i, r in enumerate(rec.head(top).itertuples(index=False), 1):
        saved = "" if pd.isna(r.est_time_saved_ns) else f"  (est. saving {_ms(r.est_time_saved_ns)} ms)"
        lines += [f"  {i}. [{r.severity}] {r.title}{saved}", f"     {r.evidence}", f"     Action: {r.action}"]
    if not len(rec):
        lines.append("  none fired")
    return "\n".join(lines)


def run_report(traces: list, *, engine: str = "pandas", scheduler=None, workers: int | None = None,
               progress: bool = False) -> str:
    """Load balance and cross-rank findings of the traces of one run (:func:`analysis.cross_rank_report`,
    computed on ``engine``: "pandas" in this process, "dask" one task per trace file)."""
    x = cross_rank_report(traces, engine=engine, scheduler=scheduler, workers=workers, timeline=False,
                          progress=progress)
    rb = x["rank_balance"]
    table = pd.DataFrame({"rank": rb["rank"], "window": rb["window"], "step ms": rb["step_time_mean_ns"].map(_ms),
                          "vs median": rb["step_time_vs_median"].map(lambda v: f"{v:.2f}"),
                          "compute ms": rb["compute_time_ns"].map(_ms), "idle ms": rb["idle_time_ns"].map(_ms),
                          "times last": rb["times_last"], "wait caused ms": rb["total_wait_caused_ns"].map(_ms)})
    lines = [f"Run {rb['run'].iloc[0]}: {len(traces)} traces (ranks {_ranks(rb['rank'])})",
             *_section("Load balance across ranks"), *("  " + ln for ln in table.to_string(index=False).splitlines())]
    rr = x["run_recommendations"]
    lines += _section(f"Across ranks ({len(rr)})")
    for i, r in enumerate(rr.itertuples(index=False), 1):
        lines += [f"  {i}. [{r.severity}] {r.title}  (time lost {_ms(r.est_time_saved_ns)} ms)",
                  f"     {r.evidence}", f"     Action: {r.action}"]
    if not len(rr):
        lines.append("  no straggler (no rank makes the others wait more than 1% of the run) and no slow link")
    steps = x["slowest_ranks_per_step"]
    if len(steps):
        st = pd.DataFrame({"step": steps["step"], "median ms": steps["step_time_median_ns"].map(_ms),
                           "max ms": steps["step_time_max_ns"].map(_ms), "slowest rank": steps["slowest_rank"],
                           "made others wait": steps["last_arrival_rank"].map(lambda r: "-" if r < 0 else str(r)),
                           "wait caused ms": steps["wait_caused_ns"].map(_ms)})
        lines += [*_section("Slowest ranks per step"), *("  " + ln for ln in st.to_string(index=False).splitlines())]
    return "\n".join(lines)


def _ranks(ranks: pd.Series) -> str:
    """Sorted ranks, runs of consecutive ranks shortened ("0-63")."""
    rs, out = sorted(set(int(r) for r in ranks)), []
    i = 0
    while i < len(rs):
        j = i
        while j + 1 < len(rs) and rs[j + 1] == rs[j] + 1:
            j += 1
        out.append(str(rs[i]) if j == i else f"{rs[i]}-{rs[j]}")
        i = j + 1
    return ", ".join(out)


def text_report(obj, *, top: int = 10, all_metrics: bool = False, engine: str = "pandas", scheduler=None,
                workers: int | None = None, per_trace: bool = True, progress: bool = False) -> str:
    """The report of a ``Trace``, or of a ``TraceSet``: for each run of several ranks its load balance and
    cross-rank findings (on ``engine``, see :func:`run_report`), then each trace unless ``per_trace`` is
    False (traces that belong to no common run stand alone and are always reported)."""
    groups = [g.traces for g in obj.groups()] if hasattr(obj, "groups") else [[obj]]
    parts = []
    for traces in groups:
        if len(traces) > 1:
            parts.append(run_report(traces, engine=engine, scheduler=scheduler, workers=workers, progress=progress))
        if per_trace or len(traces) == 1:
            parts += [trace_report(t, top=top, all_metrics=all_metrics) for t in traces]
    return ("\n\n" + "=" * 100 + "\n").join(parts) + "\n"
