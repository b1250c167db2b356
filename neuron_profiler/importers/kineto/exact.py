"""Timestamps exact to the nanosecond in every Kineto time base.

Kineto writes ``ts`` in microseconds with 3 decimals. Relative to ``baseTimeNanoseconds`` the values are
small and a float64 holds them closely enough to round back to the exact ns; but epoch-microsecond
timestamps (older traces, no ``baseTimeNanoseconds``: ~1.7e15 us) need 19 significant digits, and the float64
the JSON parser returns is off by up to 125 ns. For a batch of events holding a float ``ts`` at or above
``LIMIT_US`` (2**42 us, where the float's spacing reaches 1/1024 us), every ``ts`` of the batch is re-read
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

LIMIT_US = float(2**42)
_TS = re.compile(rb'"ts"\s*:\s*(-?[0-9][0-9.eE+-]*)')
_PLAIN = re.compile(rb"^(-?)([0-9]+)(?:\.([0-9]+))?$")
_GET_TS = operator.methodcaller("get", "ts")


def needs_exact(events: list[Any]) -> bool:
    """True when some event's ``ts`` is a float too large for float64 to keep its ns (see module doc)."""
    try:
        ts = list(map(_GET_TS, events))
    except (AttributeError, TypeError):  # an event that is not an object
        ts = [e.get("ts") if type(e) is dict else None for e in events]
    if float not in set(map(type, ts)):  # integer microseconds are exact (the common no-base case)
        return False
    try:
        if max(ts) < LIMIT_US:  # C-speed when every ts is a number
            return False
    except TypeError:
        pass
    return any(type(t) is float and t >= LIMIT_US for t in ts)


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
    be aligned with the values."""
    found = _TS.findall(text, start, len(text) if end is None else end)
    j, n = 0, len(found)
    new: list[tuple[dict[str, Any], int]] = []
    for e in events:
        if type(e) is not dict:
            continue
        t = e.get("ts")
        if type(t) not in (int, float) or t != t or t in (float("inf"), float("-inf")):
            continue
        while j < n:
            m = found[j]
            j += 1
            try:
                same = float(m) == t
            except ValueError:
                same = False
            if same:
                ns = text_to_ns(m)
                if ns is None:
                    return False
                new.append((e, ns))
                break
        else:
            return False
    for e, ns in new:
        e["ts"] = ns
    return True
