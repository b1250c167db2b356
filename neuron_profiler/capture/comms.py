"""Collective metadata for host ops of torch.distributed calls.

Gloo on CPU does not emit Kineto's ``record_param_comms`` events, so capture builds the same keys itself
("Collective name", "Process Group Name", "Process Group Ranks", "Group size", "Seq", "In msg nelems",
"Out msg nelems", "dtype") and puts them in the ``args`` of each top-level ``c10d::*`` host op.

- Sizes come from the tensors of the Python call (recorded by light wrappers active only during a window),
  else from the c10d op's recorded input shapes, else from the other side of the message and the group size
  (Kineto records nothing for a ``Tensor[][]`` argument, e.g. the output list of a list-form all_gather).
- The process group comes from the ``torch.distributed`` Python call; ops issued from C++ (DDP's reducer)
  belong to the default group.
- What cannot be read (a destroyed group, a backend without sequence numbers) is recorded in ``Problems``
  and lands in the window's trace footer (``capture_problems``).
- ``Async op`` (``neuron_profiler.collectives.ASYNC_KEY``) says whether the call returned before the collective
  ended: ``async_op=True`` and ``isend``/``irecv`` are asynchronous, other Python calls blocking; ops no wrapped
  call issued (DDP's reducer, functional collectives) asynchronous.
- ``Seq`` is the process group's own sequence number (``_get_sequence_number_for_group``), identical on
  every rank for the same collective: read before each wrapped call, or counted from the value at window
  start for unwrapped ops.
"""
from __future__ import annotations

import functools
import inspect
import json
import math
import threading
import time
from collections.abc import Callable
from typing import Any

from neuron_profiler.collectives import ASYNC_KEY

#: c10d op -> (Collective name, input arg index, output arg index, size relation); index None = no tensor.
#: Relation of the message sizes when only one side was recorded: "gather" (out = in x group size), "scatter"
#: (in = out x group size) or "same". Kineto records a ``Tensor[][]`` argument (the output list of a list-form
#: all_gather / gather, the input list of reduce_scatter / scatter) as nothing at all.
C10D_OPS: dict[str, tuple[str, int | None, int | None, str]] = {
    "c10d::allreduce_": ("allreduce", 0, 0, "same"),
    "c10d::allreduce_coalesced_": ("allreduce_coalesced", 0, 0, "same"),
    "c10d::allgather_": ("allgather", 1, 0, "gather"),
    "c10d::_allgather_base_": ("_allgather_base", 1, 0, "gather"),
    "c10d::allgather_coalesced_": ("allgather_coalesced", 1, 0, "gather"),
    "c10d::allgather_into_tensor_coalesced_": ("allgather_into_tensor_coalesced", 1, 0, "gather"),
    "c10d::reduce_scatter_": ("reduce_scatter", 1, 0, "scatter"),
    "c10d::_reduce_scatter_base_": ("_reduce_scatter_base", 1, 0, "scatter"),
    "c10d::reduce_scatter_tensor_coalesced_": ("reduce_scatter_tensor_coalesced", 1, 0, "scatter"),
    "c10d::broadcast_": ("broadcast", 0, 0, "same"),
    "c10d::reduce_": ("reduce", 0, 0, "same"),
    "c10d::alltoall_": ("all_to_all", 1, 0, "same"),
    "c10d::alltoall_base_": ("all_to_allv", 1, 0, "same"),
    "c10d::send": ("send", 0, 0, "same"),
    "c10d::recv_": ("recv", 0, 0, "same"),
    "c10d::recv_any_source_": ("recv", 0, 0, "same"),
    "c10d::gather_": ("gather", 1, 0, "gather"),
    "c10d::scatter_": ("scatter", 1, 0, "scatter"),
    "c10d::barrier": ("barrier", None, None, "same"),
    "c10d::monitored_barrier_": ("barrier", None, None, "same"),
}

#: Wrapped ``torch.distributed`` function -> (input argument, output argument) whose sizes the call records.
SIZE_ARGUMENTS: dict[str, tuple[str | None, str | None]] = {
    "all_reduce": ("tensor", "tensor"), "broadcast": ("tensor", "tensor"), "reduce": ("tensor", "tensor"),
    "all_gather": ("tensor", "tensor_list"), "all_gather_into_tensor": ("input_tensor", "output_tensor"),
    "all_gather_single": ("input_tensor", "output_tensor"), "reduce_scatter": ("input_list", "output"),
    "reduce_scatter_tensor": ("input", "output"), "reduce_scatter_single": ("input", "output"),
    "all_to_all": ("input_tensor_list", "output_tensor_list"), "all_to_all_single": ("input", "output"),
    "send": ("tensor", "tensor"), "isend": ("tensor", "tensor"), "recv": ("tensor", "tensor"),
    "irecv": ("tensor", "tensor"), "gather": ("tensor", "gather_list"), "scatter": ("scatter_list", "tensor"),
    "barrier": (None, None),
}
WRAPPED_FUNCTIONS = tuple(SIZE_ARGUMENTS)

