"""What one op's record does not hold, from the trace's other records (used by :mod:`.work`).

A convolution recorded without its stride and padding (Kineto without "Concrete Inputs") has an output size
the op model cannot compute. The trace often tells it elsewhere:

* its backward: ``convolution_backward(grad_output, input, weight, ...)`` with the same input and weight
  shapes records grad_output, which has the forward output's shape (unique per (input, weight) pair, or the
  pair is left unknown);
* its consumer: the next op on the same thread after the convolution (and its nested ops) ends, whose first
  tensor argument has the convolution's batch and output channels and no larger a spatial size (batch norm,
  activation, pooling, the next convolution).

Where neither tells it, the FLOPs stay unknown with the op model's reason.
"""
from __future__ import annotations

import json

import numpy as np
import pandas as pd

from neuron_profiler.opmodel import classify

__all__ = ["conv_out_shapes", "NEEDS_OUT_SHAPE"]

#: the op model's note for a convolution whose output size its record does not give
NEEDS_OUT_SHAPE = "stride and padding not recorded"


def _shapes(s: str) -> list:
    try:
        v = json.loads(s) if s and s[0] == "[" else []
    except ValueError:
        return []
    return v if isinstance(v, list) else []


def _tensor(v: object) -> tuple[int, ...] | None:
    ok = isinstance(v, list) and v and all(isinstance(d, int) and not isinstance(d, bool) and d > 0 for d in v)
    return tuple(v) if ok else None


def _from_backward(names: np.ndarray, shapes: np.ndarray) -> dict[tuple, tuple | None]:
    """(input shape, weight shape) -> grad_output shape of the trace's ``convolution_backward`` records (None
    when two records of the pair disagree)."""
    out: dict[tuple, tuple | None] = {}
    for s in set(shapes[np.char.endswith(names.astype(str), "convolution_backward")].tolist()):
        v = _shapes(s)
        if len(v) < 3:
            continue
        go, x, w = _tensor(v[0]), _tensor(v[1]), _tensor(v[2])
        if go is None or x is None or w is None:
            continue
        key = (x, w)
        out[key] = go if out.get(key, go) == go else None
    return out


def _consumer(pos: int, x: tuple, w: tuple, ho: dict, order: np.ndarray, rank: np.ndarray) -> tuple | None:
    """Output shape from the first op after ``pos`` on its track (after its nested ops end) whose first tensor
    argument has the convolution's batch, output channels and rank, and no larger a spatial size."""
    end = ho["start"][pos] + ho["dur"][pos]
    i = rank[pos] + 1
    track = ho["track"][pos]
    cout = w[0]
    while i < len(order):
        j = order[i]
        if ho["track"][j] != track:
            return None
        if ho["start"][j] >= end:
            v = _shapes(ho["shapes"][j])
            first = next((t for t in (_tensor(a) for a in v) if t is not None), None)
            if first is None:
                i += 1
                continue
            ok = (len(first) == len(x) and first[0] == x[0] and first[1] == cout
                  and all(o <= s for o, s in zip(first[2:], x[2:])))
            return first if ok else None
        i += 1
    return None


def conv_out_shapes(host_ops: pd.DataFrame, need: np.ndarray) -> dict[int, str]:
    """Row position -> output shape (JSON) for the convolutions at positions ``need``, from their backward or
    their consumer (see the module doc); rows neither tells are left out."""
    if not len(need):
        return {}
    names = host_ops["name"].astype(str).to_numpy()
    shapes = host_ops["input_shapes"].astype(str).to_numpy()
    bwd = _from_backward(names, shapes)
    have_time = all(c in host_ops.columns for c in ("track", "start_ts", "duration_ns"))
    ho: dict = {}
    order = rank = np.zeros(0, np.int64)
    if have_time:
        ho = {"track": host_ops["track"].to_numpy(), "start": host_ops["start_ts"].to_numpy(),
              "dur": host_ops["duration_ns"].to_numpy(), "shapes": shapes}
        order = np.lexsort((host_ops["start_ts"].to_numpy(), host_ops["track"].to_numpy()))
        rank = np.empty(len(order), np.int64)
        rank[order] = np.arange(len(order))
    out: dict[int, str] = {}
    for pos in need.tolist():
        if classify(names[pos]) != "conv":
            continue
        v = _shapes(shapes[pos])
        x, w = (_tensor(v[0]), _tensor(v[1])) if len(v) >= 2 else (None, None)
        if x is None or w is None:
            continue
        found = bwd.get((x, w))
        if found is None and have_time:
            found = _consumer(pos, x, w, ho, order, rank)
        if found is not None:
            out[pos] = json.dumps(list(found))
    return out
