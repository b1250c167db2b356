"""Recorded shapes and dtypes (Kineto ``Input Dims`` / ``Input type`` JSON) as tensor arguments."""
from __future__ import annotations

import json
import math
from dataclasses import dataclass

from neuron_profiler.hardware import dtype_size_bytes, normalize_dtype

__all__ = ["parse_json_list", "Tensor", "tensor_args", "is_shape"]


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
    """One tensor argument: shape, canonical dtype, element count and bytes."""

    shape: tuple[int, ...]
    dtype: str
    numel: int
    nbytes: int


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
            dt = dt if dt and raw != "TensorList" else "float32"
            out.append(Tensor(tuple(shp[0]), dt, numel, numel * (dtype_size_bytes(dt) or 4)))
        else:
            out.append(None)
    return out
