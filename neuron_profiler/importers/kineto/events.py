"""First pass over Kineto ``traceEvents``: validate, split by phase, and build column arrays.

Times: Kineto writes ``ts``/``dur`` in microseconds with 3 decimals (ns resolution) whatever
``displayTimeUnit`` says (``output_json.cpp`` ``fmtTs``; the Chrome trace format defines ``ts`` in µs);
they become int64 ns here, exactly for integer and 3-decimal values below 2**53 µs.
"""
from __future__ import annotations

import operator
from collections import Counter
from collections.abc import Sequence
from dataclasses import dataclass, field
from typing import Any

import msgspec
import numpy as np
import pandas as pd

from neuron_profiler.importers.kineto.decode import Event
from neuron_profiler.importers.kineto.exact import LIMIT_US, needs_exact

_NUM = (int, float)
MAX_US = 4e15  # ts + dur must fit int64 ns (with room for baseTimeNanoseconds): about year 2096
MAX_NS = MAX_US * 1000  # the same bound for ts already converted to ns (``exact``)

#: Kineto categories of device-side work -> our instruction ``engine``
DEVICE_CATEGORIES: dict[str, str] = {
    "kernel": "Kernel", "Kernel": "Kernel",
    "gpu_memcpy": "Memcpy", "Memcpy": "Memcpy",
    "gpu_memset": "Memset", "Memset": "Memset",
    "mtia_ccp_events": "Kernel",
    "cuda_sync": "Sync", "xpu_sync": "Sync",
}
#: device-side annotations: imported as host_ops on the stream track (never counted as kernel time)
DEVICE_ANNOTATION_CATEGORIES = frozenset({"gpu_user_annotation"})
#: host-side API calls that launch device work (sources of "launch" flows)
RUNTIME_CATEGORIES = frozenset({
    "cuda_runtime", "cuda_driver", "Runtime", "Driver", "mtia_runtime", "xpu_runtime", "xpu_driver",
    "privateuse1_runtime", "privateuse1_driver", "glow_runtime", "hpu_op",
})
#: framework operators (targets of ``framework_op``)
OPERATOR_CATEGORIES = frozenset({"cpu_op", "Operator", "user_annotation", "python_function"})
#: every ``cat`` this importer knows; other categories are imported as host ops and reported
KNOWN_CATEGORIES = frozenset(DEVICE_CATEGORIES) | DEVICE_ANNOTATION_CATEGORIES | RUNTIME_CATEGORIES | \
    OPERATOR_CATEGORIES | frozenset({
        "Trace", "overhead", "external_correlation", "cuda_event", "mtia_insight", "collective_comm",
        "cuda_profiler_range", "cpu_instant_event", "python_function", "fwdbwd", "ac2g",
        "async_cpu_to_gpu", "async", "mtia_counters", "hardware_counters", "xpu_scope_profiler",
        "mtia_ccp_events",
    })
FLOW_CATEGORIES = frozenset({"ac2g", "async_cpu_to_gpu", "async", "fwdbwd"})


#: complete-event columns (cat, name, pid, tid, ts, dur, args) as the per-event path builds them
_XLists = tuple[list[Any], list[Any], list[Any], list[Any], list[Any], list[Any], list[Any]]
#: the same columns as ``SplitEvents.x_cols`` holds them: ts / dur may be float64 arrays (the fast path)
XColumns = tuple[list[Any], list[Any], list[Any], list[Any], list[Any] | np.ndarray, list[Any] | np.ndarray,
                 list[Any]]


