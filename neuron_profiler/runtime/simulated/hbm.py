"""HBM held by the captured program over time, by kind: the ``HBM Usage`` counters of a simulated NeuronCore.

The model knows the program from its op stream only, so it counts what the op stream shows:

- **weights**: the trainable parameters, one per ``torch::autograd::AccumulateGrad`` op of the first step
  that has a backward pass (its input shape and dtype are the parameter's), held for the whole window;
- **gradients**: each parameter's gradient from its ``AccumulateGrad`` op until the next
  ``Optimizer.zero_grad#`` range that frees gradients (``set_to_none``: no ``aten::zero_`` inside it), or the
  window end;
- **optimizer state**: ``OPTIMIZER_STATE[class]`` tensors the size of each parameter (Adam: ``exp_avg``,
  ``exp_avg_sq``), the class read from the ``Optimizer.step#<Class>.step`` range, for the whole window
  (an unknown class counts none, and says so in ``Header.simulation.assumptions``);
- **activations**: the output of every forward kernel (``OpWork.out_bytes``) from the kernel's end until the
  end of its step's backward pass (an upper bound: the model does not know which tensors autograd saves);
  in a step without a backward pass, until the end of the next kernel (its consumer).

Steps are the ``ProfilerStep#`` ranges (the whole window without them); a step's backward pass runs from its
first ``autograd::engine::evaluate_function`` op to its last one's end (the kernels they launched included).
Times are the projected timeline (host ops) and the kernels' device times. Without an ``AccumulateGrad`` op
(inference), weights are not known: the counters hold activations only and the assumptions say so.
"""
from __future__ import annotations

import json
from dataclasses import dataclass

import numpy as np
import pandas as pd

from neuron_profiler.hardware.dtypes import dtype_size_bytes

__all__ = ["HbmUse", "hbm_usage", "OPTIMIZER_STATE", "KINDS"]

#: state tensors the size of its parameter kept per parameter, by optimizer class (SGD: the momentum buffer,
#: assumed on; Adagrad: sum of squares; RMSprop: square average)
OPTIMIZER_STATE = {"Adam": 2, "AdamW": 2, "NAdam": 2, "RAdam": 2, "Adamax": 2, "Adadelta": 2, "Adafactor": 2,
                   "SGD": 1, "Adagrad": 1, "RMSprop": 1, "Rprop": 2, "ASGD": 2, "LBFGS": 0}
KINDS = ("weights", "gradients", "optimizer state", "activations")
_ACC = "torch::autograd::AccumulateGrad"
_BWD = "autograd::engine::evaluate_function"


@dataclass
class HbmUse:
    """Intervals of HBM held (start, end, bytes) per kind, and what the model could not know."""

    intervals: dict[str, tuple[np.ndarray, np.ndarray, np.ndarray]]
    notes: list[str]


def _param_bytes(shapes: str, dtypes: str) -> int:
    try:
        shape = json.loads(shapes)[0]
        dt = json.loads(dtypes)[0]
        return int(np.prod(shape, dtype=np.int64)) * dtype_size_bytes(dt) if isinstance(shape, list) else 0
    except (ValueError, TypeError, IndexError):
        return 0


def _steps(names: np.ndarray, start: np.ndarray, end: np.ndarray, t0: int, t1: int) -> list[tuple[int, int]]:
    st = np.flatnonzero(np.char.startswith(names.astype(str), "ProfilerStep#"))
    if not len(st):
        return [(t0, t1 + 1)]
    o = st[np.argsort(start[st], kind="stable")]
    bounds = [(int(start[i]), int(end[i])) for i in o]
    bounds[0] = (min(bounds[0][0], t0), bounds[0][1])
    return [(a, (bounds[j + 1][0] if j + 1 < len(bounds) else t1 + 1)) for j, (a, _b) in enumerate(bounds)]


def hbm_usage(host: pd.DataFrame, h_start: np.ndarray, h_end: np.ndarray, k_host: np.ndarray,
              k_start: np.ndarray, k_end: np.ndarray, k_out_bytes: np.ndarray) -> HbmUse:
    """HBM intervals of the window (see the module docstring). ``host``: the window's host ops (``name``,
    ``input_shapes``, ``input_dtypes``), ``h_start`` / ``h_end`` their projected times; per kernel instance its
    host op position, device start and end, and output bytes."""
    names = host["name"].astype(str).to_numpy()
    ev = [np.asarray(x, np.int64) for x in (k_start, k_end)] + ([h_start.min(), h_end.max()] if len(h_start) else [])
    t0 = int(min((int(np.min(x)) for x in ev if np.size(x)), default=0))
    t1 = int(max((int(np.max(x)) for x in ev if np.size(x)), default=0))
    acc = np.flatnonzero(names == _ACC)
    acc_bytes = np.array([_param_bytes(s, d) for s, d in zip(host["input_shapes"].to_numpy()[acc],
                                                               host["input_dtypes"].to_numpy()[acc])], np.int64)
    steps = _steps(names, h_start, h_end, t0, t1)
    out: dict[str, list[tuple[int, int, float]]] = {k: [] for k in KINDS}
    notes: list[str] = []
    step_of = lambda t: int(np.searchsorted([a for a, _ in steps], t, side="right") - 1)  # noqa: E731
    acc_step = np.array([step_of(int(h_start[i])) for i in acc], np.int64)
    weights = int(acc_bytes[acc_step == acc_step.min()].sum()) if len(acc) else 0
    if weights:
        out["weights"].append((t0, t1, float(weights)))
        _optimizer_state(names, weights, t0, t1, out, notes)
    else:
        notes.append("weights, gradients and optimizer state not known (no backward pass in the window)")
    _gradients(names, host, h_start, acc, acc_bytes, int((acc_step == acc_step.min()).sum()) if len(acc) else 0,
               t1, out)
    _activations(names, h_start, h_end, steps, k_host, k_start, k_end, k_out_bytes, out)
    return HbmUse({k: (np.array([a for a, _, _ in v], np.int64), np.array([b for _, b, _ in v], np.int64),
                       np.array([c for _, _, c in v], np.float64)) for k, v in out.items()}, notes)


