"""The projected timeline: the target's host dispatching the program, the NeuronCore running it asynchronously.

One pass over the program in host order (``Program.order``), with a projected clock per host thread:
- an op starts when its thread gets to it and costs its ``self_ns`` (dispatch, kernel launch); a parent
  ends when its last child has; measured gaps between ops (this machine's Python) are not carried over;
- a kernel is enqueued at the end of its launch and starts on the core at
  ``max(enqueue + device_start_latency_ns, core free)``: the core runs kernels in order, back to back when
  the host is ahead; the host blocks when ``max_inflight_programs`` kernels are outstanding;
- dI/dt throttling (trn2/trn3): a kernel whose Tensor work starts after the Tensor engine idled
  ``tensor_throttle_idle_ns`` runs its first MultiplyMoving slower (``engines.throttle_extra_ns``);
- a collective starts on a CC core once the compute enqueued before it has finished (its data) and that
  core is free: each process group has its own CC core (up to the target's ``cc_cores``), so collectives of
  different groups (tensor- and data-parallel) overlap while those of one group run in order; collectives
  whose transfers overlap on one link (the chip's HBM, NeuronLink, EFA) split its bandwidth equally
  (``collectives.SharedLink``): a newcomer stretches the ones in flight, unless a later collective of their
  group already queued behind them (their end is then kept);
- torch.distributed semantics: a blocking collective (``async_op=False``, the default) holds the compute
  launched after it on this core until it ends, so tensor-parallel all-reduces sit on the critical path; an
  asynchronous one (``async_op=True``, DDP's gradient buckets, functional collectives) runs beside compute
  until its first consumer: a wait (``wait_tensor``, ``Work.wait``, a "wait" ``record_param_comms``), the
  optimizer step, or the next step (``ProfilerStep#``: the next forward); the compute launched after the
  consumer starts once every collective issued before it has ended;
- at a synchronisation point the host waits for all device work, plus ``sync_latency_ns``.
Deterministic: only the program and the model's constants enter; the capturing machine's timings set
the program order alone.
"""
from __future__ import annotations

import collections
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

import numpy as np
import pandas as pd

from neuron_profiler.runtime.simulated.collectives import MIN_COLLECTIVE_NS, SharedLink, Topology, members_of
from neuron_profiler.runtime.simulated.engines import throttle_extra_ns
from neuron_profiler.runtime.simulated.params import CoreParams
from neuron_profiler.runtime.simulated.pipeline import KernelTemplate
from neuron_profiler.runtime.simulated.program import Program

__all__ = ["Projection", "project"]


@dataclass
class Projection:
    """Projected times (ns, the host clock of the trace) of the host ops, kernels and collectives."""

    host_start: np.ndarray
    host_end: np.ndarray
    k_host: np.ndarray      # host op position of each kernel instance
    k_sig: np.ndarray       # its signature
    k_start: np.ndarray
    k_extra: np.ndarray     # throttling time added to its first MultiplyMoving
    k_enqueue: np.ndarray
    c_index: np.ndarray     # row of Program.collectives
    c_start: np.ndarray
    c_dur: np.ndarray
    c_algorithm: np.ndarray
    c_core: np.ndarray      # CC core that ran it (one per process group, up to the target's CC cores)
    c_arrival: np.ndarray   # when this rank was ready for it (start - arrival = waiting for other ranks)
    sync_wait_ns: float     # host time spent waiting for the device at synchronisation points
    queue_wait_ns: float    # host time blocked on a full device queue


#: (process group, sequence number) -> (earliest start, absolute ns; duration multiplier): what other ranks
#: impose on a collective (a late member, a slow link), for runs simulated together
CollectiveConstraints = dict[tuple[str, int], tuple[float, float]]