@dataclass
class SplitEvents:
    """Events of one trace grouped by phase; ``skipped`` counts dropped events by reason.

    Complete events are kept as parallel columns (``x_cols``: cat, name, pid, tid, ts, dur, args; lists,
    ts / dur possibly float64 arrays) built in the same pass, so no second loop over the events is needed."""

    x_cols: XColumns = field(default_factory=lambda: ([], [], [], [], [], [], []))
    flows: list[Event] = field(default_factory=list)    # s / f / t
    meta: list[Event] = field(default_factory=list)     # M
    instants: list[Event] = field(default_factory=list)  # i / I
    counters: list[Event] = field(default_factory=list)  # C
    skipped: Counter = field(default_factory=Counter)
    #: some float ts is too large for float64 to hold its ns (``exact.LIMIT_US``): re-read from the text
    big_float_ts: bool = False
    #: ``big_float_ts`` was decided over every event, as ``exact.needs_exact`` does (the fast path, when the
    #: caller did not check the ts already); else only over the events read (the per-event path)
    ts_checked: bool = False

    @property
    def n_x(self) -> int:
        """Number of readable complete events."""
        return len(self.x_cols[0])


_GET_PH = operator.attrgetter("ph")
_GET_TS = operator.attrgetter("ts")
#: position of each field in ``msgspec.structs.astuple`` of an ``Event``
_FIELD_AT = {f: i for i, f in enumerate(Event.__struct_fields__)}


def fields(events: list[Event], *names: str) -> list[list[Any]]:
    """The fields ``names`` of ``Event`` structs, a list each, from one C-level pass over the structs: each
    struct's fields as a tuple appended to one flat list (``list.extend`` of a tuple copies it; the tuple is
    freed at once), every field a strided slice of it. 25 % fewer instructions than a pass per field from 4
    fields on; a transpose by ``zip(*tuples)`` cost as much again in its per-row iterators and in the garbage
    collections its n live tuples set off."""
    if not events:
        return [[] for _ in names]
    flat: list[Any] = []
    list(map(flat.extend, map(msgspec.structs.astuple, events)))
    width = len(type(events[0]).__struct_fields__)
    if len(flat) != width * len(events):  # ``Event`` and ``ExportEvent`` structs mixed (each has >= 9 fields)
        cols = list(zip(*map(msgspec.structs.astuple, events)))
        return [list(cols[_FIELD_AT[n]]) for n in names]
    return [flat[_FIELD_AT[n]::width] for n in names]


def _fast_x(xs: list[Event], ns: bool = False) -> tuple[XColumns, bool] | None:
    """(columns, some float ts >= ``LIMIT_US``) of well-formed complete events in C-speed passes, or None when
    any event needs the per-event checks (a missing key, a non-numeric / negative / out-of-range / NaN ts or
    dur). ``ns``: the events' ``ts`` are int ns (``exact``), not microseconds."""
    cat, name, pid, tid, ts, dur, args = fields(xs, "cat", "name", "pid", "tid", "ts", "dur", "args")
    ts_types, dur_types = set(map(type, ts)), set(map(type, dur))
    if not (ts_types <= _NUMBERS and dur_types <= _NUMBERS):
        return None
    t_arr = usable_ts_array(ts, ns, ints=ts_types == _INT)
    d_arr = usable_ts_array(dur, limit=MAX_US, ints=dur_types == _INT)
    if t_arr is None or d_arr is None:
        return None
    # some float ts at or above LIMIT_US (``exact``): from the arrays at hand, per value only when ints and
    # floats mix
    big = not ns and float in ts_types and len(t_arr) > 0 and bool(t_arr.max() >= LIMIT_US) and \
        (ts_types == {float} or needs_exact(xs))
    # the arrays convert to ns exactly as the lists would (every value is below 2**53 us), except
    # ``ns`` ts (int ns up to MAX_NS): those stay ints
    return (cat, name, pid, tid, ts if ns else t_arr, d_arr, args), big


#: the type sets of numeric ts / dur, and of ints only (read as int64)
_NUMBERS, _INT = frozenset({int, float}), frozenset({int})

#: phase -> code of its group (``_GROUPS``): the fast path of ``split_events`` sorts the events by it
_PH_CODE = {"X": 0, "s": 1, "f": 1, "t": 1, "M": 2, "i": 3, "I": 3, "C": 4}
_GROUPS = (None, "flows", "meta", "instants", "counters")


