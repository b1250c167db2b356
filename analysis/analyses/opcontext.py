"""What one op's record does not hold, from the trace's other records (used by :mod:`.work`).

A convolution recorded without its stride and padding (Kineto without "Concrete Inputs") has an output size
the op model cannot compute. The trace often tells it elsewhere:

* its backward: ``convolution_backward(grad_output, input, weight, ...)`` with the same input and weight
  shapes records grad_output, which has the forward output's shape (unique per (input, weight) pair, or the
  pair is left unknown);
* its consumer: the next op on the same thread after the convolution (and its nested ops) ends, whose first
  tensor argument has the convolution's batch and output channels and no larger a spatial size (batch norm,
  activation, pooling, the next convolution).

Where neither tells it, the FLOPs stay unknown with the op model's reason. A reduction whose reduced dims are
not recorded (old Kineto writes '' for a dim list) is sized the same way from its consumer
(:func:`reduction_out_shapes`).

A backward op recorded without shapes (while its forward has them) is priced from its forward: the autograd
node it runs under (``ConvolutionBackward0``, ``AddmmBackward0``, ...) has the forward op's sequence number
(:func:`backward_signatures`).
"""
from __future__ import annotations

import json
import math
import re

import numpy as np
import pandas as pd

from neuron_profiler.opmodel import classify

__all__ = ["conv_out_shapes", "reduction_out_shapes", "backward_signatures", "NEEDS_OUT_SHAPE", "NO_SHAPES",
           "REDUCED_DIMS_UNKNOWN"]

#: the op model's note for a reduction whose reduced dims its record does not give
REDUCED_DIMS_UNKNOWN = "the reduced dims are not recorded"
#: the op model's note for an op recorded without shapes
NO_SHAPES = "no input shapes recorded"
#: the op model's note for a convolution whose output size its record does not give
NEEDS_OUT_SHAPE = "stride and padding not recorded"


def _shapes(s: str) -> list:
    try:
        v = json.loads(s) if s and s[0] == "[" else []
    except ValueError:
        return []
    return v if isinstance(v, list) else []


def _tensor(v: object) -> tuple[int, ...] | None:
    if not isinstance(v, list) or not v:
        return None
    ok = all(isinstance(d, int) and not isinstance(d, bool) and d > 0 for d in v)
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


def _consumer(pos: int, ho: dict, order: np.ndarray, rank: np.ndarray, fits) -> tuple | None:
    """The first tensor argument of the first op after ``pos`` on its track (after its nested ops end) when
    ``fits(shape)``; None otherwise. Ops recording no tensor with dims are passed over, two at most."""
    end = ho["start"][pos] + ho["dur"][pos]
    i = rank[pos] + 1
    track = ho["track"][pos]
    passed = 0
    while i < len(order) and passed <= 2:
        j = order[i]
        if ho["track"][j] != track:
            return None
        if ho["start"][j] >= end:
            v = _shapes(ho["shapes"][j])
            first = next((t for t in (_tensor(a) for a in v) if t is not None), None)
            if first is None:
                passed += 1
                i += 1
                continue
            return first if fits(first) else None
        i += 1
    return None


def _conv_fits(x: tuple, w: tuple):
    """A convolution output's shape: the input's batch and rank, the weight's output channels, no larger a
    spatial size."""
    return lambda o: (len(o) == len(x) and o[0] == x[0] and o[1] == w[0]
                      and all(a <= b for a, b in zip(o[2:], x[2:])))


def _reduction_fits(x: tuple):
    """A reduction output's element count: the product of a proper subset of the input's dims."""
    import itertools

    sizes = {math.prod(c) for r in range(len(x)) for c in itertools.combinations(x, r)}
    return lambda o: math.prod(o) in sizes and math.prod(o) < math.prod(x)


def _timeline(host_ops: pd.DataFrame, shapes: np.ndarray) -> tuple[dict, np.ndarray, np.ndarray] | None:
    if not all(c in host_ops.columns for c in ("track", "start_ts", "duration_ns")):
        return None
    ho = {"track": host_ops["track"].to_numpy(), "start": host_ops["start_ts"].to_numpy(),
          "dur": host_ops["duration_ns"].to_numpy(), "shapes": shapes}
    order = np.lexsort((host_ops["start_ts"].to_numpy(), host_ops["track"].to_numpy()))
    rank = np.empty(len(order), np.int64)
    rank[order] = np.arange(len(order))
    return ho, order, rank


def reduction_out_shapes(host_ops: pd.DataFrame, need: np.ndarray) -> dict[int, str]:
    """Row position -> output shape (JSON) of the reductions at ``need`` whose reduced dims are not recorded,
    from their consumer: the next op's first tensor argument, when its element count is the product of a
    proper subset of the input's dims (``sum(x, dim, keepdim)`` then ``view``: a bias gradient)."""
    shapes = host_ops["input_shapes"].astype(str).to_numpy()
    tl = _timeline(host_ops, shapes) if len(need) else None
    if tl is None:
        return {}
    out: dict[int, str] = {}
    for pos in need.tolist():
        v = _shapes(shapes[pos])
        x = _tensor(v[0]) if v else None
        if x is None:
            continue
        found = _consumer(pos, *tl, _reduction_fits(x))
        if found is not None:
            out[pos] = json.dumps(list(found))
    return out


