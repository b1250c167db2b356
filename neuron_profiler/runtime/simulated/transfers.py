"""The DMA stages every kernel builder uses: loads HBM -> SBUF, several tensors on parallel queues, stores.

Costs come from ``dma.transfer_ns``; a load takes an SBUF buffer (``sbuf_acquire``) and a store releases it.
"""
from __future__ import annotations

from collections.abc import Sequence

from neuron_profiler.opmodel import OpWork
from neuron_profiler.runtime.simulated.dma import transfer_ns
from neuron_profiler.runtime.simulated.params import CoreParams
from neuron_profiler.runtime.simulated.pipeline import DMA, Stage

__all__ = ["ELEMENTWISE_FREE_MAX"]

#: free elements per partition of one elementwise tile (MODEL: typical NKI tile, 8 KiB of BF16 per partition)
ELEMENTWISE_FREE_MAX = 4096


def _elem(w: OpWork) -> int:
    return max(1, int(round(w.out_bytes / w.out_elems))) if w.out_elems else 4


def _load(nbytes: float, desc: float, var: str, p: CoreParams, queue: str = "qSyncIO0", **kw) -> Stage:
    return Stage(DMA, "load", transfer_ns(nbytes, desc, p), nbytes=nbytes, queue=queue, descriptor=desc,
                 variable=var, source="HBM", dest="SBUF", hbm_read=nbytes, sbuf_acquire=True, **kw)


def _loads(parts: Sequence[tuple[str, float, float, str]], p: CoreParams) -> Stage:
    """One DMA stage loading several tensors on parallel queues (they share the core's DMA engines)."""
    parts = [x for x in parts if x[1] > 0] or parts[:1]
    ns = sum(transfer_ns(b, d, p) for _, b, d, _ in parts)
    total = sum(b for _, b, _, _ in parts)
    return Stage(DMA, "load", ns, nbytes=total, queue=parts[0][0], descriptor=parts[0][2], variable=parts[0][3],
                 source="HBM", dest="SBUF", hbm_read=total, sbuf_acquire=True, parts=tuple(parts))


def _store(nbytes: float, desc: float, var: str, p: CoreParams, queue: str = "qSyncIO2", **kw) -> Stage:
    return Stage(DMA, "store", transfer_ns(nbytes, desc, p), nbytes=nbytes, queue=queue, descriptor=desc,
                 variable=var, source="SBUF", dest="HBM", hbm_write=nbytes, sbuf_release=True, **kw)
