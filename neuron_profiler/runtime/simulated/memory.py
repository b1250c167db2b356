"""On-chip buffers of a simulated NeuronCore: what each SBUF/PSUM occupancy segment holds, and where it sits.

The pipeline scheduler (``pipeline``) gives, per kernel, occupancy segments (start, end, bytes) for the tile
buffers of each tile group, its PSUM accumulators and the operand slab that stays resident. Here:

- ``group_tags`` / ``resident_name`` name what a segment holds from the tensors its group's DMA moves
  ("mm.in0, mm.in1 -> mm.out"), and flag a buffer fed by a spill-reload queue (``qSyncSpillReload0``);
- ``place`` gives every segment of a core an address: a first-fit allocator over each partition's bytes
  (every buffer spans all partitions: tiles are [partitions x free] layouts), frees before allocations at
  the same time. A buffer that does not fit the free space when it is taken (the model asked for more than
  the capacity, e.g. a compiled graph's resident data plus its tiles) holds the largest free block and is
  marked spill: the rest stays in HBM and is reloaded. So allocations never exceed the capacity of the
  hardware table, and the ``State Buffer Usage`` / ``PSUM Usage`` counters are drawn from the placed bytes.
"""
from __future__ import annotations

import bisect
import heapq
from collections.abc import Iterable
from dataclasses import dataclass
from typing import Any

import numpy as np

__all__ = ["group_tags", "resident_name", "Placement", "place", "ALIGN_BYTES", "UNKNOWN"]

#: allocation granularity inside a partition (assumption: 64-byte aligned buffers)
ALIGN_BYTES = 64
UNKNOWN = "unknown"
_DMA = "DMA"


def _dma_vars(stages: Iterable[Any]) -> Iterable[tuple[str, str, str]]:
    for st in stages:
        if st.engine != _DMA:
            continue
        for q, _b, _d, var in st.dma_parts():
            if var:
                yield q, var, st.dest


def group_tags(g: Any) -> tuple[tuple[str, str, bool], tuple[str, str, bool]]:
    """(SBUF tag, PSUM tag) of a tile group's buffers, each (tensor name, kind, spill): the tensors its DMA
    moves in and out, kind ``tiles`` / ``accumulator``, spill when it loads on a spill-reload queue."""
    loads: list[str] = []
    stores: list[str] = []
    spill = False
    for q, var, dest in _dma_vars(g.stages):
        spill |= "SpillReload" in q
        (stores if dest == "HBM" else loads).append(var)
    ins, outs = ", ".join(dict.fromkeys(loads)), ", ".join(dict.fromkeys(stores))
    name = ins + (" -> " + outs if outs else "") if ins else outs
    acc = (outs or ins) + " accumulator" if (outs or ins) else UNKNOWN
    return (name or UNKNOWN, "tiles", spill), (acc, "accumulator", False)


def resident_name(plan: Any) -> str:
    """What a kernel keeps resident: its operand slab, named after its op (the base of its first DMA variable)."""
    for g in plan.groups:
        for _q, var, _d in _dma_vars(g.stages):
            return var.rsplit(".", 1)[0] + " resident operand"
    return "resident operand"


@dataclass
class Placement:
    """Addresses of a core's buffers of one memory (arrays in the order of ``place``'s input)."""

    start_address: np.ndarray   # int64 byte offset inside each partition
    end_address: np.ndarray     # exclusive; equal to start_address when nothing fitted
    spill: np.ndarray           # bool: asked for more than the free space (the rest stayed in HBM)
    partitions: int

    @property
    def bytes(self) -> np.ndarray:
        """Bytes each buffer holds (all partitions)."""
        return (self.end_address - self.start_address) * self.partitions


def place(start: np.ndarray, end: np.ndarray, nbytes: np.ndarray, partitions: int, capacity_bytes: float,
          align: int = ALIGN_BYTES) -> Placement:
    """First-fit addresses of buffers [start, end) of ``nbytes`` each, spread over ``partitions`` partitions of
    ``capacity_bytes / partitions`` bytes; see the module docstring. Never places beyond the capacity."""
    n = len(start)
    per_part = int(capacity_bytes // partitions) // align * align
    want = (np.ceil(np.asarray(nbytes, np.float64) / partitions / align) * align).astype(np.int64)
    lo = np.zeros(n, np.int64)
    hi = np.zeros(n, np.int64)
    spill = np.zeros(n, bool)
    order = np.lexsort((np.arange(n), start))
    live: list[tuple[int, int]] = []          # (address, size) sorted by address
    frees: list[tuple[int, int, int]] = []    # heap of (end, address, size)
    for i in order.tolist():
        t = start[i]
        while frees and frees[0][0] <= t:
            _e, a, s = heapq.heappop(frees)
            live.pop(bisect.bisect_left(live, (a, s)))
        size = min(int(want[i]), per_part)
        addr, gap = _first_fit(live, size, per_part)
        if gap < want[i]:
            spill[i] = True
        if gap <= 0:
            lo[i] = hi[i] = addr
            continue
        lo[i], hi[i] = addr, addr + gap
        bisect.insort(live, (addr, gap))
        heapq.heappush(frees, (int(end[i]), addr, gap))
    return Placement(lo, hi, spill, partitions)


def _first_fit(live: list[tuple[int, int]], size: int, capacity: int) -> tuple[int, int]:
    """(address, bytes) of the first free block of at least ``size`` bytes, else of the largest free block."""
    best = (0, 0)
    prev = 0
    for a, s in live + [(capacity, 0)]:
        gap = a - prev
        if gap >= size:
            return prev, size
        if gap > best[1]:
            best = (prev, gap)
        prev = max(prev, a + s)
    return best


def add_allocations(b: Any, core: int, buffer: str, seg: np.ndarray, tags: np.ndarray, owner_rows: np.ndarray,
                    partitions: int, capacity_bytes: float) -> np.ndarray:
    """Place a core's ``buffer`` (SBUF or PSUM) segments (``seg``: start, end, bytes) and add them to the
    ``allocations`` table of builder ``b`` (a buffer that got no byte is a 0-byte spill row); returns the placed
    segments (start, end, bytes) the occupancy counter is drawn from."""
    if not len(seg):
        return np.zeros((0, 3))
    start = np.rint(seg[:, 0]).astype(np.int64)
    end = np.maximum(np.rint(seg[:, 1]).astype(np.int64), start)
    pl = place(start, end, seg[:, 2], partitions, capacity_bytes)
    spill = pl.spill | np.array([bool(t[2]) for t in tags], dtype=bool)
    keep = (pl.end_address > pl.start_address) | pl.spill  # a buffer that got no byte stays, as a spill
    n = int(keep.sum())
    if n:
        b.add_rows("allocations", {
            "track": np.full(n, core, np.int64), "start_ts": start[keep], "duration_ns": (end - start)[keep],
            "buffer": buffer, "partition": np.zeros(n, np.int64), "num_partitions": np.full(n, partitions, np.int64),
            "start_address": pl.start_address[keep], "end_address": pl.end_address[keep],
            "tensor_name": np.array([t[0] for t in tags[keep]], dtype=object),
            "tensor_kind": np.array([t[1] for t in tags[keep]], dtype=object),
            "spill": spill[keep].astype(np.int64), "framework_op": owner_rows[keep]})
    return np.stack([start, end, pl.bytes.astype(np.float64)], axis=1)
