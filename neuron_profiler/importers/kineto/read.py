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
try:  # ISA-L inflates ~2x faster than zlib; same format, same errors
    from isal import isal_zlib as _zlib
except ImportError:  # pragma: no cover - isal is a core dependency; zlib always works
    _zlib = zlib


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
    """The decompressed bytes of ``src`` (gzip detected by magic bytes, not by the suffix), read whole.

    Raises ``TruncatedTraceError`` for a truncated or corrupt gzip stream, ``NotATraceError`` for one that
    inflates beyond ``MAX_INFLATE_RATIO`` times its size (a gzip bomb), ``TraceFormatError`` for a text whose
    import would not fit in the available memory (checked before the file is read, or while it inflates),
    ``FileNotFoundError`` when absent."""
    with TextReader(src) as reader:
        return reader.read()


class TextReader:
    """The text of a Kineto file read whole (``read()``) or a piece at a time (``read(n)``), so that a caller
    reading it in pieces never holds all of it: a gzip file (told by its magic bytes) is inflated as it is
    read, with the checks of ``read_bytes`` (``size_hint``: the text's size when the file states it).

    The file is opened (and, a plain text too large for the memory available, refused) on construction;
    use as a context manager, or call ``close``."""

    def __init__(self, src: str | Path) -> None:
        self.path = Path(src)
        budget = text_budget()
        f = open(self.path, "rb")
        try:
            size = os.fstat(f.fileno()).st_size
            head = f.read(2)
            self.gz = head == _GZIP_MAGIC
            if budget is not None and size > budget and not self.gz:
                raise _too_big(self.path, size, budget, False)
            if f.seekable():  # read from the start: ``head + f.read()`` would copy the text once more
                f.seek(0)
                head = b""
            raw = head + f.read() if self.gz else b""  # a gzip file is read whole and inflated in pieces
        except BaseException:
            f.close()
            raise
        self._f, self._head, self.size_hint = f, head, size  # a plain text: read from the file as asked
        if not self.gz:
            return
        f.close()
        self._raw, self._pending, self._head = raw, raw, b""
        ratio_limit = int(len(raw) * MAX_INFLATE_RATIO) + _MAX_INFLATE_FLOOR
        self._ratio_limit, self._limit = ratio_limit, ratio_limit if budget is None else min(ratio_limit, budget)
        self._d: Any = None  # the inflater of the current gzip member (None: between members)
        self._total = 0
        self.size_hint = _trailer_size(raw)

    def __enter__(self) -> TextReader:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()

    def close(self) -> None:
        self._f.close()

    def read(self, n: int | None = None) -> bytes:
        """The next ``n`` bytes of the text (fewer at its end, ``b""`` after it); ``None``: all the rest."""
        if not self.gz:
            head, self._head = self._head, b""
            if n is None:
                return head + self._f.read() if head else self._f.read()
            return head + self._f.read(n - len(head)) if head else self._f.read(n)
        try:
            return self._inflate(n)
        except (_zlib.error, zlib.error, OSError, ValueError) as exc:
            if isinstance(exc, TraceFormatError):
                raise
            raise TruncatedTraceError(f"{self.path}: corrupt gzip data ({exc})") from exc

    def _inflate(self, n: int | None) -> bytes:
        """Up to ``n`` (None: all) more bytes inflated, one gzip member after the other (a concatenated .gz has
        several). Read whole, the first member is inflated straight to the size the trailer states (the
        inflater otherwise doubles its buffer and then shrinks it: 20-30 % more of the text's pages touched).
        That size is only a hint: a concatenated .gz states its last member's, and the rest is then inflated
        after it (a trailer that lies is a corrupt file: the inflater's size check refuses it at the member's
        end)."""
        parts: list[bytes] = []
        got = 0
        while (n is None or got < n) and (self._d is not None or self._pending):
            if self._d is None:
                self._d = _zlib.decompressobj(wbits=31)
            room = self._limit - self._total
            if n is not None:
                want = min(n - got, room + 1)
            elif self._total == 0 and self.size_hint < room:
                want = self.size_hint + 1
            else:
                want = room + 1
            out = self._d.decompress(self._pending, want)
            self._total += len(out)
            got += len(out)
            self._check_size()
            if self._d.eof:
                self._pending, self._d = self._d.unused_data.lstrip(b"\x00"), None
            elif not out and not self._d.unconsumed_tail:  # no progress: the input ends inside a member
                raise TruncatedTraceError(
                    f"{self.path}: truncated gzip stream (expected a complete .gz file, found {len(self._raw)} "
                    f"bytes ending before the end-of-stream marker)")
            else:
                self._pending = self._d.unconsumed_tail
            if out:
                parts.append(out)
        return parts[0] if len(parts) == 1 else b"".join(parts)

    def _check_size(self) -> None:
        if self._total > self._limit and self._limit < self._ratio_limit:
            raise _too_big(self.path, self._limit, self._limit, True)
        if self._total > self._limit:
            raise NotATraceError(
                f"{self.path}: gzip data inflates to more than {self._limit:,} bytes ({MAX_INFLATE_RATIO:g}x its "
                f"size): refused as a likely gzip bomb (set NEURON_PROFILER_MAX_GZIP_RATIO to allow more)")


def _trailer_size(raw: bytes) -> int:
    """The uncompressed size a gzip file's last 4 bytes state (ISIZE, mod 2**32): a hint only, never trusted."""
    return int.from_bytes(raw[-4:], "little")


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
