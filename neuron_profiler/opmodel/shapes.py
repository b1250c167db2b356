"""Recorded shapes and dtypes (Kineto ``Input Dims`` / ``Input type`` JSON) as tensor arguments."""
from __future__ import annotations

import json
import math
from dataclasses import dataclass

from neuron_profiler.hardware import dtype_size_bytes, normalize_dtype

__all__ = ["parse_json_list", "Tensor", "tensor_args", "is_shape", "unrecorded_tensor_list", "concrete_int",
           "concrete_flag"]


def parse_json_list(s: object) -> list | None:
    """JSON list from a shapes/dtypes string; None for empty or garbage."""
    if not isinstance(s, str) or not s or s[0] != "[":
        return None
    try:
        v = json.loads(s)
    except (ValueError, RecursionError):
        return None
    return v if isinstance(v, list) else None


def is_shape(x: object) -> bool:
    return isinstance(x, list) and all(isinstance(d, int) and not isinstance(d, bool) and 0 <= d < 2**40 for d in x)


@dataclass
class Tensor:
    """One tensor argument: shape, canonical dtype, element count and bytes.

    A TensorList argument is one ``Tensor`` summed over the list: ``count`` tensors, ``shape`` the first
    one's. Kineto writes a tensor list's type as "TensorList", not its elements' dtype: ``dtype_known`` is
    then False and ``dtype`` / ``nbytes`` assume float32 (what the simulator stages); the op model's byte
    counts do not rely on them."""

    shape: tuple[int, ...]
    dtype: str
    numel: int
    nbytes: int
    count: int = 1
    dtype_known: bool = True


def tensor_args(shapes: list, dtypes: list) -> list[Tensor | None]:
    """Positional arguments -> Tensor (TensorList summed into one) or None for non-tensors."""
    out: list[Tensor | None] = []
    for i, shp in enumerate(shapes):
        raw = dtypes[i] if i < len(dtypes) else ""
        dt = normalize_dtype(raw) if isinstance(raw, str) else ""
        if isinstance(raw, str) and raw in ("Scalar", "ScalarList", "", "None", "GenericList", "Device", "Layout",
                                            "int[]", "bool", "int") and not (isinstance(shp, list) and shp):
            out.append(None)
            continue
        if is_shape(shp) and (dt or shp):
            numel = math.prod(shp) if shp else 1
            size = dtype_size_bytes(dt) or 4
            out.append(Tensor(tuple(shp), dt or "float32", numel, numel * size))
        elif isinstance(shp, list) and shp and all(is_shape(s) for s in shp):  # TensorList
            numel = sum(math.prod(s) if s else 1 for s in shp)
            known = bool(dt) and raw != "TensorList"
            dt = dt if known else "float32"
            out.append(Tensor(tuple(shp[0]), dt, numel, numel * (dtype_size_bytes(dt) or 4), len(shp), known))
        else:
            out.append(None)
    return out


def unrecorded_tensor_list(shapes: list, dtypes: list) -> bool:
    """True when a TensorList argument is recorded as an empty dims list: older Kineto writes ``[]`` for
    every tensor list (``aten::cat``, ``aten::_foreach_add_``), so its tensors' shapes are not in the trace."""
    return any(i < len(dtypes) and dtypes[i] == "TensorList" and s == [] for i, s in enumerate(shapes))


def concrete_int(concrete: list | None, i: int) -> int | None:
    """Argument ``i`` of Kineto's "Concrete Inputs" (one string per argument) as an int; None when absent or
    not an integer."""
    if not concrete or i >= len(concrete):
        return None
    try:
        return int(str(concrete[i]).strip())
    except ValueError:
        return None


def concrete_flag(concrete: list | None, i: int) -> bool:
    """Argument ``i`` of Kineto's "Concrete Inputs" is a true bool ("True", "true" or "1")."""
    return concrete is not None and i < len(concrete) and str(concrete[i]).strip() in ("True", "true", "1")
