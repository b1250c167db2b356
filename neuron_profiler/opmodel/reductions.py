"""What a reduction writes (torch-free): the reduced dims of ``sum`` / ``mean`` / ``amax`` / ... from the
record, never a guess.

* no dim argument (``sum(self)``, ``sum(self, dtype)``, ``max(self)``, ``all(self)``) or ``dim=None`` (Concrete
  Inputs "" where the type is not a ScalarList) or ``dim=[]``: a full reduction, one element;
* a dim list or int in Concrete Inputs: those dims reduced (kept as 1 with keepdim, same element count);
* a second *tensor* (``max(a, b)``, ``min(a, b)``): elementwise, the broadcast output;
* otherwise the reduced dims are not recorded (Kineto without Concrete Inputs; old Kineto writes "" for both
  ``dim=None`` and a dim list): the output size is unknown and the note says why.
"""
from __future__ import annotations

import json
import math

from .shapes import Tensor

__all__ = ["REDUCE_DIM_POS", "reduced_elems"]

#: position of the ``dim`` argument of the dim-reducing ops
REDUCE_DIM_POS = {**{b: 1 for b in ("sum", "mean", "amax", "amin", "prod", "all", "any", "argmax", "argmin", "max",
                                    "min", "var", "std", "var_mean", "std_mean", "logsumexp", "count_nonzero",
                                    "nansum", "nanmean")},
                  "norm": 2, "linalg_vector_norm": 2}
_DTYPE_ONLY = {"sum", "mean", "prod", "nansum"}  # op(self, dtype): the 2-argument overload reduces everything


def _dims(value: str, ndim: int) -> list[int] | None:
    """Reduced dims from one Concrete Inputs string ('' = None = all; '[0, 1]', '[]' = all, '1'); None when
    unparsable."""
    v = value.strip()
    if v in ("", "None"):
        return list(range(ndim))
    try:
        d = json.loads(v)
    except ValueError:
        return None
    if isinstance(d, int) and not isinstance(d, bool):
        d = [d]
    if not isinstance(d, list) or not all(isinstance(x, int) and not isinstance(x, bool) for x in d):
        return None
    return [x % ndim for x in d] if d and ndim else list(range(ndim))


def reduced_elems(base: str, shapes: list, dtypes: list, ts: list[Tensor | None],
                  concrete: list | None) -> tuple[int | None, str]:
    """(elements the reduction writes, or None when the record cannot tell, note)."""
    first = ts[0] if ts else None
    if first is None:
        return None, f"{base}: no input tensor recorded"
    pos = REDUCE_DIM_POS.get(base)
    if pos is None:  # losses and others: their own rules elsewhere
        last = first.shape[-1] if first.shape else 1
        return max(1, first.numel // max(last, 1)), ""
    n = len(shapes)
    if n <= 1 or (base in _DTYPE_ONLY and n == 2) or (base in ("norm",) and n == 2):
        return 1, ""
    other = ts[pos] if pos < len(ts) else None
    if other is not None and other.shape:  # a second tensor: max(a, b), min(a, b)
        nd = max(len(first.shape), len(other.shape))
        a = (1,) * (nd - len(first.shape)) + first.shape
        b = (1,) * (nd - len(other.shape)) + other.shape
        return math.prod(max(x, y) for x, y in zip(a, b)), ""
    if concrete and pos < len(concrete):
        dims = _dims(str(concrete[pos]), len(first.shape))
        if dims is not None:
            kept = [d for i, d in enumerate(first.shape) if i not in set(dims)]
            return max(1, math.prod(kept)), ""
    raw = dtypes[pos] if pos < len(dtypes) else ""
    if raw == "" and not concrete:
        why = "this Kineto writes '' for both dim=None and a dim list, and keeps no Concrete Inputs"
    else:
        why = "no Concrete Inputs"
    return None, f"{base}: the reduced dims are not recorded ({why}): what it writes is unknown"
