"""The captured window as a program for the target: which host ops dispatch, launch device kernels, run
collectives or wait for the device.

``extract_program(host_ops)`` reads the ``host_ops`` table (capture, or an imported Kineto trace) and
returns a ``Program`` in host order, per op (positions in the table):
- its parent on the same thread (ops nest: ``aten::linear`` -> ``aten::addmm``) and depth;
- what it costs the target's host: annotations nothing, a framework op called from Python
  ``eager_op_dispatch_ns``, an op called from inside another op ``nested_op_dispatch_ns`` (host model); the
  ops recorded inside a Python dispatch mode's handler (a dry run's FakeTensorMode) only their launches;
- the kernel it launches (leaf compute ops with shapes; ``kernel_launch_ns`` more on the host), as an
  index into ``signatures`` (distinct name/shapes/dtypes, lowered once by ``neuron_profiler.opmodel``);
- whether the host waits for the device there: ``.item()`` (``aten::_local_scalar_dense``), data-dependent
  shapes (``aten::nonzero``, ``aten::unique``...), device synchronisation calls (``neuron::sync ...`` ranges
  from ``neuron_profiler.capture.sync``, ``cudaDeviceSynchronize``-style runtime calls in imported traces);
- whether it is a collective (``record_param_comms`` args) or waits for collectives (``wait_tensor``,
  ``c10d::wait``, a "wait" ``record_param_comms``, the start of an optimizer step or of the next step).
Ops whose tensor inputs are all 0-dim run on the host (step counters and other scalar bookkeeping stay on
the CPU in a real run): they launch nothing, and an ``.item()`` that reads such a scalar is no sync.
"""
from __future__ import annotations

import json
from dataclasses import dataclass

import numpy as np
import pandas as pd

from neuron_profiler.compile.registry import GRAPH_PREFIX, graph_id_of
from neuron_profiler.eventnames import DRY_RUN_CALL_PREFIX, SYNC_PREFIX
from neuron_profiler.opmodel import OpWork, classify, is_composite, lower_signature, wants_concrete
from neuron_profiler.runtime.simulated.collectives import find_collectives, wait_positions
from neuron_profiler.runtime.simulated.graphs import GraphProgram, parse_graph
from neuron_profiler.runtime.simulated.lowering import leaf_compute_mask

__all__ = ["Program", "extract_program", "SYNC_OPS"]

#: aten ops after which the host needs a value from the device
SYNC_OPS = frozenset({"aten::_local_scalar_dense", "aten::is_nonzero", "aten::equal", "aten::nonzero",
                      "aten::masked_select", "aten::unique", "aten::_unique", "aten::_unique2",
                      "aten::unique_consecutive", "aten::unique_dim", "aten::allclose", "aten::nonzero_static"})
_WAIT_OPS = ("wait_tensor", "c10d::wait", "_wait", "Work.wait")
_HOST_CATEGORIES = ("cpu_op", "operator", "")
#: ranges whose start consumes the outstanding asynchronous collectives: the optimizer step, the next step
_CONSUMERS = ("Optimizer.step#", "ProfilerStep#")
#: ranges torch records around a Python dispatch mode's or tensor subclass's handling of an op
_MODE_RANGES = frozenset({"PythonDispatchMode", "PythonTLSSnapshot"})


@dataclass
class Program:
    """One window's host ops as the target would run them (arrays by table position)."""

    n: int
    order: np.ndarray          # positions in program order (start time, outer ops first)
    thread: np.ndarray         # track of each op
    parent: np.ndarray         # position of the enclosing op on the same thread, -1 none
    measured_start: np.ndarray
    measured_end: np.ndarray
    self_ns: np.ndarray        # projected host cost of the op itself (not its children), ns
    kernel: np.ndarray         # signature index of the kernel the op launches, -1 none
    sync: np.ndarray           # bool: the host waits for all device work here
    collective: np.ndarray     # row index into ``collectives``, -1 none
    waits_collectives: np.ndarray  # bool: device work after this op waits for the outstanding collectives
    signatures: list[tuple[str, OpWork | GraphProgram]]  # an op's work, or a compiled graph
    collectives: pd.DataFrame
    host_scalar: np.ndarray    # bool: a scalar-only op run on the host
    unpriced: list[str]        # names of compute ops that produced no device work (no shapes, unknown op)
    graph_nodes: dict[int, np.ndarray]  # graph call position -> host op position of each graph node (-1 none)
    graphs_used: list[str]     # ids of the compiled graphs the window calls


