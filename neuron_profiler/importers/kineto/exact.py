"""Timestamps exact to the nanosecond in every Kineto time base.

Kineto writes ``ts`` in microseconds with 3 decimals. Relative to ``baseTimeNanoseconds`` the values are
small and a float64 holds them closely enough to round back to the exact ns (below 2**43 us, ~102 days, its
error is under half a ns); but epoch-microsecond timestamps (older traces, no ``baseTimeNanoseconds``:
~1.7e15 us) need 19 significant digits, and the float64 the JSON parser returns is off by up to 125 ns. For a
batch of events holding a float ``ts`` at or above ``LIMIT_US`` (2**43 us), every ``ts`` of the batch is re-read
from the JSON text: the ``"ts": <number>`` occurrences in text order are aligned with the events in order
(each text must parse to the very float the parser returned; text that does not align, e.g. a ``"ts"`` key
inside ``args``, is skipped), converted with decimal arithmetic (round half to even past 3 decimals) and
stored back into the events as int ns. Callers then treat that batch's ``ts`` as ns (``ns=True``).
"""
from __future__ import annotations

import operator
import re
from decimal import ROUND_HALF_EVEN, Decimal, InvalidOperation
from typing import Any

import numpy as np

from neuron_profiler.importers.kineto.decode import Event

LIMIT_US = float(2**43)
_PLAIN = re.compile(rb"^(-?)([0-9]+)(?:\.([0-9]+))?$")
_GET_TS = operator.attrgetter("ts")


def needs_exact(events: list[Any]) -> bool:
    """True when some event's ``ts`` is a float too large for float64 to keep its ns (see module doc)."""
    try:  # C-speed passes when every element is an event
        ts: list[Any] = list(map(_GET_TS, events))
    except AttributeError:  # an element that is not an object
        ts = [e.ts if isinstance(e, Event) else None for e in events]
    types = set(map(type, ts))
    if float not in types:  # integer microseconds are exact (the common no-base case)
        return False
    if types <= _NUM_OR_NONE:  # absent ts (metadata events) are NaN here, which fmax skips
        try:
            if not np.fmax.reduce(np.array(ts, dtype=np.float64)) >= LIMIT_US:
                return False
        except OverflowError:  # an int beyond float range: one by one
            pass
    return any(type(t) is float and t >= LIMIT_US for t in ts)


_NUM_OR_NONE = frozenset({int, float, type(None)})


def text_to_ns(text: bytes) -> int | None:
    """A JSON number in microseconds -> int ns, exactly (None when not a finite number)."""
    m = _PLAIN.match(text)
    if m is not None:
        sign, ip, frac = m.groups()
        frac = frac or b""
        ns = int(ip) * 1000 + int((frac + b"000")[:3])
        if len(frac) > 3:  # round half to even on the digits past the ns
            rest = frac[3:]
            half = rest[:1] > b"5" or (rest[:1] == b"5" and (rest[1:].strip(b"0") != b"" or ns % 2 == 1))
            ns += 1 if half else 0
        return -ns if sign else ns
    try:
        d = Decimal(text.decode("ascii")) * 1000
        if not d.is_finite():
            return None
        return int(d.to_integral_value(ROUND_HALF_EVEN))
    except (InvalidOperation, UnicodeDecodeError, ValueError):
        return None


def apply_exact(events: list[Any], text: bytes, start: int = 0, end: int | None = None) -> bool:
    """Replace the numeric ``ts`` of ``events`` by exact int ns read from ``text[start:end]`` (the JSON text
    the events were parsed from, in order). Returns False, leaving the events untouched, when the texts cannot
    be aligned with the values.

    Vectorised: one regex pass finds every ``"ts": <number>``, numpy parses them (float value, integer part,
    3 decimals); when the texts' float values equal the parsed values one for one (the usual case) they are
    aligned at once, else (a ``"ts"`` key inside ``args``) one by one."""
    end = len(text) if end is None else end
    found = _TS.findall(text, start, end)
    try:
        ts = list(map(_GET_TS, events))
    except (AttributeError, TypeError):
        ts = [e.ts if isinstance(e, Event) else None for e in events]
    num = np.fromiter(map(_NUMERIC.__contains__, map(type, ts)), dtype=bool, count=len(ts))
    pos = np.flatnonzero(num)
    if not len(pos):
        return True
    try:
        vals = np.asarray([ts[i] for i in pos.tolist()], dtype=np.float64)
    except OverflowError:
        return _apply_one_by_one(events, pos.tolist(), found)
    fin = np.isfinite(vals)
    if not fin.all():
        pos, vals = pos[fin], vals[fin]
    if len(found) != len(pos) or not len(found):
        return _apply_one_by_one(events, pos.tolist(), found)
    arr = np.asarray(found, dtype="S")
    if not np.array_equal(arr.astype(np.float64), vals):
        return _apply_one_by_one(events, pos.tolist(), found)
    ns = _texts_to_ns(arr, found)
    for i, v in zip(pos.tolist(), ns.tolist()):
        events[i].ts = v
    return True


_TS = re.compile(rb'"ts"\s*:\s*(-?[0-9]+(?:\.[0-9]*)?(?:[eE][-+]?[0-9]+)?)')
_NUMERIC = frozenset({int, float})
_OUT_OF_RANGE = 8 * 10**18  # beyond MAX_NS: the range checks skip the event as "out of range"


def _texts_to_ns(arr: np.ndarray, found: list[bytes]) -> np.ndarray:
    """Exact ns of JSON numbers in microseconds (``arr``: their texts as numpy bytes)."""
    ip, _dot, frac = np.strings.partition(arr, b".")
    expo = (np.strings.find(arr, b"e") >= 0) | (np.strings.find(arr, b"E") >= 0)
    odd = (np.strings.str_len(frac) > 3) | expo
    long_ip = (np.strings.str_len(ip) > 17) & ~odd
    ipa = np.where(long_ip | expo, b"0", ip).astype(np.int64)
    fr = np.where(odd, b"000", np.strings.ljust(frac.astype("S3"), 3, b"0")).astype(np.int64)
    neg = np.strings.startswith(ip, b"-")
    ns = ipa * 1000 + np.where(neg, -fr, fr)
    ns[long_ip] = _OUT_OF_RANGE
    for j in np.flatnonzero(odd).tolist():  # more than 3 decimals or an exponent: decimal, half to even
        v = text_to_ns(found[j])
        ns[j] = v if v is not None and abs(v) < _OUT_OF_RANGE else _OUT_OF_RANGE
    return ns


def _apply_one_by_one(events: list[Any], pos: list[int], found: list[bytes]) -> bool:
    """Align texts with values one by one, skipping texts whose float differs (``"ts"`` keys in ``args``)."""
    j, n = 0, len(found)
    new: list[tuple[int, int]] = []
    for i in pos:
        t = events[i].ts
        while j < n:
            m = found[j]
            j += 1
            try:
                same = float(m) == t
            except (ValueError, OverflowError):
                same = False
            if same:
                ns = text_to_ns(m)
                if ns is None:
                    return False
                new.append((i, ns))
                break
        else:
            return False
    for i, ns in new:
        events[i].ts = ns
    return True
