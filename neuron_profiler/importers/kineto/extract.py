"""Batch-by-batch extraction of Kineto events into flat columns, so that the events of one batch can be freed
once extracted (peak memory) and every per-event Python step runs once.

``EventColumns.add(events)`` takes any batch of decoded ``traceEvents`` (``decode.Event`` structs, in file
order); ``finish()`` returns the columns of all complete events plus what the other phases yield (flows,
metadata, memory and counter samples). Each per-event value goes through the same conversion as a whole-trace
pass would (the helpers of ``events`` work element by element), so the result does not depend on how the
events were batched.
"""
from __future__ import annotations

from collections import Counter
from itertools import compress, count, islice, repeat
from operator import is_, is_not
from typing import Any

import msgspec
import numpy as np

from neuron_profiler.importers.kineto import counters as kc
from neuron_profiler.importers.kineto.args import CLASS_OF_CAT, EMPTY_ARGS, HOST, INT_ARGS, JSON_ARGS, args_columns
from neuron_profiler.importers.kineto.decode import Chunked, Event
from neuron_profiler.importers.kineto.events import (
    FLOW_CATEGORIES,
    SplitEvents,
    as_array,
    fields,
    id_column,
    int_column,
    ok_ts,
    split_events,
    ts_to_ns,
    us_to_ns,
    usable_ts_array,
)
from neuron_profiler.importers.kineto.exact import apply_exact, needs_exact


def _str_list(values: list[Any], memo: dict[str, str]) -> list[str]:
    """Values that should be strings (None -> "", others str()), equal strings shared through ``memo``."""
    n = len(memo)
    try:  # one pass; the memo's new keys (the last ones, in insertion order) tell whether all were strings
        out = list(map(memo.setdefault, values, values))
        if all(type(k) is str for k in islice(reversed(memo), len(memo) - n)):
            return out
    except TypeError:  # an unhashable value
        pass
    for k in [k for k in islice(reversed(memo), len(memo) - n) if type(k) is not str]:
        del memo[k]
    values = [v if type(v) is str else ("" if v is None else str(v)) for v in values]
    return list(map(memo.setdefault, values, values))


def _fast_flows(flows: list[Event], ns: bool = False) -> tuple[Any, ...] | None:
    """Columns (ph codes, cat codes, id, pid, tid, ts: an array of microseconds, int64 when all are ints, or
    the int ns as read when ``ns``) of flow halves when all are readable, else None (checked one by one by the
    caller: a missing key, an unknown category, a null id, an unusable ts). The categories' codes are read by
    one dict look-up per half, which also checks them."""
    if not flows:
        return None
    ph, cat, fid, pid, tid, ts = fields(flows, "ph", "cat", "id", "pid", "tid", "ts")
    try:
        cat_codes = np.fromiter(map(_CAT_CODE.__getitem__, cat), dtype=np.int8, count=len(cat))
    except (KeyError, TypeError):  # an unknown or unhashable cat
        return None
    ts_types = set(map(type, ts))
    if type(None) in set(map(type, fid)) or not ts_types <= {int, float}:
        return None
    t_arr = usable_ts_array(ts, ns, ints=ts_types == {int})
    if t_arr is None:
        return None
    return _flow_codes(ph, _FLOW_PHASES), cat_codes, fid, pid, tid, ts if ns else t_arr


_KEY_LIMIT = 2**62
#: a python frame's "Python id" / "Python parent id" that is no link: not an int64 (absent, null, a string, a
#: float, a bool, an int beyond int64)
NO_FRAME_ID = -(2**63)


def frame_ids(cat: list[str], args: list[Any], py: str | None, first: int) -> np.ndarray:
    """(row, Python id, Python parent id) int64 triples of the python_function rows among ``cat`` (``py``: that
    category's shared string; rows numbered from ``first``)."""
    is_py = [] if py is None else list(map(is_, cat, repeat(py)))
    frames = list(compress(args, is_py))
    out = np.empty((len(frames), 3), dtype=np.int64)
    if frames:
        out[:, 0] = np.fromiter(compress(count(first), is_py), dtype=np.int64, count=len(frames))
        out[:, 1] = _frame_ids(list(map(dict.get, frames, repeat("Python id"))))
        out[:, 2] = _frame_ids(list(map(dict.get, frames, repeat("Python parent id"))))
    return out


