"""Compiled graphs (``torch.compile(backend="neuron")``) as one device program.

A graph program (``neuron_profiler.compile.registry``) lists aten nodes with their input shapes, dtypes
and producers. ``graph_plan`` turns it into one ``KernelPlan`` the way a graph compiler for a NeuronCore
would, instead of one kernel per op:
- views and metadata ops are aliases (no work);
- chains of elementwise / activation / norm / softmax ops whose intermediate feeds only the next op fuse
  into one streamed kernel (the intermediate never leaves SBUF); elementwise work on a matmul's output
  that nothing else reads fuses into its PSUM evacuation (an epilogue);
- a tensor produced by the previous fused op stays in SBUF for the next one when it fits
  (``sbuf_usable_fraction`` x half the SBUF), else it goes to HBM and back;
- graph inputs (weights, activations from the host or another graph) live in HBM; graph outputs are stored;
- the ops' tile groups run in one pipeline: an op's first tiles start as soon as the tiles they read
  were produced, so engines of consecutive ops overlap (higher occupancy than eager, one launch).
Every stage carries the graph node it came from, so events name the op they stand for.
"""
from __future__ import annotations

import math
from dataclasses import dataclass, field
from typing import Any

from neuron_profiler.opmodel import OpWork, lower_signature, parse_json_list, tensor_args
from neuron_profiler.runtime.simulated.dma import descriptor_for
from neuron_profiler.runtime.simulated.kernels import (
    ELEMENTWISE_FREE_MAX,
    Fusion,
    _compute,
    _loads,
    _store,
    base_name,
    kernel_plan,
)
from neuron_profiler.runtime.simulated.params import CoreParams
from neuron_profiler.runtime.simulated.pipeline import Group, KernelPlan
from neuron_profiler.runtime.simulated.tiles import split, tile_groups

__all__ = ["GraphProgram", "parse_graph", "graph_plan"]

_TENSOR = ("matmul", "conv", "attention")
_EPILOGUE = ("vector", "scalar")


@dataclass
class GraphProgram:
    """A parsed graph program: per node its name, work, resolved tensor producers and consumers."""

    gid: str
    names: list[str]
    works: list[OpWork]
    producers: list[list[int]]       # per node, per tensor input (OpWork.inputs order): producing node, -1 input
    input_bytes: list[list[int]]
    consumers: list[set[int]]
    outputs: set[int]
    signature: tuple = field(default=())

    def with_work(self) -> list[int]:
        return [i for i, w in enumerate(self.works) if w.cls != "none"]


def parse_graph(gid: str, prog: dict[str, Any]) -> GraphProgram:
    """Parse a program from the registry or a trace's metadata (tolerant: bad nodes do no work)."""
    raw = [n for n in prog.get("nodes", []) if isinstance(n, dict)]
    names = [str(n.get("name", "")) for n in raw]
    works = [lower_signature(names[i], str(n.get("shapes", "")), str(n.get("dtypes", ""))) for i, n in enumerate(raw)]
    alias = list(range(len(raw)))

    def resolve(i: int) -> int:
        seen = 0
        while 0 <= i < len(raw) and alias[i] != i and seen < len(raw):
            i, seen = alias[i], seen + 1
        return i

    producers, input_bytes = [], []
    for i, n in enumerate(raw):
        inputs = n.get("inputs")
        pos = inputs if isinstance(inputs, list) else []
        shapes = parse_json_list(str(n.get("shapes", ""))) or []
        dtypes = parse_json_list(str(n.get("dtypes", ""))) or []
        try:
            targs = tensor_args(shapes, dtypes)
        except (TypeError, ValueError, OverflowError):
            targs = []
        prods, sizes = [], []
        for j, t in enumerate(targs):
            if t is None:
                continue
            src = pos[j] if j < len(pos) and isinstance(pos[j], int) else -1
            prods.append(resolve(src) if 0 <= src < i else -1)
            sizes.append(int(t.nbytes))
        producers.append(prods)
        input_bytes.append(sizes)
        if works[i].cls == "none":  # a view: its value is its first tensor input's
            alias[i] = prods[0] if prods and prods[0] >= 0 else i
    consumers: list[set[int]] = [set() for _ in raw]
    for i, prods in enumerate(producers):
        if works[i].cls == "none":
            continue
        for src in prods:
            if src >= 0:
                consumers[src].add(i)
    outs = {resolve(o) for o in prog.get("outputs", []) if isinstance(o, int) and 0 <= o < len(raw)}
    sig = tuple((names[i], str(raw[i].get("shapes", "")), str(raw[i].get("dtypes", ""))) for i in range(len(raw)))
    return GraphProgram(gid, names, works, producers, input_bytes, consumers, outs, sig)


