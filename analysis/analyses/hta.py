"""Holistic Trace Analysis (HTA) 0.5.0 compatibility, in one place: what ``hta_compatible=True`` (on a Trace)
and ``hta_rounding=True`` (on tables) change in the breakdowns, so our numbers compare with HTA's exactly.

* **selection** (:func:`hta_kernel_selection`): the device rows HTA's ``TraceAnalysis`` keeps (no stream -1,
  host ops carrying an ``args.stream`` as pseudo kernels) and its **last-step filter** (rows of the last
  ``ProfilerStep`` dropped);
* **rounding** (:func:`hta_round`): HTA loads ``ts`` / ``dur`` in whole µs, so a start rounds up and an end
  down ("inward"); before rounding it reads them from the JSON as float64 µs, so on epoch-µs timestamps
  (~1.7e15 µs, where float64 steps are 0.25 µs) the sub-µs digits are quantised first (:func:`json_us`
  reproduces that parse from our exact ns, :func:`hta_origin_ns` the µs zero of the JSON text); written once
  here and used by the selection, the activity frame and the idle breakdown (:func:`ceil_us`,
  :func:`floor_us`: the same rounding of exact ns, for tables without a trace);
* **quantisation** (:func:`quantise`): an activity frame with its intervals rounded inward;
* the memoised per-trace activity and unions the breakdowns use in this mode (:func:`hta_activity`,
  :func:`hta_merged`) and the idle breakdown's selection (:func:`idle_selection`).

How HTA computes each number: ``docs/hta_definitions.md``.
"""
from __future__ import annotations

import json
from typing import Any

import numpy as np
import pandas as pd

from ..core.categorical import cat_values
from ..core.intervals import is_sorted
from ..core.tables import row_positions
from .activity import KERNEL_TYPES, activity_frame, union_of_kind

__all__ = ["US_NS", "MODE_LABEL", "EXACT_LABEL", "IDLE_WHY", "ceil_us", "floor_us", "json_us", "hta_origin_ns",
           "hta_round", "quantise",
           "hta_kernel_selection", "hta_activity", "hta_unions", "hta_merged", "idle_selection"]

#: HTA's time unit (the Kineto JSON's µs), in ns
US_NS = 1000

#: how a number of ``hta_compatible=True`` is labelled where it is shown (figures, explorer)
MODE_LABEL = "HTA 0.5.0-compatible: µs-rounded, float64 timestamps"
#: how a number of the default mode is labelled beside it
EXACT_LABEL = "exact ns"
#: why the two modes' idle shares differ (one sentence; docs/hta_definitions.md "What differs between the modes")
IDLE_WHY = ("HTA counts idle differently: it rounds every event inward to whole µs (an event under 1 µs "
            "vanishes, a longer one loses up to 2 µs) and counts only Kineto-style kernels, copies and syncs "
            "(no DMA transfers or collectives), so traces of short device events look mostly idle to it.")


