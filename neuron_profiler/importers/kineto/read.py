"""Reading a Kineto / Chrome-trace JSON(.gz) file into its top-level dict, with clear format errors."""
from __future__ import annotations

import json
import os
import zlib
from pathlib import Path
from types import ModuleType
from typing import Any

from neuron_profiler.trace.errors import NotATraceError, TraceFormatError, TruncatedTraceError

# The stdlib parse: the fallback of ``decode`` for text msgspec refuses (NaN, Infinity), and the exact JSON errors.
_json = json
_JSONDecodeError: tuple[type[BaseException], ...] = (json.JSONDecodeError, UnicodeDecodeError)

_GZIP_MAGIC = b"\x1f\x8b"

_resource: ModuleType | None
try:  # address-space limits (POSIX only)
    import resource as _resource
except ImportError:  # pragma: no cover - Windows
    _resource = None


#: most bytes a gzip file may decompress to, per compressed byte (plus ``_MAX_INFLATE_FLOOR``): a gzip bomb
#: is refused before it is inflated (real Kineto JSON compresses 10-25x). Override with the env variable.
MAX_INFLATE_RATIO = float(os.environ.get("NEURON_PROFILER_MAX_GZIP_RATIO", "200"))
_MAX_INFLATE_FLOOR = 256 << 20

# ModuleType: either module (isal's stub also declares ``error`` an instance, not the exception class)
_zlib: ModuleType
_GzipFile: Any
try:  # ISA-L inflates ~2x faster than zlib; same format, same errors
    from isal import isal_zlib as _zlib
    from isal.igzip import IGzipFile as _GzipFile
except ImportError:  # pragma: no cover - isal is a core dependency; zlib always works
    _zlib = zlib
    from gzip import GzipFile as _GzipFile


#: memory an import takes per byte of JSON text, at most (measured: 4.6x on the largest real trace, 53 MB: the
#: text, its decoded events and the columns); a text whose import would not fit in the available memory is
#: refused before it is read (``NEURON_PROFILER_IMPORT_MEMORY_FACTOR``: another factor; 0 disables the check)
MEMORY_FACTOR = float(os.environ.get("NEURON_PROFILER_IMPORT_MEMORY_FACTOR", "6"))


def available_memory() -> int | None:
    """Bytes of memory available to this process: ``MemAvailable`` of ``/proc/meminfo``, lowered by an
    address-space limit (``RLIMIT_AS``); None when unknown (no check)."""
    avail = None
    try:
        with open("/proc/meminfo", "rb") as f:
            for line in f:
                if line.startswith(b"MemAvailable:"):
                    avail = int(line.split()[1]) * 1024
                    break
    except (OSError, ValueError, IndexError):
        pass
    try:
        if _resource is None:  # Windows
            return avail
        soft = _resource.getrlimit(_resource.RLIMIT_AS)[0]
        if soft != _resource.RLIM_INFINITY:
            used = _vm_size()
            left = max(soft - used, 0) if used is not None else soft
            avail = left if avail is None else min(avail, left)
    except (OSError, ValueError):
        pass
    return avail


def _vm_size() -> int | None:
    try:
        with open("/proc/self/statm", "rb") as f:
            return int(f.read().split()[0]) * os.sysconf("SC_PAGE_SIZE")
    except (OSError, ValueError, IndexError):
        return None


def text_budget() -> int | None:
    """Most bytes of JSON text an import may read with the memory available (None: no limit known)."""
    avail = available_memory() if MEMORY_FACTOR > 0 else None
    return None if avail is None else int(avail / MEMORY_FACTOR)


def _too_big(path: Path, size: int, budget: int, gz: bool) -> TraceFormatError:
    what = f"inflates to more than {size:,} bytes" if gz else f"holds {size:,} bytes"
    return TraceFormatError(
        f"{path}: the JSON text {what}; importing it needs about {MEMORY_FACTOR:g}x that in memory, more than "
        f"the {budget * MEMORY_FACTOR / 2**30:.1f} GiB available (free memory, or import on a larger machine)")


def read_bytes(src: str | Path) -> bytes:
    """The decompressed bytes of ``src`` (gzip detected by magic bytes, not by the suffix).

    Raises ``TruncatedTraceError`` for a truncated or corrupt gzip stream, ``NotATraceError`` for one that
    inflates beyond ``MAX_INFLATE_RATIO`` times its size (a gzip bomb), ``TraceFormatError`` for a text whose
    import would not fit in the available memory (checked before the file is read, or while it inflates),
    ``FileNotFoundError`` when absent."""
    with TextReader(src) as reader:
        return reader.read()


