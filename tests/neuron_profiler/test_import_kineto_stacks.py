"""Python stacks of imported operators (``importers.kineto.stacks``): the innermost ``MAX_DEPTH`` frames,
also when an ancestor's stack is already known (cached) and when parent ids form a cycle."""
from __future__ import annotations

import numpy as np

from neuron_profiler.importers.kineto.extract import NO_FRAME_ID
from neuron_profiler.importers.kineto.stacks import MAX_DEPTH, operator_stacks


def _ids(pairs: list[tuple[int | None, int | None]]) -> np.ndarray:
    """Per frame (Python id, Python parent id), None for no int."""
    return np.asarray([[NO_FRAME_ID if v is None else v for v in p] for p in pairs], dtype=np.int64).reshape(-1, 2)


def _frames_then_ops(frame_spans: list[tuple[int, int]], op_starts: list[int]):
    """Host rows: python_function frames (start, end) on thread 0, then zero-length cpu_ops at ``op_starts``."""
    n_f, n = len(frame_spans), len(frame_spans) + len(op_starts)
    is_py = np.arange(n) < n_f
    start = np.asarray([s for s, _ in frame_spans] + op_starts, dtype=np.int64)
    end = np.asarray([e for _, e in frame_spans] + op_starts, dtype=np.int64)
    names = np.asarray([f"f{i}" for i in range(n_f)] + ["op"] * len(op_starts), dtype=object)
    return is_py, ~is_py, np.zeros(n, dtype=np.int64), start, end, names


def test_deep_nesting_keeps_the_innermost_frames_after_a_shallower_stack_was_built() -> None:
    depth = MAX_DEPTH + 22  # 150 nested frames: frame i opens at 2i and encloses every later one
    spans = [(2 * i, 100_000 - i) for i in range(depth)]
    # op A is inside frame 99 only (frame 100 opens at 200), op B inside the innermost frame 149
    is_py, is_op, thread, start, end, names = _frames_then_ops(spans, [2 * 99 + 1, 2 * (depth - 1) + 1])
    frames = _ids([(i + 1, i) for i in range(depth)])  # Python id i+1, parent id i (id 0: no parent)
    out = operator_stacks(is_py, is_op, thread, start, end, names, frames).strings()
    assert out[depth] == "\n".join(f"f{i}" for i in range(100))  # whole chain, outermost first
    assert out[depth + 1] == "\n".join(f"f{i}" for i in range(depth - MAX_DEPTH, depth))  # innermost 128
    assert list(out[:depth]) == [""] * depth  # frames themselves get no stack


def test_cyclic_parent_ids_stop_at_the_depth_limit() -> None:
    # two frames naming each other as parent (corrupt ids): the walk alternates until MAX_DEPTH frames
    is_py, is_op, thread, start, end, names = _frames_then_ops([(0, 100), (10, 90)], [20])
    out = operator_stacks(is_py, is_op, thread, start, end, names, _ids([(1, 2), (2, 1)])).strings()
    chain = ["f1" if k % 2 == 0 else "f0" for k in range(MAX_DEPTH)]  # innermost (f1) first
    assert out[2] == "\n".join(reversed(chain))


def test_siblings_share_their_parents_stack() -> None:
    # root f0 [0, 100] holds f1 [10, 20] and f2 [30, 40]; one op inside each, one in the root only
    spans = [(0, 100), (10, 20), (30, 40)]
    is_py, is_op, thread, start, end, names = _frames_then_ops(spans, [15, 35, 50])
    out = operator_stacks(is_py, is_op, thread, start, end, names, _ids([(1, None), (2, 1), (3, 1)])).strings()
    assert list(out[3:]) == ["f0\nf1", "f0\nf2", "f0"]


def test_a_repeated_id_links_to_its_last_frame_and_no_id_links_nowhere() -> None:
    # f0 [0, 100] and f1 [5, 95] both say Python id 7 (the later row wins); f2 [10, 20] has parent 7; f3
    # [30, 40] has id -1 and f4 [50, 60] has no parent id: f4 must not be taken for a child of id -1
    spans = [(0, 100), (5, 95), (10, 20), (30, 40), (50, 60)]
    is_py, is_op, thread, start, end, names = _frames_then_ops(spans, [15, 55])
    out = operator_stacks(is_py, is_op, thread, start, end, names,
                          _ids([(7, None), (7, None), (8, 7), (-1, None), (9, None)])).strings()
    assert list(out[5:]) == ["f1\nf2", "f4"]


def test_the_open_frame_is_looked_for_among_the_64_frames_starting_last() -> None:
    # root f0 [0, 10**6] then 80 closed frames f1..f80 at [10i, 10i + 1]: an op at 10k + 5 starts after f_k
    # closed, and f0 is k frames back: found up to k = 63 (64 frames looked at), not at k = 64
    spans = [(0, 10**6)] + [(10 * i, 10 * i + 1) for i in range(1, 81)]
    is_py, is_op, thread, start, end, names = _frames_then_ops(spans, [10 * 63 + 5, 10 * 64 + 5, 10 * 80 + 5])
    out = operator_stacks(is_py, is_op, thread, start, end, names, _ids([(i + 1, None) for i in range(81)]))
    assert out.strings()[81:].tolist() == ["f0", "", ""]
    assert out.values == ["f0"]  # distinct stacks in order of first use


def test_each_operator_takes_frames_of_its_own_thread_when_several_have_frames() -> None:
    # thread 0: f0 [0, 100]; thread 1: f1 [0, 100] holding f2 [10, 20]; ops on threads 1, 0, 1 and 2 (no frames of
    # its own: with two Python threads it is ambiguous and gets none)
    is_py = np.asarray([True] * 3 + [False] * 4)
    thread = np.asarray([0, 1, 1, 1, 0, 1, 2], dtype=np.int64)
    start = np.asarray([0, 0, 10, 15, 15, 50, 15], dtype=np.int64)
    end = np.asarray([100, 100, 20, 15, 15, 50, 15], dtype=np.int64)
    names = np.asarray(["f0", "f1", "f2", "op", "op", "op", "op"], dtype=object)
    out = operator_stacks(is_py, ~is_py, thread, start, end, names, _ids([(1, None), (2, None), (3, 2)]))
    assert out.strings()[3:].tolist() == ["f1\nf2", "f0", "f1", ""]
    assert out.values == ["f1\nf2", "f0", "f1"]