def conv_out_shapes(host_ops: pd.DataFrame, need: np.ndarray) -> dict[int, str]:
    """Row position -> output shape (JSON) for the convolutions at positions ``need``, from their backward or
    their consumer (see the module doc); rows neither tells are left out."""
    if not len(need):
        return {}
    names = host_ops["name"].astype(str).to_numpy()
    shapes = host_ops["input_shapes"].astype(str).to_numpy()
    bwd = _from_backward(names, shapes)
    tl = _timeline(host_ops, shapes)
    out: dict[int, str] = {}
    for pos in need.tolist():
        if classify(names[pos]) != "conv":
            continue
        v = _shapes(shapes[pos])
        x, w = (_tensor(v[0]), _tensor(v[1])) if len(v) >= 2 else (None, None)
        if x is None or w is None:
            continue
        found = bwd.get((x, w))
        if found is None and tl is not None:
            found = _consumer(pos, *tl, _conv_fits(x, w))
        if found is not None:
            out[pos] = json.dumps(list(found))
    if tl is not None and len(out) < len(need):
        _nested(need, out, shapes, tl[0])
    return out


def _nested(need: np.ndarray, out: dict[int, str], shapes: np.ndarray, ho: dict) -> None:
    """A convolution nested in another of the same input and weight (``conv2d`` > ``convolution`` >
    ``cudnn_convolution``) has its output: the innermost one's consumer is often a bias view inside the
    outer call, so the shape one level found serves the levels it encloses or is enclosed by."""
    got = list(out)
    for pos in need.tolist():
        if pos in out:
            continue
        s, e = ho["start"][pos], ho["start"][pos] + ho["dur"][pos]
        for g in got:
            if ho["track"][g] != ho["track"][pos] or shapes[g].split("],[", 2)[:2] != shapes[pos].split("],[", 2)[:2]:
                continue
            gs, ge = ho["start"][g], ho["start"][g] + ho["dur"][g]
            if (gs <= s and e <= ge) or (s <= gs and ge <= e):
                out[pos] = out[g]
                break


# ---------------------------------------------------------------- backward ops priced from their forward
#: an autograd node's name (``ConvolutionBackward0``, ``AddmmBackward0``; not its evaluate_function wrapper)
_NODE = re.compile(r"^[A-Za-z0-9_]+Backward\d*$")
_MATMUL_FWD = ("aten::linear", "aten::addmm", "aten::mm", "aten::bmm", "aten::matmul", "aten::baddbmm")
_CONV_FWD = ("aten::convolution", "aten::_convolution", "aten::conv2d", "aten::conv1d", "aten::conv3d",
             "aten::cudnn_convolution", "aten::miopen_convolution", "aten::mkldnn_convolution")
#: backward ops (aten base) priced elementwise over their forward's first input: (grad, input)-shaped records
_ELEMENTWISE_BWD = {"native_layer_norm_backward", "native_batch_norm_backward", "cudnn_batch_norm_backward",
                    "miopen_batch_norm_backward", "native_group_norm_backward", "_fused_rms_norm_backward",
                    "threshold_backward", "gelu_backward", "silu_backward", "sigmoid_backward", "tanh_backward",
                    "_softmax_backward_data", "_log_softmax_backward_data", "hardtanh_backward",
                    "native_dropout_backward"}


def _node_of(pos: int, ho: dict, nodes_by_track: dict) -> int:
    """Row position of the innermost autograd node enclosing host op ``pos`` on its track (-1 none)."""
    starts, rows = nodes_by_track.get(ho["track"][pos], (None, None))
    if starts is None:
        return -1
    s, e = ho["start"][pos], ho["start"][pos] + ho["dur"][pos]
    i = int(np.searchsorted(starts, s, side="right")) - 1
    while i >= 0:
        r = rows[i]
        if ho["start"][r] + ho["dur"][r] >= e:
            return int(r)
        i -= 1
    return -1


def _forward_of(seq: int, names: np.ndarray, shapes: np.ndarray, by_seq: dict, family: tuple) -> int:
    """The forward op of sequence number ``seq`` of one family (matmul / conv) with recorded shapes, the
    most specific first (family order); -1 when none or several with different shapes."""
    cands = [r for r in by_seq.get(seq, []) if names[r] in family and _tensor((_shapes(shapes[r]) or [None])[0])]
    if not cands:
        return -1
    best = min(cands, key=lambda r: family.index(names[r]))
    same = [r for r in cands if names[r] == names[best]]
    return best if len({shapes[r] for r in same}) == 1 else -1


def _gemm_signature(fwd_name: str, fwd_shapes: str, fwd_dtypes: str) -> tuple[str, str, str] | None:
    """An ``aten::mm`` / ``aten::bmm`` signature with the forward matmul's GEMM geometry: each GEMM of its
    backward (grad input, grad weight) multiplies the same M·K·N and moves as many elements."""
    from neuron_profiler.opmodel import lower_signature

    w = lower_signature(fwd_name, fwd_shapes, fwd_dtypes)
    if not w.flops_known or min(w.gemm) <= 0:
        return None
    b, m, k, n = w.gemm
    d = json.dumps([w.dtype, w.dtype])
    if b > 1:
        return "aten::bmm", json.dumps([[b, m, k], [b, k, n]]), d
    return "aten::mm", json.dumps([[m, k], [k, n]]), d


