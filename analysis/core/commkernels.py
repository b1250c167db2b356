"""Collective kernels recognised by what they are, whatever library launched them.

HTA 0.5.0 calls a kernel communication when its name matches ``^nccl.*Kernel`` (kept for
``hta_compatible=True``). The default mode also recognises what that misses: RCCL (whose kernels are named
like NCCL's), MSCCL / MSCCL++ kernels, PyTorch's symmetric-memory collectives (``multimem_all_reduce_kernel``,
``one_shot_all_reduce_kernel``, ``two_shot_all_reduce_kernel``, ...), vLLM's and TensorRT-LLM's custom
all-reduce (``cross_device_reduce_1stage`` / ``2stage``, ``allreduce_*_kernel``) and NVSHMEM collectives: their
time is communication, not computation.
"""
from __future__ import annotations

import re

__all__ = ["is_collective_kernel", "is_collective_op", "COLLECTIVE_KERNEL_RE"]

COLLECTIVE_KERNEL_RE = re.compile(
    r"(^|[^a-z])(nccl|rccl|msccl|mscclpp)[a-z_]*(kernel|::)"
    r"|multimem_(all_reduce|all_gather|reduce_scatter)|(one|two)_shot_all_reduce|symmetric_memory"
    r"|cross_device_reduce_(1|2)stage|all_?reduce[a-z0-9_]*_kernel|all_?gather[a-z0-9_]*_kernel"
    r"|reduce_?scatter[a-z0-9_]*_kernel|all_?to_?all[a-z0-9_]*_kernel|nvshmem[a-z_]*(allreduce|alltoall|collect"
    r"|reduce|broadcast)",
    re.IGNORECASE)


def is_collective_kernel(name: str) -> bool:
    """True when a device kernel name is a collective (see the module doc)."""
    return bool(COLLECTIVE_KERNEL_RE.search(str(name)))


def is_collective_op(name: str) -> bool:
    """True when a host op name is a collective call or its wrapper (``nccl:all_reduce``, ``gloo:*``,
    ``c10d::*``, ``_c10d_functional::*``, ``record_param_comms``, ``symm_mem::multimem_all_reduce_``, ...)."""
    n = str(name).lower()
    return n.startswith(("nccl", "rccl", "gloo:", "c10d", "_c10d_functional", "symm_mem::", "mscclpp")) \
        or n == "record_param_comms" or any(k in n for k in ("all_reduce", "allreduce", "all_gather",
                                                              "reduce_scatter", "all_to_all", "alltoall"))
