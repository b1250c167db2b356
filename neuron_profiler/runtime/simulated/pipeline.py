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

import json
import math
from collections.abc import Callable
from dataclasses import dataclass, field

import numpy as np

from neuron_profiler.runtime.simulated.engines import sync_ns
from neuron_profiler.runtime.simulated.memory import group_tags, resident_name
from neuron_profiler.runtime.simulated.params import CoreParams

__all__ = ["Stage", "Group", "KernelPlan", "KernelTemplate", "schedule_kernel", "DMA"]

DMA = "DMA"
_NONE: tuple[int, ...] = ()


@dataclass
class Stage:
    """One coalesced instruction (engine) or transfer (``engine == "DMA"``) of a tile group."""

    engine: str
    opcode: str
    ns: float
    flops: float = 0.0
    transpose: bool = False
    hbm_read: float = 0.0
    hbm_write: float = 0.0
    sbuf_read: float = 0.0
    sbuf_write: float = 0.0
    psum_read: float = 0.0
    psum_write: float = 0.0
    nbytes: float = 0.0
    queue: str = ""
    descriptor: float = 0.0
    variable: str = ""
    source: str = ""
    dest: str = ""
    deps: tuple[int, ...] | None = None  # stages of the same group this one waits for; None = the previous
    sbuf_acquire: bool = False
    sbuf_release: bool = False
    psum_acquire: bool = False
    psum_release: bool = False
    mode: str = ""
    instructions: int = 1
    # a DMA stage may move several tensors at once on parallel queues sharing the DMA engines:
    # (queue, bytes, descriptor bytes, variable) per part; all parts run from the stage's start to its end
    parts: tuple[tuple[str, float, float, str], ...] = ()
    node: int = -1            # the graph node it belongs to (compiled graphs), -1 = the kernel's op

    def dma_parts(self) -> tuple[tuple[str, float, float, str], ...]:
        """The transfers of a DMA stage (one per queue it uses)."""
        return self.parts or ((self.queue, self.nbytes, self.descriptor, self.variable),)


@dataclass
class Group:
    """A run of identical tiles processed together; stage costs are for all its tiles."""

    stages: list[Stage]
    tiles: int = 1
    sbuf_bytes: float = 0.0   # SBUF held per tile in flight
    psum_bytes: float = 0.0   # PSUM held per tile in flight
    after: tuple[int, ...] = ()  # groups (plan indices) whose last stage feeds this group's first stage
    part: int = 0             # which op of a multi-op kernel (graph) it belongs to: buffers pair within one


@dataclass
class KernelPlan:
    """A kernel: its tile groups, buffer slots and what stays resident in SBUF for its whole duration."""

    groups: list[Group]
    sbuf_slots: int = 2
    psum_slots: int = 2
    prefetch: int = 1
    resident_sbuf_bytes: float = 0.0
    note: str = ""            # how it was tiled (stored in the first instruction's args)


@dataclass
class KernelTemplate:
    """Events of one kernel, times in ns relative to its start (int64 arrays)."""

    duration: int
    # instructions
    engine: np.ndarray
    opcode: np.ndarray
    start: np.ndarray
    dur: np.ndarray
    flops: np.ndarray
    transpose: np.ndarray
    hbm_read: np.ndarray
    hbm_write: np.ndarray
    sbuf_read: np.ndarray
    sbuf_write: np.ndarray
    psum_read: np.ndarray
    psum_write: np.ndarray
    args: np.ndarray
    # DMA transfers
    d_queue: np.ndarray
    d_start: np.ndarray
    d_dur: np.ndarray
    d_bytes: np.ndarray
    d_source: np.ndarray
    d_dest: np.ndarray
    d_variable: np.ndarray
    d_descriptor: np.ndarray
    # dependency links (waited-for event -> SemaphoreWait instruction); src kind 0 = instruction, 1 = DMA
    f_src_kind: np.ndarray
    f_src: np.ndarray
    f_dst: np.ndarray
    # occupancy segments
    sbuf_seg: np.ndarray      # (k, 3): start, end, bytes
    psum_seg: np.ndarray
    node: np.ndarray          # graph node of each instruction (-1: the kernel's own op)
    d_node: np.ndarray        # graph node of each DMA transfer
    first_mm: int             # index of the first MultiplyMoving instruction, -1 none
    ramp_work_ns: float       # MultiplyMoving work inside the throttle ramp window after the first one
    tensor_busy_ns: float     # total MultiplyMoving time
    # what each occupancy segment holds: (tensor name, kind, spill), kind tiles / resident / accumulator
    sbuf_tag: tuple[tuple[str, str, bool], ...] = ()
    psum_tag: tuple[tuple[str, str, bool], ...] = ()

    @property
    def n_instr(self) -> int:
        return len(self.engine)

    @property
    def n_dma(self) -> int:
        return len(self.d_queue)


