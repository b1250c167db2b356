"""The NeuronCore pipeline scheduler: one kernel's tile groups -> a timed template of its events.

A kernel is a sequence of tile groups (``Group``); each group runs a chain of stages (``Stage``) on the
core's resources: the engines (Tensor, TensorMatrix, Vector, Scalar, GpSimd, Sync) and the DMA engines.
Each engine is an in-order sequencer running its own instruction stream; engines synchronise through
semaphores, so a stage starts at ``max(its engine is free, its inputs are ready, its buffer is free)``:
- inputs: the stages of the same group it depends on (default: the previous one);
- buffers: SBUF tile buffers (``sbuf_slots`` at group level: double buffering) are taken by a group's
  loads and released by the stage that consumes them; PSUM banks likewise between MultiplyMoving and the
  evacuation. A load of group g therefore waits for the release of group g - slots: with two slots the
  input DMA of group g+1 overlaps the compute of group g when SBUF capacity allows.
- DMA: every transfer is triggered by Sync-engine instructions (``DmaTrigger``), one per tile, each when its
  tile's input is ready: the Sync engine is busy ``tiles x sync_instruction_cycles`` for a group's transfer,
  spread over the span in which its tiles become ready, and other transfers' triggers run in between (the
  compiler interleaves them in tile order). A tile's data moves ``dma_fixed_latency_ns`` after its trigger, on
  the core's DMA engines (one shared resource at the core's DMA rate, so loads and stores share bandwidth).
  Loads are issued ``prefetch`` groups ahead of the stores of the current group (software pipelining).
Where an engine sits idle waiting on a semaphore for at least ``semaphore_wait_min_ns``, the template has
a ``SemaphoreWait`` event on that engine and a "dependency" link from the event it waited for.
The result is a ``KernelTemplate``: event times relative to the kernel start, plus SBUF/PSUM occupancy
segments and the Tensor engine's first MultiplyMoving (for dI/dt throttling at run time).
"""
from __future__ import annotations

from collections.abc import Callable

from neuron_profiler.runtime.simulated.engines import sync_ns
from neuron_profiler.runtime.simulated.params import CoreParams
from neuron_profiler.runtime.simulated.plan import DMA, Group, KernelPlan, KernelTemplate, Stage, _Node
from neuron_profiler.runtime.simulated.template import _pieces, _template

__all__ = ["Stage", "Group", "KernelPlan", "KernelTemplate", "schedule_kernel", "DMA"]

_NONE: tuple[int, ...] = ()


def _build_nodes(plan: KernelPlan) -> list[_Node]:
    nodes: list[_Node] = []
    last_of: list[int] = []
    for gi, g in enumerate(plan.groups):
        row: list[int] = []
        for si, st in enumerate(g.stages):
            nodes.append(_Node(gi, si, st, st.engine))
            row.append(len(nodes) - 1)
        for si, st in enumerate(g.stages):
            deps = (si - 1,) if st.deps is None and si > 0 else (st.deps or _NONE)
            nodes[row[si]].deps = [row[d] for d in deps]
        last_of.append(row[-1])
        if g.after and row:
            nodes[row[0]].deps += [last_of[a] for a in g.after if a < gi]
    # DMA triggers on the Sync engine: the trigger takes the transfer's dependencies
    for nid in range(len(nodes)):
        n = nodes[nid]
        if n.res != DMA:
            continue
        t = _Node(n.g, n.s, Stage("Sync", "DmaTrigger", 0.0), "Sync", list(n.deps), is_trigger=True)
        nodes.append(t)
        t.trigger = nid
        n.trigger = len(nodes) - 1
        n.deps = [len(nodes) - 1]
    return nodes


def _blockers(plan: KernelPlan, nodes: list[_Node]) -> list[list[int]]:
    """Per node: the nodes it waits for (inputs, its trigger, and the release of the buffer it reuses)."""
    released: dict[tuple[str, int], int] = {}
    for nid, n in enumerate(nodes):
        if not n.is_trigger:
            for buf, flag in (("sbuf", n.stage.sbuf_release), ("psum", n.stage.psum_release)):
                if flag:
                    released.setdefault((buf, n.g), nid)
    # buffers pair with the group `slots` earlier of the same part (op) of the kernel
    prev: dict[int, list[int]] = {}
    back: dict[int, dict[int, int]] = {}
    for gi, g in enumerate(plan.groups):
        lst = prev.setdefault(g.part, [])
        back[gi] = {k: lst[-k] for k in (plan.sbuf_slots, plan.psum_slots) if len(lst) >= k}
        lst.append(gi)
    out = []
    for n in nodes:
        b = list(n.deps)
        st = n.stage if not n.is_trigger else nodes[n.trigger].stage
        for buf, flag, slots in (("sbuf", st.sbuf_acquire, plan.sbuf_slots),
                                 ("psum", st.psum_acquire, plan.psum_slots)):
            g_back = back[n.g].get(slots)
            if flag and g_back is not None and (buf, g_back) in released:
                b.append(released[(buf, g_back)])
        out.append(b)
    return out


