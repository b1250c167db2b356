"""The data of the NeuronCore pipeline scheduler (:mod:`.pipeline`): a kernel's plan (``KernelPlan``: tile
groups of ``Stage``s) in, its timed event template (``KernelTemplate``) out, and the scheduler's node.
"""
from __future__ import annotations

from dataclasses import dataclass, field

import numpy as np

__all__ = ["Stage", "Group", "KernelPlan", "KernelTemplate", "DMA"]

DMA = "DMA"


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
