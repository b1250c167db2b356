"""The one collective naming and bus-factor convention, shared by simulator, importer and analysis."""
import math

import numpy as np
import pytest

from neuron_profiler.collectives import bus_factor, normalize_collective


@pytest.mark.parametrize("raw,canon", [
    ("allreduce", "all_reduce"), ("c10d::allreduce_", "all_reduce"), ("nccl:all_reduce", "all_reduce"),
    ("ncclKernel_AllReduce_RING_LL_Sum_float", "all_reduce"), ("ncclDevKernel_AllGather_RING_LL", "all_gather"),
    ("_allgather_base", "all_gather"), ("all_gather_into_tensor_coalesced", "all_gather"),
    ("reduce_scatter_tensor", "reduce_scatter"), ("_reduce_scatter_base", "reduce_scatter"),
    ("alltoall_base", "all_to_all"), ("all_to_allv", "all_to_all"),
    ("ncclKernel_SendRecv_RING_SIMPLE_Sum_int8_t", "send_recv"), ("broadcast", "broadcast"),
    ("recv_any_source", "recv"), ("send", "send"), ("barrier", "barrier"), ("reduce", "reduce"),
    ("wait", ""), ("coalesced", ""), ("", ""),
])
def test_normalize_collective(raw, canon):
    assert normalize_collective(raw) == canon


def test_bus_factor_nccl_tests_convention():
    ops = np.array(["all_reduce", "all_gather", "reduce_scatter", "all_to_all", "broadcast", "send_recv",
                    "barrier", "mystery"], dtype=object)
    f = bus_factor(ops, np.full(len(ops), 4))
    np.testing.assert_allclose(f[:7], [1.5, 0.75, 0.75, 0.75, 1.0, 1.0, 0.0])
    assert math.isnan(f[7])
    assert bus_factor("all_reduce", 1) == 0.0 and bus_factor("all_reduce", 8) == pytest.approx(1.75)
    assert math.isnan(bus_factor("all_reduce", 0))  # no group size: unknown
