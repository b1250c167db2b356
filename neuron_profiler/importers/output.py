"""Writing imported traces: to a temporary name beside the target, renamed only once complete.

A Ctrl-C, a kill or a full disk during an import therefore never leaves a file under the final name that
reads as complete (the temporary file is removed on any exception; one left by SIGKILL has a name no reader
lists: ``<final name>.<pid>-<random>.tmp``). Write failures (full disk, read-only folder) become one
``OutputWriteError`` naming the file and the cause.
"""
from __future__ import annotations

import contextlib
import errno
import os
import re
from pathlib import Path

from neuron_profiler.trace import TraceBuilder

__all__ = ["OutputWriteError", "write_atomically"]

#: the temporary names of ``neuron_profiler.trace.files.partial_name``: ``<final name>.<pid>-<8 hex>.tmp``
_PARTIAL = re.compile(r"\.\d+-[0-9a-f]{8}\.tmp$")


class OutputWriteError(OSError):
    """An imported trace could not be written (nothing was left under the output name)."""


def write_atomically(final: str | os.PathLike, builder: TraceBuilder) -> Path:
    """Write ``builder`` to ``final`` (``TraceBuilder.write``: a temporary name beside it, renamed once complete,
    removed on any error; the folder is created); ``OutputWriteError`` when it fails with an ``OSError``
    ("cannot write <final>: No space left on device; nothing was written")."""
    final = Path(final)
    try:
        builder.write(final)
    except OutputWriteError:
        raise
    except OSError as exc:
        reason = exc.strerror or str(exc)
        if exc.errno == errno.ENOSPC:
            reason = "no space left on device"
        err = OutputWriteError(f"cannot write {final}: {reason}; nothing was written (the source is untouched)")
        err.errno = exc.errno
        raise err from exc
    return final


def stale_temporaries(folder: Path, older_than_s: float = 3600.0) -> list[Path]:
    """Temporary files of interrupted writes (a SIGKILL leaves them behind) older than ``older_than_s``."""
    import time

    now = time.time()
    out = []
    with contextlib.suppress(OSError):
        for p in folder.iterdir():
            if _PARTIAL.search(p.name):
                with contextlib.suppress(OSError):
                    if now - p.stat().st_mtime > older_than_s:
                        out.append(p)
    return out
