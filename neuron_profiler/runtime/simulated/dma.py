"""DMA model: an op's input loads (HBM -> SBUF) and output stores (SBUF -> HBM) as queue transfers.

Each transfer takes ``dma_fixed_latency_ns + bytes / bw`` where bw is the core's DMA bandwidth shared by
the queues active in that phase (``dma_bandwidth_per_core / k`` for k queues). Transfers on one queue
run back to back; different queues run in parallel, so a phase lasts as long as its busiest queue.
Large tensors are split into transfers of at most ``_MAX_TRANSFER`` bytes (at most ``_MAX_PER_TENSOR``
rows per tensor), small tensors (bias, norm weights, indices) stay small transfers.
"""
from __future__ import annotations

import math
from dataclasses import dataclass

from neuron_profiler.hardware import model_param, neuron_spec
from neuron_profiler.opmodel import OpWork

__all__ = ["DmaModel", "DmaTemplate", "QUEUES"]

#: queue name -> queue_type (Neuron Explorer names)
QUEUES: dict[str, str] = {
    "qSyncIO0": "input",
    "qSyncIO1": "input",
    "qScalarDynamicHW": "hardware_dynamic",
    "qGpSimdDynamic": "software_dynamic",
    "qSyncIO2": "output",
}
_MAX_TRANSFER = 4 << 20
_MAX_PER_TENSOR = 4
_MAX_LOAD_ROWS = 16


@dataclass
class DmaTemplate:
    """Transfers of one op signature; rel_start relative to the phase start (ns)."""

    queue: list[str]
    nbytes: list[int]
    rel_start: list[int]
    duration: list[int]
    variable: list[str]
    load: list[bool]
    load_ns: int
    store_ns: int
    load_bytes: int
    store_bytes: int


class DmaModel:
    """DMA timings of one Neuron target (per NeuronCore)."""

    def __init__(self, target: str) -> None:
        spec = neuron_spec(target)
        self.bandwidth = spec.dma_bandwidth_per_core_bytes_per_s
        self.latency_ns = model_param("dma_fixed_latency_ns")

    def transfer_ns(self, nbytes: int, sharing_queues: int = 1) -> int:
        """Duration of one transfer: fixed latency + bytes / (per-core DMA bandwidth / sharing queues)
        (ns, >= 1)."""
        return max(1, math.ceil(self.latency_ns + nbytes * sharing_queues / self.bandwidth * 1e9))

    def template(self, w: OpWork, base_name: str) -> DmaTemplate:
        """Load and store transfers of one op signature."""
        t = DmaTemplate([], [], [], [], [], [], 0, 0, 0, 0)
        if w.cls == "none":
            return t
        busy: dict[str, int] = {}
        loads: list[tuple[str, int, str]] = []
        for i, x in enumerate(w.inputs):
            if w.cls == "gpsimd":
                q = "qGpSimdDynamic"
            elif w.cls == "scalar":
                q = "qScalarDynamicHW"
            else:
                q = "qSyncIO0" if i % 2 == 0 else "qSyncIO1"
            n = int(min(_MAX_PER_TENSOR, max(1, math.ceil(x.nbytes / _MAX_TRANSFER))))
            for part in _split(x.nbytes, n):
                loads.append((q, part, f"{base_name}.in{i}"))
        if len(loads) > _MAX_LOAD_ROWS:  # e.g. foreach ops over many tensors: merge the tail
            extra = sum(b for _, b, _ in loads[_MAX_LOAD_ROWS - 1:])
            q, _, v = loads[_MAX_LOAD_ROWS - 1]
            loads = loads[:_MAX_LOAD_ROWS - 1] + [(q, extra, v)]
        k = len({q for q, _, _ in loads})
        for q, b, v in loads:
            self._add(t, busy, q, b, v, True, k)
        t.load_ns = max(busy.values(), default=0)
        busy = {}
        n = int(min(_MAX_PER_TENSOR, max(1, math.ceil(w.out_bytes / _MAX_TRANSFER))))
        for part in _split(max(w.out_bytes, 1), n):
            self._add(t, busy, "qSyncIO2", part, f"{base_name}.out", False)
        t.store_ns = max(busy.values(), default=0)
        t.load_bytes = sum(b for b, ld in zip(t.nbytes, t.load) if ld)
        t.store_bytes = sum(b for b, ld in zip(t.nbytes, t.load) if not ld)
        return t

    def _add(self, t: DmaTemplate, busy: dict[str, int], q: str, nbytes: int, var: str, load: bool,
             sharing: int = 1) -> None:
        d = self.transfer_ns(nbytes, sharing)
        t.queue.append(q)
        t.nbytes.append(int(nbytes))
        t.rel_start.append(busy.get(q, 0))
        t.duration.append(d)
        t.variable.append(var)
        t.load.append(load)
        busy[q] = busy.get(q, 0) + d


def _split(total: int, n: int) -> list[int]:
    q, r = divmod(int(total), n)
    return [q + (1 if i < r else 0) for i in range(n)]
