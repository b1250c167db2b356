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

from ..core.categorical import cat_values, categorical, category_names, per_category
from ..core.intervals import is_sorted, merge
from .activity import KERNEL_TYPES, WAIT_OPCODES, activity_frame, kernel_type_codes, union_of_kind

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
    rows, reps = _selection(instructions, host_ops, tracks=tracks, hta_rounding=hta_rounding, origin_ns=origin_ns,
                            include_last_profiler_step=include_last_profiler_step,
                            host_ops_with_stream=host_ops_with_stream)
    pos = _positions(rows, reps)
    return rows.frame if pos is None else rows.frame.take(pos)


class _Rows:
    """The rows a selection picks from: ``frame`` (the instructions, or their rows on a stream concatenated
    with host ops carrying one), ``keep`` (positions in ``frame`` of the candidate rows in order; None: all)."""

    def __init__(self, frame: pd.DataFrame, keep: np.ndarray | None) -> None:
        self.frame, self.keep = frame, keep

    def __len__(self) -> int:
        return len(self.frame) if self.keep is None else len(self.keep)

    def column(self, name: str) -> np.ndarray:
        """int64 column ``name`` of the candidate rows."""
        a = self.frame[name].to_numpy(np.int64)
        return a if self.keep is None else a[self.keep]


def _positions(rows: _Rows, reps: np.ndarray | None) -> np.ndarray | None:
    """Positions in ``rows.frame`` of the selected rows (each ``reps`` times; None: every candidate once)."""
    if reps is None:
        return rows.keep
    at = np.flatnonzero(reps) if reps.max(initial=0) <= 1 else np.repeat(np.arange(len(reps)), reps)
    return at if rows.keep is None else rows.keep[at]


def _stream_rows(instructions: pd.DataFrame, host_ops: pd.DataFrame, tracks: pd.DataFrame | None,
                 host_ops_with_stream: bool) -> _Rows:
    """The candidate rows: instructions not on a ``tid == -1`` track, then the host ops with a stream."""
    ins, keep = instructions, None
    if tracks is not None and len(tracks) and len(ins):
        bad = tracks.index.to_numpy()[tracks["tid"].to_numpy(np.int64) == -1]  # tracks of stream -1
        if len(bad):
            drop = np.isin(ins["track"].to_numpy(), bad)
            if drop.any():
                keep = np.flatnonzero(~drop)
    extra = _host_ops_with_stream(host_ops) if host_ops_with_stream else None
    if extra is None or not len(extra):  # (concatenating an empty frame would still union every Categorical)
        return _Rows(ins, keep)
    return _Rows(pd.concat([ins if keep is None else ins.take(keep), extra]), None)


def _selection(instructions: pd.DataFrame, host_ops: pd.DataFrame, *, tracks: pd.DataFrame | None,
               include_last_profiler_step: bool, hta_rounding: bool, host_ops_with_stream: bool,
               origin_ns: int | None) -> tuple[_Rows, np.ndarray | None]:
    """:func:`hta_kernel_selection` as (candidate rows, copies of each candidate row; None: one of each),
    with no copy of any column."""
    rows = _stream_rows(instructions, host_ops, tracks, host_ops_with_stream)
    names = host_ops["name"].astype(str)
    is_step = names.str.contains("ProfilerStep", regex=False).to_numpy()
    if names[is_step].nunique() < 2 or len(rows) == 0:
        return rows, None
    h_start, h_dur = host_ops["start_ts"].to_numpy(np.int64), host_ops["duration_ns"].to_numpy(np.int64)
    h_start, h_end = hta_round(h_start, h_dur, origin_ns) if hta_rounding else (h_start, h_start + h_dur)
    limit = int(h_end[is_step].max() if include_last_profiler_step else h_start[is_step].max())
    kept_host = h_start <= limit if include_last_profiler_step else h_start < limit
    i_corr = rows.column("correlation_id")
    sync = cat_values(rows.frame["name"], ["Event Sync", "Context Sync"])
    gpu_like = (i_corr >= 0) | (sync if rows.keep is None else sync[rows.keep])
    own_start = origin_ns if hta_rounding else False
    if not gpu_like.any():  # (Neuron instructions carry no correlation): the start filter alone, one byte a row
        return rows, _starts_by(rows.column("start_ts"), limit, include_last_profiler_step, own_start).view(np.int8)
    reps = np.zeros(len(rows), np.int64)
    at = np.flatnonzero(gpu_like)
    if len(at):  # host events with the device row's correlation (HTA's merge); no -1 cross product
        reps[at] = _matches(host_ops["correlation_id"].to_numpy(np.int64)[kept_host], i_corr[at])
    del i_corr
    own = np.flatnonzero(~gpu_like)
    if len(own):  # device events without a correlation: filtered by their own (rounded) start
        start = rows.column("start_ts")[own]
        reps[own] = _starts_by(start, limit, include_last_profiler_step, own_start)
    return rows, reps


