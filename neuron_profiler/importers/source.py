"""One entry point for every trace source: detect what a path holds (by content, not by suffix alone) and open
it. ``neuron-trace import``, ``analysis.load`` and the explorer all go through here.

Sources (``detect_source`` returns the kind):

==========================  ===============================================================================
``nprof``                   a trace file of this project (magic bytes ``\\x89NTRACE``; or a ``.nprof`` name,
                            so that the reader reports what is wrong with a damaged one)
``kineto-json``             torch.profiler / Kineto / Chrome trace JSON, plain or gzip (``traceEvents`` or a
                            bare event array); our own Chrome export is one of these
``neuron-explorer-json``    a Neuron Explorer JSON export (``neuron_explorer.json_export``)
``neuron-explorer-parquet`` a Neuron Explorer Parquet profile directory (``<Table>.parquet`` files of schema
                            7.4.0), or a folder holding exactly one such directory and nothing else importable
``directory``               any other folder: its traces are listed by ``list_sources``
==========================  ===============================================================================

Anything else (a FIFO, a device, a file that is none of these) raises ``NotATraceError`` with a one-line
message saying what was expected and what was found.
"""
from __future__ import annotations

import os
import stat
import warnings
import zlib
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from neuron_profiler.importers import cache as import_cache
from neuron_profiler.importers.output import OutputWriteError, write_atomically
from neuron_profiler.trace import framing, read_trace
from neuron_profiler.trace.errors import NotATraceError

__all__ = ["NPROF", "KINETO_JSON", "EXPLORER_JSON", "EXPLORER_PARQUET", "DIRECTORY", "IMPORTABLE",
           "detect_source", "is_trace_source", "list_sources", "load_source", "open_source", "import_source",
           "OpenedSource"]

NPROF = "nprof"
KINETO_JSON = "kineto-json"
EXPLORER_JSON = "neuron-explorer-json"
EXPLORER_PARQUET = "neuron-explorer-parquet"
DIRECTORY = "directory"
#: kinds converted by an importer (everything but .nprof and plain directories)
IMPORTABLE = (KINETO_JSON, EXPLORER_JSON, EXPLORER_PARQUET)

_SNIFF_BYTES = 256 << 10
_GZIP_MAGIC = b"\x1f\x8b"
_EXPECTED = ("expected .nprof, a Kineto/torch.profiler JSON(.gz) trace, a Neuron Explorer JSON export or a "
             "Neuron Explorer Parquet profile directory")


def _prefix(path: Path, n: int = _SNIFF_BYTES) -> bytes:
    """The first ``n`` bytes of the file's content (gunzipped when it is gzip; a damaged stream gives what
    decompresses, possibly nothing)."""
    with open(path, "rb") as f:
        head = f.read(n if n > 2 else 2)
        if head[:2] != _GZIP_MAGIC:
            return head
        d = zlib.decompressobj(wbits=47)
        out = bytearray()
        chunk = head
        try:
            while len(out) < n:
                out += d.decompress(chunk, n - len(out))
                while d.unconsumed_tail and len(out) < n:
                    out += d.decompress(d.unconsumed_tail, n - len(out))
                if d.eof or len(out) >= n:
                    break
                chunk = f.read(1 << 16)
                if not chunk:
                    break
        except zlib.error:
            pass
        return bytes(out)


def _describe(head: bytes) -> str:
    if not head:
        return "an empty file"
    shown = head[:24]
    return f"content starting with {shown!r}"


def _json_kind(head: bytes) -> str | None:
    """Kind of a JSON text from its first bytes, or None when it does not start like one we know."""
    from neuron_profiler.importers.neuron_explorer.detect import looks_like_export

    s = head.lstrip(b"\xef\xbb\xbf \t\r\n")
    if s[:1] == b"[":
        return KINETO_JSON
    if s[:1] != b"{":
        return None
    if b'"traceEvents"' in s or b'"ph"' in s:
        return KINETO_JSON
    if looks_like_export(s):
        return EXPLORER_JSON
    return KINETO_JSON  # a JSON object of unknown shape: the Kineto reader says what it lacks