@dataclass
class _Node:
    g: int
    s: int
    stage: Stage
    res: str
    deps: list[int] = field(default_factory=list)   # node ids
    start: float = -1.0
    end: float = -1.0
    trigger: int = -1         # DMA: its Sync trigger node; trigger: the DMA node it triggers
    is_trigger: bool = False


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


#: a stage paced by its inputs (span > busy time x this) is drawn as separate pieces with waits between
_PACED = 1.05
_MAX_PIECES = 4
_INSTR_COLS = ("flops", "hbm_read", "hbm_write", "sbuf_read", "sbuf_write", "psum_read", "psum_write")


def _pieces(start: float, end: float, busy: float, tiles: int) -> list[tuple[float, float, float]]:
    """(start, end, share) pieces of a stage: one piece when it ran back to back, else up to four pieces of
    its busy time spread over its span (its tiles arrived one by one from a slower input)."""
    span = end - start
    if busy <= 0 or span <= busy * _PACED or tiles < 2:
        return [(start, end, 1.0)]
    k = min(_MAX_PIECES, tiles)
    slot, chunk = span / k, busy / k
    # the first piece starts with the stage; later ones end with their slot (their input arrived)
    return [(start, start + chunk, 1.0 / k)] + [(start + (j + 1) * slot - chunk, start + (j + 1) * slot, 1.0 / k)
                                                for j in range(1, k)]


def _template(plan: KernelPlan, nodes: list[_Node], waits: list[tuple[str, float, float, int]],
              sync_pieces: dict[int, list[tuple[float, float, float]]], p: CoreParams) -> KernelTemplate:
    """The scheduled kernel as arrays: its instructions (stage pieces, DMA triggers, semaphore waits), DMA
    transfers, wait flows, buffer occupancy and Tensor-engine ramp."""
    ins, dma, first_row, paced_waits = _stage_records(plan, nodes, sync_pieces, p)
    f_kind, f_src, f_dst = _wait_records(ins, nodes, waits + paced_waits, first_row)
    sbuf, psum, sbuf_tag, psum_tag = _occupancy(plan, nodes)
    first_mm, ramp, busy = _matmul_ramp(ins, p)
    duration = max([n.end for n in nodes] + [r["end"] for r in ins], default=0.0)

    def i64(key: str, recs: list[dict]) -> np.ndarray:
        return np.ceil(np.array([r.get(key, 0.0) for r in recs], dtype=np.float64) - 1e-6).astype(np.int64)

    def obj(key: str, recs: list[dict]) -> np.ndarray:
        return np.array([r.get(key, "") for r in recs], dtype=object)

    s_arr, e_arr = i64("start", ins), i64("end", ins)
    ds, de = i64("start", dma), i64("end", dma)
    return KernelTemplate(
        duration=int(np.ceil(duration)), engine=obj("engine", ins), opcode=obj("opcode", ins),
        start=s_arr, dur=np.maximum(e_arr - s_arr, 1), flops=i64("flops", ins),
        transpose=np.array([bool(r.get("transpose", False)) for r in ins], dtype=bool),
        hbm_read=i64("hbm_read", ins), hbm_write=i64("hbm_write", ins), sbuf_read=i64("sbuf_read", ins),
        sbuf_write=i64("sbuf_write", ins), psum_read=i64("psum_read", ins), psum_write=i64("psum_write", ins),
        args=obj("args", ins),
        d_queue=obj("queue", dma), d_start=ds, d_dur=np.maximum(de - ds, 1), d_bytes=i64("bytes", dma),
        d_source=obj("source", dma), d_dest=obj("dest", dma), d_variable=obj("variable", dma),
        d_descriptor=i64("descriptor", dma),
        f_src_kind=np.array(f_kind, dtype=np.int64), f_src=np.array(f_src, dtype=np.int64),
        f_dst=np.array(f_dst, dtype=np.int64), sbuf_seg=sbuf, psum_seg=psum,
        node=np.array([r.get("node", -1) for r in ins], dtype=np.int64),
        d_node=np.array([r.get("node", -1) for r in dma], dtype=np.int64), first_mm=first_mm,
        ramp_work_ns=ramp, tensor_busy_ns=busy, sbuf_tag=sbuf_tag, psum_tag=psum_tag)