def _optimizer_state(names: np.ndarray, weights: int, t0: int, t1: int, out: dict, notes: list[str]) -> None:
    steps = sorted({n.split("#", 1)[1].split(".", 1)[0] for n in names if n.startswith("Optimizer.step#")})
    if not steps:
        notes.append("optimizer state not counted (no optimizer step in the window)")
        return
    n_state = 0
    for cls in steps:
        if cls not in OPTIMIZER_STATE:
            notes.append(f"optimizer state of {cls} not counted (unknown optimizer class)")
        n_state = max(n_state, OPTIMIZER_STATE.get(cls, 0))
    if n_state:
        out["optimizer state"].append((t0, t1, float(n_state * weights)))


def _gradients(names: np.ndarray, host: pd.DataFrame, h_start: np.ndarray, acc: np.ndarray, acc_bytes: np.ndarray,
               n_params: int, t1: int, out: dict) -> None:
    """A gradient from its parameter's first AccumulateGrad until the next zero_grad that frees it (the first
    ``n_params`` AccumulateGrad ops between two frees allocate; later ones accumulate)."""
    zg = np.flatnonzero(np.char.startswith(names.astype(str), "Optimizer.zero_grad#"))
    zero_ = np.flatnonzero(names == "aten::zero_")
    frees = []
    ends = h_start[zg] + host["duration_ns"].to_numpy(np.int64)[zg] if len(zg) else np.zeros(0, np.int64)
    for i, e in zip(zg, ends):
        if not ((h_start[zero_] >= h_start[i]) & (h_start[zero_] <= e)).any():  # set_to_none
            frees.append(int(h_start[i]))
    frees_arr = np.sort(np.array(frees, np.int64))
    order = sorted(zip(acc.tolist(), acc_bytes.tolist()), key=lambda x: int(h_start[x[0]]))
    epoch_of = np.searchsorted(frees_arr, [int(h_start[i]) for i, _ in order], side="right")
    seen: dict[int, int] = {}
    for (i, b), ep in zip(order, epoch_of.tolist()):
        seen[ep] = seen.get(ep, 0) + 1
        if seen[ep] > n_params or not b:
            continue  # a further backward pass before zero_grad accumulates into the held gradients
        t = int(h_start[i])
        end = int(frees_arr[ep]) if ep < len(frees_arr) else t1
        out["gradients"].append((t, end, float(b)))


def _activations(names: np.ndarray, h_start: np.ndarray, h_end: np.ndarray, steps: list[tuple[int, int]],
                 k_host: np.ndarray, k_start: np.ndarray, k_end: np.ndarray, k_out: np.ndarray, out: dict) -> None:
    bwd = np.flatnonzero(np.char.startswith(names.astype(str), _BWD))
    ks = np.asarray(k_start, np.int64)
    ke = np.asarray(k_end, np.int64)
    hs = h_start[k_host] if len(k_host) else np.zeros(0, np.int64)
    for a, b in steps:
        in_step = np.flatnonzero((hs >= a) & (hs < b))
        if not len(in_step):
            continue
        sb = bwd[(h_start[bwd] >= a) & (h_start[bwd] < b)]
        if len(sb):
            b0, b1 = int(h_start[sb].min()), int(h_end[sb].max())
            fwd = in_step[hs[in_step] < b0]
            launched = in_step[(hs[in_step] >= b0) & (hs[in_step] <= b1)]
            free = max(b1, int(ke[launched].max()) if len(launched) else b1)
            out["activations"].extend((int(ke[k]), free, float(k_out[k])) for k in fwd if k_out[k] > 0)
        else:
            o = in_step[np.argsort(ks[in_step], kind="stable")]
            nxt = np.append(ke[o][1:], ke[o][-1])
            out["activations"].extend((int(ke[k]), int(max(n, ke[k])), float(k_out[k]))
                                      for k, n in zip(o, nxt) if k_out[k] > 0)


def add_hbm_counters(b: object, host: pd.DataFrame, h_start: np.ndarray, h_end: np.ndarray, k_host: np.ndarray,
                     k_start: np.ndarray, k_end: np.ndarray, k_out_bytes: np.ndarray, parent: int,
                     **track: int) -> list[str]:
    """Add the ``HBM Usage`` counter (bytes, total) and one ``HBM Usage: <kind>`` counter per kind held to
    builder ``b`` under track ``parent``; returns the notes of what was not known."""
    from neuron_profiler.runtime.simulated.counters import step_series

    use = hbm_usage(host, h_start, h_end, k_host, k_start, k_end, k_out_bytes)
    s, e, v = (np.concatenate([use.intervals[k][j] for k in KINDS]) for j in range(3))
    series = [("HBM Usage", s, e, v)] + [(f"HBM Usage: {k}", *use.intervals[k]) for k in KINDS
                                         if len(use.intervals[k][0])]
    for name, a, z, amount in series:
        if not len(a):
            continue
        ts, val = step_series(a, np.maximum(z, a), amount)
        t = b.add_track("counter", name, parent, unit="bytes", **track)  # type: ignore[attr-defined]
        b.add_rows("counters", {"track": t, "ts": ts, "value": val})  # type: ignore[attr-defined]
    return use.notes