def detect_source(path: str | os.PathLike) -> str:
    """The kind of trace source at ``path`` (see the module doc). Raises ``FileNotFoundError`` when absent,
    ``NotATraceError`` for anything that is not a trace source."""
    from neuron_profiler.importers.neuron_explorer.detect import find_profiles, is_profile_dir

    p = Path(path)
    try:
        st = p.stat()
    except FileNotFoundError:
        raise FileNotFoundError(f"no such trace file or directory: {p}") from None
    if stat.S_ISDIR(st.st_mode):
        if is_profile_dir(p):
            return EXPLORER_PARQUET
        profiles = find_profiles(p)
        if len(profiles) == 1 and not _other_sources(p, profiles):
            return EXPLORER_PARQUET
        return DIRECTORY
    if not stat.S_ISREG(st.st_mode):
        raise NotATraceError(f"{p}: not a regular file (a FIFO, socket or device); {_EXPECTED}")
    head = _prefix(p)
    if head.startswith(framing.MAGIC) or p.name.lower().endswith(".nprof"):
        return NPROF
    kind = _json_kind(head)
    if kind is None:
        raise NotATraceError(f"{p}: unknown trace file type ({_describe(head)}); {_EXPECTED}")
    return kind


def _other_sources(root: Path, profiles: list[Path]) -> bool:
    """True when ``root`` holds importable files outside the Explorer profile directories."""
    for f in root.rglob("*"):
        if f.is_file() and not any(f.is_relative_to(d) for d in profiles) and _looks_importable_file(f):
            return True
    return False


def _looks_importable_file(p: Path) -> bool:
    name = p.name.lower()
    return name.endswith((".nprof", ".json", ".json.gz"))


def is_trace_source(path: str | os.PathLike) -> bool:
    """True for a file or directory ``open_source`` can open as one trace (for listings: cheap checks on
    names, then the content of candidate files)."""
    p = Path(path)
    try:
        if p.is_dir():
            from neuron_profiler.importers.neuron_explorer.detect import is_profile_dir

            return is_profile_dir(p)
        if not (p.is_file() and _looks_importable_file(p)):
            return False
        return detect_source(p) in (NPROF, *IMPORTABLE)
    except (OSError, NotATraceError):
        return False


def names_trace_content(path: str | os.PathLike) -> bool:
    """For listings of a folder: whether a JSON file's first bytes show trace content (``traceEvents`` or
    events, an event list, a Neuron Explorer export). A JSON object of another shape (e.g. the ``truth.json`` a
    synthetic run writes beside its traces) is importable only in the sense that the Kineto reader says what it
    lacks: not listed as a trace. ``.nprof`` files and directories: ``is_trace_source``."""
    from neuron_profiler.importers.neuron_explorer.detect import looks_like_export

    p = Path(path)
    if p.is_dir() or p.name.lower().endswith(".nprof"):
        return is_trace_source(p)
    try:
        s = _prefix(p).lstrip(b"\xef\xbb\xbf \t\r\n")
    except OSError:
        return False
    return s[:1] == b"[" or (s[:1] == b"{" and (b'"traceEvents"' in s or b'"ph"' in s or looks_like_export(s)))


def list_sources(root: str | os.PathLike) -> list[Path]:
    """The traces of a directory, sorted: every ``.nprof`` inside (recursively) when there is any (a folder of
    converted traces), else every importable source (Explorer profile directories, Kineto and Explorer JSON
    files outside them)."""
    from neuron_profiler.importers.neuron_explorer.detect import find_profiles

    root = Path(root)
    nprofs = sorted(p for p in root.rglob("*.nprof") if p.is_file())
    if nprofs:
        return nprofs
    profiles = find_profiles(root)
    files = [f for f in sorted(root.rglob("*")) if f.is_file() and _looks_importable_file(f)
             and not any(f.is_relative_to(d) for d in profiles) and is_trace_source(f)]
    return sorted(profiles + files)


def load_source(path: str | os.PathLike, kind: str | None = None, *, run_id: str = "",
                progress: bool = False) -> Any:
    """Import one source into an in-memory ``TraceBuilder`` (nothing written). ``kind`` defaults to
    ``detect_source(path)``; ``.nprof`` files and plain directories are not imported (``ValueError``)."""
    p = Path(path)
    kind = kind or detect_source(p)
    if kind == KINETO_JSON:
        from neuron_profiler.importers.kineto import load_kineto_builder

        return load_kineto_builder(p, run_id=run_id)
    if kind == EXPLORER_PARQUET:
        from neuron_profiler.importers.neuron_explorer import load_parquet_profile

        return load_parquet_profile(p, run_id=run_id)
    if kind == EXPLORER_JSON:
        from neuron_profiler.importers.neuron_explorer import load_json_export

        return load_json_export(p, run_id=run_id)
    raise ValueError(f"{p}: a {kind} is not imported (open .nprof files with read_trace; list directories "
                     f"with list_sources)")


