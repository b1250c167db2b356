"""Parse a Kineto JSON text slice by slice: the top-level keys once, then ``traceEvents`` a few MB at a time,
so that only one slice of event dicts is alive at any moment (peak memory) and orjson can be used (faster
than the stdlib, but its parse of a whole 50 MB trace peaks ~180 MB higher).

Soundness: a cut is only ever made just before a ``{`` that follows ``},`` outside the array's first element,
and every slice is parsed on its own as ``[slice]``. A cut that is not between two top-level events (inside
an object, an array or a string) leaves that slice with unbalanced brackets or an open string, so its parse
fails and it is merged with the next slice. The array's end is found by parsing from the last cut (or an
earlier one, when that cut lies in the keys after the events) with the stdlib's ``raw_decode``, which stops
exactly at the array's closing ``]`` whatever follows (keys such as Kineto's ``INFO`` / ``ERROR`` log lists,
full of ``]``); the document with the array replaced by a sentinel must then parse and hold the sentinel as
its top-level ``traceEvents``. Anything unexpected returns ``None``, and a slice that still fails after
merging raises ``SliceError``: callers then parse the whole text as before."""
from __future__ import annotations

import json
import re
from collections.abc import Callable, Iterator
from types import ModuleType
from typing import Any

orjson: ModuleType | None  # None when the package is missing
try:
    import orjson
except ImportError:  # pragma: no cover - orjson is optional
    orjson = None

SLICE_BYTES = 256 << 10  # small slices: lower peak, and faster (the slice's objects stay in cache)
_EVENTS_KEY = re.compile(rb'"traceEvents"\s*:\s*\[')
_CUT = re.compile(rb"\}\s*,\s*\{")
_SENTINEL = "\x00neuron_profiler:traceEvents\x00"
_SENTINEL_JSON = json.dumps(_SENTINEL).encode()
_MAX_MERGES = 8  # a run of bad cuts this long (text full of "}, {" inside events): parse the whole text


class SliceError(ValueError):
    """A slice of events could not be parsed (the caller parses the whole text for the exact error)."""


def loads(buf: bytes) -> Any:
    """Parse JSON bytes: orjson when installed, else (or when orjson rejects the text, e.g. for NaN,
    Infinity or integers beyond 64 bits, which the stdlib accepts) the stdlib parser."""
    if orjson is not None:
        try:
            return orjson.loads(buf)
        except orjson.JSONDecodeError:
            pass
    return json.loads(buf.decode("utf-8"))


def _array_end(raw: bytes, cuts: list[int], tries: int = 8) -> int | None:
    """Byte offset of the ``]`` closing the events array, parsing ``[`` + the text from one of the last cuts
    (each a position where an event may start, or the array's first byte) with ``raw_decode``."""
    dec = json.JSONDecoder()
    for c in reversed(cuts[-tries:]):
        try:
            text = "[" + raw[c:].decode("utf-8")
            _, idx = dec.raw_decode(text)
        except (ValueError, UnicodeDecodeError, RecursionError):
            continue
        end = c + len(text[1:idx].encode("utf-8")) - 1
        if 0 <= end < len(raw) and raw[end] == 0x5D:  # "]"
            return end
    return None


def split_document(raw: bytes, slice_bytes: int | None = None) -> tuple[dict[str, Any], list[tuple[int, int]]] | None:
    """(the top-level document with ``traceEvents`` set to a sentinel, byte ranges of the event slices), or
    None when the text does not have the expected shape. ``slice_bytes`` defaults to ``SLICE_BYTES``."""
    slice_bytes = slice_bytes or SLICE_BYTES
    m = _EVENTS_KEY.search(raw)
    if m is None:
        return None
    start = m.end()
    cuts = [start]
    pos = start + slice_bytes
    while pos < len(raw):
        c = _CUT.search(raw, pos)
        if c is None:
            break
        cuts.append(c.end() - 1)
        pos = c.end() - 1 + slice_bytes
    end = _array_end(raw, cuts)
    if end is None:
        return None
    doc = document_around(raw, m.start(), end)
    if doc is None:
        return None
    cuts = [c for c in cuts if c < end] + [end]
    return doc, list(zip(cuts, cuts[1:]))


def events_start(raw: bytes) -> tuple[int, int] | None:
    """(offset of the ``"traceEvents"`` key, offset just past its ``[``), or None."""
    m = _EVENTS_KEY.search(raw)
    return None if m is None else (m.start(), m.end())


def document_around(raw: bytes, key_start: int, array_end: int) -> dict[str, Any] | None:
    """The top-level document with the events array (its key at ``key_start``, its ``]`` at ``array_end``)
    replaced by a sentinel, when that parses and the sentinel is the document's top-level ``traceEvents``."""
    try:
        doc = loads(b"".join((raw[:key_start], b'"traceEvents":', _SENTINEL_JSON, raw[array_end + 1:])))
    except (ValueError, UnicodeDecodeError, RecursionError):
        return None
    if not isinstance(doc, dict) or doc.get("traceEvents") != _SENTINEL:
        return None
    return doc


def _parse_slice(raw: bytes, a: int, b: int) -> list[Any] | None:
    piece = raw[a:b].rstrip()
    if piece.endswith(b","):
        piece = piece[:-1]
    if not piece.strip():
        return []
    try:
        events = loads(b"".join((b"[", piece, b"]")))
    except (ValueError, UnicodeDecodeError, RecursionError):
        return None
    return events if isinstance(events, list) else None


def iter_slices(raw: bytes, ranges: list[tuple[int, int]]) -> Iterator[list[Any]]:
    """The events of each byte range, in order (``iter_slice_texts`` without the text)."""
    for events, _a, _b in iter_slice_texts(raw, ranges):
        yield events


def iter_slice_texts(raw: bytes, ranges: list[tuple[int, int]],
                     take: Callable[[int, int], bool] | None = None) -> Iterator[tuple[list[Any], int, int]]:
    """(events, first byte, end byte) of each byte range, in order; a range that does not parse is merged with
    the next one. Raises ``SliceError`` when the last merged range still does not parse (invalid JSON), or
    after ``_MAX_MERGES`` merges in a row (which would make the parse quadratic). ``take(a, b)``: True when the
    caller extracted the range from the text itself (nothing is parsed or yielded for it)."""
    i = 0
    while i < len(ranges):
        a, b = ranges[i]
        if take is not None and take(a, b):
            i += 1
            continue
        events = _parse_slice(raw, a, b)
        merged = 0
        while events is None and i + 1 < len(ranges) and merged < _MAX_MERGES:
            i += 1
            merged += 1
            b = ranges[i][1]
            events = _parse_slice(raw, a, b)
        if events is None:
            raise SliceError(f"events in bytes {a}..{b} are not valid JSON")
        yield events, a, b
        i += 1