def split_events(events: list[Any], ns: bool = False, float_ts_checked: bool = False) -> SplitEvents:
    """Group events by ``ph`` and drop those that cannot be read (counted in ``skipped`` by reason).

    Fast path: one pass reads every ``ph`` and one its group code, a stable sort of the codes gathers each
    group in file order in one more pass (none when the slice holds one group); any oddity (an event that is
    not an object, an unknown or unhashable ``ph``, a complete event needing checks) takes the per-event path,
    which gives the same result. ``float_ts_checked``: the caller knows no ``ts`` needs ``exact``
    (``big_float_ts`` stays False without a second scan)."""
    try:
        codes = np.fromiter(map(_PH_CODE.__getitem__, map(_GET_PH, events)), dtype=np.int8, count=len(events))
    except (AttributeError, TypeError, KeyError):  # not an object, an unhashable or unknown ph
        return _split_slow(events, ns)
    out = SplitEvents()
    counts = np.bincount(codes, minlength=len(_GROUPS)).tolist()
    if max(counts, default=0) == len(events):  # one group (or no event): no gather
        groups = [events if c else [] for c in counts]
        others = [] if counts[0] else events
    else:  # X first (code 0), then the other groups, each in file order
        ordered = list(map(events.__getitem__, np.argsort(codes, kind="stable").tolist()))
        bounds = np.cumsum([0, *counts]).tolist()
        groups = [ordered[a:b] for a, b in zip(bounds, bounds[1:])]
        others = ordered[counts[0]:]
    for attr, group in zip(_GROUPS[1:], groups[1:]):
        setattr(out, attr, group)
    if counts[0]:
        got = _fast_x(groups[0], ns)
        if got is None:
            return _split_slow(events, ns)
        out.x_cols, out.big_float_ts = got
    if not (ns or float_ts_checked or out.big_float_ts):  # the complete events are checked: the others
        out.big_float_ts = _big_float_ts(others)
    out.ts_checked = not (ns or float_ts_checked)
    return out


def _big_float_ts(events: list[Event]) -> bool:
    """Some event's ``ts`` is a float too large for float64 to keep its ns (``exact``). Usually one C-speed
    pass (the largest ts is below the limit); integer epoch microseconds need a second (no float: exact)."""
    try:
        if max(map(_GET_TS, events), default=0) < LIMIT_US:
            return False
        return float in set(map(type, map(_GET_TS, events))) and needs_exact(events)
    except (TypeError, AttributeError):  # a ts that is not a number, an event that is not an object
        return needs_exact(events)


def _split_slow(events: list[Any], ns: bool = False) -> SplitEvents:
    """The per-event path of ``split_events`` (validates every complete event)."""
    out = SplitEvents()
    max_ts = MAX_NS if ns else MAX_US
    lists: _XLists = ([], [], [], [], [], [], [])
    out.x_cols = lists
    c_cat, c_name, c_pid, c_tid, c_ts, c_dur, c_args = (lst.append for lst in lists)
    skipped = out.skipped
    flows_append = out.flows.append
    ts: Any  # JSON values, checked with ``type(...) in _NUM`` (a test mypy does not narrow on)
    dur: Any
    for e in events:
        if not isinstance(e, Event):  # also an ``ExportEvent``
            skipped["event is not a JSON object"] += 1
            continue
        ph = e.ph
        if ph == "X":
            ts, dur = e.ts, e.dur
            if type(ts) not in _NUM:
                skipped["missing or non-numeric ts"] += 1
            elif type(dur) not in _NUM:
                skipped["missing or non-numeric dur"] += 1
            elif dur < 0:
                skipped["negative dur"] += 1
            elif ts < 0:
                skipped["negative ts"] += 1
            elif not (ts <= max_ts and dur <= MAX_US):  # also NaN (stdlib json accepts NaN/Infinity)
                skipped["ts or dur out of range"] += 1
            else:
                if not ns and type(ts) is float and ts >= LIMIT_US:
                    out.big_float_ts = True
                c_cat(e.cat)
                c_name(e.name)
                c_pid(e.pid)
                c_tid(e.tid)
                c_ts(ts)
                c_dur(dur)
                c_args(e.args)
        elif ph == "s" or ph == "f" or ph == "t":
            flows_append(e)
            if not ns and type(e.ts) is float and e.ts >= LIMIT_US:
                out.big_float_ts = True
        elif ph == "M":
            out.meta.append(e)
        elif ph == "i" or ph == "I" or ph == "C":
            (out.instants if ph != "C" else out.counters).append(e)
            if not ns and type(e.ts) is float and e.ts >= LIMIT_US:
                out.big_float_ts = True
        else:
            skipped[f"unsupported ph {ph!r}"] += 1
    return out


