"""Decoding a Kineto JSON text into typed events (msgspec): the importer's one parse.

``decode_document`` returns the top-level keys as Python values and ``traceEvents`` as a list of ``Event``
structs (non-object elements kept as they are, counted as skipped later). msgspec decodes into structs
without building a dict per event; the fields the importer reads are the struct's fields, every other key of
an event is skipped by the decoder unread. Values are typed where they are read (``events``, ``counters``,
``tracks``...): every field is ``Any`` here, so no input is refused for a field's type.

Text msgspec refuses but the standard library reads (``NaN`` / ``Infinity``, which Python's json writes) is
parsed by ``json`` and converted to the same structs; text neither reads is a ``NotATraceError`` with the
stdlib's exact message. A ``\\uD800``-style escape of a lone UTF-16 surrogate (which no UTF-8 text can hold)
is read as U+FFFD, the replacement character, in every string position: such a string could not be written
to a trace, compared or encoded again.
"""
from __future__ import annotations

import re
from typing import Any, Union

import msgspec
import numpy as np

from neuron_profiler.importers.kineto.read import decode_text, parse_json
from neuron_profiler.trace.errors import NotATraceError


class Event(msgspec.Struct, gc=False, omit_defaults=True):
    """One element of ``traceEvents`` that is a JSON object: the keys the importer reads (absent -> None)."""

    ph: Any = None
    cat: Any = None
    name: Any = None
    pid: Any = None
    tid: Any = None
    ts: Any = None
    dur: Any = None
    id: Any = None
    args: Any = None


class ExportEvent(Event, gc=False, omit_defaults=True):
    """An event of a document holding ``EXPORT_KEY`` (our own Chrome export, ``roundtrip``): also the keys
    the export writes beside a counter sample's args. Kept out of ``Event``: three more fields cost every
    Kineto import 1 % of its decode and extraction instructions."""

    nprof_table: Any = msgspec.field(default=None, name="nprof.table")
    nprof_row: Any = msgspec.field(default=None, name="nprof.row")
    nprof_track: Any = msgspec.field(default=None, name="nprof.track")


#: the top-level key of our own Chrome export: the events of a document holding it become ``ExportEvent``
EXPORT_KEY = "neuronProfiler"
#: ``traceEvents``: objects become ``Event``; any other JSON value is kept as decoded
EventList = list[Union[Event, list, str, int, float, bool, None]]  # noqa: UP007 - a runtime type for msgspec
ExportEventList = list[Union[ExportEvent, list, str, int, float, bool, None]]  # noqa: UP007
_EVENTS = msgspec.json.Decoder(EventList)
_EXPORT_EVENTS = msgspec.json.Decoder(ExportEventList)


def event_list_type(doc: dict[str, Any]) -> Any:
    """The type the events of a document with the top-level keys ``doc`` are decoded into: ``EventList``, or
    ``ExportEventList`` for our own export (``EXPORT_KEY``)."""
    return ExportEventList if EXPORT_KEY in doc else EventList
_TOP = msgspec.json.Decoder(Union[dict[str, msgspec.Raw], EventList])  # noqa: UP007
_ANY = msgspec.json.Decoder()
_TOP_KEYS = msgspec.json.Decoder(dict[str, msgspec.Raw])
#: the top-level keys Kineto writes (torch 1.x to 2.x; CUDA, ROCm, MTIA, CPU-only traces; its logger's INFO /
#: WARNING / ERROR lists after the events), in the order it writes them: a document holding no other key is
#: decoded in one pass (``_decode``)
KINETO_TOP_KEYS = (
    "schemaVersion", "metadata", "deviceProperties", "distributedInfo", "group_trace_id", "trace_id", "host_name",
    "logical_server_subtype", "username", "tw_cluster", "tw_task_id", "tw_user", "tw_job", "record_shapes",
    "profile_memory", "with_stack", "with_flops", "with_modules", "cuda_runtime_version", "cuda_driver_version",
    "cupti_version", "hip_runtime_version", "hip_driver_version", "roctracer_version", "INFO", "WARNING", "ERROR",
    "traceName", "displayTimeUnit", "baseTimeNanoseconds")
#: such a document: ``traceEvents`` typed, the other keys as decoded; any other key is a ValidationError
_DOCUMENT = msgspec.json.Decoder(msgspec.defstruct(
    "KinetoDocument", [("traceEvents", EventList, msgspec.UNSET), *((k, Any, msgspec.UNSET) for k in KINETO_TOP_KEYS)],
    forbid_unknown_fields=True, gc=False))
