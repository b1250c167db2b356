"""DMA cost model of one NeuronCore.

A transfer is striped over the core's DMA engines (16 per core), one descriptor per engine at a time, so a
transfer of fewer descriptors than engines uses only that many. Its data phase takes ``bytes / rate`` with
``rate = min(dma_bytes_per_s * engines_used / engines * efficiency(descriptor_bytes), hbm_share)``:
- ``efficiency(s) = s / (s^p + knee^p)^(1/p)`` for ``s`` contiguous bytes per descriptor (one partition
  row): about 0.24 at 512 B, 0.71 at the 2 KiB knee, 0.89 at 4 KiB and 1 for 64 KiB (S23: "needs >= 2 KiB,
  target >= 4 KiB contiguous per partition");
- ``hbm_share``: the core's share of its chip's HBM bandwidth when ``active_cores`` cores run at once.
Before its data moves, a transfer waits ``dma_fixed_latency_ns`` after its trigger (S23, ~1.3 us); the
latency of queued transfers overlaps the data phase of earlier ones (the pipeline scheduler applies it).
"""
from __future__ import annotations

import math

from neuron_profiler.runtime.simulated.params import CoreParams

__all__ = ["efficiency", "transfer_ns", "rate_bytes_per_s", "descriptor_for", "QUEUE_TYPES"]

#: DMA queue name -> Neuron Explorer queue_type
QUEUE_TYPES: dict[str, str] = {
    "qSyncIO0": "input", "qSyncIO1": "input", "qSyncIO2": "output",
    "qSyncSpillReload0": "data", "qScalarDynamicHW": "hardware_dynamic", "qGpSimdDynamic": "software_dynamic",
}


def efficiency(descriptor_bytes: float, p: CoreParams) -> float:
    """Fraction of the DMA engines' peak reached with ``descriptor_bytes`` contiguous bytes per descriptor."""
    s = max(float(descriptor_bytes), 1.0)
    e = p.dma_exponent
    return s / (s ** e + p.dma_knee_bytes ** e) ** (1.0 / e)


def rate_bytes_per_s(descriptor_bytes: float, p: CoreParams, descriptors: float = float("inf")) -> float:
    """Bytes/s of one transfer of ``descriptors`` descriptors: the DMA engines it can keep busy at
    ``efficiency(descriptor_bytes)``, capped by the HBM share."""
    engines = min(float(p.dma_engines), max(descriptors, 1.0))
    return min(p.dma_bytes_per_s * engines / p.dma_engines * efficiency(descriptor_bytes, p), p.hbm_share_bytes_per_s)


def transfer_ns(nbytes: float, descriptor_bytes: float, p: CoreParams) -> float:
    """Data-phase duration (ns) of moving ``nbytes`` in descriptors of ``descriptor_bytes``."""
    if nbytes <= 0:
        return 0.0
    desc = max(min(descriptor_bytes, nbytes), 1.0)
    return nbytes / rate_bytes_per_s(desc, p, nbytes / desc) * 1e9


def descriptor_for(free_elems: float, elem_bytes: int) -> int:
    """Contiguous bytes per partition row of a [partitions, free] tile of a contiguous tensor."""
    return int(max(1, math.ceil(free_elems)) * max(1, elem_bytes))