def _frame_ids(values: list[Any]) -> np.ndarray:
    """Frame ids as int64: ``NO_FRAME_ID`` for a value that is no int64 other than ``NO_FRAME_ID`` itself.
    Ints and None (a root frame's "Python parent id") go through numpy, the Nones set afterwards."""
    types = set(map(type, values))
    if types <= _INT_NONE:
        nulls = list(compress(count(), map(is_, values, repeat(None)))) if type(None) in types else []
        try:
            arr = _int64_zeroed(values, nulls)
        except OverflowError:
            pass
        else:
            arr[nulls] = NO_FRAME_ID  # NO_FRAME_ID itself stays NO_FRAME_ID
            return arr
    return np.fromiter(map(_frame_id, values), dtype=np.int64, count=len(values))


_INT_NONE = frozenset({int, type(None)})


def _frame_id(v: Any) -> int:
    return v if type(v) is int and NO_FRAME_ID < v < 2**63 else NO_FRAME_ID


class IdKeys:
    """Int64 keys for pid / tid values, equal exactly when their ``id_column`` values are equal: in-range
    ints are their own key, any other value gets a key below -2**62 from a shared dict."""

    def __init__(self) -> None:
        self.other: dict[Any, int] = {}

    def keys(self, values: list[Any]) -> np.ndarray:
        """Keys of ``values`` (as read from the events). Ints go through numpy; only the others (Kineto's
        one "Spans" event has string ids, so nearly every slice has a few) are looked up one by one."""
        odd = [] if set(map(type, values)) <= {int} else \
            list(compress(count(), map(is_not, map(type, values), repeat(int))))
        try:
            arr = _int64_zeroed(values, odd)
            if len(arr) and not -_KEY_LIMIT < arr.min() <= arr.max() < _KEY_LIMIT:  # rare: find them
                odd = sorted({*odd, *np.flatnonzero((arr <= -_KEY_LIMIT) | (arr >= _KEY_LIMIT)).tolist()})
        except OverflowError:  # an int beyond int64: every out-of-range value is looked up
            odd = [i for i, v in enumerate(values) if not (type(v) is int and -_KEY_LIMIT < v < _KEY_LIMIT)]
            arr = _int64_zeroed(values, odd)
        other = self.other
        for i in odd:
            v = values[i]
            obj = v if type(v) is int or type(v) is str else repr(v)
            k = other.get(obj)
            if k is None:
                k = other[obj] = -(2**63) + len(other)
            arr[i] = k
        return arr


def _int64_zeroed(values: list[Any], zero: list[int]) -> np.ndarray:
    """``values`` as int64 with the positions ``zero`` set to 0 (OverflowError: an int beyond int64)."""
    if zero:
        values = list(values)
        for i in zero:
            values[i] = 0
    return as_array(values, np.int64)


class IdColumn:
    """The pid or tid of each complete event as read; indexing (a row or an array of rows) gives them with
    ``id_column`` semantics (int or str objects), so only the rows that need objects are converted."""

    def __init__(self, raw: list[Any]) -> None:
        self.raw = raw

    def __len__(self) -> int:
        return len(self.raw)

    def __getitem__(self, rows: Any) -> Any:
        if isinstance(rows, (int, np.integer)):
            return id_column([self.raw[int(rows)]])[0]
        return id_column([self.raw[i] for i in np.asarray(rows).tolist()])


FLOW_PHASES = ("s", "f", "t")  # flows["ph"] codes index these
FLOW_CATS = tuple(sorted(FLOW_CATEGORIES))  # flows["cat"] codes index these
_FLOW_PHASES, _FLOW_CATS = FLOW_PHASES, FLOW_CATS


_CAT_CODE = {c: i for i, c in enumerate(_FLOW_CATS)}


