"""Where device time goes, with the definitions of Holistic Trace Analysis (HTA) 0.5.0 so numbers compare.

Each function takes either a :class:`analysis.Trace` or the trace tables (reader conventions: ns ints,
Categorical strings):

* ``kernel_breakdown``: HTA ``get_gpu_kernel_breakdown`` (per-type exclusive time of the union of each type's
  intervals, "A overlapping B" rows for time where several types run) plus per-name statistics.
* ``temporal_breakdown``: HTA ``get_temporal_breakdown``: span = last end - first start of all device
  activity of the rank (every stream merged), idle = span - union busy time, compute = union of COMPUTATION,
  non_compute = span - compute - idle (memory, communication, syncs and OTHER).
* ``idle_time_breakdown`` (:mod:`analysis.analyses.idle`): HTA ``get_idle_time_breakdown`` per stream.
* ``comm_comp_overlap``: HTA ``get_comm_comp_overlap``: time when COMMUNICATION and COMPUTATION unions
  overlap / COMMUNICATION union time.
Kernel types: :func:`classify_kernels` (see :mod:`analysis.analyses.activity`).

**On a Trace** (``t.temporal_breakdown()`` or ``analysis.temporal_breakdown(t)``) the functions use the
trace's shared device activity: instructions, DMA transfers (MEMORY) and, for Neuron traces, collectives
(COMMUNICATION), in exact ns; the temporal breakdown spans the analysed span (:func:`analysis_span`: the
window of a restricted trace, else first to last device activity), the same span and activity as the
summary's ``idle_percent``. ``hta_compatible=True`` reproduces HTA 0.5.0 instead: its event selection
(:func:`hta_kernel_selection`: last-ProfilerStep filter, no stream -1 / ``tid == -1`` tracks, host ops that
carry an ``args.stream``), its float64 reading of the JSON µs and inward rounding to whole µs, and its span,
all in :mod:`analysis.analyses.hta` (``docs/hta_definitions.md``, "What differs between the modes").

**On tables** (``temporal_breakdown(instructions, dma=..., collectives=..., hta_rounding=...)``) they compute
from the given rows, or from a precomputed ``activity=`` frame (``hta_rounding`` rounds the exact ns inward:
no trace tells the JSON's zero for HTA's float64 reading). Where HTA raises (no device events, negative
rounded durations) these functions return the documented empty / zero / NaN results instead.

Speed: names, engines and opcodes stay Categorical and are classified once per category; interval unions
run on start-sorted int64 arrays (:mod:`analysis.core.intervals`).
"""
from __future__ import annotations

from collections.abc import Callable

import numpy as np
import pandas as pd

from ..core.intervals import intersection_ns, merge
from ..registry import Column, is_trace, register
from . import hta
from .activity import (
    COMMUNICATION,
    COMPUTATION,
    KERNEL_TYPES,
    KINETO_DEVICE_OPCODES,
    MEMORY,
    NEURON_COMPUTE_ENGINES,
    OTHER,
    activity_frame,
    analysis_span,
    classify_kernels,
    kernel_type_mask,
    merged_activity,
    trace_activity,
)
from .hta import hta_kernel_selection

__all__ = ["TEMPORAL_COLUMNS", "KERNEL_TYPE_COLUMNS", "KERNEL_NAME_COLUMNS", "OVERLAP_COLUMNS",
           "classify_kernels", "device_activity", "merge_intervals", "temporal_breakdown", "kernel_breakdown",
           "comm_comp_overlap", "hta_kernel_selection", "KERNEL_TYPES", "COMPUTATION",
           "COMMUNICATION", "MEMORY", "OTHER", "NEURON_COMPUTE_ENGINES", "KINETO_DEVICE_OPCODES", "analysis_span"]

#: HTA's interval merge (touching intervals merge); see :func:`analysis.core.intervals.merge`
merge_intervals = merge

TEMPORAL_SPEC = (Column("rank", "count", "Rank"),
                 Column("idle_time_ns", "ns", "Idle", "Span minus the union of all device activity"),
                 Column("compute_time_ns", "ns", "Compute", "Union of COMPUTATION intervals"),
                 Column("non_compute_time_ns", "ns", "Non-compute",
                        "Busy but not computing: memory, communication, syncs"),
                 Column("kernel_time_ns", "ns", "Device span", "The span the shares divide by"),
                 Column("idle_time_pctg", "percent", "Idle share"),
                 Column("compute_time_pctg", "percent", "Compute share"),
                 Column("non_compute_time_pctg", "percent", "Non-compute share"))
KERNEL_TYPE_SPEC = (Column("kernel_type", "", "Kernel type", "COMPUTATION, COMMUNICATION, MEMORY or 'A overlapping B'"),
                    Column("sum_ns", "ns", "Time", "Exclusive wall time"),
                    Column("percentage", "percent", "Share"))
