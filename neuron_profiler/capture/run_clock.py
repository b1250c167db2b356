"""One timeline origin for the ranks of a run: rank 0's window start, shared through the process group's
key-value store (the c10d store every ``init_process_group`` has; no collective is issued).

A simulated rank projects its timeline from a window start. Each rank's own start, measured on this machine,
differs by how far that rank's CPU lagged (hundreds of ms under load), which made independently simulated
ranks look like stragglers. Rank 0 publishes its start when a window opens; every rank reads it, without
waiting, when it exports the window. When the store is missing or the value has not arrived, the rank keeps
its own start and the trace says so (``Header.simulation.assumptions["cross_rank_origin"]``).

A window opened before the process group exists (``neuron-profile capture -- torchrun ...`` profiles from
interpreter start-up; so do ``torch.multiprocessing.spawn`` workers under the runner) has no store to publish to:
``publish_after_init`` wraps ``init_process_group`` for the window, so rank 0 publishes as soon as the group is
up, and the other ranks wait for the value (at most ``LATE_WAIT_S``) when they export.
"""
from __future__ import annotations

import datetime
import functools
from collections.abc import Callable
from typing import Any

__all__ = ["publish_start", "shared_start", "publish_after_init", "LATE_WAIT_S"]

#: how long a rank exporting a window opened before the process group waits for rank 0's start (rank 0 publishes
#: it right after ``init_process_group``, a rendezvous every rank passed long before it exports)
LATE_WAIT_S = 5.0

#: errors of a missing / closed store or a private API that moved
_STORE_ERRORS = (RuntimeError, AttributeError, ValueError, OSError, TypeError)


def _key(run_id: str, ordinal: int) -> str:
    return f"neuron_profiler/{run_id}/window{ordinal}/start_ns"


def _store() -> Any:
    import torch.distributed as dist

    if not (dist.is_available() and dist.is_initialized()):
        return None
    return dist.distributed_c10d._get_default_store()


def publish_start(run_id: str, ordinal: int, start_ns: int, problems: Any) -> None:
    """Rank 0: publish the start of its ``ordinal``-th window (failures are recorded, never raised)."""
    try:
        store = _store()
        if store is not None:
            store.set(_key(run_id, ordinal), str(int(start_ns)))
    except _STORE_ERRORS as exc:
        problems.add(f"cannot publish the window start for the other ranks ({exc!r})")


def shared_start(run_id: str, ordinal: int, problems: Any, wait_s: float = 0.0) -> int | None:
    """Rank 0's start of its ``ordinal``-th window when the store has it, else None; waits up to ``wait_s``
    seconds for it (0: never blocks)."""
    try:
        store = _store()
        key = _key(run_id, ordinal)
        if store is None:
            return None
        if not store.check([key]):
            if wait_s <= 0:
                return None
            try:
                store.wait([key], datetime.timedelta(seconds=wait_s))
            except _STORE_ERRORS + (TimeoutError,):
                problems.add(f"rank 0's window start did not arrive within {wait_s:g} s; this rank's timeline "
                             "keeps its own origin")
                return None
        return int(store.get(key))
    except _STORE_ERRORS as exc:
        problems.add(f"cannot read rank 0's window start ({exc!r}); this rank's timeline keeps its own origin")
        return None


def publish_after_init(run_id: str, ordinal: int, start_ns: int, problems: Any) -> Callable[[], None]:
    """For a window opened before the process group exists: wrap ``init_process_group`` so that rank 0 of a
    multi-rank group publishes ``start_ns`` as soon as the group is up. Returns the function that removes the
    wrapper (call it when the window ends; idempotent). No-op without torch.distributed."""
    try:
        import torch.distributed as dist
        import torch.distributed.distributed_c10d as c10d
    except ImportError:
        return lambda: None
    orig = c10d.init_process_group
    saved = [(mod, getattr(mod, "init_process_group", None)) for mod in (dist, c10d)]

    @functools.wraps(orig)
    def init_process_group(*args: Any, **kwargs: Any) -> Any:
        out = orig(*args, **kwargs)
        try:
            if dist.get_world_size() > 1 and dist.get_rank() == 0:
                publish_start(run_id, ordinal, start_ns, problems)
        except _STORE_ERRORS as exc:
            problems.add(f"cannot publish the window start after init_process_group ({exc!r})")
        return out

    for mod, _ in saved:
        mod.init_process_group = init_process_group  # type: ignore[attr-defined]

    def remove() -> None:
        for mod, fn in saved:
            if getattr(mod, "init_process_group", None) is init_process_group:
                mod.init_process_group = fn  # type: ignore[attr-defined]
    return remove