class _Device:
    """The NeuronCore's state while the host dispatches: the in-order core, the CC cores, the queue."""

    def __init__(self, p: CoreParams, topo: Topology, base: int, constraints: CollectiveConstraints) -> None:
        self.p, self.topo, self.base, self.constraints = p, topo, base, constraints
        self.core_free, self.tensor_idle_since = 0.0, -np.inf
        self.cc_free: dict[int, float] = {}
        self.cc_of: dict[str, int] = {}
        self.cc_done = 0.0
        self.compute_after = 0.0  # compute launched from now on waits until then (blocking / waited collectives)
        self.links: dict[str, SharedLink] = {}
        self.inflight: collections.deque[float] = collections.deque()
        self.q_max = max(int(p.host["max_inflight_programs"]), 1)
        self.kernels: list[tuple[int, int, float, float, float]] = []   # host, sig, start, extra, enqueue
        self.colls: list[list] = []  # index, start, dur, algorithm, core, arrival, latency, blocking
        self.queue_wait = 0.0

    def launch(self, host: int, sig: int, tpl: KernelTemplate, clock: float) -> float:
        """Enqueue a kernel at ``clock``; returns the host clock after (blocked while the queue is full)."""
        while self.inflight and self.inflight[0] <= clock:
            self.inflight.popleft()
        if len(self.inflight) >= self.q_max:
            blocked = self.inflight[len(self.inflight) - self.q_max]
            self.queue_wait += max(0.0, blocked - clock)
            clock = max(clock, blocked)
        ready = max(clock + self.p.host["device_start_latency_ns"], self.compute_after)
        start = max(ready, self.core_free)
        extra = 0.0
        if tpl.first_mm >= 0 and start + tpl.start[tpl.first_mm] - self.tensor_idle_since >= self.p.throttle_idle_ns:
            extra = throttle_extra_ns(tpl.ramp_work_ns, self.p)
        self.core_free = start + tpl.duration + extra
        if tpl.first_mm >= 0:
            self.tensor_idle_since = self.core_free
        self.inflight.append(self.core_free)
        self.kernels.append((host, sig, start, extra, clock))
        return clock

    def collective(self, index: int, row: pd.Series, clock: float) -> None:
        """Run a collective on its process group's CC core once its input (the compute before it) is done; its
        bytes wait for the collectives ahead of it on the same link; a blocking one holds later compute."""
        cc = self.cc_of.setdefault(str(row["process_group"]), len(self.cc_of) % max(self.p.cc_cores, 1))
        arrival = max(clock + self.p.host["device_start_latency_ns"], self.core_free, self.cc_free.get(cc, 0.0),
                      self.compute_after)  # its input is produced after what the compute waits for
        floor, factor = self.constraints.get((str(row["process_group"]), int(row["sequence_number"])), (None, 1.0))
        ready = arrival if floor is None else max(arrival, floor - self.base)
        members = members_of(row["replica_group"], int(row["group_size"]))
        cost = self.topo.cost(row["operation"], float(row["message_bytes"]), members)
        xfer, lat = cost.transfer_ns * factor, cost.latency_ns * factor
        me, blocking = len(self.colls), bool(row.get("blocking", False))
        self.colls.append([index, ready, 0, cost.algorithm, cc, arrival, lat, blocking])
        ends = self.links.setdefault(cost.link, SharedLink()).add(me, ready, xfer) if cost.link and xfer > 0 \
            else {me: ready + xfer}
        for k, end in ends.items():
            self._end_at(k, end)

    def _end_at(self, k: int, xfer_end: float) -> None:
        """(Re)set the end of collective ``k`` from the end of its transfer; an earlier one only while nothing
        of its group queued behind it."""
        c = self.colls[k]
        new, old_end = k == len(self.colls) - 1, c[1] + c[2]
        end = c[1] + max(int(np.ceil(xfer_end + c[6] - c[1])), MIN_COLLECTIVE_NS)
        if not new and (end == old_end or self.cc_free.get(c[4]) != old_end):
            return
        c[2] = int(end - c[1])
        self.cc_free[c[4]] = end
        self.cc_done = max(self.cc_done, end)
        if c[7] or (not new and self.compute_after == old_end):  # blocking, or what the compute waits for
            self.compute_after = max(self.compute_after, end)

    def wait_collectives(self) -> None:
        """A consumer of the outstanding collectives: compute launched from now on starts after them."""
        self.compute_after = max(self.compute_after, self.cc_done)

    def done(self) -> float:
        return max(self.core_free, self.cc_done)