KERNEL_NAME_SPEC = (Column("name", "", "Kernel"), Column("kernel_type", "", "Kernel type"),
                    Column("sum_ns", "ns", "Total time"), Column("max_ns", "ns", "Longest"),
                    Column("min_ns", "ns", "Shortest"), Column("mean_ns", "ns", "Mean"),
                    Column("std_ns", "ns", "Standard deviation"), Column("count", "count", "Calls"))
OVERLAP_SPEC = (Column("rank", "count", "Rank"),
                Column("comm_time_ns", "ns", "Communication", "Union of COMMUNICATION"),
                Column("overlap_time_ns", "ns", "Overlapped", "Communication time with computation running"),
                Column("comp_comm_overlap_pctg", "percent", "Communication overlapped",
                       "Share of communication time hidden under computation"))
ACTIVITY_SPEC = (Column("start_ts", "ns", "Start"), Column("end_ts", "ns", "End"), Column("name", "", "Kernel / event"),
                 Column("kernel_type", "", "Kernel type", "COMPUTATION, COMMUNICATION, MEMORY or OTHER (HTA)"),
                 Column("track", "count", "Track"), Column("opcode", "", "Opcode / Kineto category"),
                 Column("framework_op", "count", "Host op row", "-1 none"),
                 Column("table", "count", "Source table", "0 instructions, 1 dma, 2 collectives"),
                 Column("row", "count", "Row position", "Position of the row in its table"))
TEMPORAL_COLUMNS = [c.name for c in TEMPORAL_SPEC]
KERNEL_TYPE_COLUMNS = [c.name for c in KERNEL_TYPE_SPEC]
KERNEL_NAME_COLUMNS = [c.name for c in KERNEL_NAME_SPEC]
OVERLAP_COLUMNS = [c.name for c in OVERLAP_SPEC]


class _TraceTables:
    """Default of ``dma=`` / ``collectives=``: the trace's own tables (on tables: none)."""

    def __repr__(self) -> str:
        return "<the trace's>"


TRACE_TABLES = _TraceTables()


def _table(v):
    return None if v is TRACE_TABLES else v


@register("device_activity", columns=ACTIVITY_SPEC)
def device_activity(instructions, *, dma=TRACE_TABLES, collectives=TRACE_TABLES,
                    hta_rounding: bool = False, sort: bool = False, hta_compatible: bool = False) -> pd.DataFrame:
    """Device intervals with their kernel type (columns: ``analysis.analyses.activity.ACTIVITY_COLUMNS``).

    On a Trace: its shared, start-sorted activity (:func:`analysis.analyses.activity.trace_activity`;
    ``hta_compatible`` selects and rounds as HTA). On tables: :func:`analysis.analyses.activity.activity_frame`
    of ``instructions`` (+ ``dma``, ``collectives``)."""
    if is_trace(instructions) and dma is TRACE_TABLES and collectives is TRACE_TABLES:
        return hta.hta_activity(instructions) if hta_compatible else trace_activity(instructions)
    if is_trace(instructions):
        return _explicit(instructions, dma, collectives)
    act = activity_frame(instructions, dma=_table(dma), collectives=_table(collectives), sort=sort and not hta_rounding)
    return hta.quantise(act, sort=sort) if hta_rounding else act


def _explicit(trace, dma, collectives) -> pd.DataFrame:
    """A trace's instructions with explicitly given dma / collectives tables (None: leave them out)."""
    d = trace.table("dma") if dma is TRACE_TABLES else dma
    c = (None if trace.is_kineto_import else trace.table("collectives")) if collectives is TRACE_TABLES else collectives
    return activity_frame(trace.analysis_table("instructions"), dma=d, collectives=c, sort=True,
                          window=trace.window_bounds)


def _merged(act: pd.DataFrame, ktype: str | None = None) -> tuple[np.ndarray, np.ndarray]:
    s, e = act["start_ts"].to_numpy(np.int64), act["end_ts"].to_numpy(np.int64)
    if ktype is not None:
        m = kernel_type_mask(act, ktype) if isinstance(act["kernel_type"].dtype, pd.CategoricalDtype) \
            else (act["kernel_type"] == ktype).to_numpy()
        s, e = s[m], e[m]
    return merge(s, e)


Unions = Callable[[str | None], tuple[np.ndarray, np.ndarray]]