class Unreadable(Exception):
    """``TextReader.readinto`` met what ``read`` would refuse (a truncated or corrupt .gz, more text than
    allowed): the caller reads the file whole, which raises the error with its message."""


class TextReader:
    """The text of a Kineto file, read whole (``read``) or into the caller's buffer a piece at a time
    (``readinto``: a .gz is inflated as it is read, so the caller never holds all of the text). ``size_hint``:
    the text's size as the file states it (a .gz's trailer: a hint only), 0 when it cannot tell (a pipe, which
    is read whole). A plain text too large for the memory available is refused when the file is opened."""

    def __init__(self, src: str | Path) -> None:
        self.path = Path(src)
        self._budget = text_budget()
        self._f = open(self.path, "rb")
        try:
            size = os.fstat(self._f.fileno()).st_size
            self._head = self._f.read(2)
            self.gz = self._head == _GZIP_MAGIC
            if self._budget is not None and size > self._budget and not self.gz:
                raise _too_big(self.path, size, self._budget, False)
            self.size_hint = 0
            if self._f.seekable():  # read from the start: ``head + f.read()`` would copy the text once more
                if self.gz and size >= 4:
                    self._f.seek(size - 4)
                self.size_hint = _trailer_size(self._f.read(4)) if self.gz else size
                self._f.seek(0)
                self._head = b""
        except BaseException:
            self._f.close()
            raise
        ratio_limit = int(size * MAX_INFLATE_RATIO) + _MAX_INFLATE_FLOOR
        self._limit = ratio_limit if self._budget is None else min(ratio_limit, self._budget)
        self._pieces: Any = None
        self._total = 0

    def __enter__(self) -> TextReader:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()

    def close(self) -> None:
        if self._pieces is not None and self._pieces is not self._f:
            self._pieces.close()  # the inflater (it leaves the file it was given open)
        self._f.close()

    def read(self) -> bytes:
        """The whole text (the file read once, a .gz inflated); the errors of ``read_bytes``."""
        raw = self._head + self._f.read() if self._head else self._f.read()
        if raw[:2] != _GZIP_MAGIC:
            return raw
        return _gunzip(self.path, raw, self._budget)

    def readinto(self, view: memoryview) -> int:
        """Read the next bytes of the text into ``view`` (of a seekable file): how many, 0 at its end. Raises
        ``Unreadable`` for a .gz ``read`` would refuse (truncated, corrupt, beyond the size allowed)."""
        if self._pieces is None:
            self._pieces = _GzipFile(fileobj=self._f, mode="rb") if self.gz else self._f
        try:
            n = self._pieces.readinto(view)
        except (EOFError, OSError, ValueError, _zlib.error, zlib.error) as exc:
            raise Unreadable(f"{self.path}: {exc}") from None
        self._total += n
        if self.gz and self._total > self._limit:
            raise Unreadable(f"{self.path}: inflates to more than {self._limit:,} bytes")
        return n


def _gunzip(path: Path, raw: bytes, budget: int | None) -> bytes:
    ratio_limit = int(len(raw) * MAX_INFLATE_RATIO) + _MAX_INFLATE_FLOOR
    limit = ratio_limit if budget is None else min(ratio_limit, budget)
    parts: list[bytes] = []
    total, data = 0, raw
    try:
        while data:  # one gzip member after the other (a concatenated .gz has several)
            d = _zlib.decompressobj(wbits=31)
            out = _inflate(d, data, limit - total, _trailer_size(raw) if not parts else None)
            total += len(out)
            if total > limit and limit < ratio_limit:
                raise _too_big(path, limit, limit, True)
            if total > limit:
                raise NotATraceError(
                    f"{path}: gzip data inflates to more than {limit:,} bytes ({MAX_INFLATE_RATIO:g}x its size): "
                    f"refused as a likely gzip bomb (set NEURON_PROFILER_MAX_GZIP_RATIO to allow more)")
            if not d.eof:
                raise TruncatedTraceError(
                    f"{path}: truncated gzip stream (expected a complete .gz file, found {len(raw)} bytes ending "
                    f"before the end-of-stream marker)")
            parts.append(out)
            data = d.unused_data.lstrip(b"\x00")
    except (_zlib.error, zlib.error, OSError, ValueError) as exc:
        if isinstance(exc, TraceFormatError):
            raise
        raise TruncatedTraceError(f"{path}: corrupt gzip data ({exc})") from exc
    return parts[0] if len(parts) == 1 else b"".join(parts)


