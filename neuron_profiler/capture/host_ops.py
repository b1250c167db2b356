"""Host ops from a finished torch.profiler window: Kineto's events -> rows of the ``host_ops`` table.

One row per CPU op / user annotation (python_function frames become the ``stack`` column instead of rows).
Columns filled: track (one per Kineto thread), name, category, start_ts / duration_ns (ns, Unix epoch),
input_shapes / input_dtypes (JSON), module (``with_modules``), stack (``with_stack``, innermost last),
sequence_number, correlation_id, external_id, flops (from shapes for matmul/conv leaves, else Kineto's),
args (JSON; collectives carry record_param_comms keys, see ``capture.comms``).
"""
from __future__ import annotations

import json
from collections.abc import Iterable
from typing import Any

from neuron_profiler.capture.comms import annotate_collectives
from neuron_profiler.capture.flops import concrete_strings, op_flops
from neuron_profiler.capture.tensor_lists import ListDtypes, list_shapes, type_tensor_lists
from neuron_profiler.opmodel import wants_concrete

_SKIP_NAMES = {"[memory]", "[OutOfMemory]"}
_SKIP_FRAME_PARTS = ("torch/profiler/", "torch/autograd/profiler", "neuron_profiler/")
MAX_STACK_FRAMES = 48
_CONV_PARENTS = {"aten::conv1d", "aten::conv2d", "aten::conv3d"}


def kineto_events(prof: Any) -> list[Any]:
    """The raw ``_KinetoEvent`` list of the window that just ended (empty if none)."""
    p = getattr(prof, "profiler", None)
    res = getattr(p, "kineto_results", None)
    return list(res.events()) if res is not None else []


def _event_name(e: Any) -> str:
    """``e.name()``; Kineto occasionally hands back a python frame name that is not valid UTF-8."""
    try:
        return e.name()
    except UnicodeDecodeError:
        return "<frame with an undecodable name>"


def _python_frames(events: Iterable[Any]) -> tuple[dict[int, list[tuple[int, int, int]]], dict[int, tuple[str, int]]]:
    """Per thread: python frames as (start, end, python_id) sorted by start; and id -> (name, parent_id)."""
    per_thread: dict[int, list[tuple[int, int, int]]] = {}
    tree: dict[int, tuple[str, int]] = {}
    for e in events:
        if not e.is_python_function():
            continue
        pid = e.python_id()
        tree[pid] = (_event_name(e), e.python_parent_id())
        per_thread.setdefault(e.start_thread_id(), []).append((e.start_ns(), e.start_ns() + e.duration_ns(), pid))
    for v in per_thread.values():
        v.sort()
    return per_thread, tree


def _stack_string(pid: int, tree: dict[int, tuple[str, int]], cache: dict[int, str]) -> str:
    if pid in cache:
        return cache[pid]
    frames: list[str] = []
    cur, seen = pid, 0
    while cur in tree and seen < 512:
        name, parent = tree[cur]
        if not any(part in name for part in _SKIP_FRAME_PARTS):
            frames.append(name)
        cur, seen = parent, seen + 1
    frames.reverse()  # outermost first, innermost last
    s = "\n".join(frames[-MAX_STACK_FRAMES:])
    cache[pid] = s
    return s


def _innermost(intervals: list[tuple[int, int, Any]], points: list[tuple[int, int, int]]) -> dict[int, Any]:
    """For each (start, end, key) point, the payload of the innermost interval (sorted by start) containing it."""
    out: dict[int, Any] = {}
    stack: list[tuple[int, int, Any]] = []
    i = 0
    for start, end, key in sorted(points):
        while i < len(intervals) and intervals[i][0] <= start:
            while stack and stack[-1][1] < intervals[i][0]:
                stack.pop()
            stack.append(intervals[i])
            i += 1
        while stack and stack[-1][1] < end:
            stack.pop()
        # frames that ended before this op but lie under a still-open frame were popped above
        if stack:
            out[key] = stack[-1][2]
    return out