def _source(instructions, *, dma, collectives, activity: pd.DataFrame | None, hta_rounding: bool,
            hta_compatible: bool) -> tuple[pd.DataFrame, Unions]:
    """The activity frame a breakdown works on, and its unions by kernel type: ``activity=`` as given; a
    Trace's own (memoised unions; HTA's with ``hta_compatible``, :mod:`analysis.analyses.hta`); a Trace with
    explicit ``dma`` / ``collectives``; or built from tables (rounded as HTA with ``hta_rounding``)."""
    if activity is not None:
        return activity, lambda k: _merged(activity, k)
    if instructions is None:
        raise ValueError("pass a Trace, the instructions table or activity= (a device_activity frame)")
    if is_trace(instructions):
        t = instructions
        if hta_compatible:
            return hta.hta_activity(t), lambda k: hta.hta_merged(t, k)
        if dma is TRACE_TABLES and collectives is TRACE_TABLES:
            return trace_activity(t), lambda k: merged_activity(t, k)
        act = _explicit(t, dma, collectives)
    else:
        act = activity_frame(instructions, dma=_table(dma), collectives=_table(collectives))
        act = hta.quantise(act) if hta_rounding else act
    return act, lambda k: _merged(act, k)


def _rank(instructions, rank: int | None) -> int:
    return int(rank) if rank is not None else (instructions.rank if is_trace(instructions) else 0)


@register("temporal_breakdown", columns=TEMPORAL_SPEC, figure="temporal_breakdown_figure")
def temporal_breakdown(instructions, rank: int | None = None, *, hta_rounding: bool = False,
                       dma=TRACE_TABLES, collectives=TRACE_TABLES,
                       activity: pd.DataFrame | None = None, hta_compatible: bool = False,
                       span: tuple[int, int] | None = None) -> pd.DataFrame:
    """Idle / compute / non-compute device time of one rank (HTA ``get_temporal_breakdown``).

    One row; columns: ``rank``; ``idle_time_ns``, ``compute_time_ns``, ``non_compute_time_ns``,
    ``kernel_time_ns`` (ns; kernel_time = the span, the denominator: HTA's first device start to last end;
    on a Trace without ``hta_compatible`` the analysed span); ``idle_time_pctg``, ``compute_time_pctg``,
    ``non_compute_time_pctg`` (percent, 2 decimals). With no device activity the times are 0 and the shares
    NaN (unknown: there is no span to divide; HTA raises there). ``activity``: a precomputed
    :func:`device_activity` frame (then ``instructions``, ``dma``, ``collectives``, ``hta_rounding`` are unused);
    ``span``: (lo, hi) to divide by instead."""
    if hta_compatible and activity is None and is_trace(instructions):  # HTA's unions, not its 5M-row activity
        u = hta.hta_unions(instructions)
        n_act, unions = u["rows"], lambda k: u[k]
    else:
        act, unions = _source(instructions, dma=dma, collectives=collectives, activity=activity,
                              hta_rounding=hta_rounding, hta_compatible=hta_compatible)
        n_act = len(act)
    default = activity is None and dma is TRACE_TABLES and collectives is TRACE_TABLES and not hta_compatible
    if span is None and is_trace(instructions) and default:
        span = analysis_span(instructions) if n_act else None  # the summary's span
    if n_act == 0:
        width = busy = compute = 0
    else:
        gs, ge = unions(None)
        width = int(ge[-1] - gs[0]) if span is None else int(span[1] - span[0])
        busy = int(ge.sum() - gs.sum())
        cs, ce = unions(COMPUTATION)
        compute = int(ce.sum() - cs.sum())
    idle = width - busy
    non_compute = width - compute - idle
    row: dict[str, float] = {"rank": _rank(instructions, rank), "idle_time_ns": idle, "compute_time_ns": compute,
           "non_compute_time_ns": non_compute, "kernel_time_ns": width}
    for k in ("idle_time", "compute_time", "non_compute_time"):
        row[f"{k}_pctg"] = round(100.0 * row[f"{k}_ns"] / width, 2) if width else float("nan")
    return pd.DataFrame([row])


def _type_time(act: pd.DataFrame, types: list[str]) -> pd.DataFrame:
    """HTA ``_get_gpu_kernel_type_time``: sweep over the per-type unions with one bit per type."""
    times, deltas = [], []
    for i, ktype in enumerate(types):
        gs, ge = _merged(act, ktype)
        times += [gs, ge]
        deltas += [np.full(len(gs), 1 << i), np.full(len(ge), -(1 << i))]
    if not times or sum(len(x) for x in times) == 0:
        return pd.DataFrame({"kernel_type": pd.Series(dtype=object), "sum_ns": pd.Series(dtype=np.int64)})
    t = np.concatenate(times)
    d = np.concatenate(deltas)
    o = np.argsort(t, kind="stable")
    t, d = t[o], d[o]
    running = np.cumsum(d)
    dur = np.diff(t, append=t[-1])
    keep = running > 0
    sums = np.bincount(running[keep], weights=dur[keep], minlength=1 << len(types))
    present = np.flatnonzero(np.bincount(running[keep], minlength=1 << len(types)))
    labels = [" overlapping ".join(tp for i, tp in enumerate(types) if r & (1 << i)) for r in present]
    return pd.DataFrame({"kernel_type": pd.Series(labels, dtype=object),
                         "sum_ns": sums[present].round().astype(np.int64)}).sort_values(
        "kernel_type", ignore_index=True)