#: a JSON escape of a UTF-16 surrogate pair, or of a lone surrogate, with the backslashes before it
_SURROGATE = re.compile(rb"(\\*)\\u(?:[dD][89abAB][0-9a-fA-F]{2}(\\u[dD][c-fC-F][0-9a-fA-F]{2})?"
                        rb"|[dD][c-fC-F][0-9a-fA-F]{2})")


def decode_document(raw: bytes, where: str) -> tuple[dict[str, Any], list[Any], bytes | msgspec.Raw]:
    """(the top-level keys but ``traceEvents``, the events, the events' JSON text: bytes-like, ``bytes()`` of it
    when needed) of a Kineto JSON text; a bare JSON array is the events. Raises ``NotATraceError`` for text
    that is not a Kineto trace."""
    if not raw or raw.isspace():  # isspace stops at the first other char; strip() would copy 50 MB
        raise NotATraceError(f"{where}: empty file (expected a Kineto JSON trace)")
    if not raw.isascii():  # msgspec skips the keys it does not read unchecked: the whole text must be UTF-8
        decode_text(raw, where)
    try:
        return _decode(raw, where)
    except (msgspec.DecodeError, RecursionError):  # see below (ValidationError is a DecodeError)
        pass
    if _SURROGATE.search(raw) is not None:  # msgspec refuses lone surrogates: read them as U+FFFD
        raw = replace_lone_surrogates(raw)
        try:
            return _decode(raw, where)
        except (msgspec.DecodeError, RecursionError):
            pass
    # NaN / Infinity (which Python's json writes), or invalid JSON: the stdlib reads it or gives the exact error
    doc = parse_json(decode_text(raw, where), where)
    events = doc.pop("traceEvents")
    try:
        typed = msgspec.convert(events, event_list_type(doc))
    except (msgspec.ValidationError, RecursionError) as exc:  # pragma: no cover - every JSON value converts
        raise NotATraceError(f"{where}: 'traceEvents' could not be read ({exc})") from None
    return doc, typed, raw


def _decode(raw: bytes, where: str) -> tuple[dict[str, Any], list[Any], bytes | msgspec.Raw]:
    """The typed decode; ``msgspec.DecodeError`` for any text that is not a trace object or event list (the
    caller's stdlib parse then gives the exact error).

    A document whose top-level keys are all ``KINETO_TOP_KEYS`` (every real trace we know) is decoded in one
    pass, its events typed as they are met; its text is returned as the events' text (``exact`` aligns the
    ``"ts"`` texts with the events and skips any other). Any other document (a key of its own, the array
    format, ``traceEvents`` not a list) takes two: the top-level keys with ``traceEvents`` skipped as text
    (msgspec's skip of the events costs 8 % of a whole import), then the events."""
    try:
        d: Any = _DOCUMENT.decode(raw)
    except msgspec.ValidationError:  # an unknown top-level key, not an object...: the two-pass decode
        pass
    else:
        if d.traceEvents is msgspec.UNSET:
            raise msgspec.DecodeError("no traceEvents")
        return {k: v for k in KINETO_TOP_KEYS if (v := getattr(d, k)) is not msgspec.UNSET}, d.traceEvents, raw
    top = _TOP.decode(raw)
    if isinstance(top, list):  # the Chrome "JSON array format"
        return {}, top, raw
    ev_raw = top.pop("traceEvents", None)
    if ev_raw is None:
        raise msgspec.DecodeError("no traceEvents")
    # ValidationError (a DecodeError): not a list; our own export (a key outside KINETO_TOP_KEYS): its structs
    events = (_EXPORT_EVENTS if EXPORT_KEY in top else _EVENTS).decode(ev_raw)
    return {k: _ANY.decode(v) for k, v in top.items()}, events, ev_raw


#: the top-level ``"traceEvents": [`` of a Kineto object text; a boundary between two elements that are
#: objects (``}`` ``,`` ``{``), where a chunk of the events may end (``document_chunks``)
_EVENTS_KEY = re.compile(rb'"traceEvents"\s*:\s*\[')
_BOUNDARY = re.compile(rb"\}\s*,\s*\{")
_ARRAY_FORMAT = re.compile(rb"\s*\[")


def _address(buf: Any) -> int:
    """Address of the first byte of a buffer (to tell which text a ``msgspec.Raw`` points into)."""
    return int(np.frombuffer(buf, dtype=np.uint8).__array_interface__["data"][0])


