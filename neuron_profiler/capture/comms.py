"""Collective metadata for host ops of torch.distributed calls.

Gloo on CPU does not emit Kineto's ``record_param_comms`` events, so capture builds the same keys itself
("Collective name", "Process Group Name", "Process Group Ranks", "Group size", "Seq", "In msg nelems",
"Out msg nelems", "dtype") and puts them in the ``args`` of each top-level ``c10d::*`` host op.

- Sizes come from the c10d op's recorded input shapes (``record_shapes``) or from the Python call.
- The process group comes from the ``torch.distributed`` Python call (recorded by light wrappers active
  only during a window); ops issued from C++ (DDP's reducer) belong to the default group.
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
from typing import Any, Callable

#: c10d op -> (Collective name, input arg index, output arg index); index None = no tensor.
C10D_OPS: dict[str, tuple[str, "int | None", "int | None"]] = {
    "c10d::allreduce_": ("allreduce", 0, 0),
    "c10d::allreduce_coalesced_": ("allreduce_coalesced", 0, 0),
    "c10d::allgather_": ("allgather", 1, 0),
    "c10d::_allgather_base_": ("_allgather_base", 1, 0),
    "c10d::allgather_coalesced_": ("allgather_coalesced", 1, 0),
    "c10d::allgather_into_tensor_coalesced_": ("allgather_into_tensor_coalesced", 1, 0),
    "c10d::reduce_scatter_": ("reduce_scatter", 1, 0),
    "c10d::_reduce_scatter_base_": ("_reduce_scatter_base", 1, 0),
    "c10d::reduce_scatter_tensor_coalesced_": ("reduce_scatter_tensor_coalesced", 1, 0),
    "c10d::broadcast_": ("broadcast", 0, 0),
    "c10d::reduce_": ("reduce", 0, 0),
    "c10d::alltoall_": ("all_to_all", 1, 0),
    "c10d::alltoall_base_": ("all_to_allv", 1, 0),
    "c10d::send": ("send", 0, 0),
    "c10d::recv_": ("recv", 0, 0),
    "c10d::recv_any_source_": ("recv", 0, 0),
    "c10d::gather_": ("gather", 1, 0),
    "c10d::scatter_": ("scatter", 1, 0),
    "c10d::barrier": ("barrier", None, None),
    "c10d::monitored_barrier_": ("barrier", None, None),
}

WRAPPED_FUNCTIONS = ("all_reduce", "all_gather", "all_gather_into_tensor", "reduce_scatter", "reduce_scatter_tensor",
                     "broadcast", "reduce", "all_to_all", "all_to_all_single", "send", "recv", "isend", "irecv",
                     "gather", "scatter", "barrier")


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


def group_info(group: Any = None) -> "dict[str, Any] | None":
    """Name, ranks and current sequence number of a process group (``None`` = default group)."""
    try:
        import torch.distributed as dist
        if not (dist.is_available() and dist.is_initialized()):
            return None
        pg = group if group is not None else dist.distributed_c10d._get_default_group()
        try:
            seq = int(pg._get_sequence_number_for_group())
        except Exception:  # backends without sequence numbers
            seq = -1
        return {"name": str(pg.group_name), "ranks": list(dist.get_process_group_ranks(pg)), "seq": seq}
    except Exception:
        return None


class CommRecorder:
    """Wraps the ``torch.distributed`` collectives while a window is active and records each call as
    ``dict(t0, t1, group, ranks, seq, nelems, dtype)``."""

    def __init__(self) -> None:
        self.calls: list[dict[str, Any]] = []
        self.default_start: "dict[str, Any] | None" = None
        self.rank_world: "tuple[int, int] | None" = None  # seen while the window ran (the group may be gone at export)
        self._saved: list[tuple[Any, str, Callable[..., Any]]] = []
        self._lock = threading.Lock()
        try:  # import now, not inside the first profiled window
            import torch.distributed.distributed_c10d  # noqa: F401
        except Exception:
            pass

    def _wrap(self, fn: Callable[..., Any]) -> Callable[..., Any]:
        sig = inspect.signature(fn)
        rec = self

        @functools.wraps(fn)
        def wrapper(*args: Any, **kwargs: Any) -> Any:
            try:
                bound = sig.bind_partial(*args, **kwargs).arguments
            except TypeError:
                bound = {}
            info = group_info(bound.get("group"))
            tensor = next((v for k, v in bound.items() if k in ("tensor", "input", "input_tensor")), None)
            t0 = time.time_ns()
            try:
                return fn(*args, **kwargs)
            finally:
                if info is not None:
                    entry = {"t0": t0, "t1": time.time_ns(), "fn": fn.__name__, **info}
                    if tensor is not None and hasattr(tensor, "numel"):
                        entry["nelems"] = int(tensor.numel())
                        entry["dtype"] = kineto_dtype(tensor.dtype)
                    with rec._lock:
                        rec.calls.append(entry)
        wrapper.__neuron_profiler_wrapped__ = True  # type: ignore[attr-defined]
        return wrapper

    def _wrap_destroy(self, fn: Callable[..., Any]) -> Callable[..., Any]:
        rec = self

        @functools.wraps(fn)
        def destroy_process_group(*args: Any, **kwargs: Any) -> Any:
            try:
                import torch.distributed as dist
                if dist.is_initialized():
                    rec.rank_world = (dist.get_rank(), dist.get_world_size())
                    rec._default_late = group_info(None)
            except Exception:
                pass
            return fn(*args, **kwargs)
        destroy_process_group.__neuron_profiler_wrapped__ = True  # type: ignore[attr-defined]
        return destroy_process_group

    def start(self) -> None:
        """Install the wrappers (no-op when torch.distributed is unavailable) and note the default group's seq."""
        self.calls = []
        self.rank_world = None
        self._default_late: "dict[str, Any] | None" = None
        self.default_start = group_info(None)
        try:
            import torch.distributed as dist
            import torch.distributed.distributed_c10d as c10d
        except Exception:
            return
        if not dist.is_available():
            return
        for mod in (dist, c10d):
            for name in WRAPPED_FUNCTIONS:
                fn = getattr(mod, name, None)
                if fn is None or getattr(fn, "__neuron_profiler_wrapped__", False):
                    continue
                self._saved.append((mod, name, fn))
                setattr(mod, name, self._wrap(fn))
            fn = getattr(mod, "destroy_process_group", None)
            if fn is not None and not getattr(fn, "__neuron_profiler_wrapped__", False):
                self._saved.append((mod, "destroy_process_group", fn))
                setattr(mod, "destroy_process_group", self._wrap_destroy(fn))

    def stop(self) -> list[dict[str, Any]]:
        """Restore the original functions; returns the recorded calls.

        If the default group did not exist when the window started, it was created inside the window, so its
        sequence numbers in the window start at 0."""
        for mod, name, fn in reversed(self._saved):
            setattr(mod, name, fn)
        self._saved = []
        if self.default_start is None:
            late = group_info(None) or getattr(self, "_default_late", None)
            if late is not None:
                self.default_start = {**late, "seq": 0}
        return self.calls