#: Failures tolerated while reading process-group facts (a destroyed group, a backend without sequence
#: numbers, an older torch without the private accessor); each is recorded in the window's trace.
GROUP_ERRORS = (RuntimeError, ValueError, AttributeError)
_DESTROY = "destroy_process_group"  # wrapped too: rank, world size and default group are read before it runs

_KINETO_DTYPES = {"float32": "float", "float64": "double", "float16": "c10::Half", "bfloat16": "c10::BFloat16",
                  "int64": "long int", "int32": "int", "int16": "short int", "int8": "signed char",
                  "uint8": "unsigned char", "bool": "bool"}


def kineto_dtype(dtype: Any) -> str:
    """A torch dtype named the way Kineto's recorded input dtypes name it (torch.float32 -> "float")."""
    name = str(dtype).replace("torch.", "")
    return _KINETO_DTYPES.get(name, name)


def numel(shape: Any) -> int:
    """Elements of a recorded shape: ``[d0, d1]`` (a tensor) or nested lists of shapes (tensor lists)."""
    if isinstance(shape, (list, tuple)):
        if all(isinstance(d, int) for d in shape):
            return math.prod(shape)
        return sum(numel(s) for s in shape)
    return 0


def recorded_numel(shapes: list[Any], dtypes: list[str], idx: int | None) -> int | None:
    """Elements of argument ``idx`` of a c10d op as Kineto recorded it; None when it was not recorded (Kineto
    leaves both the shape and the dtype of a ``Tensor[][]`` argument empty)."""
    if idx is None or idx >= len(shapes):
        return None
    if idx >= len(dtypes) or dtypes[idx] == "":
        return None
    return numel(shapes[idx])


def _tensor_numel(value: Any) -> int | None:
    """Elements of a tensor or a (nested) list of tensors passed to a collective; None for anything else."""
    if hasattr(value, "numel") and callable(value.numel):
        return int(value.numel())
    if isinstance(value, (list, tuple)):
        parts = [_tensor_numel(v) for v in value]
        return None if any(p is None for p in parts) else sum(p for p in parts if p is not None)
    return None


def _first_dtype(value: Any) -> str | None:
    if hasattr(value, "dtype") and hasattr(value, "numel"):
        return kineto_dtype(value.dtype)
    if isinstance(value, (list, tuple)) and value:
        return _first_dtype(value[0])
    return None


class Problems:
    """Distinct descriptions of what capture could not record (kept in the trace footer as
    ``capture_problems``), at most ``limit`` of them."""

    def __init__(self, limit: int = 32) -> None:
        self.limit = limit
        self._items: dict[str, None] = {}
        self._lock = threading.Lock()

    def add(self, what: str) -> None:
        """Record one problem (duplicates are kept once)."""
        with self._lock:
            if len(self._items) < self.limit:
                self._items.setdefault(what, None)

    def take(self) -> list[str]:
        """The problems recorded so far, clearing them."""
        with self._lock:
            out, self._items = list(self._items), {}
        return out


def group_info(group: Any = None, problems: Problems | None = None) -> dict[str, Any] | None:
    """Name, ranks and current sequence number of a process group (``None`` = default group); None when
    torch.distributed is not initialised or the group cannot be read (recorded in ``problems``)."""
    import torch.distributed as dist
    if not (dist.is_available() and dist.is_initialized()):
        return None
    try:
        pg = group if group is not None else dist.distributed_c10d._get_default_group()
        info = {"name": str(pg.group_name), "ranks": list(dist.get_process_group_ranks(pg)), "seq": -1}
    except GROUP_ERRORS as exc:
        if problems is not None:
            problems.add(f"process group {group!r} unreadable ({exc!r}); its collectives carry no group")
        return None
    try:
        # a c10d ProcessGroup method missing from torch's stubs; a group without it raises AttributeError (caught)
        info["seq"] = int(pg._get_sequence_number_for_group())  # type: ignore[union-attr]
    except GROUP_ERRORS as exc:  # backends without sequence numbers
        if problems is not None:
            problems.add(f"process group {info['name']}: no sequence number ({exc!r}); Seq is counted in the window")
    return info


