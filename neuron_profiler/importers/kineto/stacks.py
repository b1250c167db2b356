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
from neuron_profiler.trace.strings import CodedStrings

MAX_DEPTH = 128


def operator_stacks(is_py: np.ndarray, is_op: np.ndarray, thread: np.ndarray, start: np.ndarray,
                    end: np.ndarray, names: np.ndarray, frames: np.ndarray) -> CodedStrings | None:
    """Stack string per host row ("" when unknown) as ``CodedStrings``, or None when the trace has no frames.

    ``is_py`` marks python_function rows, ``is_op`` the rows that get a stack (cpu_op); ``thread`` is a
    per-row thread key; rows are any order. ``frames``: per python_function row (in row order), its args'
    ``Python id`` and ``Python parent id`` (int64; ``NO_FRAME_ID``: not an int64, no link). The distinct
    stacks are listed in order of first use by row (how the writer numbers strings), each built once per
    distinct innermost frame (operators share few of them: 479 operators, 100 frames on bert_h100)."""
    py_rows = np.flatnonzero(is_py)
    if len(py_rows) == 0:
        return None
    codes = np.full(len(is_py), -1, dtype=np.int64)
    ops = np.flatnonzero(is_op)
    rows, found = _innermost_frames(py_rows, ops, thread, start, end) if len(ops) else (ops, ops)
    if not len(rows):
        return CodedStrings(codes, [])
    uniq, first, inv = np.unique(found, return_index=True, return_inverse=True)
    stacks = _Stacks(py_rows, frames, names)
    text_code: dict[str, int] = {}  # two frames may have equal stacks: one code per distinct string
    frame_code = np.empty(len(uniq), dtype=np.int64)
    for u in np.argsort(first, kind="stable").tolist():  # frames by their first operator row
        frame_code[u] = text_code.setdefault(stacks.of(int(uniq[u])), len(text_code))
    codes[rows] = frame_code[inv.reshape(-1)]
    return CodedStrings(codes, list(text_code))


class _Stacks:
    """Stack strings of frame rows, through the frames' ``Python id`` / ``Python parent id`` links."""

    def __init__(self, py_rows: np.ndarray, frames: np.ndarray, names: np.ndarray) -> None:
        self.names = names.tolist()  # lists: a walk reads one element at a time, ~3x faster than from arrays
        own, par = frames[:, 0], frames[:, 1]
        ok = own != NO_FRAME_ID
        linked = np.flatnonzero(ok & (par != NO_FRAME_ID))
        # the parent row of each frame whose two ids are ints: the row of its parent id (the last row of an id
        # wins, so the rows are looked up in reverse, where ``lookup`` takes the first)
        parent = lookup(own[ok][::-1], py_rows[ok][::-1].astype(np.int64), par[linked])
        parent_of = np.full(len(names), -1, dtype=np.int64)
        parent_of[py_rows[linked]] = parent
        self.parent: list[int] = parent_of.tolist()  # row -> its parent frame's row (-1: none)
        self.cache: dict[int, tuple[str, int]] = {}  # frame row -> (its stack, its depth)

    def of(self, r: int) -> str:
        """The chain of frames from ``r`` up (innermost ``MAX_DEPTH`` frames), built on the cached stack of
        the nearest ancestor already seen, so shared parents are walked once."""
        cache, names, parent = self.cache, self.names, self.parent
        hit = cache.get(r)
        if hit is not None:
            return hit[0]
        chain: list[int] = []
        cur = r
        while cur >= 0 and cur not in cache and len(chain) < MAX_DEPTH:
            chain.append(cur)
            cur = parent[cur]
        base, depth = cache[cur] if cur >= 0 and cur in cache else ("", 0)
        if cur >= 0 and (cur not in cache or depth + len(chain) > MAX_DEPTH):  # deep (or cyclic): walk it
            walk, cur, n = [], r, 0
            while cur >= 0 and n < MAX_DEPTH:
                walk.append(str(names[cur]))
                cur = parent[cur]
                n += 1
            return "\n".join(reversed(walk))
        for f in reversed(chain):
            base = f"{base}\n{names[f]}" if depth else str(names[f])
            depth += 1
            cache[f] = (base, depth)
        return base


def _innermost_frames(py_rows: np.ndarray, ops: np.ndarray, thread: np.ndarray, start: np.ndarray,
                      end: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """(operator rows in row order, the innermost frame row open at each one's start): frames of the operator's
    own thread, else of the trace's only Python thread; operators without such a frame are left out. The frame
    is the last of the thread starting at or before the operator that is still open, looked for among that
    frame and the ``_WALK_BACK - 1`` frames of the thread before it."""
    order = py_rows[np.lexsort((start[py_rows], thread[py_rows]))]
    key = thread[order]  # sorted: its distinct values without a hash table
    py_threads = key[np.flatnonzero(np.concatenate([[True], key[1:] != key[:-1]]))]
    f_start, f_end = start[order], end[order]
    op_th, op_start = thread[ops], start[ops]
    if len(py_threads) == 1:  # the usual case: one search over all the frames
        lo = np.zeros(len(ops), dtype=np.int64)
        pos = np.searchsorted(f_start, op_start, "right") - 1
    else:
        own = py_threads[np.minimum(np.searchsorted(py_threads, op_th), len(py_threads) - 1)] == op_th
        ops, op_th, op_start = ops[own], op_th[own], op_start[own]
        lo, pos = np.searchsorted(key, op_th, "left"), np.empty(len(ops), dtype=np.int64)
        for t in np.unique(op_th).tolist():  # per thread, the last frame starting at or before each operator
            m = op_th == t
            a, b = int(lo[m][0]), int(np.searchsorted(key, t, "right"))
            pos[m] = a + np.searchsorted(f_start[a:b], op_start[m], "right") - 1
    ok = pos >= lo
    shut = np.flatnonzero(ok)
    shut = shut[f_end[pos[shut]] < op_start[shut]]  # that frame ended before the operator: walk back
    for c in range(0, len(shut), _WINDOW_ROWS):
        part = shut[c:c + _WINDOW_ROWS]
        pos[part] = _walk_back(pos[part], lo[part], op_start[part], f_end)
    hit = np.flatnonzero(pos >= lo)
    return ops[hit], order[pos[hit]]


#: frames looked at per operator (the one starting last before it, and earlier ones of its thread)
_WALK_BACK = 64
#: operators walked back at once (a window of _WALK_BACK - 1 positions each: ~0.5 MB per array)
_WINDOW_ROWS = 1024


def _walk_back(pos: np.ndarray, lo: np.ndarray, at: np.ndarray, f_end: np.ndarray) -> np.ndarray:
    """Per operator, the nearest of the ``_WALK_BACK - 1`` frame positions before ``pos`` (not below ``lo``,
    its thread's first) whose frame is open at ``at`` (ends at or after it); -1 when none is."""
    cand = pos[:, None] - np.arange(1, _WALK_BACK, dtype=np.int64)
    is_open = (cand >= lo[:, None]) & (f_end[np.maximum(cand, 0)] >= at[:, None])
    j = is_open.argmax(axis=1)
    i = np.arange(len(pos))
    return np.where(is_open[i, j], cand[i, j], -1)