def _whole(nbytes: float) -> int:
    """Whole bytes of a transfer (fractional shares of a tensor round up, as the emitted columns do)."""
    return int(math.ceil(nbytes - 1e-6)) if nbytes > 0 else 0


def _int_split(total: int, shares: list[float]) -> list[int]:
    """``total`` whole bytes split over pieces of these shares (summing to 1), summing exactly to ``total``."""
    cum, out, prev = 0.0, [], 0
    for sh in shares:
        cum += sh
        nxt = total if cum >= 1.0 - 1e-9 else min(total, int(math.ceil(total * cum - 1e-6)))
        out.append(nxt - prev)
        prev = nxt
    return out


def _hbm_total(moved: Stage, hbm: float) -> int:
    """The whole HBM bytes a DMA stage's trigger carries: the sum of its transfers' whole bytes when the stage
    moves exactly that traffic (so the trigger and its DMA rows agree to the byte), else ``hbm`` rounded up."""
    parts = moved.dma_parts()
    if hbm > 0 and abs(hbm - sum(b for _, b, _, _ in parts)) <= 1e-6 * max(hbm, 1.0):
        return sum(_whole(b) for _, b, _, _ in parts)
    return _whole(hbm)


def _stage_records(plan: KernelPlan, nodes: list[_Node], sync_pieces: dict[int, list[tuple[float, float, float]]],
                   p: CoreParams) -> tuple[
        list[dict], list[dict], dict[int, tuple[int, int]], list[tuple[str, float, float, int]]]:
    """(instruction records, DMA records, node -> (0 instruction / 1 DMA, its first record), the waits
    between the pieces of paced stages) of every scheduled node."""
    ins: list[dict] = []
    dma: list[dict] = []
    first_row: dict[int, tuple[int, int]] = {}
    paced_waits: list[tuple[str, float, float, int]] = []
    for nid, n in enumerate(nodes):
        st = n.stage
        tiles = plan.groups[n.g].tiles
        if n.res == DMA:
            first_row[nid] = (1, len(dma))
            pieces = _pieces(n.start, n.end, st.ns, tiles)
            split = [_int_split(_whole(nbytes), [pc[2] for pc in pieces]) for _, nbytes, _, _ in st.dma_parts()]
            for j, piece in enumerate(pieces):
                for (q, _, desc, var), sizes in zip(st.dma_parts(), split):
                    dma.append({"queue": q, "start": piece[0], "end": piece[1], "bytes": sizes[j],
                                "source": st.source, "dest": st.dest, "variable": var, "descriptor": desc,
                                "node": st.node})
            continue
        first_row[nid] = (0, len(ins))
        if n.is_trigger:  # the trigger carries its transfer's HBM traffic (as Explorer attributes DMA to it)
            moved = nodes[n.trigger].stage
            pieces = sync_pieces.get(nid) or [(n.start, n.end, 1.0)]
            reads = _int_split(_hbm_total(moved, moved.hbm_read), [pc[2] for pc in pieces])
            writes = _int_split(_hbm_total(moved, moved.hbm_write), [pc[2] for pc in pieces])
            for (a, b, share), rd, wr in zip(pieces, reads, writes):
                ins.append({"engine": "Sync", "opcode": "DmaTrigger", "start": a, "end": b,
                            "args": _args(Stage("Sync", "DmaTrigger", 0.0, instructions=tiles), "", share),
                            "hbm_read": rd, "hbm_write": wr, "node": moved.node})
            continue
        pieces = _pieces(n.start, n.end, st.ns, tiles)
        for j, (a, b, share) in enumerate(pieces):
            if j and a - pieces[j - 1][1] >= p.semaphore_wait_min_ns:
                paced_waits.append((n.res, pieces[j - 1][1], a, -1 - nid))
            rec = {"engine": n.res, "opcode": st.opcode, "start": a, "end": b, "transpose": st.transpose,
                   "args": _args(st, plan.note if not ins else "", share), "node": st.node}
            for c in _INSTR_COLS:
                rec[c] = getattr(st, c) * share
            ins.append(rec)
    return ins, dma, first_row, paced_waits