class Chunked:
    """A Kineto object text read a chunk of its events at a time (``document_chunks``): iterate for
    (events, their JSON text) pairs, then ``doc`` holds the top-level keys but ``traceEvents``. ``failed``:
    a chunk's text was not a run of whole elements of the top-level ``traceEvents`` (or the keys around it
    are not what they seemed): everything read must be dropped and the text read by ``decode_document``."""

    def __init__(self, raw: bytes, start: int, size: int) -> None:
        self.raw, self.start, self.size = raw, start, size
        self.doc: dict[str, Any] = {}
        self.failed = False

    def __iter__(self) -> Any:
        a = self.start
        while True:
            got = self._chunk(a)
            if got is None:
                break
            events, chunk, a = got
            yield events, chunk
            del events, chunk
        tail = self._tail(a)
        if tail is None:
            self.failed = True
            return
        yield tail

    def _tail(self, a: int) -> tuple[list[Any], bytes] | None:
        """(events, their text) of the rest from ``a``, the keys after the events added to ``doc``: the text
        ``{"e": [<rest>], <keys after>}`` is an object (None when it is not, or holds another ``traceEvents``)."""
        try:
            text = b"".join((b'{"e":[', memoryview(self.raw)[a:]))
            tail = _TOP_KEYS.decode(text)
            rest = tail.pop("e")
            if _address(rest) != _address(text) + 5:  # a key "e" of the text's own came last
                return None
            events = _EVENTS.decode(rest)
            after = {k: _ANY.decode(v) for k, v in tail.items()}
        except (msgspec.DecodeError, RecursionError, KeyError):
            return None
        if "traceEvents" in after:  # the key found first was not the only top-level one
            return None
        self.doc.update(after)
        return events, bytes(rest)

    def _chunk(self, a: int) -> tuple[list[Any], bytes, int] | None:
        """(events, their text, where the next chunk starts) of the chunk starting at ``a``, cut at the first
        ``}`` ``,`` ``{`` after ``size`` bytes that is a boundary between two elements (a few are tried: one
        inside a string or a nested value makes no JSON array); None: the rest is read as the tail."""
        raw, view = self.raw, memoryview(self.raw)
        pos = a + self.size
        for _ in range(_CUTS_TRIED):
            m = _BOUNDARY.search(raw, pos) if pos < len(raw) else None
            if m is None:
                return None
            chunk = b"".join((b"[", view[a:m.start() + 1], b"]"))
            try:
                return _EVENTS.decode(chunk), chunk, m.end() - 1
            except (msgspec.DecodeError, RecursionError):
                pos = m.end() - 1
        return None


#: cuts tried per chunk: each failed one costs a decode of the chunk; after them the rest is read in one piece
_CUTS_TRIED = 3


def document_chunks(raw: bytes, where: str, size: int) -> Chunked | None:
    """The events of a Kineto object text in chunks of about ``size`` bytes (``Chunked``), so that the
    events of the whole trace never live at once (the caller extracts and frees each chunk: on the 53 MB
    real trace 35k page faults fewer, a third of the import's time); None when the text is not read so
    (empty, the array format, no top-level ``traceEvents`` found, keys before it that do not read): the
    caller reads it with ``decode_document``.

    The text is cut without a parse: at the ``"traceEvents": [`` found first, then after about ``size``
    bytes at the next ``}`` ``,`` ``{``. A cut is checked by the decode it feeds: text holding only part of
    an element (a cut inside a string or a nested value) is no JSON array, and the rest of the text is then
    read in one piece; the keys before the events must read as an object ending with ``traceEvents``, those
    after it must not hold another ``traceEvents``."""
    if not raw or raw.isspace() or _ARRAY_FORMAT.match(raw):
        return None
    if not raw.isascii():  # msgspec skips the keys it does not read unchecked: the whole text must be UTF-8
        decode_text(raw, where)
    m = _EVENTS_KEY.search(raw)
    if m is None:
        return None
    try:  # the keys before: ``<text before> "traceEvents": []}`` must be an object ending with that key
        before = _TOP_KEYS.decode(b"".join((memoryview(raw)[:m.start()], b'"traceEvents":[]}')))
    except (msgspec.DecodeError, RecursionError):
        return None
    if list(before)[-1:] != ["traceEvents"] or bytes(before.pop("traceEvents")) != b"[]":
        return None
    out = Chunked(raw, m.end(), size)
    out.doc = {k: _ANY.decode(v) for k, v in before.items()}
    return out


def _lone_to_fffd(m: re.Match[bytes]) -> bytes:
    whole, low = m.group(0), m.group(2)
    if len(m.group(1)) % 2:  # an escaped backslash followed by "u..." (then perhaps a real escape)
        return whole[:-len(low)] + b"\\uFFFD" if low else whole
    return whole if low else m.group(1) + b"\\uFFFD"  # a valid pair, or a lone surrogate


def replace_lone_surrogates(raw: bytes) -> bytes:
    """``raw`` with every JSON escape of an unpaired UTF-16 surrogate replaced by ``\\uFFFD`` (pairs kept)."""
    return _SURROGATE.sub(_lone_to_fffd, raw)
