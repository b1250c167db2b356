"""Why each stream sits idle between kernels: HTA 0.5.0's ``get_idle_time_breakdown`` (host_wait /
kernel_wait / other per stream), on a :class:`analysis.Trace` or on the trace tables, with the conventions of
:mod:`analysis.analyses.breakdown` (``hta_compatible`` / ``hta_rounding``; ``docs/hta_definitions.md``)."""
from __future__ import annotations

import numpy as np
import pandas as pd

from ..core.categorical import categorical, category_names, per_category
from ..core.intervals import first_rows, stable_key_order
from ..core.tables import row_positions
from ..registry import Column, is_trace, register
from . import hta
from .activity import HTA_IDLE_KERNEL_OPCODES, KINETO_DEVICE_OPCODES

__all__ = ["IDLE_COLUMNS", "IDLE_CATEGORIES", "idle_time_breakdown"]

IDLE_SPEC = (Column("rank", "count", "Rank"), Column("stream", "count", "Stream"),
             Column("idle_category", "", "Why idle", "host_wait / kernel_wait / other"),
             Column("idle_time_ns", "ns", "Idle time"),
             Column("idle_time_ratio", "", "Share of the stream's idle time"))
IDLE_CATEGORIES = ("host_wait", "kernel_wait", "other")
IDLE_COLUMNS = [c.name for c in IDLE_SPEC]


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
    """:func:`_gaps_by_category` one stream at a time (a few streams): each stream's rows taken by a mask (a
    slice when the rows are grouped by stream, as a Neuron instruction table's engine tracks are), in
    time order (a stable sort of that stream's starts when they are not), so no array spans the whole table."""
    sums = np.zeros(3 * n_streams)
    counts = np.zeros(3 * n_streams, np.int64)
    blocks = _stream_blocks(s_codes, n_streams)
    for j in range(n_streams):
        if blocks is not None:  # rows grouped by stream: the stream's rows are a slice (copied: changed in place)
            m = slice(int(blocks[j]), int(blocks[j + 1]))
            st, en = start[m].copy(), end[m].copy()
        else:
            m = s_codes == j
            st, en = start[m], end[m]
        if not len(st):
            continue
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


def _stream_blocks(s_codes: np.ndarray, n_streams: int) -> np.ndarray | None:
    """When the rows are grouped by stream code in ascending order (a Neuron instruction table: each engine
    track's rows together), the bounds of each stream's rows (``n_streams + 1`` positions); else None."""
    if len(s_codes) > 1 and not (s_codes[1:] >= s_codes[:-1]).all():
        return None
    bounds = np.zeros(n_streams + 1, np.int64)
    np.cumsum(np.bincount(s_codes, minlength=n_streams), out=bounds[1:])
    return bounds


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
    memset and MTIA events only) and rounds as HTA does, float64 reading included (``hta_rounding`` on tables
    rounds the exact ns: :func:`analysis.analyses.hta.hta_round`)."""
    if is_trace(instructions):
        t = instructions
        host_ops, flows, tracks = t.table("host_ops"), t.flows, t.tracks if tracks is None else tracks
        rank = t.rank if rank is None else rank
        instructions = hta.idle_selection(t, tracks) if hta_compatible else t.analysis_table("instructions")
        hta_rounding = hta_rounding or hta_compatible
        origin = hta.hta_origin_ns(t) if hta_compatible else None
    else:
        origin = None
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
        start, end = hta.hta_round(start, end, origin)
        launch = hta.hta_round(launch, np.zeros_like(launch), origin)[0]
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
