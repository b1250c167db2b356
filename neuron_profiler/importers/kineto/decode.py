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

from neuron_profiler.importers.kineto.read import decode_text, parse_json
from neuron_profiler.trace.errors import NotATraceError


class Event(msgspec.Struct, gc=False, omit_defaults=True):
    """One element of ``traceEvents`` that is a JSON object: the keys the importer reads (absent -> None).

    ``nprof_*``: the keys our own Chrome export writes beside a counter sample's args (``roundtrip``)."""

    ph: Any = None
    cat: Any = None
    name: Any = None
    pid: Any = None
    tid: Any = None
    ts: Any = None
    dur: Any = None
    id: Any = None
    args: Any = None
    nprof_table: Any = msgspec.field(default=None, name="nprof.table")
    nprof_row: Any = msgspec.field(default=None, name="nprof.row")
    nprof_track: Any = msgspec.field(default=None, name="nprof.track")


#: ``traceEvents``: objects become ``Event``; any other JSON value is kept as decoded
EventList = list[Union[Event, list, str, int, float, bool, None]]  # noqa: UP007 - a runtime type for msgspec
_EVENTS = msgspec.json.Decoder(EventList)
_TOP = msgspec.json.Decoder(Union[dict[str, msgspec.Raw], EventList])  # noqa: UP007
_ANY = msgspec.json.Decoder()
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
        typed = msgspec.convert(events, EventList)
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
    events = _EVENTS.decode(ev_raw)  # ValidationError (a DecodeError): not a list
    return {k: _ANY.decode(v) for k, v in top.items()}, events, ev_raw


def _lone_to_fffd(m: re.Match[bytes]) -> bytes:
    whole, low = m.group(0), m.group(2)
    if len(m.group(1)) % 2:  # an escaped backslash followed by "u..." (then perhaps a real escape)
        return whole[:-len(low)] + b"\\uFFFD" if low else whole
    return whole if low else m.group(1) + b"\\uFFFD"  # a valid pair, or a lone surrogate


def replace_lone_surrogates(raw: bytes) -> bytes:
    """``raw`` with every JSON escape of an unpaired UTF-16 surrogate replaced by ``\\uFFFD`` (pairs kept)."""
    return _SURROGATE.sub(_lone_to_fffd, raw)
