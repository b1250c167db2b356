"""FLOPs of matrix-engine aten ops from their recorded input shapes (a multiply-add counts 2 FLOPs).

Only the ops Kineto's ``with_flops`` counts get a value (``aten::mm``, ``addmm``, ``bmm``, ``baddbmm``,
``convolution``), so sums over a trace do not double count parents such as ``aten::linear``. The formulas
are the simulated runtime's op model (``lower_signature``), the single place that derives work from shapes.
"""
from __future__ import annotations

import json
from collections.abc import Sequence
from typing import Any

from neuron_profiler.opmodel import lower_signature

COUNTED_OPS = frozenset({"aten::mm", "aten::addmm", "aten::bmm", "aten::baddbmm", "aten::convolution"})


def _as_json(v: Any) -> str:
    # default=str: a value JSON has no form for (an enum, a dtype object) must never break the export
    return v if isinstance(v, str) else ("" if v is None else json.dumps(v, default=str))


def concrete_strings(concrete: Sequence[Any]) -> list[str]:
    """Recorded scalar arguments as Kineto writes its "Concrete Inputs": one string per argument ("" for a
    tensor or an unrecorded value)."""
    return [_as_json(c) for c in concrete]


def op_flops(name: str, shapes: Sequence[Any], concrete: Sequence[Any] | None = None,
             dtypes: Sequence[Any] | None = None) -> int:
    """FLOPs of one aten op from its input shapes; ``concrete`` = the recorded scalar arguments (stride,
    padding, dilation, transposed, groups of a convolution). 0 for other ops and malformed records."""
    if name not in COUNTED_OPS or not shapes:
        return 0
    conc = concrete_strings(concrete) if concrete else None
    work = lower_signature(name, json.dumps(list(shapes)), json.dumps(list(dtypes or [])), 0, conc)
    return int(work.flops) if work.cls in ("matmul", "conv") else 0