def _flow_codes(values: list[str], categories: tuple[str, ...]) -> np.ndarray:
    """Codes of values known to be among ``categories`` (flow phases and categories)."""
    index = {c: i for i, c in enumerate(categories)}
    return np.fromiter(map(index.__getitem__, values), dtype=np.int8, count=len(values))


class EventColumns:
    """Accumulates the columns of a trace's events chunk by chunk (see module doc)."""

    def __init__(self) -> None:
        self.n_events = 0
        self.n_instants = self.n_counters = 0
        self.skipped: Counter = Counter()          # unreadable events, by reason
        self.skipped_memory: Counter = Counter()   # unreadable [memory] instants
        self.skipped_counters: Counter = Counter()  # unreadable ph:"C" events
        self._memo: dict[str, str] = {}       # cat / name strings
        self._ids = IdKeys()
        self._x: dict[str, list[Any]] = {k: [] for k in (
            "cat", "name", "pid", "tid", "pid_key", "tid_key", "ts", "dur", "cls", *INT_ARGS, *JSON_ARGS,
            "args")}
        self.coll_args: dict[int, dict[str, Any]] = {}         # X row -> args with "Collective name"
        self._frames: list[np.ndarray] = []  # ``frame_ids`` triples of python_function rows
        self._flows: dict[str, list[Any]] = {k: [] for k in ("ph", "cat", "id", "pid", "tid", "ts")}  # arrays
        self.bad_flows = 0
        self.inexact_ts = 0  # events whose ts kept float64 precision (text not available or not aligned)
        self.meta: list[dict[str, Any]] = []
        self._mem: list[tuple[np.ndarray, ...]] = []
        self.ctr: list[tuple[Any, str, int, float]] = []

    @property
    def n_x(self) -> int:
        """Readable complete events so far."""
        return sum(map(len, self._x["ts"]))

    def add(self, events: list[Any], text: bytes | None = None, span: tuple[int, int] | None = None,
            ns: bool = False, float_ts_checked: bool = False) -> None:
        """Extract one slice of ``traceEvents`` (the caller may free it afterwards). ``text[span[0]:span[1]]``:
        the JSON text the slice was parsed from, for timestamps exact to the ns (``exact``; without it, or
        when it does not align, float64 precision is kept and counted in ``inexact_ts``). ``ns``: the caller
        already made the events' ``ts`` exact int ns (``exact.apply_exact``); ``float_ts_checked``: the caller
        found no ``ts`` that needs it (``exact.needs_exact``)."""
        split = split_events(events, ns, float_ts_checked)
        if split.big_float_ts:
            if text is not None and apply_exact(events, text, *(span or (0, len(text)))):
                ns = True
                split = split_events(events, ns)
            else:
                self.inexact_ts += len(events)
        self._add_split(len(events), split, ns)

    def add_chunk(self, events: list[Any], text: bytes, exact: bool | None) -> bool | None:
        """Extract one chunk of a text read a chunk at a time (``extract_chunked``; ``text``: the chunk's JSON
        text) under the trace's timestamp decision ``exact`` (None: the first chunk, which makes it, as
        ``exact.needs_exact`` decides). Returns the decision, or None when it cannot be kept: a later chunk
        first needs the text, or the chunk's texts do not align (``exact.apply_exact``)."""
        if not exact:
            split = split_events(events)  # its fast path decides over every event, as ``needs_exact`` would
            if not (split.big_float_ts if split.ts_checked else needs_exact(events)):
                self._add_split(len(events), split, False)
                return False
            if exact is not None:
                return None
        if not apply_exact(events, text):
            return None
        self.add(events, ns=True)
        return True

    def _add_split(self, n_events: int, split: SplitEvents, ns: bool) -> None:
        """The columns of a slice of ``n_events`` events as ``split_events`` grouped them."""
        self.n_events += n_events
        self.skipped.update(split.skipped)
        self._add_other(split.meta, split.instants, split.counters, split.flows, ns)
        if split.n_x:
            self._add_x(*split.x_cols, ns=ns)

    def _add_other(self, meta: list[Any], instants: list[Any], counters: list[Any], flows: list[Any],
                   ns: bool) -> None:
        """The events of a slice that are not complete events."""
        self.meta.extend(meta)
        self.n_instants += len(instants)
        self.n_counters += len(counters)
        if instants:
            self._mem.append(kc.memory_samples(instants, self.skipped_memory, ns))
        if counters:
            self.ctr.extend(kc.counter_samples(counters, self.skipped_counters, ns))
        if flows:
            self._add_flows(flows, ns)

    def _add_flows(self, flows: list[Event], ns: bool = False) -> None:
        cols = _fast_flows(flows, ns)
        if cols is None:
            ok = [f for f in flows if ok_ts(f.ts, ns) and type(f.cat) is str and f.cat in FLOW_CATEGORIES
                  and f.id is not None]
            cols = (_flow_codes([f.ph for f in ok], _FLOW_PHASES), _flow_codes([f.cat for f in ok], _FLOW_CATS),
                    [f.id for f in ok], [f.pid for f in ok], [f.tid for f in ok], [f.ts for f in ok])
        self.bad_flows += len(flows) - len(cols[0])
        if not len(cols[0]):
            return
        ph, cat, fid, pid, tid, ts = cols
        self._append_flows(ph, cat, int_column(fid), pid, tid, ts_to_ns(ts, ns))

    def _append_flows(self, ph: np.ndarray, cat: np.ndarray, fid: np.ndarray, pid: list[Any], tid: list[Any],
                      ts_ns: np.ndarray) -> None:
        """Append flow halves already converted: phase / category codes, int64 ids and ns."""
        c = self._flows
        c["ph"].append(ph)
        c["cat"].append(cat)
        c["id"].append(fid)
        c["pid"].append(self._ids.keys(pid))
        c["tid"].append(self._ids.keys(tid))
        c["ts"].append(ts_ns)

    def _add_x(self, cat: list[Any], name: list[Any], pid: list[Any], tid: list[Any], ts: list[Any] | np.ndarray,
               dur: list[Any] | np.ndarray, args: list[Any], ns: bool = False) -> None:
        if not set(map(type, args)) <= {dict}:  # absent or not an object: the shared empty args
            args = list(args)
            for i in compress(count(), map(is_not, map(type, args), repeat(dict))):
                args[i] = EMPTY_ARGS
        cat = _str_list(cat, self._memo)
        cls = np.fromiter(map(CLASS_OF_CAT.get, cat, repeat(HOST)), dtype=np.int8, count=len(cat))
        self._append_x(cat, _str_list(name, self._memo), pid, tid, ts_to_ns(ts, ns), us_to_ns(dur), cls, args)

    def _append_x(self, cat: list[str], name: list[str], pid: list[Any], tid: list[Any], ts_ns: np.ndarray,
                  dur_ns: np.ndarray, cls: np.ndarray, args: list[dict[str, Any]]) -> None:
        """Append complete events already converted: shared cat / name strings, int64 ns, row classes and
        args dicts (``EMPTY_ARGS`` for missing args)."""
        first = self.n_x
        x = self._x
        x["cat"].extend(cat)
        x["name"].extend(name)
        x["pid"].extend(pid)
        x["tid"].extend(tid)
        x["pid_key"].append(self._ids.keys(pid))
        x["tid_key"].append(self._ids.keys(tid))
        x["ts"].append(ts_ns)
        x["dur"].append(dur_ns)
        x["cls"].append(cls)
        cols = args_columns(args, cls)
        for c in (*INT_ARGS, *JSON_ARGS, "args"):
            x[c].append(cols[c])
        for i in cols["coll"].tolist():
            self.coll_args[first + i] = args[i]
        # cat strings are shared through the memo: an identity test finds the frames
        self._frames.append(frame_ids(cat, args, self._memo.get("python_function"), first))

    def finish(self) -> dict[str, Any]:
        """All columns as arrays: X columns (``cat``/``name`` object str, ``pid``/``tid`` as ``IdColumn`` and
        ``pid_key``/``tid_key`` their int64 keys (one key space shared with the flows' pid/tid),
        ``start_ts``/``duration_ns`` int64 ns without base time, ``cls``, args-derived int64 columns, JSON
        text columns), ``frames`` (``frame_ids`` of the python_function rows, by row), ``flows`` (dict of arrays),
        ``mem`` (``memory_samples`` tuple)."""
        x = self._x
        out: dict[str, Any] = {}
        for k in ("cat", "name"):
            arr = np.empty(len(x[k]), dtype=object)
            arr[:] = x[k]
            out[k] = arr
            x[k] = []
        out["pid"], out["tid"] = IdColumn(x.pop("pid")), IdColumn(x.pop("tid"))
        for k, col in (("ts", "start_ts"), ("dur", "duration_ns"), ("pid_key", "pid_key"), ("tid_key", "tid_key")):
            out[col] = np.concatenate(x.pop(k)) if x[k] else np.zeros(0, np.int64)
        for k in ("cls", *INT_ARGS, *JSON_ARGS, "args"):
            parts = x.pop(k)
            out[k] = np.concatenate(parts) if parts else np.zeros(0, dtype=object if k in JSON_ARGS or k == "args"
                                                                  else np.int8 if k == "cls" else np.int64)
        for k in ("flops", "bytes"):
            out[k][out[k] < 0] = 0
        f = self._flows
        fl = {k: np.concatenate(v) if v else np.zeros(0, dtype=np.int8 if k in ("ph", "cat") else np.int64)
              for k, v in f.items()}
        out["flows"] = fl  # ph / cat as int8 codes into FLOW_PHASES / FLOW_CATS
        self._flows = {}
        out["frames"] = np.concatenate(self._frames) if self._frames else np.zeros((0, 3), dtype=np.int64)
        self._frames = []
        out["mem"] = kc.concat_samples(self._mem)
        self._mem = []
        return out


