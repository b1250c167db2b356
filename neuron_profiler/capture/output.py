"""Where window traces go and how they get there: ``<out>/<run_id>/rank{rank:05d}_window{window:03d}.nprof``,
written under a temporary name and renamed only when complete, so a file with the final name is always whole
(a crash or a full disk leaves at most a ``*.nprof.tmp``, which no reader lists as a trace)."""
from __future__ import annotations

import os
from pathlib import Path
from typing import TYPE_CHECKING

if TYPE_CHECKING:  # pragma: no cover
    from neuron_profiler.trace.builder import TraceBuilder

__all__ = ["trace_path", "write_window", "TMP_SUFFIX"]

TMP_SUFFIX = ".tmp"


def trace_path(out_dir: str | os.PathLike[str], run_id: str, rank: int, window: int) -> Path:
    """``<out_dir>/<run_id>/rank{rank:05d}_window{window:03d}.nprof`` (sorts by rank, then window)."""
    return Path(out_dir) / run_id / f"rank{rank:05d}_window{window:03d}.nprof"


def unique_path(path: Path) -> Path:
    """``path``, or ``<stem>_pid<pid>.nprof`` when another process of the run (same rank, e.g. a launcher)
    already wrote it."""
    return path.with_name(f"{path.stem}_pid{os.getpid()}{path.suffix}") if path.exists() else path


def write_window(builder: TraceBuilder, path: Path) -> Path:
    """Write ``builder`` to ``path`` atomically: to ``<path>.tmp``, then rename. On any failure (``OSError``
    for a full or read-only disk) the partial temporary file is removed and the error propagates."""
    tmp = path.with_name(path.name + TMP_SUFFIX)
    try:
        builder.write(tmp)
        os.replace(tmp, path)
    except BaseException:
        try:
            tmp.unlink()
        except OSError:  # never created (read-only directory) or already gone
            pass
        raise
    return path