class CommRecorder:
    """Wraps the ``torch.distributed`` collectives while a window is active and records each call as
    ``dict(t0, t1, fn, name, ranks, seq, in_nelems, out_nelems, dtype)``."""

    def __init__(self) -> None:
        self.calls: list[dict[str, Any]] = []
        self.default_start: dict[str, Any] | None = None
        self.rank_world: tuple[int, int] | None = None  # seen while the window ran (the group may be gone at export)
        self.problems = Problems()
        self._default_late: dict[str, Any] | None = None
        self._saved: list[tuple[Any, str, Callable[..., Any]]] = []
        self._lock = threading.Lock()
        try:  # import now, not inside the first profiled window
            import torch.distributed.distributed_c10d  # noqa: F401
        except ImportError:  # torch built without distributed support: nothing to wrap
            pass

    def _describe(self, fn_name: str, bound: dict[str, Any]) -> dict[str, Any] | None:
        info = group_info(bound.get("group"), self.problems)
        if info is None:
            return None
        in_arg, out_arg = SIZE_ARGUMENTS.get(fn_name, (None, None))
        entry: dict[str, Any] = {"fn": fn_name, **info,
                                 "async": fn_name in ("isend", "irecv") or bool(bound.get("async_op", False))}
        for key, arg in (("in_nelems", in_arg), ("out_nelems", out_arg)):
            n = _tensor_numel(bound.get(arg)) if arg is not None else None
            if n is not None:
                entry[key] = n
        dtype = _first_dtype(bound.get(in_arg)) if in_arg is not None else None
        if dtype is not None:
            entry["dtype"] = dtype
        return entry

    def _wrap(self, fn: Callable[..., Any]) -> Callable[..., Any]:
        sig = inspect.signature(fn)
        rec = self
        name = fn.__name__

        @functools.wraps(fn)
        def wrapper(*args: Any, **kwargs: Any) -> Any:
            entry = None
            try:  # our bookkeeping must never reach the user's call; a failure is recorded instead
                entry = rec._describe(name, sig.bind_partial(*args, **kwargs).arguments)
            except Exception as exc:  # noqa: BLE001
                rec.problems.add(f"torch.distributed.{name}: call not recorded ({exc!r})")
            t0 = time.time_ns()
            try:
                return fn(*args, **kwargs)
            finally:
                if entry is not None:
                    entry["t0"], entry["t1"] = t0, time.time_ns()
                    with rec._lock:
                        rec.calls.append(entry)
        wrapper.__neuron_profiler_wrapped__ = True  # type: ignore[attr-defined]
        return wrapper

    def _wrap_destroy(self, fn: Callable[..., Any]) -> Callable[..., Any]:
        rec = self

        @functools.wraps(fn)
        def destroy_process_group(*args: Any, **kwargs: Any) -> Any:
            import torch.distributed as dist
            if dist.is_initialized():
                try:
                    rec.rank_world = (dist.get_rank(), dist.get_world_size())
                except GROUP_ERRORS as exc:
                    rec.problems.add(f"rank and world size unreadable before destroy_process_group ({exc!r})")
                rec._default_late = group_info(None, rec.problems)
            return fn(*args, **kwargs)
        destroy_process_group.__neuron_profiler_wrapped__ = True  # type: ignore[attr-defined]
        return destroy_process_group

    def start(self) -> None:
        """Install the wrappers (no-op when torch.distributed is unavailable) and note the default group's seq."""
        self.calls = []
        self.rank_world = None
        self.default_start = None
        self._default_late = None
        try:
            import torch.distributed as dist
            import torch.distributed.distributed_c10d as c10d
        except ImportError:
            return
        if not dist.is_available():
            return
        self.default_start = group_info(None, self.problems)
        for mod in (dist, c10d):
            for name in WRAPPED_FUNCTIONS:
                fn = getattr(mod, name, None)
                if fn is None or getattr(fn, "__neuron_profiler_wrapped__", False):
                    continue
                self._saved.append((mod, name, fn))
                setattr(mod, name, self._wrap(fn))
            fn = getattr(mod, _DESTROY, None)
            if fn is not None and not getattr(fn, "__neuron_profiler_wrapped__", False):
                self._saved.append((mod, _DESTROY, fn))
                setattr(mod, _DESTROY, self._wrap_destroy(fn))  # like the collectives (restored by stop)

    def stop(self) -> list[dict[str, Any]]:
        """Restore the original functions; returns the recorded calls.

        If the default group did not exist when the window started, it was created inside the window, so its
        sequence numbers in the window start at 0."""
        for mod, name, fn in reversed(self._saved):
            setattr(mod, name, fn)
        self._saved = []
        if self.default_start is None:
            late = group_info(None, self.problems) or self._default_late
            if late is not None:
                self.default_start = {**late, "seq": 0}
        return self.calls


