"""The import cache: converted ``.nprof`` copies of imported sources, in the user's cache directory.

Opening a Kineto JSON or a Neuron Explorer profile (``analysis.load``, the explorer, ``neuron-trace import``
without ``-o``) converts it once and keeps the result here, never beside the source:

- where: ``$NEURON_PROFILER_CACHE_DIR`` when set (tests, shared machines), else
  ``platformdirs.user_cache_dir("neuron-profiler")`` (``~/.cache/neuron-profiler`` on Linux,
  ``~/Library/Caches/neuron-profiler`` on macOS, ``%LOCALAPPDATA%\\neuron-profiler\\Cache`` on Windows), in
  ``imports/``. The first write of a process says where on stderr (one line).
- key: the source's resolved path, size and mtime (for a directory: those of every file in it) and the
  importer version. A changed source gets a new entry and the old entries of that path are removed.
- trust: an entry is used only when it reads back complete (footer present) and its header carries the
  same key; anything else (a stale, partial or foreign file) is re-imported. Entries are written to a
  temporary name and renamed when complete (``output.write_atomically``).
"""
from __future__ import annotations

import contextlib
import hashlib
import json
import os
import sys
from pathlib import Path
from typing import Any

from neuron_profiler.importers.output import stale_temporaries, write_atomically

__all__ = ["ENV_VAR", "IMPORTER_VERSION", "cache_dir", "cache_key", "cache_path", "lookup", "store"]

ENV_VAR = "NEURON_PROFILER_CACHE_DIR"
#: Bumped whenever an importer's output changes, so that older cache entries are re-imported.
IMPORTER_VERSION = "2026.12-1"
KEY_METADATA = "import.cache_key"
_MAX_DIR_FILES = 10_000  # a directory source's key lists at most this many files
_announced = False


def cache_dir() -> Path:
    """The folder of imported traces (not created here)."""
    env = os.environ.get(ENV_VAR)
    if env:
        return Path(env).expanduser() / "imports"
    try:
        import platformdirs

        base = Path(platformdirs.user_cache_dir("neuron-profiler", appauthor=False))
    except ImportError:  # pragma: no cover - platformdirs is a core dependency
        base = Path(os.environ.get("XDG_CACHE_HOME") or Path.home() / ".cache") / "neuron-profiler"
    return base / "imports"


def _state(src: Path) -> dict[str, Any]:
    st = src.stat()
    state: dict[str, Any] = {"path": str(src), "size": st.st_size, "mtime_ns": st.st_mtime_ns}
    if src.is_dir():
        files = []
        for i, p in enumerate(sorted(q for q in src.rglob("*") if q.is_file())):
            if i >= _MAX_DIR_FILES:
                break
            s = p.stat()
            files.append([p.relative_to(src).as_posix(), s.st_size, s.st_mtime_ns])
        state["files"] = files
    return state


def cache_key(src: str | os.PathLike) -> str:
    """Hex key of a source's current state (resolved path, size, mtime; every file of a directory)."""
    p = Path(src).resolve()
    text = json.dumps({"importer": IMPORTER_VERSION, **_state(p)}, sort_keys=True)
    return hashlib.sha256(text.encode()).hexdigest()


def _path_tag(src: Path) -> str:
    return hashlib.sha256(str(src.resolve()).encode()).hexdigest()[:12]


def _stem(src: Path) -> str:
    name = src.resolve().name or "trace"
    for suf in (".json.gz", ".json", ".gz", ".nprof"):
        if name.lower().endswith(suf):
            name = name[: -len(suf)]
            break
    safe = "".join(c if c.isalnum() or c in "-_.@" else "_" for c in name)[:80]
    return safe or "trace"


def cache_path(src: str | os.PathLike, key: str | None = None) -> Path:
    """Where the cache entry of ``src`` in its current state lives: ``<stem>.<path tag>.<key>.nprof``."""
    p = Path(src)
    return cache_dir() / f"{_stem(p)}.{_path_tag(p)}.{(key or cache_key(p))[:16]}.nprof"


def lookup(src: str | os.PathLike) -> Path | None:
    """The trusted cache entry of ``src`` (complete, same key), or None (absent, stale or partial)."""
    from neuron_profiler.trace import TraceFormatError, read_trace

    key = cache_key(src)
    p = cache_path(src, key)
    if not p.is_file():
        return None
    try:
        with read_trace(p) as tf:
            ok = bool(tf.complete) and tf.header.metadata.get(KEY_METADATA) == key
    except (TraceFormatError, OSError):
        ok = False
    return p if ok else None


def _announce(folder: Path) -> None:
    global _announced
    if not _announced:
        _announced = True
        print(f"neuron-profiler: imported traces are cached in {folder} (set {ENV_VAR} to change)",
              file=sys.stderr)


def store(builder: Any, src: str | os.PathLike) -> Path:
    """Write ``builder`` as the cache entry of ``src`` (atomically) and remove older entries of the same
    source path and leftovers of interrupted writes. Raises ``OutputWriteError`` when it cannot be written."""
    key = cache_key(src)
    final = cache_path(src, key)
    builder.header.metadata[KEY_METADATA] = key
    write_atomically(final, builder)
    _announce(final.parent)
    tag = _path_tag(Path(src))
    for old in final.parent.glob(f"*.{tag}.*.nprof"):
        if old != final:
            with contextlib.suppress(OSError):
                old.unlink()
    for tmp in stale_temporaries(final.parent):
        with contextlib.suppress(OSError):
            tmp.unlink()
    return final
