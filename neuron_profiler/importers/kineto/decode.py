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

import codecs
import re
from typing import Any, Union

import msgspec
import numpy as np

from neuron_profiler.importers.kineto.read import TextReader, Unreadable, decode_text, parse_json
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
    """A Kineto object text read a chunk of its events at a time (``document_chunks``), as its file is read:
    iterate for (events, their JSON text) pairs, then ``doc`` holds the top-level keys but ``traceEvents``.
    ``failed``: a chunk's text was not a run of whole elements of the top-level ``traceEvents`` (or the keys
    around it are not what they seemed, or the text is not UTF-8): everything read must be dropped and the text
    read whole by ``decode_document``.

    The text lives in one buffer that is refilled in place (``_more``): only a chunk and the piece being read
    are held, never the whole text, and no memory is taken afresh per chunk. A chunk is decoded where it lies:
    the byte before it becomes ``[`` and the one after it ``]`` (both are ``,`` or blanks between elements). The
    text handed out with a chunk's events is a view of that buffer, valid until the next chunk is read."""

    def __init__(self, reader: TextReader, buf: bytearray, end: int, start: int, size: int) -> None:
        self.reader, self.size = reader, size
        self.buf, self.end, self.at = buf, end, start  # text in buf[:end]; the next chunk from buf[at]
        self.doc: dict[str, Any] = {}
        self.failed = False
        self._utf8: Any = None  # an incremental UTF-8 check, from the first piece that is not ASCII

    def __iter__(self) -> Any:
        try:
            while True:
                got = self._chunk()
                if got is None:
                    break
                events, text = got
                del got  # else this chunk's structs live on while the next one is decoded
                yield events, text
                text.release()
                del events, text
            tail = self._tail()
        except Unreadable:
            tail = None
        if tail is None:
            self.failed = True
            return
        yield tail

    def _chunk(self) -> tuple[list[Any], memoryview] | None:
        """(events, their text) of the chunk from ``at``, cut at the first ``}`` ``,`` ``{`` after ``size`` bytes
        that is a boundary between two elements (a few are tried: one inside a string or a nested value makes no
        JSON array); None: the rest is read as the tail."""
        skip = self.size
        for _ in range(_CUTS_TRIED):
            m = self._find(_BOUNDARY, skip)
            if m is None:
                return None
            buf, end = self.buf, m.start() + 1
            after = buf[end]
            buf[self.at - 1], buf[end] = 0x5B, 0x5D  # "[" and "]"
            text = memoryview(buf)[self.at - 1:end + 1]
            try:
                events = _EVENTS.decode(text)
            except (msgspec.DecodeError, RecursionError):
                text.release()
                buf[end] = after
                skip = m.end() - 1 - self.at
                continue
            self.at = m.end() - 1
            return events, text
        return None

    def _tail(self) -> tuple[list[Any], bytes] | None:
        """(events, their text) of the rest from ``at``, the keys after the events added to ``doc``: the text
        ``{"e": [<rest>], <keys after>}`` is an object (None when it is not, or holds another ``traceEvents``)."""
        while self._more(self.end - self.at):
            pass
        start = self.at - len(_TAIL_HEAD)  # the bytes before ``at`` are read already: room for the head
        self.buf[start:self.at] = _TAIL_HEAD
        text = memoryview(self.buf)[start:self.end]
        try:
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

    def _find(self, pattern: re.Pattern[bytes], skip: int) -> re.Match[bytes] | None:
        """The first match of ``pattern`` from ``skip`` bytes after ``at``, reading more of the text until one is
        found (a match is complete when found: the patterns end in a fixed byte); None at the text's end. The
        match's positions are good until the buffer is refilled."""
        while True:
            m = pattern.search(self.buf, self.at + skip, self.end)  # ``at`` moves when the buffer is refilled
            if m is not None or not self._more(self.end - self.at - skip):
                return m

    def _more(self, searched: int) -> bool:
        """Read more of the text into the buffer (False at its end): a piece, or the ``searched`` bytes a search
        found nothing in if that is more, so that searches started again from the same place stay linear."""
        want = max(_PIECE, searched)
        if self.at >= _PIECE or self.end + want > len(self.buf):
            self._make_room(want)
        with memoryview(self.buf) as view:
            n = self.reader.readinto(view[self.end:self.end + want])
        if self._utf8 is not None or (n and np.frombuffer(self.buf, np.uint8, n, self.end).max() >= 0x80):
            self._utf8 = self._utf8 or codecs.getincrementaldecoder("utf-8")()  # the decoder skips unread keys
            try:  # unchecked: every byte is checked here, across the cuts between pieces
                with memoryview(self.buf) as view:
                    self._utf8.decode(view[self.end:self.end + n], final=not n)
            except UnicodeDecodeError:
                raise Unreadable from None
        self.end += n
        return n > 0

    def _make_room(self, n: int) -> None:
        """Room for ``n`` more bytes: the text before the next chunk is dropped (but the few bytes its decode
        overwrites), and the buffer doubled when that is not enough (an element larger than a chunk). Dropped
        as soon as it is more than a piece, so that the buffer's first pages are used again and again."""
        keep = max(self.at - len(_TAIL_HEAD), 0)
        view = memoryview(self.buf)
        view[:self.end - keep] = view[keep:self.end]
        view.release()
        self.at, self.end = self.at - keep, self.end - keep
        if self.end + n > len(self.buf):
            grown = bytearray(max(2 * len(self.buf), self.end + n))
            grown[:self.end] = memoryview(self.buf)[:self.end]
            self.buf = grown


#: cuts tried per chunk: each failed one costs a decode of the chunk; after them the rest is read in one piece
_CUTS_TRIED = 3
#: text read from the file at a time; the head a tail is decoded with (``Chunked._tail``)
_PIECE = 128 << 10
_TAIL_HEAD = b'{"e":['


def document_chunks(reader: TextReader, size: int) -> Chunked | None:
    """The events of the Kineto object text ``reader`` reads, in chunks of about ``size`` bytes (``Chunked``),
    so that neither the text nor the events of the whole trace live at once (the caller extracts and frees each
    chunk; docs/importers.md gives the page faults saved); None when the text is
    not read so (empty, the array format, no top-level ``traceEvents`` found, keys before it that do not read):
    the caller reads it whole with ``decode_document``.

    The text is cut without a parse: at the ``"traceEvents": [`` found first, then after about ``size``
    bytes at the next ``}`` ``,`` ``{``. A cut is checked by the decode it feeds: text holding only part of
    an element (a cut inside a string or a nested value) is no JSON array, and the rest of the text is then
    read in one piece; the keys before the events must read as an object ending with ``traceEvents``, those
    after it must not hold another ``traceEvents``."""
    out = Chunked(reader, bytearray(size + 2 * _PIECE), 0, 0, size)
    try:  # the array format is told by its first piece (the rest of the text is not read for it)
        m = None if not out._more(0) or _ARRAY_FORMAT.match(out.buf, 0, out.end) else out._find(_EVENTS_KEY, 0)
    except Unreadable:
        return None
    buf = out.buf
    if m is None or _ARRAY_FORMAT.match(buf, 0, out.end):
        return None
    try:  # the keys before: ``<text before> "traceEvents": []}`` must be an object ending with that key
        before = _TOP_KEYS.decode(b"".join((memoryview(buf)[:m.start()], b'"traceEvents":[]}')))
    except (msgspec.DecodeError, RecursionError):
        return None
    if list(before)[-1:] != ["traceEvents"] or bytes(before.pop("traceEvents")) != b"[]":
        return None
    out.at = m.end()
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
