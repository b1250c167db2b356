"""One-line error messages shared by the command-line tools (``neuron-trace``, ``neuron-analyze``): a leaf
module, so the analysis CLI does not import the trace CLI to agree with it."""
from __future__ import annotations

from neuron_profiler.trace.errors import TraceFormatError

__all__ = ["one_line", "too_large"]


def too_large(path: object, e: BaseException) -> str:
    """The one line for an input that ran out of memory (or of stack) while being read: what to do about it."""
    what = "too deeply nested" if isinstance(e, RecursionError) else "too large to read into this machine's memory"
    return (f"{path}: {what} ({type(e).__name__}); check that it is a trace, or read it on a machine with more "
            f"memory")


def one_line(e: BaseException) -> str:
    """The message of ``e`` on one line (an OSError as `file: reason`)."""
    if isinstance(e, OSError) and e.strerror and not isinstance(e, TraceFormatError):
        return f"{e.filename}: {e.strerror}" if e.filename else e.strerror
    return " ".join(str(e).split())
