"""Collective operations: the one canonical naming and the one bus-bandwidth convention of the project.

Used by the simulated runtime, the Kineto importer and the analysis package alike, so a collective is
called the same everywhere and its busbw means the same thing whether it was simulated, imported or
recomputed.
"""
from __future__ import annotations

import functools
import re

import numpy as np

#: Canonical names, in the order their squashed spellings are searched for (longest first where one
#: contains another: "allreduce" before "reduce", "sendrecv" before "send").
_PATTERNS = (
    ("allreduce", "all_reduce"), ("allgather", "all_gather"), ("reducescatter", "reduce_scatter"),
    ("alltoall", "all_to_all"), ("sendrecv", "send_recv"), ("broadcast", "broadcast"), ("bcast", "broadcast"),
    ("barrier", "barrier"), ("reduce", "reduce"), ("gather", "gather"), ("scatter", "scatter"),
    ("send", "send"), ("recv", "recv"),
)
#: record_param_comms / c10d entries that move no data (work waits, coalescing markers, setup)
NOT_COLLECTIVES = frozenset({"wait", "", "init", "finalize", "coalesced", "startcoalescing", "endcoalescing"})
_PREFIXES = ("nccl:", "gloo:", "c10d::", "neuron:")
#: ``record_param_comms`` args key written by capture: false for a torch.distributed call that blocks the compute
#: after it (``async_op=False``, the default; ``send`` / ``recv``), true for one that runs beside compute until
#: waited for (``async_op=True``, ``isend`` / ``irecv``, DDP's gradient buckets and functional collectives, which
#: no Python call of torch.distributed issues). Absent (imported traces): asynchronous.
ASYNC_KEY = "Async op"


@functools.lru_cache(maxsize=4096)
def normalize_collective(name: str) -> str:
    """Canonical collective name: all_reduce, all_gather, reduce_scatter, all_to_all, send_recv, broadcast,
    barrier, reduce, gather, scatter, send, recv. Accepts c10d names ("allreduce", "_allgather_base",
    "reduce_scatter_tensor_coalesced"), backend-prefixed names ("nccl:all_reduce", "c10d::allreduce_") and
    NCCL/RCCL kernel names ("ncclKernel_AllReduce_RING_LL_Sum_float"). "" for entries that move no data
    ("wait", coalescing markers); other names come back lower-cased and squashed."""
    s = str(name or "").strip().lower()
    for p in _PREFIXES:
        if s.startswith(p):
            s = s[len(p):]
    flat = re.sub(r"[^a-z]", "", s)
    if flat in NOT_COLLECTIVES:
        return ""
    for key, canon in _PATTERNS:
        if key in flat:
            return canon
    return flat


_RING = ("all_gather", "reduce_scatter", "all_to_all")
_ONE = ("broadcast", "reduce", "send", "recv", "send_recv", "gather", "scatter")


def bus_factor(operation, group_size):
    """busbw / algbw (nccl-tests convention): all_reduce 2(n-1)/n; all_gather, reduce_scatter, all_to_all
    (n-1)/n; broadcast, reduce, send, recv, send_recv, gather, scatter 1; barrier 0; unknown NaN.
    ``operation`` must be canonical (see ``normalize_collective``). Vectorised; scalars in, scalar out."""
    ops = np.atleast_1d(np.asarray(operation, dtype=object))
    n = np.broadcast_to(np.atleast_1d(np.asarray(group_size, dtype=float)), ops.shape).astype(float)
    n = np.where(n >= 1, n, np.nan)
    out = np.full(ops.shape, np.nan)
    ar = ops == "all_reduce"
    ring = np.isin(ops, _RING)
    out[ar] = 2.0 * (n[ar] - 1) / n[ar]
    out[ring] = (n[ring] - 1) / n[ring]
    out[np.isin(ops, _ONE)] = 1.0
    out[ops == "barrier"] = 0.0
    return out.item() if np.ndim(operation) == 0 and np.ndim(group_size) == 0 else out