def as_array(values: Sequence[Any] | np.ndarray, dtype: Any) -> np.ndarray:
    """``np.asarray(values, dtype)`` of numbers; a list goes through ``np.fromiter``: the same values and errors
    (OverflowError) without numpy's shape discovery, 2-5x faster on int lists (a None, NaN for asarray, is a
    TypeError here: callers pass checked types)."""
    if isinstance(values, list):
        return np.fromiter(values, dtype=dtype, count=len(values))
    return np.asarray(values, dtype=dtype)


def usable_ts_array(ts: Sequence[Any] | np.ndarray, ns: bool = False, limit: float | None = None,
                    ints: bool = False) -> np.ndarray | None:
    """``ts`` (numbers) as float64 when every value is usable (``ok_ts``; ``limit``: another upper bound,
    e.g. for durations), else None: the caller takes the per-event path, which skips the bad ones. ``ints``:
    the caller knows every value is an int: they are read as int64 (the same ns, in half the time)."""
    try:
        t = as_array(ts, np.int64 if ints else np.float64)
    except OverflowError:  # an integer beyond int64 / float range
        return None
    hi = (MAX_NS if ns else MAX_US) if limit is None else limit
    return t if ((t >= 0) & (t <= hi)).all() else None  # NaN fails both comparisons


def ok_ts(v: Any, ns: bool = False) -> bool:
    """True for a usable timestamp: a finite int/float in [0, MAX_US] microseconds (``ns``: [0, MAX_NS] ns)."""
    return type(v) in _NUM and 0 <= v <= (MAX_NS if ns else MAX_US)


def ts_to_ns(values: Sequence[Any] | np.ndarray, ns: bool = False) -> np.ndarray:
    """``us_to_ns(values)``, or (``ns``: already exact ns ints, ``exact``) the values as int64."""
    if ns:
        return as_array(values, np.int64)
    return us_to_ns(values)


def us_to_ns(values: Sequence[Any] | np.ndarray) -> np.ndarray:
    """Microsecond numbers (int or float) -> int64 ns, splitting integer and fraction to keep ns exact."""
    arr = np.asarray(values)
    if arr.dtype.kind in "iu":
        return arr.astype(np.int64) * 1000
    arr = arr.astype(np.float64)
    ip = np.floor(arr)
    return ip.astype(np.int64) * 1000 + np.rint((arr - ip) * 1000.0).astype(np.int64)


def int_column(values: list[Any], default: int = -1) -> np.ndarray:
    """Values that should be ints -> int64 array; None, wrong types, non-numeric strings and magnitudes of
    2**62 or more -> ``default`` (floats are truncated, numeric strings parsed)."""
    types = set(map(type, values))
    if types <= _INT_OR_NONE:
        try:
            # ``types`` tells whether a None is present: ``None in values`` would compare every int with None
            arr = as_array(values if type(None) not in types else [default if v is None else v for v in values],
                           np.int64)
        except OverflowError:
            pass
        else:
            if len(arr) and not -2**62 < arr.min() <= arr.max() < 2**62:  # rare: find them
                arr[(arr <= -2**62) | (arr >= 2**62)] = default
            return arr
    out = np.full(len(values), default, dtype=np.int64)
    for i, v in enumerate(values):
        t = type(v)
        if t is int:
            if -2**62 < v < 2**62:
                out[i] = v
        elif t is float and v == v and abs(v) < 2**62:
            out[i] = int(v)
        elif t is str:
            out[i] = _int_of_text(v, default)
    return out