def annotate_collectives(ops: list[dict[str, Any]], calls: list[dict[str, Any]],
                         default_start: dict[str, Any] | None, dtype_hints: list[tuple[int, str]]) -> int:
    """Set ``args`` (record_param_comms keys, as JSON) on the top-level c10d host ops in ``ops``.

    ``ops``: host op dicts in start order with keys name, start_ts, duration_ns, shapes, dtypes, args.
    ``dtype_hints``: (start_ns, dtype) of backend events ("gloo:all_reduce", ...) used when the c10d op
    only recorded "TensorList". Message sizes come from the Python call when one was recorded, else from the
    op's recorded shapes, else from the other side and the group size (``C10D_OPS`` relation).
    Returns how many ops were annotated.
    """
    if default_start is None and not calls:
        return 0
    counters: dict[str, int] = {}
    n = 0
    busy_until = -1
    for op in ops:
        spec = C10D_OPS.get(op["name"])
        if spec is None:
            continue
        start, end = op["start_ts"], op["start_ts"] + op["duration_ns"]
        if start < busy_until:  # nested inside another c10d op
            continue
        busy_until = end
        call = next((c for c in calls if c["t0"] <= start + 2000 and c["t1"] + 2000 >= end), None)
        info = call if call is not None else default_start
        if info is None:
            continue
        group = info["name"]
        if call is not None and call["seq"] >= 0:
            seq = call["seq"]
        else:
            base = default_start["seq"] if default_start is not None and default_start["name"] == group else 0
            seq = max(base, 0) + counters.get(group, 0)  # unreadable (-1): counted from the window start
        counters[group] = counters.get(group, 0) + 1
        in_n, out_n = message_nelems(op, spec, call, len(info["ranks"]))
        dtype = _tensor_dtype(op.get("dtypes") or [], spec[1])
        if dtype is None and call is not None:
            dtype = call.get("dtype")
        if dtype is None:
            dtype = next((d for ts, d in dtype_hints if start <= ts <= end + 50_000_000), "float")
        args = json.loads(op["args"]) if op.get("args") else {}
        args.update({"Collective name": spec[0], "Process Group Name": group,
                     "Process Group Ranks": json.dumps(info["ranks"]), "Group size": len(info["ranks"]),
                     "Seq": int(seq), "In msg nelems": int(in_n), "Out msg nelems": int(out_n), "dtype": dtype,
                     ASYNC_KEY: bool(call.get("async", False)) if call is not None else True})
        op["args"] = json.dumps(args)
        n += 1
    return n


def message_nelems(op: dict[str, Any], spec: tuple[str, int | None, int | None, str],
                   call: dict[str, Any] | None, group_size: int) -> tuple[int, int]:
    """(input, output) elements of one c10d op: the Python call's tensors, else the recorded shapes, else
    derived from the other side (an all_gather's output is ``group_size`` inputs; a reduce_scatter's input is
    ``group_size`` outputs); 0 when neither side is known."""
    _, i_in, i_out, relation = spec
    shapes, dtypes = op.get("shapes") or [], op.get("dtypes") or []
    in_n = call.get("in_nelems") if call is not None else None
    out_n = call.get("out_nelems") if call is not None else None
    in_n = recorded_numel(shapes, dtypes, i_in) if in_n is None else in_n
    out_n = recorded_numel(shapes, dtypes, i_out) if out_n is None else out_n
    size = max(int(group_size), 1)
    if out_n is None and in_n is not None:
        out_n = in_n * size if relation == "gather" else in_n // size if relation == "scatter" else in_n
    if in_n is None and out_n is not None:
        in_n = out_n * size if relation == "scatter" else out_n // size if relation == "gather" else out_n
    return int(in_n or 0), int(out_n or 0)


def _tensor_dtype(dtypes: list[str], idx: int | None) -> str | None:
    if idx is None or idx >= len(dtypes):
        return None
    d = dtypes[idx]
    return None if d in ("", "TensorList", "GenericList", "Scalar", "ScalarList") else d