def ceil_us(ns: np.ndarray) -> np.ndarray:
    """Times (ns) rounded up to whole µs: HTA's start of an interval."""
    return -((-ns) // US_NS) * US_NS


def floor_us(ns: np.ndarray) -> np.ndarray:
    """Times (ns) rounded down to whole µs: HTA's end of an interval."""
    return (ns // US_NS) * US_NS


def json_us(ns: np.ndarray) -> np.ndarray:
    """The float64 that Python's ``json`` (HTA's parser) reads from the Kineto text of a time whose exact value
    is ``ns`` nanoseconds (the decimal µs ``ns / 1000``): ``ns / 1000`` correctly rounded to float64, like
    ``float("1712195495519689.047")`` (= 1712195495519689.0, float64 steps being 0.25 µs there).

    Below 2**53 ns (104 days) ``ns`` is exact in float64 and one IEEE division is correctly rounded. Above, the
    whole µs ``q`` (exact in float64 below 2**53 µs) plus ``r / 1000`` (r = the ns digits) is: r / 1000 is off by
    under 2**-54 while, unless it is a tie (then r / 1000 is exact), ``q + r / 1000`` lies at least
    2**(e - 53) / 1000 from any rounding midpoint of a result >= 2**e, e >= 43 here. Beyond 2**53 µs: Python's
    exact ``int / int``."""
    ns = np.asarray(ns, dtype=np.int64)
    q, r = np.divmod(ns, US_NS)
    out = np.where(np.abs(ns) < 2 ** 53, ns.astype(np.float64) / US_NS, q.astype(np.float64) + r / float(US_NS))
    odd = np.flatnonzero(np.abs(q) >= 2 ** 53)
    if len(odd):
        out[odd] = [int(v) / US_NS for v in ns[odd].tolist()]
    return out


def hta_origin_ns(trace: Any) -> int | None:
    """The ns value our times have where the Kineto JSON's ``ts`` is 0 (its ``baseTimeNanoseconds`` when the
    importer added it, else 0), so that ``ns - origin`` is the µs text HTA parsed, times 1000; None for traces
    that are not Kineto imports (HTA never read them: :func:`hta_round` then rounds the exact ns)."""
    if not getattr(trace, "is_kineto_import", False) or trace.header is None:
        return None
    md = trace.header.metadata
    if str(md.get("time_origin", "")).startswith("kineto ts (us) + baseTimeNanoseconds"):
        try:
            return int(md["kineto.baseTimeNanoseconds"])
        except (KeyError, TypeError, ValueError):
            return None
    return 0


def hta_round(start_ns: np.ndarray, dur_ns: np.ndarray, origin_ns: int | None = None
              ) -> tuple[np.ndarray, np.ndarray]:
    """(start, end) in ns of events as HTA 0.5.0 loads them (``trace_parser.round_down_time_stamps``):
    ``ts`` and ``dur`` read as float64 µs (:func:`json_us` of ``start - origin_ns`` and of ``dur``),
    ``end = ts + dur`` in float64, then ``ts = ceil(ts)``, ``end = floor(end)``. ``origin_ns`` None: the
    inward rounding of the exact ns (:func:`ceil_us`, :func:`floor_us`), which is the same wherever float64
    holds the µs text exactly enough (the ~1e12 µs of a CUDA-clock trace, integer µs)."""
    start = np.asarray(start_ns, dtype=np.int64)
    dur = np.asarray(dur_ns, dtype=np.int64)
    if origin_ns is None:
        return ceil_us(start), floor_us(start + dur)
    ts = json_us(start - origin_ns)
    end = ts + json_us(dur)
    return (np.ceil(ts).astype(np.int64) * US_NS + origin_ns,
            np.floor(end).astype(np.int64) * US_NS + origin_ns)


def quantise(act: pd.DataFrame, *, sort: bool = False, origin_ns: int | None = None) -> pd.DataFrame:
    """An activity frame (:func:`analysis.analyses.activity.activity_frame`) with each interval rounded inward
    to whole µs as HTA loads it (start up, end down; may give zero or negative durations, like HTA;
    ``origin_ns``: with HTA's float64 reading, :func:`hta_round`); ``sort`` orders the rows by the rounded
    start (stable)."""
    s = act["start_ts"].to_numpy(np.int64)
    start, end = hta_round(s, act["end_ts"].to_numpy(np.int64) - s, origin_ns)
    out = act.assign(start_ts=start, end_ts=end)
    if sort and len(out) and not is_sorted(start):
        out = out.iloc[np.argsort(start, kind="stable")]
    return out


def _host_ops_with_stream(host_ops: pd.DataFrame) -> pd.DataFrame:
    """Host ops whose Kineto args carry an integer ``stream`` other than -1, shaped as instruction rows."""
    if "args" not in host_ops or len(host_ops) == 0:
        return host_ops.iloc[0:0][[]]
    a = host_ops["args"].astype(str)
    cand = host_ops[a.str.contains('"stream"', regex=False).to_numpy()]
    keep = []
    for r, txt in zip(cand.index, cand["args"].astype(str)):
        try:
            v = json.loads(txt).get("stream")
        except (ValueError, AttributeError):
            continue
        if type(v) is int and v != -1:
            keep.append(r)
    h = host_ops.loc[keep]
    return pd.DataFrame({"track": -1, "start_ts": h["start_ts"].to_numpy(np.int64),
                         "duration_ns": h["duration_ns"].to_numpy(np.int64), "engine": "Host",
                         "opcode": "kernel", "name": h["name"].astype(str).to_numpy(),
                         "correlation_id": h["correlation_id"].to_numpy(np.int64)},
                        index=pd.Index(-1 - np.asarray(keep, dtype=np.int64), name=host_ops.index.name))


def hta_kernel_selection(instructions: pd.DataFrame, host_ops: pd.DataFrame, *,
                         tracks: pd.DataFrame | None = None, include_last_profiler_step: bool = False,
                         hta_rounding: bool = True, host_ops_with_stream: bool = True,
                         origin_ns: int | None = None) -> pd.DataFrame:
    """The instruction rows HTA 0.5.0 ``TraceAnalysis`` analyses (for exact comparisons with HTA).

    HTA (``Trace._filter_irrelevant_gpu_kernels``), when the trace has two or more distinct
    ``ProfilerStep#N`` names, keeps only host events starting before the last ProfilerStep (or ending by its
    end with ``include_last_profiler_step``) and the device events whose correlation id matches one of them
    (one copy per matching host event, as its merge does); device events without a correlation (e.g. MTIA)
    are filtered by their own start. Rows on stream -1 (device-wide "Event Sync") are dropped: HTA's
    breakdowns only take events with a stream. Needs ``tracks`` for the stream test.

    ``host_ops_with_stream``: HTA takes *every* event with an ``args.stream`` as a GPU event, including the
    host-side ``cpu_op`` that torch.compile / Triton launchers annotate with ``stream``; such host ops are
    appended as pseudo kernel rows (opcode "kernel", index -1 - host row) so the numbers match HTA. They are
    CPU time, so our own (non-emulated) breakdowns never include them. ``origin_ns``: see :func:`hta_round`."""
    ins = instructions
    if tracks is not None and len(tracks) and len(ins):
        pos = row_positions(tracks.index, ins["track"].to_numpy())
        tid = np.where(pos >= 0, tracks["tid"].to_numpy(np.int64)[np.maximum(pos, 0)], -2)  # -2: no such track
        if (tid == -1).any():
            ins = ins[tid != -1]
    if host_ops_with_stream:
        extra = _host_ops_with_stream(host_ops)
        if len(extra):  # (concatenating an empty frame would still union every Categorical)
            ins = pd.concat([ins, extra])
    names = host_ops["name"].astype(str)
    is_step = names.str.contains("ProfilerStep", regex=False).to_numpy()
    if names[is_step].nunique() < 2 or len(ins) == 0:
        return ins

    h_start, h_dur = host_ops["start_ts"].to_numpy(np.int64), host_ops["duration_ns"].to_numpy(np.int64)
    h_start, h_end = hta_round(h_start, h_dur, origin_ns) if hta_rounding else (h_start, h_start + h_dur)
    if include_last_profiler_step:
        kept_host = h_start <= h_end[is_step].max()
    else:
        kept_host = h_start < h_start[is_step].max()
    cutoff_ok = kept_host
    corr = host_ops["correlation_id"].to_numpy(np.int64)[cutoff_ok]
    counts = pd.Series(corr).value_counts()
    i_corr = ins["correlation_id"].to_numpy(np.int64)
    gpu_like = (i_corr >= 0) | cat_values(ins["name"], ["Event Sync", "Context Sync"])
    vals, cnt = counts.index.to_numpy(np.int64), counts.to_numpy(np.int64)
    o = np.argsort(vals)
    vals, cnt = vals[o], cnt[o]
    reps = np.zeros(len(i_corr), np.int64)  # host events with the device row's correlation (HTA's merge)
    if len(vals):
        at = np.minimum(np.searchsorted(vals, i_corr), len(vals) - 1)
        hit = vals[at] == i_corr
        reps[hit] = cnt[at[hit]]
    reps = np.where(gpu_like & (i_corr < 0), np.minimum(reps, 1), reps)  # no -1 cross product
    i_start = ins["start_ts"].to_numpy(np.int64)
    i_start = hta_round(i_start, np.zeros_like(i_start), origin_ns)[0] if hta_rounding else i_start
    limit = h_end[is_step].max() if include_last_profiler_step else h_start[is_step].max()
    own = (i_start <= limit) if include_last_profiler_step else (i_start < limit)
    reps = np.where(gpu_like, reps, own.astype(np.int64))
    if reps.max(initial=0) <= 1:
        return ins[reps.astype(bool)]
    return ins.iloc[np.repeat(np.arange(len(ins)), reps)]


#: the instruction columns the HTA selection and an activity frame read (the others are not copied by the selection)
_ACTIVITY_COLUMNS = ("track", "start_ts", "duration_ns", "name", "opcode", "engine", "framework_op", "correlation_id")


def _activity_columns(ins: pd.DataFrame) -> pd.DataFrame:
    return ins[[c for c in _ACTIVITY_COLUMNS if c in ins.columns]]


def hta_activity(trace) -> pd.DataFrame:
    """The activity HTA 0.5.0 analyses on a trace, memoised: :func:`hta_kernel_selection` of its instructions,
    quantised (with HTA's float64 reading, :func:`hta_origin_ns`) and sorted by start; no DMA or collectives
    tables (HTA knows only Kineto events)."""
    return trace.memo("hta_activity", lambda: _hta_activity(trace))


def _hta_activity(trace) -> pd.DataFrame:
    origin = hta_origin_ns(trace)
    sel = hta_kernel_selection(_activity_columns(trace.analysis_table("instructions")), trace.table("host_ops"),
                               tracks=trace.tracks, origin_ns=origin)
    return quantise(activity_frame(sel), sort=True, origin_ns=origin)


def _hta_intervals(trace) -> pd.DataFrame:
    """:func:`_hta_activity` reduced to ``start_ts``, ``end_ts`` and ``kernel_type`` (the same rows and order)."""
    origin = hta_origin_ns(trace)
    sel = hta_kernel_selection(_activity_columns(trace.analysis_table("instructions")), trace.table("host_ops"),
                               tracks=trace.tracks, origin_ns=origin)
    return quantise(activity_frame(sel)[["start_ts", "end_ts", "kernel_type"]], sort=True, origin_ns=origin)


def hta_unions(trace) -> dict:
    """The row count (``"rows"``) of :func:`hta_activity` and its unions (key None: all rows; each kernel type)
    as sorted disjoint (start, end) arrays, memoised without keeping the activity itself (as many rows as the
    device activity: the temporal breakdown needs only these)."""
    def compute() -> dict:
        act = trace._memo.get("hta_activity")  # already kept for an analysis of its rows: not computed again
        # the unions need only each row's rounded interval and kernel type: sort those, not every column
        act = _hta_intervals(trace) if act is None else act
        out: dict = {k: union_of_kind(act, k) for k in (None, *KERNEL_TYPES)}
        out["rows"] = len(act)
        return out
    return trace.memo("hta_unions", compute)


def hta_merged(trace, kernel_type: str | None = None) -> tuple[np.ndarray, np.ndarray]:
    """The union of :func:`hta_activity` (of one kernel type, or all) as sorted disjoint (start, end) arrays,
    memoised (:func:`hta_unions`)."""
    u = hta_unions(trace)
    if kernel_type in u:
        return u[kernel_type]
    return trace.memo(("hta_merged", kernel_type), lambda: union_of_kind(hta_activity(trace), kernel_type))


def idle_selection(trace, tracks: pd.DataFrame | None = None) -> pd.DataFrame:
    """The instructions HTA's idle-time breakdown takes: :func:`hta_kernel_selection` without host ops carrying a
    stream (its idle analysis keeps kernel, memcpy, memset and MTIA events only)."""
    return hta_kernel_selection(trace.analysis_table("instructions"), trace.table("host_ops"),
                                tracks=trace.tracks if tracks is None else tracks, host_ops_with_stream=False,
                                origin_ns=hta_origin_ns(trace))