def extract_host_ops(events: list[Any], *, with_stack: bool = False,
                     module_intervals: list[tuple[int, int, str]] | None = None,
                     comm_calls: list[dict[str, Any]] | None = None,
                     comm_default_start: dict[str, Any] | None = None,
                     list_dtypes: ListDtypes | None = None) -> list[dict[str, Any]]:
    """Host op dicts sorted by start: keys tid, name, category, start_ts, duration_ns, input_shapes, input_dtypes,
    module, stack, sequence_number, correlation_id, external_id, flops, args (and shapes/dtypes as lists; for c10d ops
    ``shapes`` are the structured shapes, where a tensor list is a list of shapes). A tensor-list argument's
    ``input_shapes`` entry is its list of shapes and its ``input_dtypes`` entry its element dtype where known
    (``capture.tensor_lists``; ``list_dtypes``: what the dry-run mode recorded)."""
    ops: list[dict[str, Any]] = []
    dtype_hints: list[tuple[int, str]] = []
    for e in events:
        if e.is_python_function():
            continue
        name = _event_name(e)
        if name in _SKIP_NAMES:
            continue
        cat = e.activity_type() or "cpu_op"
        shapes = e.shapes()
        dtypes = e.dtypes()
        if "TensorList" in dtypes and not name.startswith("c10d::"):
            shapes, dtypes = list_shapes(e, shapes, dtypes)
        concrete = None
        if wants_concrete(name):  # scalar arguments the op model reads (stride, window, reduction, dtype...)
            try:
                concrete = e.concrete_inputs()
            except (RuntimeError, TypeError, ValueError):  # not recorded for this event: fall back
                concrete = None
        flops = op_flops(name, shapes, concrete, dtypes) if shapes else 0
        # kept as Kineto writes them (one string per argument, "" for tensors), for analysis and the simulator
        args = json.dumps({"Concrete Inputs": concrete_strings(concrete)}, separators=(",", ":")) \
            if concrete and any(c not in ("", None, []) for c in concrete) else ""
        if not flops and name not in _CONV_PARENTS:  # their aten::convolution child carries the count
            try:
                flops = int(e.flops() or 0)
            except (RuntimeError, TypeError, ValueError):  # not recorded for this event: fall back
                flops = 0
        comm_shapes = shapes
        if name.startswith("c10d::"):  # tensor lists only show up in the structured shapes
            try:
                comm_shapes = e.structured_input_shapes()
            except (RuntimeError, TypeError, ValueError):  # not recorded for this event: fall back
                comm_shapes = shapes
        if name.startswith(("gloo:", "nccl:")) and dtypes:
            dtype_hints.append((e.start_ns(), dtypes[0]))
        ops.append({"tid": int(e.start_thread_id()), "name": name, "category": cat, "start_ts": int(e.start_ns()),
                    "duration_ns": max(int(e.duration_ns()), 0), "shapes": comm_shapes, "dtypes": dtypes,
                    "op_shapes": shapes, "op_dtypes": list(dtypes),
                    "input_shapes": "", "input_dtypes": "",
                    "module": "", "stack": "", "sequence_number": int(e.sequence_nr()),
                    "correlation_id": int(e.correlation_id()) or -1, "external_id": int(e.external_id()) or -1,
                    "flops": int(flops), "args": args, "fwd_tid": int(e.fwd_thread_id())})
    ops.sort(key=lambda o: (o["start_ts"], -o["duration_ns"]))
    type_tensor_lists(ops, list_dtypes)
    for op in ops:
        shp, dts = op.pop("op_shapes"), op["op_dtypes"]
        op["input_shapes"] = json.dumps(shp, separators=(",", ":")) if shp else ""
        op["input_dtypes"] = json.dumps(dts, separators=(",", ":")) if dts else ""
        del op["op_dtypes"]
    if with_stack:
        _attach_stacks(ops, events)
    if module_intervals:
        _attach_modules(ops, module_intervals)
    annotate_collectives(ops, comm_calls or [], comm_default_start, sorted(dtype_hints))
    return ops


def _attach_stacks(ops: list[dict[str, Any]], events: list[Any]) -> None:
    per_thread, tree = _python_frames(events)
    cache: dict[int, str] = {}
    by_tid: dict[int, list[tuple[int, int, int]]] = {}
    for i, op in enumerate(ops):
        by_tid.setdefault(op["tid"], []).append((op["start_ts"], op["start_ts"] + op["duration_ns"], i))
    for tid, points in by_tid.items():
        frames = per_thread.get(tid)
        if not frames:
            continue
        for i, pid in _innermost(frames, points).items():
            ops[i]["stack"] = _stack_string(pid, tree, cache)


def _attach_modules(ops: list[dict[str, Any]], intervals: list[tuple[int, int, str]]) -> None:
    ivs = sorted(intervals)
    points = [(op["start_ts"], op["start_ts"] + op["duration_ns"], i) for i, op in enumerate(ops)]
    for i, name in _innermost(ivs, points).items():
        ops[i]["module"] = name
    # backward: autograd nodes carry the forward op's sequence number; children inherit by nesting
    fwd: dict[int, str] = {}
    for op in ops:
        if op["module"] and op["sequence_number"] >= 0 and not op["name"].startswith("autograd::"):
            fwd.setdefault(op["sequence_number"], op["module"])
    by_tid: dict[int, list[int]] = {}
    for i, op in enumerate(ops):
        by_tid.setdefault(op["tid"], []).append(i)
    for idxs in by_tid.values():
        open_: list[tuple[int, str]] = []  # (end, module)
        for i in idxs:
            op = ops[i]
            while open_ and open_[-1][0] <= op["start_ts"]:
                open_.pop()
            if not op["module"]:
                if op["name"].startswith("autograd::engine::evaluate_function") and op["sequence_number"] in fwd:
                    op["module"] = fwd[op["sequence_number"]]
                elif open_:
                    op["module"] = open_[-1][1]
            if op["module"]:
                open_.append((op["start_ts"] + op["duration_ns"], op["module"]))
