"""Big per-trace frames allocated in 4 KiB pages instead of transparent huge pages.

numpy asks the kernel for transparent huge pages (``madvise``) for every array of 4 MiB or more. Where a
huge-page fault is dear this is most of a big frame's cost: on the explorer's benchmark VM, building the 5M-row
device activity frame spends 0.5-0.7 s of system time faulting its ~300 MB in with huge pages and 0.1-0.2 s
with 4 KiB pages, for the same user time (docs/explorer.md). :func:`small_pages` builds such a frame without
the hint. numpy's switch is process-wide, so it is reference-counted under a lock: nested and concurrent users
turn it off once and the last one out restores it; another thread allocating meanwhile gets 4 KiB pages too
(a matter of speed, never of results). Without numpy's switch it does nothing.
"""
from __future__ import annotations

import importlib
import threading
from collections.abc import Iterator
from contextlib import contextmanager

__all__ = ["small_pages"]


def _switch():
    """numpy's ``_set_madvise_hugepage(enabled) -> previous`` (numpy >= 1.20), or None."""
    for mod in ("numpy._core.multiarray", "numpy.core.multiarray"):
        try:
            fn = getattr(importlib.import_module(mod), "_set_madvise_hugepage", None)
        except ImportError:
            continue
        if fn is not None:
            return fn
    return None


_SET = _switch()
_LOCK = threading.Lock()
_state = {"depth": 0, "previous": True}


@contextmanager
def small_pages() -> Iterator[None]:
    """Arrays allocated inside are not marked for transparent huge pages (see the module doc)."""
    if _SET is None:
        yield
        return
    with _LOCK:
        if _state["depth"] == 0:
            _state["previous"] = bool(_SET(False))
        _state["depth"] += 1
    try:
        yield
    finally:
        with _LOCK:
            _state["depth"] -= 1
            if _state["depth"] == 0:
                _SET(_state["previous"])