#: events extracted per step: few enough for a batch's structs and columns to stay in the CPU caches
#: (measured on the real traces: 2,000-4,000 fastest, 20,000 15-30 % slower)
_BATCH = 4000


def extract_events(events: list[Any], text: bytes | msgspec.Raw | None = None) -> EventColumns:
    """The columns of decoded events (``decode``; ``text``: their JSON text, for exact timestamps; without it
    float64 precision is kept), extracted a batch at a time; each batch's structs are released once extracted
    (``events`` is emptied)."""
    ev = EventColumns()
    if len(events) <= _BATCH:  # one batch: ``add`` finds out itself whether ts need the text (``exact``)
        ev.add(events, None if text is None else bytes(text))
        events.clear()
        return ev
    ns = False
    exact = needs_exact(events)
    if exact and text is not None:  # exact ns from the text (see ``exact``)
        ns = apply_exact(events, bytes(text))
    del text
    for i in range(0, len(events), _BATCH):
        batch = events[i:i + _BATCH]
        events[i:i + _BATCH] = repeat(None, len(batch))  # O(batch): the structs are freed after extraction
        ev.add(batch, ns=ns, float_ts_checked=not exact)
        del batch
    events.clear()
    return ev


def extract_chunked(chunked: Chunked) -> EventColumns | None:
    """The columns of the events of a text read a chunk at a time (``decode.document_chunks``): each chunk is
    extracted while its structs are hot in the CPU caches and freed before the next is decoded. Timestamps
    are decided for the whole trace, as ``extract_events`` does: when the first chunk holds a float ``ts``
    that needs its text (``exact``), every chunk's ``ts`` are re-read from its text. None when the text could
    not be read so (``Chunked.failed``), or when that decision cannot be kept (a later chunk first needs
    the text, a chunk's texts do not align): the caller reads the text whole, which decides for all."""
    ev = EventColumns()
    exact: bool | None = None
    for events, text in chunked:
        exact = ev.add_chunk(events, text, exact)
        if exact is None:
            return None
        del events, text
    return None if chunked.failed else ev