def _conv_backward_signature(fwd_name: str, fwd_shapes: str, fwd_dtypes: str, fwd_args: str
                             ) -> tuple[str, str, str, str] | None:
    """A ``convolution_backward(grad_output, input, weight)`` signature from its forward convolution's shapes
    (grad_output has the forward output's shape)."""
    from neuron_profiler.opmodel import lower_signature

    try:
        conc = json.loads(fwd_args).get("Concrete Inputs") if fwd_args else None
    except (ValueError, AttributeError):
        conc = None
    w = lower_signature(fwd_name, fwd_shapes, fwd_dtypes, 0, conc if isinstance(conc, list) else None)
    v = _shapes(fwd_shapes)
    if not w.flops_known or len(v) < 2 or w.gemm[1] <= 0:
        return None
    x, wt = v[0], v[1]
    out_sp = w.gemm[1] // max(x[0], 1)  # M = N · out spatial
    sp = x[2:]
    # the output's spatial dims: their product is known; the forward's shape keeps the rank
    go = [x[0], wt[0], out_sp] + [1] * (len(sp) - 1)
    return ("aten::convolution_backward", json.dumps([go, x, wt]), json.dumps([w.dtype] * 3), "")


def backward_signatures(host_ops: pd.DataFrame, need: np.ndarray) -> dict[int, tuple[str, str, str, str]]:
    """Row position -> (name, shapes, dtypes, args) to price a backward op recorded without shapes (at positions
    ``need``) from its forward's shapes: the forward is the op of the same sequence number as the autograd
    node (``ConvolutionBackward0``, ``AddmmBackward0``, ...) the backward op runs under. A
    ``convolution_backward`` becomes its forward's grad GEMMs, a matmul under a matmul node one GEMM of the
    forward's size, a norm / activation backward its (grad, input) over the forward's input."""
    if not len(need) or not all(c in host_ops.columns for c in ("track", "start_ts", "duration_ns",
                                                                "sequence_number")):
        return {}
    names = host_ops["name"].astype(str).to_numpy()
    shapes = host_ops["input_shapes"].astype(str).to_numpy()
    dtypes = host_ops["input_dtypes"].astype(str).to_numpy()
    args = host_ops["args"].astype(str).to_numpy() if "args" in host_ops.columns else np.full(len(names), "")
    seq = host_ops["sequence_number"].to_numpy()
    ho = {"track": host_ops["track"].to_numpy(), "start": host_ops["start_ts"].to_numpy(),
          "dur": host_ops["duration_ns"].to_numpy()}
    uniq, inv = np.unique(names, return_inverse=True)
    is_node = np.array([bool(_NODE.match(n)) for n in uniq], dtype=bool)[inv]
    nodes_by_track: dict = {}
    for tr in np.unique(ho["track"][is_node]):
        rows = np.flatnonzero(is_node & (ho["track"] == tr))
        rows = rows[np.argsort(ho["start"][rows], kind="stable")]
        nodes_by_track[tr] = (ho["start"][rows], rows)
    fwd_rows = np.flatnonzero(~is_node & (seq >= 0))
    by_seq: dict = {}
    for r in fwd_rows.tolist():
        by_seq.setdefault(int(seq[r]), []).append(r)
    out: dict[int, tuple[str, str, str, str]] = {}
    for pos in need.tolist():
        node = _node_of(pos, ho, nodes_by_track)
        if node < 0 or seq[node] < 0:
            continue
        sig = _signature_from_forward(pos, int(seq[node]), names, shapes, dtypes, args, by_seq)
        if sig is not None:
            out[pos] = sig
    return out


def _signature_from_forward(pos: int, s: int, names, shapes, dtypes, args, by_seq) -> tuple | None:
    base = names[pos].split("::", 1)[-1].split(".", 1)[0]
    cls = classify(names[pos])
    if base == "convolution_backward":
        f = _forward_of(s, names, shapes, by_seq, _CONV_FWD)
        return _conv_backward_signature(names[f], shapes[f], dtypes[f], args[f]) if f >= 0 else None
    if cls == "matmul":
        f = _forward_of(s, names, shapes, by_seq, _MATMUL_FWD)
        g = _gemm_signature(names[f], shapes[f], dtypes[f]) if f >= 0 else None
        return (*g, "") if g is not None else None
    if base in _ELEMENTWISE_BWD:
        cands = [r for r in by_seq.get(s, []) if _tensor((_shapes(shapes[r]) or [None])[0])]
        if not cands:
            return None
        x = _shapes(shapes[cands[0]])[0]
        d = (json.loads(dtypes[cands[0]]) or ["float"])[0] if dtypes[cands[0]].startswith("[") else "float"
        return names[pos], json.dumps([x, x]), json.dumps([d, d]), ""
    return None