def _int_of_text(v: str, default: int) -> int:
    """A numeric string's int when its magnitude is below 2**62 (as for ints), else ``default``."""
    try:
        x = int(v)  # ValueError: not an integer text (also one of more than 4300 digits)
    except ValueError:
        return default
    return x if -2**62 < x < 2**62 else default


_INT_OR_NONE = frozenset({int, type(None)})


def id_column(values: list[Any]) -> np.ndarray:
    """pid / tid values -> object array of int or str (anything else, e.g. a list, becomes its repr)."""
    if not set(map(type, values)) <= {int, str}:
        values = [v if type(v) is int or type(v) is str else repr(v) for v in values]
    arr = np.empty(len(values), dtype=object)
    arr[:] = values
    return arr


def _int_keys(values: np.ndarray) -> np.ndarray:
    """Object ids -> int64 keys with the same equality pattern, when they are ints plus at most a few distinct
    strings (Kineto names a span thread "PyTorch Profiler"): the strings get distinct keys below the
    smallest int. Any other input is returned as is."""
    types = np.fromiter(map(type, values), dtype=object, count=len(values))
    is_int = types == int  # noqa: E721 - element-wise over an object array
    try:
        if is_int.all():
            return values.astype(np.int64)
        is_str = types == str  # noqa: E721
        strs = values[is_str].tolist()
        uniq = dict.fromkeys(strs)
        if not (is_int | is_str).all() or len(uniq) > 64:
            return values
        ints = values[is_int].astype(np.int64)
    except OverflowError:
        return values
    low = int(ints.min()) if len(ints) else 0
    if low < -(2**62):
        return values
    out = np.empty(len(values), dtype=np.int64)
    out[is_int] = ints
    lookup = {v: low - 1 - k for k, v in enumerate(uniq)}
    out[is_str] = [lookup[v] for v in strs]
    return out


#: up to this many values, ``factorize`` uses a dict pass (5 us for 10 values, pandas 12-14 us; even at 100,
#: beyond which pandas' hash table wins)
_DICT_FACTORIZE_MAX = 64


def factorize(values: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """(int64 codes, uniques) in order of first appearance, as ``pd.factorize`` gives them (missing values,
    None or NaN, get code -1 there): the importer's one factorization, by a dict pass (small arrays) or by
    pandas."""
    n = len(values)
    if n <= _DICT_FACTORIZE_MAX and values.dtype.kind in "iuO":
        vals = values.tolist()
        if values.dtype.kind != "O" or set(map(type, vals)) <= _INT_OR_STR:
            uniq = list(dict.fromkeys(vals))
            lookup = dict(zip(uniq, range(len(uniq))))
            codes = np.fromiter(map(lookup.__getitem__, vals), dtype=np.int64, count=n)
            out = np.empty(len(uniq), dtype=values.dtype)
            out[:] = uniq
            return codes, out
    codes, uniq = pd.factorize(values)
    return codes.astype(np.int64, copy=False), np.asarray(uniq, dtype=values.dtype if values.dtype.kind in "iu"
                                                          else object)


_INT_OR_STR = frozenset({int, str})


def key_codes(*columns: np.ndarray) -> list[np.ndarray]:
    """Factorize several id columns (object, or int64 when all are ints) with one shared code book, so equal
    values get equal codes; codes in order of first appearance."""
    lens = [len(c) for c in columns]
    if columns and all(c.dtype == np.int64 for c in columns):
        codes, _ = factorize(np.concatenate(columns))
    else:
        allv = np.concatenate([np.asarray(c, dtype=object) for c in columns]) if columns else np.zeros(0, object)
        allv = _int_keys(allv)
        try:
            codes, _ = factorize(allv)
        except TypeError:  # unhashable junk (lists...): repr makes it hashable
            keyed = np.asarray([v if type(v) in (int, str) else repr(v) for v in allv] + [None], dtype=object)[:-1]
            codes, _ = factorize(keyed)
    out, pos = [], 0
    for n in lens:
        out.append(codes[pos:pos + n].astype(np.int64))
        pos += n
    return out