@dataclass
class _Fused:
    kind: str                 # "tensor", "stream", "gpsimd"
    nodes: list[int]
    epilogue: list[int] = field(default_factory=list)

    @property
    def last(self) -> int:
        return (self.epilogue or self.nodes)[-1]

    @property
    def members(self) -> set[int]:
        return set(self.nodes) | set(self.epilogue)


def _fuse(g: GraphProgram) -> list[_Fused]:
    """Fused ops in execution order. A streamed op joins the fused op whose last node produced its first
    input when nothing else reads that value and its other inputs are ready by then (independent nodes
    in between, such as weight casts, are reordered around it)."""
    out: list[_Fused] = []
    owner: dict[int, int] = {}
    for i in g.with_work():
        w = g.works[i]
        kind = "tensor" if w.cls in _TENSOR else "gpsimd" if w.cls == "gpsimd" else "stream"
        src = g.producers[i][0] if g.producers[i] else -1
        k = owner.get(src, -1)
        others_ready = all(o < 0 or owner.get(o, -1) <= k for o in g.producers[i][1:])
        if (kind == "stream" and k >= 0 and out[k].last == src and g.consumers[src] == {i}
                and src not in g.outputs and others_ready):
            f = out[k]
            if f.kind == "stream":
                f.nodes.append(i)
                owner[i] = k
                continue
            if f.kind == "tensor" and w.cls in _EPILOGUE:
                f.epilogue.append(i)
                owner[i] = k
                continue
        out.append(_Fused(kind, [i]))
        owner[i] = len(out) - 1
    return out


def graph_plan(g: GraphProgram, p: CoreParams) -> KernelPlan | None:
    """One kernel plan for a whole graph (see the module docstring); None when the graph does no work."""
    fused = _fuse(g)
    if not fused:
        return None
    budget = p.sbuf_bytes * p.sbuf_usable_fraction * 0.5
    owner = {m: k for k, f in enumerate(fused) for m in f.members}
    groups: list[Group] = []
    spans: list[tuple[int, int]] = []   # (first, end) group index of each fused op
    resident = 0.0
    for k, f in enumerate(fused):
        prev = fused[k - 1] if k else None
        nxt = fused[k + 1] if k + 1 < len(fused) else None
        in_sbuf = _resident_inputs(g, f, prev, budget)
        store = _needs_store(g, f, nxt, budget)
        plan = _plan_of(g, f, in_sbuf, store, p)
        resident = max(resident, plan.resident_sbuf_bytes)
        first = len(groups)
        feeds = sorted({owner[s] for m in f.members for s in g.producers[m] if s >= 0 and owner.get(s, k) != k})
        n_groups = len(plan.groups)
        for j, grp in enumerate(plan.groups):
            grp.part = k
            after = []
            for src in feeds:
                a, b = spans[src]
                after.append(a + min(b - a - 1, int(math.ceil((j + 1) / n_groups * (b - a))) - 1))
            grp.after = tuple(after)
            for st in grp.stages:
                st.node = f.nodes[0] if st.node < 0 else st.node
            groups.append(grp)
        spans.append((first, len(groups)))
    n_ops = sum(len(f.members) for f in fused)
    note = (f"compiled graph {g.gid}: {n_ops} ops in {len(fused)} fused kernels, one launch")
    return KernelPlan(groups, resident_sbuf_bytes=resident, note=note)


