"""Collective kernels recognised by what they are (symmetric memory, MSCCL++, custom all-reduce), so their
time is communication in the default mode; HTA-compatible mode keeps HTA's ``^nccl.*Kernel``."""
import pytest
from _traces import gpu_builder

import analysis
from analysis.core.commkernels import is_collective_kernel


@pytest.mark.parametrize("name,comm", [
    ("ncclDevKernel_Generic(ncclDevKernelArgsStorage<4096ul>)", True),
    ("void (anonymous namespace)::multimem_all_reduce_kernel<c10::BFloat16, 16>(c10::BFloat16*)", True),
    ("void c10d::symmetric_memory::two_shot_all_reduce_kernel<float>", True),
    ("void mscclpp::allreduce6<float>(float*)", True),
    ("void vllm::cross_device_reduce_2stage<half, 8>()", True),
    ("void at::native::reduce_kernel<512, 1>()", False),
    ("void at::native::vectorized_gather_kernel<16, long>", False),
    ("triton_red_fused_sum_0", False),
])
def test_is_collective_kernel(name, comm):
    assert is_collective_kernel(name) is comm


def test_symmetric_memory_all_reduce_is_communication_not_compute():
    b, t = gpu_builder("NVIDIA B200")
    b.add_rows("instructions", {"track": t["stream"], "start_ts": [0, 1000], "duration_ns": [1000, 3000],
                                "engine": "Kernel", "opcode": "kernel",
                                "name": ["sm100_gemm", "void multimem_all_reduce_kernel<c10::BFloat16, 16>()"]})
    tr = analysis.Trace.from_builder(b)
    tb = tr.temporal_breakdown().iloc[0]
    assert tb["compute_time_ns"] == 1000 and tb["non_compute_time_ns"] == 3000
    assert tr.temporal_breakdown(hta_compatible=True).iloc[0]["compute_time_ns"] == 4000  # HTA's regex


def test_collective_rows_have_no_model_flops_and_say_why_their_bytes_are_unknown():
    from analysis.analyses.unpriced import unpriced_reason

    b, t = gpu_builder("NVIDIA A100-SXM4-80GB")
    host = b.add_rows("host_ops", {"track": t["thread"], "name": ["nccl:all_reduce"], "category": "cpu_op",
                                   "start_ts": [0], "duration_ns": [50], "input_shapes": ["[[1024]]"],
                                   "input_dtypes": ['["float"]']})
    b.add_rows("instructions", {"track": t["stream"], "start_ts": [100], "duration_ns": [5000], "engine": "Kernel",
                                "opcode": "kernel", "name": ["ncclDevKernel_AllReduce_Sum_f32_RING_LL"],
                                "framework_op": [host]})
    tr = analysis.Trace.from_builder(b)
    w = analysis.instruction_work(tr)
    assert w["flops_known"].all() and w["flops"].sum() == 0
    assert "collective" in unpriced_reason(tr).iloc[0]
    h = tr.hot_ops().loc["nccl:all_reduce"]
    assert h["flops"] == 0 and "collectives analysis" in h["note"]