def _matches(host_corr: np.ndarray, corr: np.ndarray) -> np.ndarray:
    """Per device correlation id: how many host events have it (at most 1 for a negative id)."""
    vals, cnt = np.unique(host_corr, return_counts=True)
    reps = np.zeros(len(corr), np.int64)
    if len(vals):
        at = np.minimum(np.searchsorted(vals, corr), len(vals) - 1)
        hit = vals[at] == corr
        reps[hit] = cnt[at[hit]]
    return np.where(corr < 0, np.minimum(reps, 1), reps)


def _starts_by(start: np.ndarray, limit: int, inclusive: bool, origin_ns: int | None | bool) -> np.ndarray:
    """Whether each start (ns), rounded up as HTA loads it (``origin_ns`` False: not rounded), is before
    ``limit`` (at or before it when ``inclusive``). Rounding to whole µs is monotonic, so without HTA's float64
    reading (origin None) this is one comparison with the last start that rounds below the limit: a start
    rounds up to at most the multiple of 1000 ``m`` exactly when it is at most ``m``."""
    if origin_ns is None:
        last = int(floor_us(np.int64(limit))) if inclusive else int(ceil_us(np.int64(limit))) - US_NS
        return start <= last
    if origin_ns is not False:
        start = hta_round(start, np.zeros_like(start), origin_ns)[0]
    return start <= limit if inclusive else start < limit


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


def _hta_intervals(trace) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """:func:`_hta_activity` reduced to its ``start_ts``, ``end_ts`` and ``kernel_type`` codes (the same rows in
    the same order), gathered once from the selection's row positions: no copy of the other columns, no
    activity frame."""
    origin = hta_origin_ns(trace)
    rows, reps = _selection(_activity_columns(trace.analysis_table("instructions")), trace.table("host_ops"),
                            tracks=trace.tracks, include_last_profiler_step=False, hta_rounding=True,
                            host_ops_with_stream=True, origin_ns=origin)
    f = rows.frame
    working = _working(f)  # what activity_frame keeps of the selection: no semaphore waits
    if working is not None:
        cand = working if rows.keep is None else working[rows.keep]
        if reps is None:
            reps = cand.view(np.int8)
        else:
            reps[~cand] = 0
        del cand
    pos = _positions(rows, reps)
    del reps
    kt = kernel_type_codes(f) if len(f) else np.zeros(0, np.int8)

    def take(a: np.ndarray) -> np.ndarray:
        return a if pos is None else a[pos]
    start, end = hta_round(take(f["start_ts"].to_numpy(np.int64)), take(f["duration_ns"].to_numpy(np.int64)),
                           origin)
    kt = take(kt)
    if len(start) and not is_sorted(start):
        o = np.argsort(start, kind="stable")
        start, end, kt = start[o], end[o], kt[o]
    return start, end, kt


def _working(frame: pd.DataFrame) -> np.ndarray | None:
    """Rows an activity frame keeps (:func:`analysis.analyses.activity.activity_frame`: no ``WAIT_OPCODES``),
    None when that is every row."""
    if not len(frame) or "opcode" not in frame.columns:
        return None
    op = categorical(frame, "opcode")
    wait = per_category(op, np.isin(category_names(op), list(WAIT_OPCODES)), False)
    return ~wait if wait.any() else None


def hta_unions(trace) -> dict:
    """The row count (``"rows"``) of :func:`hta_activity` and its unions (key None: all rows; each kernel type)
    as sorted disjoint (start, end) arrays, memoised without keeping the activity itself (as many rows as the
    device activity: the temporal breakdown needs only these)."""
    def compute() -> dict:
        act = trace._memo.get("hta_activity")  # already kept for an analysis of its rows: not computed again
        if act is not None:
            out: dict = {k: union_of_kind(act, k) for k in (None, *KERNEL_TYPES)}
            out["rows"] = len(act)
            return out
        # the unions need only each row's rounded interval and kernel type: sort those, not every column
        s, e, kt = _hta_intervals(trace)
        out = {None: merge(s, e, sorted_by_start=True)}
        for code, k in enumerate(KERNEL_TYPES):
            m = kt == code
            out[k] = merge(s[m], e[m], sorted_by_start=True)
        out["rows"] = len(s)
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