def _resident_inputs(g: GraphProgram, f: _Fused, prev: _Fused | None, budget: float) -> frozenset[int]:
    """Positions (in the first node's inputs) of tensors the previous fused op left in SBUF."""
    if prev is None:
        return frozenset()
    head = f.nodes[0]
    return frozenset(j for j, (src, nb) in enumerate(zip(g.producers[head], g.input_bytes[head]))
                     if src == prev.last and nb <= budget)


def _needs_store(g: GraphProgram, f: _Fused, nxt: _Fused | None, budget: float) -> bool:
    last = f.last
    users = g.consumers[last]
    nb = g.works[last].out_bytes
    if last in g.outputs or nb > budget or nxt is None:
        return True
    return not users <= {nxt.nodes[0]}


def _plan_of(g: GraphProgram, f: _Fused, in_sbuf: frozenset[int], store: bool, p: CoreParams) -> KernelPlan:
    head = f.nodes[0]
    w = g.works[head]
    if f.kind == "tensor":
        epi = [g.works[i] for i in f.epilogue]
        fusion = Fusion(in_sbuf, store, float(sum(x.flops for x in epi)), any(x.cls == "scalar" for x in epi))
        plan = kernel_plan(w, g.names[head], p, fusion)
    elif f.kind == "gpsimd":
        plan = kernel_plan(w, g.names[head], p)
    elif len(f.nodes) == 1:
        plan = kernel_plan(w, g.names[head], p, Fusion(in_sbuf, store))
    else:
        plan = _chain(g, f, in_sbuf, store, p)
    assert plan is not None  # nodes in fused ops all have work
    return plan


def _chain(g: GraphProgram, f: _Fused, in_sbuf: frozenset[int], store: bool, p: CoreParams) -> KernelPlan:
    """One streamed kernel for a chain of elementwise-like ops: external inputs loaded once, intermediates
    in SBUF, the last output stored."""
    works = [g.works[i] for i in f.nodes]
    elem = max(1, int(round(works[-1].out_bytes / max(works[-1].out_elems, 1))))
    total = max(max(w.elems or w.out_elems for w in works), 1)
    members = set(f.nodes)
    ext = 0.0
    for i in f.nodes:
        for j, (src, nb) in enumerate(zip(g.producers[i], g.input_bytes[i])):
            if src in members or (i == f.nodes[0] and j in in_sbuf):
                continue
            ext += nb
    per_part = math.ceil(total / p.partitions)
    cap = p.sbuf_bytes * p.sbuf_usable_fraction / (2 * p.partitions * elem * 3)
    free = int(max(1, min(per_part, ELEMENTWISE_FREE_MAX, cap)))
    n_tiles = math.ceil(per_part / free)
    sizes = tile_groups(n_tiles, p.max_tile_groups)
    desc = descriptor_for(free, elem)
    last_bytes = float(works[-1].out_bytes)
    groups = []
    for tiles, share in zip(sizes, split(1.0, sizes)):
        st = [_loads([("qSyncIO0", ext * share, desc, f"{base_name(g.names[f.nodes[0]])}.in")], p)] if ext > 0 else []
        for node, w in zip(f.nodes, works):
            n_in = max(1, sum(1 for t in w.inputs if t.numel >= total))
            comp = _compute(w, base_name(g.names[node]), tiles, free, n_in, elem, share, False, p,
                            (len(st) - 1,) if st else None)
            for c in comp:
                c.node = node
            st.extend(comp)
        if store:
            st.append(_store(last_bytes * share, desc, f"{base_name(g.names[f.nodes[-1]])}.out", p, node=f.nodes[-1]))
        else:
            st[-1].sbuf_release = True
        st[0].sbuf_acquire = True
        groups.append(Group(st, tiles, sbuf_bytes=p.partitions * free * elem * 3))
    return KernelPlan(groups, note=f"{len(f.nodes)} fused elementwise ops, {n_tiles} tiles of 128x{free}")