def annotate_collectives(ops: "list[dict[str, Any]]", calls: list[dict[str, Any]],
                         default_start: "dict[str, Any] | None", dtype_hints: "list[tuple[int, str]]") -> int:
    """Set ``args`` (record_param_comms keys, as JSON) on the top-level c10d host ops in ``ops``.

    ``ops``: host op dicts in start order with keys name, start_ts, duration_ns, shapes, dtypes, args.
    ``dtype_hints``: (start_ns, dtype) of backend events ("gloo:all_reduce", ...) used when the c10d op
    only recorded "TensorList". Returns how many ops were annotated.
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
            seq = base + counters.get(group, 0)
        counters[group] = counters.get(group, 0) + 1
        coll, i_in, i_out = spec
        shapes = op.get("shapes") or []
        in_n = numel(shapes[i_in]) if i_in is not None and len(shapes) > i_in else call.get("nelems", 0) if call else 0
        out_n = numel(shapes[i_out]) if i_out is not None and len(shapes) > i_out else in_n
        dtype = _tensor_dtype(op.get("dtypes") or [], i_in)
        if dtype is None and call is not None:
            dtype = call.get("dtype")
        if dtype is None:
            dtype = next((d for ts, d in dtype_hints if start <= ts <= end + 50_000_000), "float")
        args = json.loads(op["args"]) if op.get("args") else {}
        args.update({"Collective name": coll, "Process Group Name": group,
                     "Process Group Ranks": json.dumps(info["ranks"]), "Group size": len(info["ranks"]),
                     "Seq": int(seq), "In msg nelems": int(in_n), "Out msg nelems": int(out_n), "dtype": dtype})
        op["args"] = json.dumps(args)
        n += 1
    return n


def _tensor_dtype(dtypes: list[str], idx: "int | None") -> "str | None":
    if idx is None or idx >= len(dtypes):
        return None
    d = dtypes[idx]
    return None if d in ("", "TensorList", "GenericList", "Scalar", "ScalarList") else d
