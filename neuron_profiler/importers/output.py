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
from collections.abc import Callable, Iterator
from pathlib import Path

from neuron_profiler.trace import files

__all__ = ["OutputWriteError", "atomic_output", "write_atomically"]

#: the temporary names of ``neuron_profiler.trace.files.partial_name``: ``<final name>.<pid>-<8 hex>.tmp``
_PARTIAL = re.compile(r"\.\d+-[0-9a-f]{8}\.tmp$")


class OutputWriteError(OSError):
    """An imported trace could not be written (nothing was left under the output name)."""


@contextlib.contextmanager
def atomic_output(final: str | os.PathLike) -> Iterator[Path]:
    """The trace package's atomic write (``neuron_profiler.trace.files.atomic_output``), creating
    ``final``'s folder first (the import cache's folders are made on demand)."""
    Path(final).parent.mkdir(parents=True, exist_ok=True)
    with files.atomic_output(final) as tmp:
        yield tmp


def write_atomically(final: str | os.PathLike, write: Callable[[Path], object]) -> Path:
    """``write(tmp)`` then rename to ``final``; ``OutputWriteError`` when it fails with an ``OSError``
    ("cannot write <final>: No space left on device; nothing was written"). A ``write`` marked ``atomic``
    (``TraceBuilder.write``: it writes a temporary name and renames it itself) is given ``final`` directly."""
    final = Path(final)
    try:
        if getattr(write, "atomic", False):
            write(final)  # TraceBuilder.write creates the folder
        else:
            with atomic_output(final) as tmp:
                write(tmp)
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
