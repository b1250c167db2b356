"""Where device time goes, with the definitions of Holistic Trace Analysis (HTA) 0.5.0 so numbers compare.

Each function takes either a :class:`analysis.Trace` or the trace tables (reader conventions: ns ints,
Categorical strings):

* ``kernel_breakdown``: HTA ``get_gpu_kernel_breakdown`` (per-type exclusive time of the union of each type's
  intervals, "A overlapping B" rows for time where several types run) plus per-name statistics.
* ``temporal_breakdown``: HTA ``get_temporal_breakdown``: span = last end - first start of all device
  activity of the rank (every stream merged), idle = span - union busy time, compute = union of COMPUTATION,
  non_compute = span - compute - idle (memory, communication, syncs and OTHER).
* ``idle_time_breakdown``: HTA ``get_idle_time_breakdown`` per stream (host_wait / kernel_wait / other).
* ``comm_comp_overlap``: HTA ``get_comm_comp_overlap``: time when COMMUNICATION and COMPUTATION unions
  overlap / COMMUNICATION union time.
Kernel types: :func:`classify_kernels` (see :mod:`analysis.analyses.activity`).

**On a Trace** (``t.temporal_breakdown()`` or ``analysis.temporal_breakdown(t)``) the functions use the
trace's shared device activity: instructions, DMA transfers (MEMORY) and, for Neuron traces, collectives
(COMMUNICATION), in exact ns; the temporal breakdown spans the analysed span (:func:`analysis_span`: the
window of a restricted trace, else first to last device activity), the same span and activity as the
summary's ``idle_percent``. ``hta_compatible=True`` reproduces HTA 0.5.0 instead: its event selection
(:func:`hta_kernel_selection`: last-ProfilerStep filter, no stream -1 / ``tid == -1`` tracks, host ops that
carry an ``args.stream``), its inward rounding to whole µs and its span; ``docs/hta_definitions.md``.

**On tables** (``temporal_breakdown(instructions, dma=..., collectives=..., hta_rounding=...)``) they compute
from the given rows, or from a precomputed ``activity=`` frame. Where HTA raises (no device events, negative
rounded durations) these functions return the documented empty / zero / NaN results instead.

Speed: names, engines and opcodes stay Categorical and are classified once per category; interval unions
run on start-sorted int64 arrays (:mod:`analysis.core.intervals`).
"""
from __future__ import annotations

import numpy as np
import pandas as pd

