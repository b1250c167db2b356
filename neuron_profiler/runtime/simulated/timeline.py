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
  different groups (tensor- and data-parallel) overlap while those of one group run in order; compute
  after an op that waits for collectives (``wait_tensor``, an optimizer step)
  starts after them;
- at a synchronisation point the host waits for all device work, plus ``sync_latency_ns``.
Deterministic: only the program and the model's constants enter; the capturing machine's timings set
the program order alone.
"""
from __future__ import annotations

import collections
from dataclasses import dataclass

import numpy as np

from neuron_profiler.runtime.simulated.collectives import Topology, members_of
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
    sync_wait_ns: float     # host time spent waiting for the device at synchronisation points
    queue_wait_ns: float    # host time blocked on a full device queue


def project(prog: Program, templates: list[KernelTemplate | None], p: CoreParams, topo: Topology,
            world_size: int = 1) -> Projection:
    """Project ``prog`` (see the module docstring). ``templates[sig]``: the kernel of each signature."""
    h = p.host
    n = prog.n
    # the clock runs in ns relative to the window start: float64 holds epoch-ns timestamps only to 256 ns
    base = int(prog.measured_start.min()) if n else 0
    t0 = 0.0
    hs, he = np.zeros(n), np.zeros(n)
    clocks: dict[int, float] = {}
    stacks: dict[int, list[int]] = collections.defaultdict(list)
    cursor = t0
    core_free, tensor_idle_since = t0, -np.inf
    cc_free: dict[int, float] = {}
    cc_done, wait_cc = t0, False
    cc_of: dict[str, int] = {}
    inflight: collections.deque[float] = collections.deque()
    q_max = max(int(h["max_inflight_programs"]), 1)
    k_host, k_sig, k_start, k_extra, k_enq = [], [], [], [], []
    c_idx, c_start, c_dur, c_alg, c_core = [], [], [], [], []
    sync_wait = queue_wait = 0.0
    coll = prog.collectives
    for i in prog.order.tolist():
        th = int(prog.thread[i])
        clock = max(clocks.get(th, cursor), cursor if not stacks[th] else -np.inf)
        st = stacks[th]
        par = int(prog.parent[i])
        while st and st[-1] != par:
            he[st.pop()] = clock
        hs[i] = clock
        clock += prog.self_ns[i]
        sig = int(prog.kernel[i])
        if sig >= 0 and templates[sig] is not None:
            tpl = templates[sig]
            while inflight and inflight[0] <= clock:
                inflight.popleft()
            if len(inflight) >= q_max:
                blocked = inflight[len(inflight) - q_max]
                queue_wait += max(0.0, blocked - clock)
                clock = max(clock, blocked)
            ready = clock + h["device_start_latency_ns"]
            if wait_cc:
                ready, wait_cc = max(ready, cc_done), False
            start = max(ready, core_free)
            extra = 0.0
            if tpl.first_mm >= 0:
                first = start + tpl.start[tpl.first_mm]
                if first - tensor_idle_since >= p.throttle_idle_ns:
                    extra = throttle_extra_ns(tpl.ramp_work_ns, p)
            core_free = start + tpl.duration + extra
            if tpl.first_mm >= 0:
                tensor_idle_since = core_free
            inflight.append(core_free)
            k_host.append(i), k_sig.append(sig), k_start.append(start), k_extra.append(extra), k_enq.append(clock)
        ci = int(prog.collective[i])
        if ci >= 0:
            row = coll.iloc[ci]
            cc = cc_of.setdefault(str(row["process_group"]), len(cc_of) % max(p.cc_cores, 1))
            ready = max(clock + h["device_start_latency_ns"], core_free, cc_free.get(cc, t0))
            members = members_of(row["replica_group"], int(row["group_size"]))
            dur, alg = topo.duration(row["operation"], float(row["message_bytes"]), members)
            cc_free[cc] = ready + dur
            cc_done = max(cc_done, cc_free[cc])
            c_idx.append(ci), c_start.append(ready), c_dur.append(dur), c_alg.append(alg), c_core.append(cc)
        if prog.waits_collectives[i]:
            wait_cc = True
        if prog.sync[i]:
            done = max(core_free, cc_done) + h["sync_latency_ns"]
            sync_wait += max(0.0, done - clock)
            clock = max(clock, done)
        st.append(i)
        clocks[th] = clock
        cursor = max(cursor, hs[i])
    for th, st in stacks.items():
        while st:
            he[st.pop()] = clocks[th]
    def i64(v) -> np.ndarray:
        return np.asarray(np.ceil(np.asarray(v, dtype=np.float64) - 1e-6), dtype=np.int64) + base
    return Projection(host_start=i64(hs), host_end=i64(he), k_host=np.asarray(k_host, np.int64),
                      k_sig=np.asarray(k_sig, np.int64), k_start=i64(k_start),
                      k_extra=np.asarray(np.ceil(np.asarray(k_extra, dtype=np.float64)), dtype=np.int64),
                      k_enqueue=i64(k_enq), c_index=np.asarray(c_idx, np.int64), c_start=i64(c_start),
                      c_dur=np.asarray(c_dur, np.int64), c_algorithm=np.asarray(c_alg, dtype=object),
                      c_core=np.asarray(c_core, np.int64),
                      sync_wait_ns=sync_wait, queue_wait_ns=queue_wait)
