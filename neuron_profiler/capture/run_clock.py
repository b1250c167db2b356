"""One timeline origin for the ranks of a run: rank 0's window start, shared through the process group's
key-value store (the c10d store every ``init_process_group`` has; no collective is issued).

A simulated rank projects its timeline from a window start. Each rank's own start, measured on this machine,
differs by how far that rank's CPU lagged (hundreds of ms under load), which made independently simulated
ranks look like stragglers. Rank 0 publishes its start when a window opens; every rank reads it, without
waiting, when it exports the window. When the store is missing or the value has not arrived, the rank keeps
its own start and the trace says so (``Header.simulation.assumptions["cross_rank_origin"]``).
"""
from __future__ import annotations

from typing import Any

__all__ = ["publish_start", "shared_start"]

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


def shared_start(run_id: str, ordinal: int, problems: Any) -> int | None:
    """Rank 0's start of its ``ordinal``-th window when the store already has it (never blocks), else None."""
    try:
        store = _store()
        key = _key(run_id, ordinal)
        if store is None or not store.check([key]):
            return None
        return int(store.get(key))
    except _STORE_ERRORS as exc:
        problems.add(f"cannot read rank 0's window start ({exc!r}); this rank's timeline keeps its own origin")
        return None