def _codes(col: pd.Series) -> tuple[np.ndarray, np.ndarray]:
    if isinstance(col.dtype, pd.CategoricalDtype):
        return col.cat.codes.to_numpy(np.int64), np.asarray(col.cat.categories, dtype=object)
    codes, uniq = pd.factorize(col.astype(str).fillna(""))
    return codes.astype(np.int64), np.asarray(uniq, dtype=object)


def _per_category(codes: np.ndarray, cats: np.ndarray, fn) -> np.ndarray:
    vals = np.array([fn(str(c)) for c in cats] + [fn("")])
    return vals[codes]


def _parents(track: np.ndarray, start: np.ndarray, end: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """(order, parent): program order (by track, start, longest first) and each op's enclosing op."""
    order = np.lexsort((-(end - start), start, track))
    parent = np.full(len(track), -1, dtype=np.int64)
    stack: list[int] = []
    prev_track = None
    for i in order.tolist():
        if track[i] != prev_track:
            stack.clear()
            prev_track = track[i]
        while stack and end[stack[-1]] <= start[i] and not (end[stack[-1]] == start[i] == end[i]):
            stack.pop()
        while stack and end[stack[-1]] < end[i]:  # overlapping but not nested: not a parent
            stack.pop()
        if stack:
            parent[i] = stack[-1]
        stack.append(i)
    prog = np.lexsort((-(end - start), start))
    return prog, parent


def _concrete(args: str) -> list | None:
    if not args or "Concrete Inputs" not in args:
        return None
    try:
        a = json.loads(args)
    except ValueError:
        return None
    v = a.get("Concrete Inputs") if isinstance(a, dict) else None
    return v if isinstance(v, list) else None


@dataclass
class _Ops:
    """Per-op columns of a host op table the program is built from (positions in the table)."""

    n: int
    track: np.ndarray
    start: np.ndarray
    end: np.ndarray
    order: np.ndarray
    parent: np.ndarray
    name_c: np.ndarray
    name_k: np.ndarray
    names: np.ndarray
    host_cat: np.ndarray     # bool: a framework op category (cpu_op)
    op_like: np.ndarray      # bool: a namespaced op or an autograd node

    def per_name(self, fn) -> np.ndarray:
        return _per_category(self.name_c, self.name_k, fn)


def _ops(host_ops: pd.DataFrame) -> _Ops:
    n = len(host_ops)
    track = host_ops["track"].to_numpy(np.int64) if n else np.zeros(0, np.int64)
    start = host_ops["start_ts"].to_numpy(np.int64) if n else np.zeros(0, np.int64)
    end = start + (host_ops["duration_ns"].to_numpy(np.int64) if n else np.zeros(0, np.int64))
    order, parent = _parents(track, start, end)
    name_c, name_k = _codes(host_ops["name"]) if n else (np.zeros(0, np.int64), np.zeros(0, object))
    cat_c, cat_k = (_codes(host_ops["category"]) if "category" in host_ops.columns and n
                    else (np.zeros(n, np.int64), np.array([""], dtype=object)))
    host_cat = _per_category(cat_c, cat_k, lambda c: c in _HOST_CATEGORIES).astype(bool)
    op_like = _per_category(name_c, name_k, lambda s: ("::" in s and not s.startswith(SYNC_PREFIX))
                            or s.endswith(("Backward0", "Backward1")) or s == "torch::autograd::AccumulateGrad")
    return _Ops(n, track, start, end, order, parent, name_c, name_k,
                _per_category(name_c, name_k, lambda s: s).astype(object), host_cat, op_like.astype(bool))


def extract_program(host_ops: pd.DataFrame, host: dict[str, float],
                    graphs: dict[str, dict] | None = None) -> Program:
    """The program of a window's ``host_ops`` (see the module docstring); ``host``: host model constants;
    ``graphs``: compiled graph programs by id (a ``neuron::graph <id>`` range runs one as a single launch, and
    the ops recorded inside it are its parts, not separate dispatches)."""
    o = _ops(host_ops)
    cls = o.per_name(classify)
    compute = (cls != "none") & o.host_cat
    leaf = leaf_compute_mask(host_ops, compute, np.isin(cls, ["matmul", "conv", "attention"])) if o.n \
        else np.zeros(0, bool)
    leaf = _helpers_absorbed(leaf, compute, cls, o.parent, o.order)
    leaf = _autocast_casts(leaf, compute, o.parent, o.names, o.order)
    leaf = _decomposed_as_one(leaf, compute, o.parent, o.names)
    is_call = o.per_name(lambda s: s.startswith(GRAPH_PREFIX)).astype(bool)
    calls = np.flatnonzero(is_call).tolist()
    inside = _descendants(calls, o.parent, o.order) if calls else np.zeros(o.n, dtype=bool)
    # torch.compile's own work (Dynamo tracing, AOT autograd on fake tensors) is host work of the first call,
    # not device work: the ops it records inside its "(dynamo_timed)" ranges are not kernels
    compiling = np.flatnonzero(o.per_name(lambda s: s.endswith("(dynamo_timed)")).astype(bool)).tolist()
    if compiling:
        inside |= _descendants(compiling, o.parent, o.order)
    leaf &= ~inside
    kernel, host_scalar, sigs = _lower_leaves(host_ops, o, leaf)
    graph_nodes, used = _graph_calls(o, calls, graphs or {}, kernel, sigs)

    self_ns = _host_costs(o, (kernel >= 0) & ~is_call, host)
    self_ns[list(graph_nodes)] = host["graph_launch_ns"]
    self_ns[inside] = 0.0

    coll = find_collectives(host_ops) if o.n else pd.DataFrame()
    coll_idx = np.full(o.n, -1, dtype=np.int64)
    if len(coll):
        pos = host_ops.index.get_indexer(coll["host_row"].to_numpy())
        coll_idx[pos] = np.arange(len(coll))
        kernel[pos] = -1
    unpriced = leaf & (kernel < 0) & ~host_scalar & (coll_idx < 0)
    names_unpriced = pd.Series(o.names[unpriced]).value_counts().index.tolist() if unpriced.any() else []
    waits = o.per_name(lambda s: any(k in s for k in _WAIT_OPS) or s.startswith(_CONSUMERS)).astype(bool)
    waits[wait_positions(host_ops)] = True
    return Program(n=o.n, order=o.order, thread=o.track, parent=o.parent, measured_start=o.start,
                   measured_end=o.end, self_ns=self_ns, kernel=kernel,
                   sync=_sync_points(o, host_scalar) & ~inside, collective=coll_idx, waits_collectives=waits,
                   signatures=sigs, collectives=coll, host_scalar=host_scalar,
                   unpriced=[str(x) for x in names_unpriced], graph_nodes=graph_nodes, graphs_used=used)


def _host_costs(o: _Ops, launches: np.ndarray, host: dict[str, float]) -> np.ndarray:
    """Projected host cost of each op itself (ns): a framework op called from Python (or an autograd node)
    ``eager_op_dispatch_ns``, an op inside an op ``nested_op_dispatch_ns``, plus ``kernel_launch_ns`` where it
    launches a kernel (``launches``); annotations cost nothing. What torch records inside a Python dispatch
    mode's handler (``PythonDispatchMode`` / ``PythonTLSSnapshot`` ranges: FakeTensorMode's re-dispatch, its
    decompositions and its fake tensors' ``detach`` / ``empty_strided`` / ``set_``, capture's dry-run recorder)
    is how this machine implements the op around the range, which paid the dispatch: only the kernel launches
    inside it are the program's, so meta and fake dry runs cost the host what the same program costs on the
    device. A tensor subclass's handler (``PythonSubclass``: DTensor, FSDP2 parameters) outside such a mode is
    the program's own work and keeps its costs. A ``neuron::dry_run <op>`` range (a meta dry run's autocast
    call) is the program's call of the op, as CPU autocast's wrapper op is."""
    par_ok = o.parent >= 0
    parent_is_op = np.zeros(o.n, dtype=bool)
    parent_is_op[par_ok] = o.op_like[o.parent[par_ok]]
    self_ns = np.zeros(o.n, dtype=np.float64)
    op_like = (o.op_like & o.host_cat) | o.per_name(lambda s: s.startswith(DRY_RUN_CALL_PREFIX)).astype(bool)
    self_ns[op_like & ~parent_is_op] = host["eager_op_dispatch_ns"]
    self_ns[op_like & parent_is_op] = host["nested_op_dispatch_ns"]
    in_mode = _descendants(np.flatnonzero(o.per_name(lambda s: s in _MODE_RANGES)).tolist(), o.parent, o.order)
    self_ns[in_mode] = 0.0
    self_ns[launches] += host["kernel_launch_ns"]
    return self_ns


def _lower_leaves(host_ops: pd.DataFrame, o: _Ops, leaf: np.ndarray) -> tuple[np.ndarray, np.ndarray, list]:
    """(kernel signature per op (-1 none), host-scalar flags, signatures): each distinct (name, shapes, dtypes)
    of the leaf ops lowered once by the op model."""
    n = o.n
    kernel = np.full(n, -1, dtype=np.int64)
    host_scalar = np.zeros(n, dtype=bool)
    sigs: list[tuple[str, OpWork | GraphProgram]] = []
    rows = np.flatnonzero(leaf)
    if not len(rows):
        return kernel, host_scalar, sigs
    cols = {c: (_codes(host_ops[c]) if c in host_ops.columns else (np.full(n, -1, np.int64), np.zeros(0, object)))
            for c in ("input_shapes", "input_dtypes", "args")}
    flops = host_ops["flops"].to_numpy(np.int64) if "flops" in host_ops.columns else np.zeros(n, np.int64)
    reads_args = o.per_name(wants_concrete).astype(bool)[rows]  # ops whose Concrete Inputs the op model reads
    key = np.stack([o.name_c[rows], cols["input_shapes"][0][rows], cols["input_dtypes"][0][rows], flops[rows],
                    np.where(reads_args, cols["args"][0][rows], -1)], axis=1)
    uniq, inv = np.unique(key, axis=0, return_inverse=True)
    sig_of_uniq = np.full(len(uniq), -1, dtype=np.int64)
    scalar_of_uniq = np.zeros(len(uniq), dtype=bool)

    def val(kind: str, code: int) -> str:
        return "" if code < 0 else str(cols[kind][1][code])
    for u, (nc, sc, dc, fl, ac) in enumerate(uniq):
        name = str(o.name_k[nc])
        w = lower_signature(name, val("input_shapes", sc), val("input_dtypes", dc), int(fl),
                            _concrete(val("args", ac)) if ac >= 0 else None)
        if w.cls == "none":
            continue
        if w.inputs and all(t.shape == () for t in w.inputs):
            scalar_of_uniq[u] = True
            continue
        sig_of_uniq[u] = len(sigs)
        sigs.append((name, w))
    inv = inv.reshape(-1)
    kernel[rows] = sig_of_uniq[inv]
    host_scalar[rows] = scalar_of_uniq[inv]
    return kernel, host_scalar, sigs


def _graph_calls(o: _Ops, calls: list[int], graphs: dict[str, dict], kernel: np.ndarray, sigs: list
                 ) -> tuple[dict[int, np.ndarray], list[str]]:
    """Give each ``neuron::graph <id>`` call its graph's signature; returns the host op of each graph node per
    call, and the ids of the graphs used."""
    graph_nodes: dict[int, np.ndarray] = {}
    used: list[str] = []
    parsed: dict[str, int] = {}
    for i in calls:
        gid = graph_id_of(str(o.names[i])) or ""
        prog = graphs.get(gid)
        if prog is None:
            continue
        if gid not in parsed:
            parsed[gid] = len(sigs)
            sigs.append((GRAPH_PREFIX + gid, parse_graph(gid, prog)))
            used.append(gid)
        kernel[i] = parsed[gid]
        graph_nodes[i] = _match_nodes(i, sigs[parsed[gid]][1], o.parent, o.order, o.names)
    return graph_nodes, used


def _sync_points(o: _Ops, host_scalar: np.ndarray) -> np.ndarray:
    """Ops after which the host waits for the device (see the module docstring)."""
    sync = o.per_name(lambda s: s in SYNC_OPS).astype(bool) & o.host_cat
    sync |= o.per_name(lambda s: s.startswith(SYNC_PREFIX)).astype(bool)
    sync |= o.per_name(lambda s: "synchronize" in s.lower() and "::" not in s).astype(bool) & ~o.host_cat
    return sync & ~_reads_host_scalar(o.order, o.names, host_scalar, o.track)


def _descendants(roots: list[int], parent: np.ndarray, order: np.ndarray) -> np.ndarray:
    """True for every op nested (at any depth) inside one of ``roots``."""
    inside = np.zeros(len(parent), dtype=bool)
    is_root = np.zeros(len(parent), dtype=bool)
    is_root[roots] = True
    for i in order.tolist():  # parents come before their children
        j = int(parent[i])
        if j >= 0 and (is_root[j] or inside[j]):
            inside[i] = True
    return inside


def _match_nodes(call: int, g: GraphProgram, parent: np.ndarray, order: np.ndarray, names: np.ndarray) -> np.ndarray:
    """Host op position of each graph node: the graph ran its nodes in order, each one a direct child of the
    call's range with the node's name (unmatched nodes get -1: their events count against the call)."""
    kids = [i for i in order.tolist() if int(parent[i]) == call]
    out = np.full(len(g.names), -1, dtype=np.int64)
    k = 0
    for j, nm in enumerate(g.names):
        look = k
        while look < len(kids) and str(names[kids[look]]) != nm and look < k + 8:
            look += 1
        if look < len(kids) and str(names[kids[look]]) == nm:
            out[j] = kids[look]
            k = look + 1
    return out


def _decomposed_as_one(leaf: np.ndarray, compute: np.ndarray, parent: np.ndarray, names: np.ndarray) -> np.ndarray:
    """Dry runs (meta device, FakeTensorMode) run ops through their Python decompositions, which record
    ``prims::`` ops, FP32 upcasts and casts that a device kernel never runs: lower the outermost compute op
    that contains ``prims::`` ops as one kernel, with the dtypes the program used, and nothing inside it.
    A composite (``opmodel.is_composite``: ``rms_norm``, ``cross_entropy_loss``, ...), which a real run runs
    op by op, is not one kernel because one of its ops (``mean``) decomposes on meta tensors.
    A real run records no ``prims::`` ops and is unchanged. A ``_foreach_*`` op is not one kernel here: it
    runs one op per list element, each lowered as one (as on CPU, where its per-tensor ops are the leaves).
    Nor is an autocast wrapper (:func:`_autocast_wrappers`): its casts and its inner op are lowered, as they
    run on the device."""
    prims = np.array([str(x).startswith("prims::") for x in names], dtype=bool) if len(names) else np.zeros(0, bool)
    if not prims.any():
        return leaf
    has = np.zeros(len(leaf), dtype=bool)
    for i in np.flatnonzero(prims).tolist():
        j = int(parent[i])
        while j >= 0 and not has[j]:
            has[j] = True
            j = int(parent[j])
    foreach = np.array(["::_foreach_" in str(x) for x in names], dtype=bool)
    composite = np.array([is_composite(str(x)) for x in names], dtype=bool)
    dec = has & compute & ~prims & ~foreach & ~composite & ~_autocast_wrappers(parent, names)
    out = leaf & ~prims
    for i in np.flatnonzero(dec).tolist():
        j, outer = int(parent[i]), True
        while j >= 0:
            if dec[j]:
                outer = False
                break
            j = int(parent[j])
        out[i] = outer
    # anything inside an outermost decomposed op is part of it
    for i in np.flatnonzero(out & ~dec).tolist():
        j = int(parent[i])
        while j >= 0:
            if dec[j] and out[j]:
                out[i] = False
                break
            j = int(parent[j])
    return out


_HELPERS = ("copy", "fill")


def _helpers_absorbed(leaf: np.ndarray, compute: np.ndarray, cls: np.ndarray, parent: np.ndarray,
                      order: np.ndarray) -> np.ndarray:
    """``leaf`` with each op whose only compute work inside is copies and fills (a CPU kernel's
    ``contiguous`` of its input, the zeroing of its output: ``native_layer_norm_backward`` -> ``clone`` ->
    ``copy_``) lowered as one kernel, its helpers part of it, as a device kernel does them; matmuls keep their
    own rule (``leaf_compute_mask``) and copies and fills are helpers, not such ops."""
    n = len(parent)
    seq = order.tolist()
    helper = np.isin(cls, _HELPERS)
    tensor = np.isin(cls, ["matmul", "conv", "attention"])
    other_inside = np.zeros(n, dtype=bool)  # holds a compute op that is not a helper
    helper_inside = np.zeros(n, dtype=bool)
    for i in reversed(seq):  # children before their parents
        p = int(parent[i])
        if p >= 0:
            other_inside[p] |= other_inside[i] or (compute[i] and not helper[i])
            helper_inside[p] |= helper_inside[i] or (compute[i] and helper[i])
    unit = compute & ~helper & ~tensor & helper_inside & ~other_inside
    if not unit.any():
        return leaf
    out = leaf.copy()
    covered = np.zeros(n, dtype=bool)  # inside a leaf or a unit already
    for i in seq:  # parents before their children
        p = int(parent[i])
        above = p >= 0 and (covered[p] or out[p])
        if unit[i] and not above:
            out[i] = True
        elif above and (covered[p] or unit[p]):
            out[i] = False
        covered[i] = above or (unit[i] and out[i])
    return out


_CASTS = ("aten::to", "aten::_to_copy")


def _autocast_wrappers(parent: np.ndarray, names: np.ndarray) -> np.ndarray:
    """True for autocast's wrapper records: an op whose direct children are casts of its inputs
    (``aten::to`` / ``aten::_to_copy``) and the same op again, redispatched in the autocast dtype (CPU autocast
    records ``aten::linear`` in the input dtypes around them)."""
    n = len(parent)
    same = np.zeros(n, dtype=bool)
    cast = np.zeros(n, dtype=bool)
    for i in np.flatnonzero(parent >= 0).tolist():
        p = int(parent[i])
        if names[p] == names[i]:
            same[p] = True
        elif names[i] in _CASTS:
            cast[p] = True
    return same & cast


def _autocast_casts(leaf: np.ndarray, compute: np.ndarray, parent: np.ndarray, names: np.ndarray,
                    order: np.ndarray) -> np.ndarray:
    """``leaf`` plus the innermost compute ops of the casts under an autocast wrapper: autocast's casts run
    on the device before the op (a cast of the weights, of the activations), they are not part of the
    matmul the wrapper holds."""
    wrap = _autocast_wrappers(parent, names)
    if not wrap.any():
        return leaf
    in_cast = np.zeros(len(parent), dtype=bool)
    holds_compute = np.zeros(len(parent), dtype=bool)
    seq = order.tolist()
    for i in seq:  # parents come before their children
        p = int(parent[i])
        if p >= 0:
            in_cast[i] = in_cast[p] or (wrap[p] and names[i] in _CASTS)
    for i in reversed(seq):
        p = int(parent[i])
        if p >= 0 and (compute[i] or holds_compute[i]):
            holds_compute[p] = True
    return leaf | (in_cast & compute & ~holds_compute)


def _reads_host_scalar(order: np.ndarray, names: np.ndarray, host_scalar: np.ndarray,
                       track: np.ndarray) -> np.ndarray:
    """True for ``.item()`` reads of a scalar the host just computed (the last op with tensor inputs
    before it on its thread was a host scalar op): no device synchronisation."""
    out = np.zeros(len(order), dtype=bool)
    last_scalar: dict[int, bool] = {}
    for i in order.tolist():
        nm = names[i]
        if nm == "aten::_local_scalar_dense":
            out[i] = last_scalar.get(int(track[i]), False)
        elif host_scalar[i]:
            last_scalar[int(track[i])] = True
        elif nm.startswith("aten::") and nm not in ("aten::item", "aten::detach", "aten::alias"):
            if not _IS_VIEW(nm):
                last_scalar[int(track[i])] = False
    return out


def _IS_VIEW(name: str) -> bool:  # noqa: N802
    return classify(name) == "none"
