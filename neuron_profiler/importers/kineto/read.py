"""Reading a Kineto / Chrome-trace JSON(.gz) file into its top-level dict, with clear format errors."""
from __future__ import annotations

import json
import os
import zlib
from pathlib import Path
from types import ModuleType
from typing import Any

from neuron_profiler.trace.errors import NotATraceError, TraceFormatError, TruncatedTraceError

# The whole-document parse (the fallback of ``split``, and the path that reports exact JSON errors)
# uses the stdlib parser: on a whole 50 MB trace orjson peaks ~180 MB higher. Slices use orjson.
_json = json
_JSONDecodeError: tuple[type[BaseException], ...] = (json.JSONDecodeError, UnicodeDecodeError)

_GZIP_MAGIC = b"\x1f\x8b"


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


def read_bytes(src: str | Path) -> bytes:
    """The decompressed bytes of ``src`` (gzip detected by magic bytes, not by the suffix).

    Raises ``TruncatedTraceError`` for a truncated or corrupt gzip stream, ``NotATraceError`` for one that
    inflates beyond ``MAX_INFLATE_RATIO`` times its size (a gzip bomb), ``FileNotFoundError`` when absent."""
    path = Path(src)
    raw = path.read_bytes()
    if raw[:2] != _GZIP_MAGIC:
        return raw
    limit = int(len(raw) * MAX_INFLATE_RATIO) + _MAX_INFLATE_FLOOR
    parts: list[bytes] = []
    total, data = 0, raw
    try:
        while data:  # one gzip member after the other (a concatenated .gz has several)
            d = _zlib.decompressobj(wbits=31)
            out = d.decompress(data, limit - total + 1)
            total += len(out)
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
        if isinstance(exc, TruncatedTraceError | NotATraceError):
            raise
        raise TruncatedTraceError(f"{path}: corrupt gzip data ({exc})") from exc
    return parts[0] if len(parts) == 1 else b"".join(parts)


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