@register("kernel_breakdown", columns=KERNEL_TYPE_SPEC + KERNEL_NAME_SPEC[:1] + KERNEL_NAME_SPEC[3:],
          figure="kernel_breakdown_figure", returns="frames")
def kernel_breakdown(instructions, *, include_memory_kernels: bool = True, hta_rounding: bool = False,
                     dma=TRACE_TABLES, collectives=TRACE_TABLES,
                     activity: pd.DataFrame | None = None, hta_compatible: bool = False
                     ) -> tuple[pd.DataFrame, pd.DataFrame]:
    """Device time by kernel type and by kernel name (HTA ``get_gpu_kernel_breakdown``).

    Returns ``(by_type, by_name)``:
    * ``by_type``: ``kernel_type`` (COMPUTATION, COMMUNICATION, MEMORY, or "A overlapping B" for time when
      several types run at once), ``sum_ns`` (ns of exclusive wall time), ``percentage`` (of the total, 1
      decimal); sorted by sum_ns descending. MEMORY is left out when ``include_memory_kernels`` is False;
      OTHER (syncs) is never included, as in HTA.
    * ``by_name``: ``name``, ``kernel_type``, ``sum_ns``, ``max_ns``, ``min_ns``, ``mean_ns``, ``std_ns``
      (sample std, 0 for one kernel), ``count``; every kernel name, sorted by sum_ns descending (HTA folds
      names past its ``num_kernels`` into "others"; we list them all).
    Both empty (same columns) without device activity. ``activity``, ``hta_compatible``: see
    :func:`temporal_breakdown`."""
    act, _ = _source(instructions, dma=dma, collectives=collectives, activity=activity, hta_rounding=hta_rounding,
                     hta_compatible=hta_compatible)
    types = [COMPUTATION, COMMUNICATION] + ([MEMORY] if include_memory_kernels else [])
    by_type = _type_time(act, types)
    by_type = by_type.sort_values("sum_ns", ascending=False, ignore_index=True)
    total = by_type["sum_ns"].sum()
    by_type["percentage"] = (100.0 * by_type["sum_ns"] / total).round(1) if total else 0.0
    g = pd.DataFrame({"name": act["name"], "kernel_type": act["kernel_type"],
                      "dur": act["end_ts"].to_numpy() - act["start_ts"].to_numpy()}, index=act.index)
    by_name = g.groupby(["name", "kernel_type"], as_index=False, observed=True)["dur"].agg(
        sum_ns="sum", max_ns="max", min_ns="min", mean_ns="mean", std_ns="std", count="count")
    by_name["std_ns"] = by_name["std_ns"].fillna(0.0)
    for c in ("name", "kernel_type"):
        by_name[c] = by_name[c].astype(object)
    by_name = by_name.sort_values("sum_ns", ascending=False, ignore_index=True)
    return by_type, by_name


@register("comm_comp_overlap", columns=OVERLAP_SPEC, figure="comm_comp_overlap_figure")
def comm_comp_overlap(instructions, rank: int | None = None, *, hta_rounding: bool = False,
                      dma=TRACE_TABLES, collectives=TRACE_TABLES,
                      activity: pd.DataFrame | None = None, hta_compatible: bool = False) -> pd.DataFrame:
    """Share of communication time overlapped by computation (HTA ``get_comm_comp_overlap``).

    One row: ``rank``, ``comm_time_ns`` (union of COMMUNICATION), ``overlap_time_ns`` (ns when a
    communication and a computation interval both run), ``comp_comm_overlap_pctg`` (percent, 2 decimals;
    NaN when there is no communication, like HTA's 0/0). ``activity``, ``hta_compatible``: see
    :func:`temporal_breakdown`."""
    _, unions = _source(instructions, dma=dma, collectives=collectives, activity=activity,
                        hta_rounding=hta_rounding, hta_compatible=hta_compatible)
    cs, ce = unions(COMMUNICATION)
    ps, pe = unions(COMPUTATION) if len(cs) else (cs, ce)  # no comm: nothing overlaps
    comm = int(ce.sum() - cs.sum())
    overlap = intersection_ns(cs, ce, ps, pe)
    pct = round(100.0 * overlap / comm, 2) if comm else float("nan")
    return pd.DataFrame([{"rank": _rank(instructions, rank), "comm_time_ns": comm, "overlap_time_ns": overlap,
                          "comp_comm_overlap_pctg": pct}])