@dataclass
class OpenedSource:
    """An opened trace: ``source`` is the reader's ``TraceFile`` (or, when no cache could be written, the
    in-memory ``TraceBuilder``); ``kind`` the detected source kind; ``file`` the ``.nprof`` read (the source
    itself or its cache entry; None when in memory)."""

    source: Any
    kind: str
    path: Path
    file: Path | None


def open_source(path: str | os.PathLike, *, cache: bool = True, progress: bool = False) -> OpenedSource:
    """Open one trace for reading, whatever it is. ``.nprof`` files are read directly; importable sources are
    converted once into the user's cache (``importers.cache``) and read from there on later calls
    (``cache=False``: converted in memory, nothing written). When the cache cannot be written (full disk,
    read-only cache folder) the trace stays in memory and a warning says why."""
    p = Path(path)
    kind = detect_source(p)
    if kind == NPROF:
        return OpenedSource(read_trace(p), kind, p, p)
    if kind not in IMPORTABLE:
        raise ValueError(f"{p}: a directory of several traces; open them one by one (list_sources) or with "
                         f"analysis.load (a TraceSet)")
    if cache:
        hit = import_cache.lookup(p)
        if hit is not None:
            return OpenedSource(read_trace(hit), kind, p, hit)
    builder = load_source(p, kind, progress=progress)
    if not cache:
        return OpenedSource(builder, kind, p, None)
    try:
        out = import_cache.store(builder, p)
    except (OutputWriteError, OSError) as exc:
        warnings.warn(f"{p}: kept in memory, the import cache could not be written ({exc})", stacklevel=2)
        return OpenedSource(builder, kind, p, None)
    return OpenedSource(read_trace(out), kind, p, out)


def import_source(src: str | os.PathLike, out: str | os.PathLike | None = None, *,
                  progress: bool = True) -> list[Path]:
    """Convert ``src`` to ``.nprof`` and return the written files.

    - one source (a Kineto / Explorer JSON file, an Explorer profile directory): written to ``out`` (a file,
      or a directory that receives ``<stem>.nprof``); without ``out``, into the import cache (the entry
      ``analysis.load`` and the explorer reuse), never beside the source;
    - a directory of Kineto traces (one file per rank): ``out`` is a directory receiving
      ``rank<NNNNN>_<stem>.nprof`` per rank (same ``run_id``); without ``out``, a folder of the cache.
    Every file is written to a temporary name and renamed when complete."""
    from neuron_profiler.importers.kineto import api as kineto_api

    p = Path(src)
    kind = detect_source(p)
    if kind == DIRECTORY:
        out_dir = Path(out) if out is not None else import_cache.cache_path(p).with_suffix("")
        if any(f.is_file() and kineto_api.is_kineto_file(f) for f in p.iterdir()):
            return kineto_api.import_directory(p, out_dir, progress=progress)  # one file per rank
        sources = [f for f in list_sources(p) if f.suffix != ".nprof"]
        if not sources:
            raise NotATraceError(f"{p}: no importable traces (Kineto JSON files, Neuron Explorer profiles or "
                                 f"JSON exports) found")
        written = []
        for i, f in enumerate(sources):  # e.g. several Explorer profiles: one .nprof each
            name = f"{i:03d}_{import_cache._stem(f)}.nprof" if len(sources) > 1 else f"{import_cache._stem(f)}.nprof"
            written += import_source(f, out_dir / name, progress=progress)
        return written
    if kind == NPROF:
        raise ValueError(f"{p}: already a .nprof trace (use `neuron-trace convert --to nprof` to rewrite it)")
    if kind == KINETO_JSON:
        return [kineto_api.import_kineto(p, out, progress=progress)]
    builder = load_source(p, kind, progress=progress)
    if out is None:
        return [import_cache.store(builder, p)]
    dst = Path(out)
    if dst.is_dir():
        dst = dst / (import_cache._stem(p) + ".nprof")
    return [write_atomically(dst, builder)]