from ..core.categorical import categorical, category_names, per_category
from ..core.intervals import first_rows, intersection_ns, merge, stable_key_order
from ..core.tables import row_positions
from ..registry import Column, register
from .activity import (
    COMMUNICATION,
    COMPUTATION,
    HTA_IDLE_KERNEL_OPCODES,
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
from .hta_selection import hta_kernel_selection

__all__ = ["TEMPORAL_COLUMNS", "KERNEL_TYPE_COLUMNS", "KERNEL_NAME_COLUMNS", "OVERLAP_COLUMNS", "IDLE_COLUMNS",
           "classify_kernels", "device_activity", "merge_intervals", "temporal_breakdown", "kernel_breakdown",
           "comm_comp_overlap", "idle_time_breakdown", "hta_kernel_selection", "KERNEL_TYPES", "COMPUTATION",
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
IDLE_SPEC = (Column("rank", "count", "Rank"), Column("stream", "count", "Stream"),
             Column("idle_category", "", "Why idle", "host_wait / kernel_wait / other"),
             Column("idle_time_ns", "ns", "Idle time"),
             Column("idle_time_ratio", "", "Share of the stream's idle time"))
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
IDLE_CATEGORIES = ("host_wait", "kernel_wait", "other")
IDLE_COLUMNS = [c.name for c in IDLE_SPEC]


def _is_trace(obj) -> bool:
    return hasattr(obj, "memo") and hasattr(obj, "header")


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
    if _is_trace(instructions) and dma is TRACE_TABLES and collectives is TRACE_TABLES:
        return trace_activity(instructions, hta_compatible)
    if _is_trace(instructions):
        return _explicit(instructions, dma, collectives)
    return activity_frame(instructions, dma=_table(dma), collectives=_table(collectives), hta_rounding=hta_rounding,
                          sort=sort)


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


def _own(instructions, kw: dict) -> bool:
    """True when a breakdown runs on a trace's own activity (so memoised unions apply)."""
    return _is_trace(instructions) and kw.get("activity") is None and (
        kw.get("hta_compatible") or (kw.get("dma", TRACE_TABLES) is TRACE_TABLES
                                     and kw.get("collectives", TRACE_TABLES) is TRACE_TABLES))


def _unions(instructions, kw: dict, act: pd.DataFrame, ktype: str | None) -> tuple[np.ndarray, np.ndarray]:
    if _own(instructions, kw):
        return merged_activity(instructions, ktype, bool(kw.get("hta_compatible")))
    return _merged(act, ktype)


def _activity(instructions, kw: dict) -> pd.DataFrame:
    """The activity frame a breakdown works on: ``activity=``, a Trace's, or built from tables."""
    if kw.get("activity") is not None:
        return kw["activity"]
    if instructions is None:
        raise ValueError("pass a Trace, the instructions table or activity= (a device_activity frame)")
    dma, cc = kw.get("dma", TRACE_TABLES), kw.get("collectives", TRACE_TABLES)
    if _is_trace(instructions):
        if kw.get("hta_compatible") or (dma is TRACE_TABLES and cc is TRACE_TABLES):
            return trace_activity(instructions, kw.get("hta_compatible", False))
        return _explicit(instructions, dma, cc)
    return activity_frame(instructions, dma=_table(dma), collectives=_table(cc),
                          hta_rounding=kw.get("hta_rounding", False))


def _rank(instructions, rank: int | None) -> int:
    return int(rank) if rank is not None else (instructions.rank if _is_trace(instructions) else 0)


@register("temporal_breakdown", columns=TEMPORAL_SPEC, figure="temporal_breakdown_figure")
def temporal_breakdown(instructions, rank: int | None = None, *, hta_rounding: bool = False,
                       dma=TRACE_TABLES, collectives=TRACE_TABLES,
                       activity: pd.DataFrame | None = None, hta_compatible: bool = False,
                       span: tuple[int, int] | None = None) -> pd.DataFrame:
    """Idle / compute / non-compute device time of one rank (HTA ``get_temporal_breakdown``).

    One row; columns: ``rank``; ``idle_time_ns``, ``compute_time_ns``, ``non_compute_time_ns``,
    ``kernel_time_ns`` (ns; kernel_time = the span, the denominator: HTA's first device start to last end;
    on a Trace without ``hta_compatible`` the analysed span); ``idle_time_pctg``, ``compute_time_pctg``,
    ``non_compute_time_pctg`` (percent, 2 decimals). All zero when there is no device activity (HTA raises
    there). ``activity``: a precomputed :func:`device_activity` frame (then ``instructions``, ``dma``,
    ``collectives``, ``hta_rounding`` are unused); ``span``: (lo, hi) to divide by instead."""
    kw = {"dma": dma, "collectives": collectives, "hta_rounding": hta_rounding, "activity": activity,
          "hta_compatible": hta_compatible}
    act = _activity(instructions, kw)
    default = activity is None and dma is TRACE_TABLES and collectives is TRACE_TABLES and not hta_compatible
    if span is None and _is_trace(instructions) and default:
        span = analysis_span(instructions) if len(act) else None  # the summary's span
    if len(act) == 0:
        width = busy = compute = 0
    else:
        gs, ge = _unions(instructions, kw, act, None)
        width = int(ge[-1] - gs[0]) if span is None else int(span[1] - span[0])
        busy = int(ge.sum() - gs.sum())
        cs, ce = _unions(instructions, kw, act, COMPUTATION)
        compute = int(ce.sum() - cs.sum())
    idle = width - busy
    non_compute = width - compute - idle
    row: dict[str, float] = {"rank": _rank(instructions, rank), "idle_time_ns": idle, "compute_time_ns": compute,
           "non_compute_time_ns": non_compute, "kernel_time_ns": width}
    for k in ("idle_time", "compute_time", "non_compute_time"):
        row[f"{k}_pctg"] = round(100.0 * row[f"{k}_ns"] / width, 2) if width else 0.0
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
    act = _activity(instructions, {"dma": dma, "collectives": collectives, "hta_rounding": hta_rounding,
                                   "activity": activity, "hta_compatible": hta_compatible})
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
    kw = {"dma": dma, "collectives": collectives, "hta_rounding": hta_rounding, "activity": activity,
          "hta_compatible": hta_compatible}
    act = _activity(instructions, kw)
    cs, ce = _unions(instructions, kw, act, COMMUNICATION)
    ps, pe = _unions(instructions, kw, act, COMPUTATION) if len(cs) else (cs, ce)  # no comm: nothing overlaps
    comm = int(ce.sum() - cs.sum())
    overlap = intersection_ns(cs, ce, ps, pe)
    pct = round(100.0 * overlap / comm, 2) if comm else float("nan")
    return pd.DataFrame([{"rank": _rank(instructions, rank), "comm_time_ns": comm, "overlap_time_ns": overlap,
                          "comp_comm_overlap_pctg": pct}])


def _launch_start(k: pd.DataFrame, host_ops: pd.DataFrame | None, flows: pd.DataFrame | None
                  ) -> tuple[np.ndarray, np.ndarray]:
    """(start ns of the launching host op, has one) per row of ``k`` (first ``launch`` flow per instruction)."""
    launch, has = np.zeros(len(k), dtype=np.int64), np.zeros(len(k), dtype=bool)
    if flows is None or not len(flows) or host_ops is None or not len(host_ops) or not len(k):
        return launch, has
    m = (per_category(categorical(flows, "kind"), category_names(categorical(flows, "kind")) == "launch",
                       False)
         & per_category(categorical(flows, "src_table"),
                         category_names(categorical(flows, "src_table")) == "host_ops", False)
         & per_category(categorical(flows, "dst_table"),
                         category_names(categorical(flows, "dst_table")) == "instructions", False))
    dst = flows["dst_row"].to_numpy(np.int64)[m]
    src = flows["src_row"].to_numpy(np.int64)[m]
    dst, first = first_rows(dst)  # first launch flow of each instruction, as HTA's drop_duplicates
    hpos = row_positions(host_ops.index, src[first])
    ok = hpos >= 0
    dst, src_ts = dst[ok], host_ops["start_ts"].to_numpy(np.int64)[hpos[ok]]
    if not len(dst):
        return launch, has
    idx = k.index
    if isinstance(idx, pd.RangeIndex) and idx.step == 1:  # row ids = start + position: scatter the few flows
        pos = dst - idx.start
        ok = (pos >= 0) & (pos < len(k))
        launch[pos[ok]] = src_ts[ok]
        has[pos[ok]] = True
        return launch, has
    ids = idx.to_numpy(np.int64)
    if ids.min() >= 0 and max(int(ids.max()), int(dst[-1])) < 4 * len(ids) + 1024:  # row ids: a dense lookup
        by_id = np.full(max(int(ids.max()), int(dst[-1])) + 1, -1, np.int64)
        by_id[dst] = np.arange(len(dst))
        pos = by_id[ids]
        has = pos >= 0
    else:
        pos = np.minimum(np.searchsorted(dst, ids), len(dst) - 1)  # dst is sorted (first_rows: ascending)
        has = dst[pos] == ids
    launch[has] = src_ts[pos[has]]
    return launch, has


def _stream_codes(k: pd.DataFrame, tracks: pd.DataFrame | None) -> tuple[np.ndarray, np.ndarray]:
    """(distinct stream ids, stream code per row): the GPU stream (``tracks.tid`` of a "stream" track) of each
    row's track when the tracks table is given, else the track id (a Neuron engine: its rows run in order, as a
    stream's kernels do, while all engines of a core share one tid); one lookup per distinct track."""
    track = k["track"].to_numpy(np.int64) if "track" in k else np.full(len(k), -1, np.int64)
    t_lo = int(track.min()) if len(track) else 0
    if 0 <= t_lo and len(track) and int(track.max()) < (1 << 20):
        t_lo = 0  # small non-negative ids index the lookup directly (no offset copy)
    key = track - t_lo if t_lo else track  # offset track ids (one array, used twice)
    t_ids = np.flatnonzero(np.bincount(key)) + t_lo if len(track) else track
    t_stream = t_ids
    if tracks is not None and len(tracks) and len(k):
        pos = row_positions(tracks.index, t_ids)
        tid = tracks["tid"].to_numpy(np.int64)[np.maximum(pos, 0)]
        if "kind" in tracks:
            is_stream = (tracks["kind"].astype(str).to_numpy() == "stream")[np.maximum(pos, 0)]
            tid = np.where(is_stream, tid, t_ids)
        t_stream = np.where(pos >= 0, tid, -1)
    s_vals, t_code = np.unique(t_stream, return_inverse=True)
    lut = np.zeros(int(t_ids[-1] - t_lo) + 1 if len(t_ids) else 1, dtype=np.int32)
    lut[t_ids - t_lo] = t_code
    return s_vals, (lut[key] if len(track) else np.zeros(0, np.int32))


def _by_stream(s_codes: np.ndarray, n_streams: int, start: np.ndarray, *cols: np.ndarray
               ) -> tuple[np.ndarray, np.ndarray, tuple[np.ndarray, ...], np.ndarray]:
    """Rows grouped by stream, time-ordered within each: (first position of each present stream's rows, and
    the end of the last; start; the other columns; first row of a stream as a mask). A linear radix order by
    stream (streams ascending); a sort only when rows are out of time order within a stream."""
    counts = np.bincount(s_codes, minlength=n_streams)
    bounds = np.concatenate([[0], np.cumsum(counts[counts > 0])])
    first = np.zeros(len(s_codes), dtype=bool)
    first[bounds[:-1]] = True
    o = stable_key_order(s_codes)
    st = start[o]
    if not ((st[1:] >= st[:-1]) | first[1:]).all():
        o = np.lexsort((start, s_codes))  # by stream, then start (stable)
        st = start[o]
    return bounds, st, tuple(x[o] for x in cols), first


#: up to this many streams the idle breakdown takes each stream's rows by a mask (arrays of one stream's size,
#: recycled by the allocator) instead of grouping all rows in one order (arrays of the whole table)
_FEW_STREAMS = 64


def _stream_gaps(st: np.ndarray, en: np.ndarray, la: np.ndarray | None, hl: np.ndarray | None, delay_ns: int,
                 hta_gaps: bool) -> tuple[np.ndarray, np.ndarray]:
    """(idle ns per category, rows per category) of one stream's time-ordered rows; ``en`` is changed in place.
    The rules of :func:`_gaps_by_category`."""
    if not hta_gaps:
        np.maximum.accumulate(en, out=en)
    gap = st  # start - end of the previous kernel(s), in place of the starts
    np.subtract(st[1:], en[:-1], out=gap[1:])
    host_wait = None
    if la is not None:
        host_wait = np.zeros(len(st), dtype=bool)
        np.greater(la[1:], en[:-1], out=host_wait[1:])
        host_wait &= hl
        host_wait[0] = False
    if not hta_gaps:
        np.maximum(gap, 0, out=gap)
    gap[0] = 0
    cat = (gap >= delay_ns).view(np.int8)  # kernel_wait (1) when shorter than the delay, else other (2)
    cat += 1
    cat[0] = 2
    if host_wait is not None:
        cat[host_wait] = 0
    return np.bincount(cat, weights=gap, minlength=3), np.bincount(cat, minlength=3)


def _gaps_per_stream(s_codes: np.ndarray, n_streams: int, start: np.ndarray, end: np.ndarray,
                     launch: np.ndarray | None, has_launch: np.ndarray | None, delay_ns: int, hta_gaps: bool,
                     end_is_duration: bool) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """:func:`_gaps_by_category` one stream at a time (a few streams): each stream's rows taken by a mask, in
    time order (a stable sort of that stream's starts when they are not), so no array spans the whole table."""
    sums = np.zeros(3 * n_streams)
    counts = np.zeros(3 * n_streams, np.int64)
    for j in range(n_streams):
        m = s_codes == j
        if not m.any():
            continue
        st, en = start[m], end[m]
        la: np.ndarray | None = None
        hl: np.ndarray | None = None
        if launch is not None and has_launch is not None:
            la, hl = launch[m], has_launch[m]
        if not (st[1:] >= st[:-1]).all():  # as the grouped path's lexsort (stream, start): stable by start
            o = np.argsort(st, kind="stable")
            st, en = st[o], en[o]
            if la is not None and hl is not None:
                la, hl = la[o], hl[o]
        if end_is_duration:
            en += st
        sums[3 * j:3 * j + 3], counts[3 * j:3 * j + 3] = _stream_gaps(st, en, la, hl, delay_ns, hta_gaps)
    return _idle_shares(sums, counts, n_streams)


def _idle_shares(sums: np.ndarray, counts: np.ndarray, n_streams: int) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """(present ``stream * 3 + category`` keys, idle ns, share of the stream's idle time)."""
    present = np.flatnonzero(counts)
    idle = sums[present].round().astype(np.int64)
    per_stream = np.bincount(present // 3, weights=idle, minlength=n_streams)[present // 3]
    ratio = np.where(per_stream > 0, idle / np.where(per_stream > 0, per_stream, 1), 0.0).round(4)
    return present, idle, ratio


def _gaps_by_category(s_codes: np.ndarray, n_streams: int, start: np.ndarray, end: np.ndarray,
                      launch: np.ndarray, has_launch: np.ndarray, delay_ns: int, hta_gaps: bool = False,
                      end_is_duration: bool = False) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """HTA's per-stream gaps before each kernel, summed per (stream, category): (present ``stream * 3 +
    category`` keys, idle ns, share of the stream's idle time).

    ``hta_gaps``: the gap is measured from the plain previous row's end, as HTA does (on a GPU stream kernels
    do not overlap); otherwise from the latest end so far on the stream and never below 0, so that rows
    overlapping on one track (engine instructions of a simulated Neuron core) count no idle time, instead of
    negative idle time that would push the other categories above 100 %. ``end_is_duration``: ``end`` holds
    the durations (the ends are made after grouping, so no unsorted copy of them exists).

    Works in place on the grouped copies (gap, end, category): a few arrays of the row count in all."""
    launched = bool(has_launch.any())
    if n_streams <= _FEW_STREAMS:
        return _gaps_per_stream(s_codes, n_streams, start, end, launch if launched else None,
                                has_launch if launched else None, delay_ns, hta_gaps, end_is_duration)
    bounds, st, cols, first = _by_stream(s_codes, n_streams, start, end, *((launch, has_launch) if launched else ()))
    en = cols[0]  # a fresh grouped copy: changed in place
    if end_is_duration:
        en += st
    if not hta_gaps:  # latest end so far, per stream (rows are grouped by stream: one C pass per stream)
        for a, b in zip(bounds[:-1].tolist(), bounds[1:].tolist()):
            np.maximum.accumulate(en[a:b], out=en[a:b])
    gap = st  # start - end of the previous kernel(s) on the stream, in the grouped starts' array
    np.subtract(st[1:], en[:-1], out=gap[1:])
    host_wait = None
    if launched:
        la, hl = cols[1], cols[2]
        host_wait = np.zeros(len(st), dtype=bool)
        np.greater(la[1:], en[:-1], out=host_wait[1:])
        host_wait &= hl
        host_wait[first] = False
        del la, hl
    del en, cols, st
    if not hta_gaps:
        np.maximum(gap, 0, out=gap)
    gap[first] = 0  # first kernel of a stream: no gap (HTA: NaN, summed as 0)
    cat = (gap >= delay_ns).view(np.int8)  # kernel_wait (1) when shorter than the delay, else other (2)
    cat += 1
    cat[first] = 2  # HTA: the first kernel's NaN gap falls through to "other"
    if host_wait is not None:
        cat[host_wait] = 0
    sums = np.zeros(3 * n_streams)
    counts = np.zeros(3 * n_streams, np.int64)
    stream_of = np.flatnonzero(np.bincount(s_codes, minlength=n_streams))
    for j, (a, b) in enumerate(zip(bounds[:-1].tolist(), bounds[1:].tolist())):  # per stream, rows in order
        k0 = 3 * int(stream_of[j])
        sums[k0:k0 + 3] = np.bincount(cat[a:b], weights=gap[a:b], minlength=3)
        counts[k0:k0 + 3] = np.bincount(cat[a:b], minlength=3)
    return _idle_shares(sums, counts, n_streams)


@register("idle_time_breakdown", columns=IDLE_SPEC, figure="idle_time_figure")
def idle_time_breakdown(instructions, host_ops: pd.DataFrame | None = None, flows: pd.DataFrame | None = None, *,
                        rank: int | None = None, tracks: pd.DataFrame | None = None, streams: list[int] | None = None,
                        consecutive_kernel_delay_ns: int = 30_000, hta_rounding: bool = False,
                        hta_compatible: bool = False) -> pd.DataFrame:
    """Why each stream sits idle between kernels (HTA ``get_idle_time_breakdown``).

    For consecutive kernels on a stream, the gap before a kernel is ``host_wait`` when the host call that
    launched it (``launch`` flow) started after the previous kernel ended, else ``kernel_wait`` when the gap
    is shorter than ``consecutive_kernel_delay_ns`` (HTA: 30 µs), else ``other``. Kineto cuda_sync rows are
    left out as in HTA; Neuron instructions count per engine track. The previous kernel's end is the latest
    end so far on the stream, so overlapping rows (engine instructions of a simulated core) add no idle time;
    with ``hta_rounding`` / ``hta_compatible`` it is the previous row's, as in HTA.

    Columns: ``rank``, ``stream`` (GPU stream id from ``tracks.tid`` when ``tracks`` is given, else the track
    id), ``idle_category`` (host_wait / kernel_wait / other), ``idle_time_ns`` (ns), ``idle_time_ratio``
    (share of the stream's idle time). Empty (same columns) without device rows (HTA raises there).

    On a Trace the tables come from the trace (streams named by its tracks table); ``hta_compatible`` takes
    HTA's kernel selection (without host ops carrying a stream: HTA's idle analysis keeps kernel, memcpy,
    memset and MTIA events only) and rounds as HTA does."""
    if _is_trace(instructions):
        t = instructions
        host_ops, flows, tracks = t.table("host_ops"), t.flows, t.tracks if tracks is None else tracks
        rank = t.rank if rank is None else rank
        instructions = t.analysis_table("instructions") if not hta_compatible else hta_kernel_selection(
            t.analysis_table("instructions"), host_ops, tracks=tracks, host_ops_with_stream=False)
        hta_rounding = hta_rounding or hta_compatible
    rank = 0 if rank is None else int(rank)
    ins = instructions
    opcode = categorical(ins, "opcode")
    names = category_names(opcode)
    keep_cat = np.isin(names, list(HTA_IDLE_KERNEL_OPCODES)) | ~np.isin(names, list(KINETO_DEVICE_OPCODES))
    keep = per_category(opcode, keep_cat, True)
    k = ins if keep.all() else ins[[c for c in ("start_ts", "duration_ns", "track") if c in ins.columns]][keep]
    start = k["start_ts"].to_numpy(np.int64)
    end = k["duration_ns"].to_numpy(np.int64)  # durations: the ends are made once the rows are grouped
    launch, has_launch = _launch_start(k, host_ops, flows)
    if hta_rounding:
        end = start + end
        start, end = -((-start) // 1000) * 1000, (end // 1000) * 1000
        launch = -((-launch) // 1000) * 1000
    s_vals, s_codes = _stream_codes(k, tracks)
    if streams:
        m = np.isin(s_vals, list(streams))[s_codes]
        s_codes, start, end, launch, has_launch = s_codes[m], start[m], end[m], launch[m], has_launch[m]
    if not len(start):
        return pd.DataFrame({"rank": pd.Series(dtype=np.int64), "stream": pd.Series(dtype=np.int64),
                             "idle_category": pd.Series(dtype=object), "idle_time_ns": pd.Series(dtype=np.int64),
                             "idle_time_ratio": pd.Series(dtype=float)})
    present, idle, ratio = _gaps_by_category(s_codes, len(s_vals), start, end, launch, has_launch,
                                             consecutive_kernel_delay_ns, hta_gaps=hta_rounding,
                                             end_is_duration=not hta_rounding)
    return pd.DataFrame({"rank": np.full(len(present), int(rank), dtype=np.int64),
                         "stream": np.asarray(s_vals)[present // 3].astype(np.int64),
                         "idle_category": np.array(IDLE_CATEGORIES, dtype=object)[present % 3],
                         "idle_time_ns": idle, "idle_time_ratio": ratio})