def _wait_records(ins: list[dict], nodes: list[_Node], waits: list[tuple[str, float, float, int]],
                  first_row: dict[int, tuple[int, int]]) -> tuple[list[int], list[int], list[int]]:
    """Append a SemaphoreWait instruction per wait (engine, from, to, waited-for node; ``-1 - node`` for a
    paced stage waiting on its own input); returns the flows (source kind, source record, wait record) from
    each waited-for node's first record to its wait."""
    f_kind, f_src, f_dst = [], [], []
    for eng, a, b, last in waits:
        if last >= 0:
            kind, row = first_row[last]
            f_kind.append(kind)
            f_src.append(row)
            f_dst.append(len(ins))
        owner = nodes[last if last >= 0 else -1 - last].stage.node
        ins.append({"engine": eng, "opcode": "SemaphoreWait", "start": a, "end": b, "args": "", "node": owner})
    return f_kind, f_src, f_dst


def _matmul_ramp(ins: list[dict], p: CoreParams) -> tuple[int, float, float]:
    """(the first MATMUL record, -1 without one; its MATMUL time within the throttle ramp after the first
    one starts; its total MATMUL time)."""
    mm = [k for k, r in enumerate(ins) if r["opcode"] == "MATMUL"]
    if not mm:
        return -1, 0.0, 0.0
    first_mm = min(mm, key=lambda k: ins[k]["start"])
    ramp = busy = 0.0
    t0 = ins[first_mm]["start"]
    for k in mm:
        r = ins[k]
        busy += r["end"] - r["start"]
        ramp += max(0.0, min(r["end"], t0 + p.throttle_ramp_ns) - max(r["start"], t0))
    return first_mm, ramp, busy


def _args(st: Stage, note: str, share: float) -> str:
    parts = []
    if note:
        parts.append('"tiling": ' + json.dumps(note))
    if st.mode:
        parts.append(f'"performance_mode": "{st.mode}"')
    n = int(round(st.instructions * share))
    if n > 1:
        parts.append(f'"instructions": {n}')
    return "{" + ", ".join(parts) + "}" if parts else ""


def _occupancy(plan: KernelPlan, nodes: list[_Node]) -> tuple[np.ndarray, np.ndarray, tuple, tuple]:
    """SBUF and PSUM occupancy segments (start, end, bytes): per group from its first acquiring stage to its
    releasing stage, ``min(tiles, slots)`` tiles' buffers; plus the kernel's resident SBUF data; and what each
    segment holds (``memory.group_tags``)."""
    per_group: dict[int, dict[str, list[float]]] = {}
    for n in nodes:
        if n.is_trigger:
            continue
        d = per_group.setdefault(n.g, {})
        s = n.stage
        for buf, acq, rel in (("sbuf", s.sbuf_acquire, s.sbuf_release), ("psum", s.psum_acquire, s.psum_release)):
            if acq:
                d.setdefault(buf + "_start", []).append(n.start)
            if rel:
                d.setdefault(buf + "_end", []).append(n.end)
    out: dict[str, list[tuple[float, float, float]]] = {"sbuf": [], "psum": []}
    tags: dict[str, list[tuple[str, str, bool]]] = {"sbuf": [], "psum": []}
    for gi, d in per_group.items():
        g = plan.groups[gi]
        sb_tag, ps_tag = group_tags(g)
        for buf, per_tile, slots, tag in (("sbuf", g.sbuf_bytes, plan.sbuf_slots, sb_tag),
                                          ("psum", g.psum_bytes, plan.psum_slots, ps_tag)):
            if d.get(buf + "_start") and d.get(buf + "_end") and per_tile > 0:
                out[buf].append((min(d[buf + "_start"]), max(d[buf + "_end"]), per_tile * min(g.tiles, slots)))
                tags[buf].append(tag)
    end = max((n.end for n in nodes), default=0.0)
    if plan.resident_sbuf_bytes > 0 and end > 0:
        out["sbuf"].append((0.0, end, plan.resident_sbuf_bytes))
        tags["sbuf"].append((resident_name(plan), "resident", False))
    return (np.array(out["sbuf"], dtype=np.float64).reshape(-1, 3),
            np.array(out["psum"], dtype=np.float64).reshape(-1, 3), tuple(tags["sbuf"]), tuple(tags["psum"]))