def schedule_kernel(plan: KernelPlan, p: CoreParams) -> KernelTemplate:
    """Schedule ``plan`` on one NeuronCore (see the module docstring) and return its event template.

    A list scheduler: when an engine is free it runs, among the stages whose inputs are ready, the one of the
    oldest tile group (the order a compiler's software pipeline gives), else the earliest ready one."""
    nodes = _build_nodes(plan)
    blockers = _blockers(plan, nodes)
    trig_ns = sync_ns(p)
    per_tile = [_per_tile(n, plan, trig_ns) for n in nodes]
    dur = [trig_ns * max(plan.groups[n.g].tiles, 1) if n.is_trigger else n.stage.ns for n in nodes]
    pending = [len(b) for b in blockers]
    dependents: list[list[int]] = [[] for _ in nodes]
    for nid, b in enumerate(blockers):
        for x in b:
            dependents[x].append(nid)
    free: dict[str, float] = {}
    ready: dict[str, list[int]] = {}
    for nid, n in enumerate(nodes):
        free.setdefault(n.res, 0.0)
        ready.setdefault(n.res, [])
        if not pending[nid]:
            ready[n.res].append(nid)
    waits: list[tuple[str, float, float, int]] = []  # engine, from, to, waited-for node
    started: set[str] = set()  # engines that ran an instruction (waits before the first one are implied)

    def earliest(nid: int) -> float:
        # the first tile can go once the first tile of each input is in (a trigger's first tile: its start)
        b = blockers[nid]
        t = max((nodes[x].start + per_tile[x] for x in b), default=0.0)
        if nodes[nid].res == DMA:
            t = max(t, nodes[nodes[nid].trigger].start + trig_ns + p.dma_latency_ns)
        return t

    def last_tile_end(nid: int) -> float:
        # the last tile ends after the last tile of each input (a transfer: its last trigger + the latency)
        lat = {nodes[nid].trigger: p.dma_latency_ns} if nodes[nid].res == DMA else {}
        return max((nodes[x].end + lat.get(x, 0.0) + per_tile[nid] for x in blockers[nid]), default=0.0)

    for _ in range(len(nodes)):
        start, r, nid = _next_node(nodes, ready, free, earliest)
        n = nodes[nid]
        b = blockers[nid]
        if r not in (DMA, "Sync") and b and r in started and start - free[r] >= p.semaphore_wait_min_ns:
            last = max(b, key=lambda x: nodes[x].start + per_tile[x])
            waits.append((r, free[r], start, last))
        started.add(r)
        n.start = start
        n.end = max(start + dur[nid], last_tile_end(nid))
        # a group's triggers occupy the Sync engine for their own time only: those of other transfers
        # interleave with them while this group's tiles become ready
        free[r] = start + dur[nid] if n.is_trigger else n.end
        ready[r].remove(nid)
        for d in dependents[nid]:
            pending[d] -= 1
            if not pending[d]:
                ready[nodes[d].res].append(d)
    pieces, sync_waits = _sync_pieces(plan, nodes, blockers, per_tile, dur, p)
    return _template(plan, nodes, waits + sync_waits, pieces, p)


def _next_node(nodes: list[_Node], ready: dict[str, list[int]], free: dict[str, float],
               earliest: Callable[[int], float]) -> tuple[float, str, int]:
    """(start, engine, node) of the next stage to run: per engine, the ready stage of the oldest tile group
    among those whose inputs are in by the time the engine is free, else the one whose inputs come first;
    over engines, the earliest start (then the oldest group)."""
    best: tuple[float, tuple[int, int], str, int] | None = None
    for r, lst in ready.items():
        if not lst:
            continue
        times = [(earliest(x), x) for x in lst]
        avail = [(nodes[x].g, nodes[x].s, x, t) for t, x in times if t <= free[r]]
        if avail:
            _g, _s, x, t = min(avail)
        else:
            t, x = min(times, key=lambda tx: (tx[0], nodes[tx[1]].g, nodes[tx[1]].s))
        cand = (max(free[r], t), (nodes[x].g, nodes[x].s), r, x)
        if best is None or cand[:2] < best[:2]:
            best = cand
    if best is None:
        raise RuntimeError("kernel pipeline deadlock (a stage waits for one that can never run)")
    return best[0], best[2], best[3]


def _sync_pieces(plan: KernelPlan, nodes: list[_Node], blockers: list[list[int]], per_tile: list[float],
                 dur: list[float], p: CoreParams) -> tuple[dict[int, list[tuple[float, float, float]]],
                                                          list[tuple[str, float, float, int]]]:
    """Where the Sync engine's trigger instructions are drawn: per trigger node its pieces (start, end, share:
    up to four, spread over the span in which its tiles became ready), moved later where they would overlap
    another trigger's piece (the engine runs one instruction at a time); and the SemaphoreWait of the Sync
    engine in each gap of at least ``semaphore_wait_min_ns`` before a piece (linked to the input the trigger
    waited for when it is a trigger's first piece)."""
    out: dict[int, list[tuple[float, float, float]]] = {}
    flat: list[list] = []
    for nid, n in enumerate(nodes):
        if n.is_trigger:
            tiles = plan.groups[n.g].tiles
            # a single trigger goes once its input is all there (the end of its span)
            pieces = _pieces(n.start, n.end, dur[nid], tiles) if tiles > 1 else [(n.end - dur[nid], n.end, 1.0)]
            for j, piece in enumerate(pieces):
                flat.append([piece[0], piece[1] - piece[0], piece[2], nid, j])
    flat.sort(key=lambda r: (r[0], r[3], r[4]))
    waits: list[tuple[str, float, float, int]] = []
    prev_end = None
    for rec in flat:
        start, length, share, nid, j = rec
        if prev_end is not None and start < prev_end:
            start = prev_end
        if prev_end is not None and start - prev_end >= p.semaphore_wait_min_ns:
            b = blockers[nid]
            last = max(b, key=lambda x: nodes[x].start + per_tile[x]) if b and j == 0 else -1 - nid
            waits.append(("Sync", prev_end, start, last))
        out.setdefault(nid, []).append((start, start + length, share))
        prev_end = start + length
    return out, waits


def _per_tile(n: _Node, plan: KernelPlan, trig_ns: float) -> float:
    return trig_ns if n.is_trigger else n.stage.ns / max(plan.groups[n.g].tiles, 1)
