"""Python stacks for imported operators, from ``python_function`` events (``with_stack=True``).

Kineto writes each Python frame as a complete event with ``Python id`` / ``Python parent id``; they may
sit on their own thread (pid 0 / tid 0 on recent versions). An operator's stack is the chain of frames
enclosing its start, innermost last, names joined by newlines. Frames are matched on the operator's own
thread when it has frames, else on the single Python thread of the trace (ambiguous otherwise: skipped).
"""
from __future__ import annotations

from typing import Any

import numpy as np

MAX_DEPTH = 128


def operator_stacks(is_py: np.ndarray, is_op: np.ndarray, thread: np.ndarray, start: np.ndarray,
                    end: np.ndarray, names: np.ndarray, frames: dict[int, tuple[Any, Any]]) -> np.ndarray | None:
    """Stack string per host row (object array, "" when unknown) or None when the trace has no frames.

    ``is_py`` marks python_function rows, ``is_op`` the rows that get a stack (cpu_op); ``thread`` is a
    per-row thread key; rows are any order. ``frames``: python_function row -> its args' (``Python id``,
    ``Python parent id``) values as read."""
    py_rows = np.flatnonzero(is_py)
    if len(py_rows) == 0:
        return None
    by_id: dict[int, int] = {}
    parent_of: dict[int, int] = {}
    for r in py_rows.tolist():
        pid_, par = frames.get(r, (None, None))
        if type(pid_) is int:
            by_id[pid_] = r
            parent_of[r] = par if type(par) is int else -1
    cache: dict[int, str] = {}

    def stack_of(r: int) -> str:
        s = cache.get(r)
        if s is not None:
            return s
        chain, cur, depth = [], r, 0
        while cur >= 0 and depth < MAX_DEPTH:
            chain.append(str(names[cur]))
            cur = by_id.get(parent_of.get(cur, -1), -1)
            depth += 1
        s = cache[r] = "\n".join(reversed(chain))
        return s

    out = np.full(len(is_py), "", dtype=object)
    py_threads = np.unique(thread[py_rows])
    order = py_rows[np.lexsort((start[py_rows], thread[py_rows]))]
    key = thread[order]
    for r in np.flatnonzero(is_op).tolist():
        th = thread[r] if thread[r] in py_threads else (py_threads[0] if len(py_threads) == 1 else None)
        if th is None:
            continue
        lo, hi = np.searchsorted(key, th, "left"), np.searchsorted(key, th, "right")
        j = lo + np.searchsorted(start[order[lo:hi]], start[r], "right") - 1
        steps = 0
        while j >= lo and steps < 64:  # innermost frame still open at the op's start
            f = order[j]
            if end[f] >= start[r]:
                out[r] = stack_of(int(f))
                break
            j -= 1
            steps += 1
    return out
