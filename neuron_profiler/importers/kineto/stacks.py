"""Python stacks for imported operators, from ``python_function`` events (``with_stack=True``).

Kineto writes each Python frame as a complete event with ``Python id`` / ``Python parent id``; they may
sit on their own thread (pid 0 / tid 0 on recent versions). An operator's stack is the chain of frames
enclosing its start, innermost last, names joined by newlines. Frames are matched on the operator's own
thread when it has frames, else on the single Python thread of the trace (ambiguous otherwise: skipped).
"""
from __future__ import annotations

import numpy as np

from neuron_profiler.importers.kineto.extract import NO_FRAME_ID
from neuron_profiler.importers.kineto.links import lookup

MAX_DEPTH = 128


def operator_stacks(is_py: np.ndarray, is_op: np.ndarray, thread: np.ndarray, start: np.ndarray,
                    end: np.ndarray, names: np.ndarray, frames: np.ndarray) -> np.ndarray | None:
    """Stack string per host row (object array, "" when unknown) or None when the trace has no frames.

    ``is_py`` marks python_function rows, ``is_op`` the rows that get a stack (cpu_op); ``thread`` is a
    per-row thread key; rows are any order. ``frames``: per python_function row (in row order), its args'
    ``Python id`` and ``Python parent id`` (int64; ``NO_FRAME_ID``: not an int64, no link)."""
    py_rows = np.flatnonzero(is_py)
    if len(py_rows) == 0:
        return None
    out = np.full(len(is_py), "", dtype=object)
    ops = np.flatnonzero(is_op)
    if not len(ops):
        return out
    stacks = _Stacks(py_rows, frames, names)
    for r, f in zip(*_innermost_frames(py_rows, ops, thread, start, end)):
        out[r] = stacks.of(f)
    return out


class _Stacks:
    """Stack strings of frame rows, through the frames' ``Python id`` / ``Python parent id`` links."""

    def __init__(self, py_rows: np.ndarray, frames: np.ndarray, names: np.ndarray) -> None:
        self.names = names
        own, par = frames[:, 0], frames[:, 1]
        ok = own != NO_FRAME_ID
        linked = np.flatnonzero(ok & (par != NO_FRAME_ID))
        # the parent row of each frame whose two ids are ints: the row of its parent id (the last row of an id
        # wins, so the rows are looked up in reverse, where ``lookup`` takes the first)
        parent = lookup(own[ok][::-1], py_rows[ok][::-1].astype(np.int64), par[linked])
        has = parent >= 0
        self.parent: dict[int, int] = dict(zip(py_rows[linked[has]].tolist(), parent[has].tolist()))
        self.cache: dict[int, tuple[str, int]] = {}  # frame row -> (its stack, its depth)

    def _parent(self, r: int) -> int:
        """The frame row of ``r``'s parent (-1: none)."""
        return self.parent.get(r, -1)

    def of(self, r: int) -> str:
        """The chain of frames from ``r`` up (innermost ``MAX_DEPTH`` frames), built on the cached stack of
        the nearest ancestor already seen, so shared parents are walked once."""
        cache, names = self.cache, self.names
        hit = cache.get(r)
        if hit is not None:
            return hit[0]
        chain: list[int] = []
        cur = r
        while cur >= 0 and cur not in cache and len(chain) < MAX_DEPTH:
            chain.append(cur)
            cur = self._parent(cur)
        base, depth = cache[cur] if cur >= 0 and cur in cache else ("", 0)
        if cur >= 0 and (cur not in cache or depth + len(chain) > MAX_DEPTH):  # deep (or cyclic): walk it
            walk, cur, n = [], r, 0
            while cur >= 0 and n < MAX_DEPTH:
                walk.append(str(names[cur]))
                cur = self._parent(cur)
                n += 1
            return "\n".join(reversed(walk))
        for f in reversed(chain):
            base = f"{base}\n{names[f]}" if depth else str(names[f])
            depth += 1
            cache[f] = (base, depth)
        return base


def _innermost_frames(py_rows: np.ndarray, ops: np.ndarray, thread: np.ndarray, start: np.ndarray,
                      end: np.ndarray) -> tuple[list[int], list[int]]:
    """(operator rows, the innermost frame row open at each one's start): frames of the operator's own
    thread, else of the trace's only Python thread; operators without such a frame are left out."""
    py_threads = np.unique(thread[py_rows])
    order = py_rows[np.lexsort((start[py_rows], thread[py_rows]))]
    key = thread[order]
    op_th = thread[ops]
    own = py_threads[np.minimum(np.searchsorted(py_threads, op_th), len(py_threads) - 1)] == op_th
    th = np.where(own, op_th, py_threads[0] if len(py_threads) == 1 else op_th)
    ok = own | (len(py_threads) == 1)
    ops, th = ops[ok], th[ok]
    # per operator, the last frame of that thread starting at or before it (one searchsorted per thread)
    lo, hi = np.searchsorted(key, th, "left"), np.searchsorted(key, th, "right")
    pos = np.full(len(ops), -1, dtype=np.int64)
    for t in np.unique(th).tolist():
        m = th == t
        a, b = int(lo[m][0]), int(hi[m][0])
        pos[m] = a + np.searchsorted(start[order[a:b]], start[ops[m]], "right") - 1
        pos[m & (pos < a)] = -1
        lo[m] = a
    # walk back (up to 64 earlier frames of the thread) to the innermost frame still open at the op's start
    steps = 0
    todo = np.flatnonzero(pos >= 0)
    while len(todo) and steps < 64:
        f = order[pos[todo]]
        open_ = end[f] >= start[ops[todo]]
        todo = todo[~open_]
        pos[todo] -= 1
        todo = todo[pos[todo] >= lo[todo]]
        steps += 1
    hit = (pos >= 0) & (pos >= lo)
    if len(todo):
        hit[todo] = False
    hit_rows = np.flatnonzero(hit)
    found = order[pos[hit_rows]]
    ok_end = end[found] >= start[ops[hit_rows]]
    return ops[hit_rows][ok_end].tolist(), found[ok_end].tolist()