def _trailer_size(raw: bytes) -> int:
    """The uncompressed size a gzip file's last 4 bytes state (ISIZE, mod 2**32): a hint only, never trusted."""
    return int.from_bytes(raw[-4:], "little")


def _inflate(d: Any, data: bytes, room: int, hint: int | None) -> bytes:
    """One gzip member of ``data`` inflated by ``d``, at most ``room + 1`` bytes (one more than allowed tells the
    caller it is too big). With ``hint`` (the trailer's size), the output buffer grows straight to that size
    (the inflater otherwise doubles it and then shrinks it: 20-30 % more of the text's pages touched). A
    concatenated .gz states its last member's size, so the hint may be wrong: the rest is then inflated after
    it (a trailer that lies is a corrupt file: the inflater's size check refuses it at the member's end)."""
    if hint is None or hint >= room:
        return d.decompress(data, room + 1)
    pieces = [d.decompress(data, hint + 1)]
    got = len(pieces[0])
    while not d.eof and got <= room:
        more = d.decompress(d.unconsumed_tail, room - got + 1)
        if not more:  # no progress: a truncated stream (the caller sees ``d.eof`` False)
            break
        pieces.append(more)
        got += len(more)
    return pieces[0] if len(pieces) == 1 else b"".join(pieces)


def parse_json(data: bytes | str, where: str) -> dict[str, Any]:
    """Parse Kineto JSON text into the top-level dict (a bare event list becomes ``{"traceEvents": list}``).

    Raises ``NotATraceError`` for invalid JSON or JSON that is not a Chrome/Kineto trace."""
    if not data or data.isspace():  # isspace stops at the first other char; strip() would copy 50 MB
        raise NotATraceError(f"{where}: empty file (expected a Kineto JSON trace)")
    try:
        doc = _json.loads(data)
    except _JSONDecodeError as exc:
        raise NotATraceError(f"{where}: not valid JSON ({exc}); expected a Kineto/Chrome trace") from exc
    except RecursionError:
        raise NotATraceError(f"{where}: JSON nested too deeply to parse (more than ~1000 levels); expected a "
                             f"Kineto/Chrome trace") from None
    except TypeError as exc:  # pragma: no cover - defensive
        raise NotATraceError(f"{where}: not valid JSON ({exc})") from exc
    if isinstance(doc, list):  # the Chrome "JSON array format"
        doc = {"traceEvents": doc}
    if not isinstance(doc, dict):
        raise NotATraceError(f"{where}: expected a JSON object with a 'traceEvents' list, found a JSON "
                             f"{type(doc).__name__}")
    events = doc.get("traceEvents")
    if events is None:
        keys = ", ".join(sorted(map(str, doc))[:8]) or "none"
        raise NotATraceError(f"{where}: expected a JSON object with a 'traceEvents' list (a torch.profiler / "
                             f"Kineto trace), found keys: {keys}")
    if not isinstance(events, list):
        raise NotATraceError(f"{where}: 'traceEvents' must be a list, found {type(events).__name__}")
    return doc


def decode_text(data: bytes, src: str | Path) -> str:
    """``data`` decoded as UTF-8; ``NotATraceError`` when it is not."""
    try:
        return data.decode("utf-8")
    except UnicodeDecodeError as exc:
        raise NotATraceError(f"{src}: not UTF-8 text ({exc}); expected a Kineto JSON trace") from exc


def read_text(src: str | Path) -> str:
    """The decoded text of ``src``; the compressed and decompressed bytes are freed before returning, so
    the JSON parse that follows does not hold the file twice (peak memory)."""
    data = read_bytes(src)
    text = decode_text(data, src)
    del data
    return text


def load_document(src: str | Path) -> dict[str, Any]:
    """Read and parse one Kineto JSON(.gz) file; every failure is a ``TraceFormatError`` (or OSError)."""
    path = Path(src)
    if path.is_dir():
        raise TraceFormatError(f"{path}: is a directory (expected one Kineto JSON file; use import_directory)")
    return parse_json(read_text(path), str(path))