def project(prog: Program, templates: list[KernelTemplate | None], p: CoreParams, topo: Topology,
            world_size: int = 1, constraints: CollectiveConstraints | None = None,
            anchor_ns: int | None = None) -> Projection:
    """Project ``prog`` (see the module docstring). ``templates[sig]``: the kernel of each signature;
    ``constraints``: what other ranks impose on its collectives (see ``CollectiveConstraints``);
    ``anchor_ns``: where the projected timeline starts (the profiler window's start, the closest thing the
    ranks of a run share; default: the first host op)."""
    h = p.host
    n = prog.n
    # the clock runs in ns relative to the anchor: float64 holds epoch-ns timestamps only to 256 ns
    first = int(prog.measured_start.min()) if n else 0
    base = first if anchor_ns is None else int(anchor_ns)  # the run's origin even if this rank's ops came earlier
    dev = _Device(p, topo, base, constraints or {})
    hs, he = np.zeros(n), np.zeros(n)
    clocks: dict[int, float] = {}
    stacks: dict[int, list[int]] = collections.defaultdict(list)
    cursor = 0.0
    sync_wait = 0.0
    for i in prog.order.tolist():
        th = int(prog.thread[i])
        clock = max(clocks.get(th, cursor), cursor if not stacks[th] else -np.inf)
        st = stacks[th]
        while st and st[-1] != int(prog.parent[i]):
            he[st.pop()] = clock
        hs[i] = clock
        clock += prog.self_ns[i]
        sig = int(prog.kernel[i])
        template = templates[sig] if sig >= 0 else None
        if template is not None:
            clock = dev.launch(i, sig, template, clock)
        if prog.collective[i] >= 0:
            dev.collective(int(prog.collective[i]), prog.collectives.iloc[int(prog.collective[i])], clock)
        if prog.waits_collectives[i]:
            dev.wait_collectives()
        if prog.sync[i]:
            done = dev.done() + h["sync_latency_ns"]
            sync_wait += max(0.0, done - clock)
            clock = max(clock, done)
        st.append(i)
        clocks[th] = clock
        cursor = max(cursor, hs[i])
    for th, st in stacks.items():
        while st:
            he[st.pop()] = clocks[th]
    return _projection(hs, he, dev, base, sync_wait)


def _projection(hs: np.ndarray, he: np.ndarray, dev: _Device, base: int, sync_wait: float) -> Projection:
    def i64(v) -> np.ndarray:
        return np.asarray(np.ceil(np.asarray(v, dtype=np.float64) - 1e-6), dtype=np.int64) + base
    k: list[Sequence[Any]] = list(zip(*dev.kernels)) if dev.kernels else [[]] * 5  # columns of the kernels
    c: list[Sequence[Any]] = list(zip(*dev.colls)) if dev.colls else [[]] * 8
    return Projection(host_start=i64(hs), host_end=i64(he), k_host=np.asarray(k[0], np.int64),
                      k_sig=np.asarray(k[1], np.int64), k_start=i64(k[2]),
                      k_extra=np.asarray(np.ceil(np.asarray(k[3], dtype=np.float64)), dtype=np.int64),
                      k_enqueue=i64(k[4]), c_index=np.asarray(c[0], np.int64), c_start=i64(c[1]),
                      c_dur=np.asarray(c[2], np.int64), c_algorithm=np.asarray(c[3], dtype=object),
                      c_core=np.asarray(c[4], np.int64), c_arrival=i64(c[5]),
                      sync_wait_ns=sync_wait, queue_wait_ns=dev.queue_wait)
