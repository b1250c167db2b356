"""``--auto-cast matmult`` (neuronx-cc's default): an FP32 matmul loads its FP32 operands, casts them to BF16 in
SBUF and multiplies at the BF16 rate; no BF16 copy of an operand goes through HBM. Oracles by hand from the
operand sizes and the engine cost model."""
from __future__ import annotations

import json
import math

import pytest

from neuron_profiler.config import NeuronConfig
from neuron_profiler.opmodel import lower_signature
from neuron_profiler.runtime.simulated import engines
from neuron_profiler.runtime.simulated.kernels import kernel_plan
from neuron_profiler.runtime.simulated.params import CoreParams
from neuron_profiler.runtime.simulated.pipeline import DMA, schedule_kernel
from neuron_profiler.runtime.simulated.runtime import SimulatedRuntime

M, K, N = 1024, 1024, 4096
NONE = CoreParams.for_target("trn1")
MATMULT = CoreParams.for_target("trn1", auto_cast="matmult")


def _plan(dtype: str, p: CoreParams, name: str = "aten::mm", shapes=((M, K), (K, N))):
    w = lower_signature(name, json.dumps([list(s) for s in shapes]), json.dumps([dtype] * len(shapes)))
    return w, kernel_plan(w, name, p)


def _sum(plan, engine=None, opcode=None, attr="ns"):
    return sum(getattr(s, attr) for g in plan.groups for s in g.stages
               if (engine is None or s.engine == engine) and (opcode is None or s.opcode == opcode))


def test_fp32_matmul_under_matmult_reads_fp32_and_writes_no_bf16_copy():
    """HBM traffic: the FP32 operands once (4 B each) and the FP32 result, exactly as without auto-cast; the
    fused cast adds no HBM byte (an eager cast + BF16 matmul would add 2 B write + 2 B read per element)."""
    w, auto = _plan("float", MATMULT)
    _, plain = _plan("float", NONE)
    a, b, out = 4 * M * K, 4 * K * N, 4 * M * N
    assert _sum(auto, DMA, "store", "hbm_write") == pytest.approx(out)
    assert _sum(auto, DMA, "load", "hbm_read") == pytest.approx(_sum(plain, DMA, "load", "hbm_read"))
    assert _sum(auto, DMA, "load", "hbm_read") >= a + b
    assert _sum(auto, DMA, attr="hbm_write") == pytest.approx(_sum(plain, DMA, attr="hbm_write"))


def test_fp32_matmul_under_matmult_multiplies_at_the_bf16_rate():
    """The MATMUL instructions take a quarter of their FP32 time (fp32_matmul_slowdown 4 on trn1), the same as
    a BF16 matmul of the same shape."""
    _, auto = _plan("float", MATMULT)
    _, plain = _plan("float", NONE)
    _, bf16 = _plan("c10::BFloat16", NONE)
    assert _sum(auto, "TensorMatrix", "MATMUL") == pytest.approx(_sum(plain, "TensorMatrix", "MATMUL") / 4, rel=1e-3)
    assert _sum(auto, "TensorMatrix", "MATMUL") == pytest.approx(_sum(bf16, "TensorMatrix", "MATMUL"))


def test_the_on_chip_cast_is_one_engine_pass_over_the_loaded_fp32_elements():
    """The cast reads every loaded FP32 element from SBUF (4 B) and writes it as BF16 (2 B), on the engine the
    group's evacuation does not use, at one element per lane per cycle plus the fixed overhead."""
    _, auto = _plan("float", MATMULT)
    loaded = _sum(auto, DMA, "load", "hbm_read")
    casts = [s for g in auto.groups for s in g.stages if s.sbuf_write and not s.psum_read and s.engine != DMA]
    assert sum(s.sbuf_read for s in casts) == pytest.approx(loaded)
    assert sum(s.sbuf_write for s in casts) == pytest.approx(loaded / 2)
    for s in casts:
        free = s.sbuf_read / 4 / MATMULT.partitions / s.instructions
        cost = (engines.vector_ns(s.instructions, free, 1, "float32", MATMULT) if s.engine == "Vector"
                else engines.scalar_ns(s.instructions, free, MATMULT))
        assert s.ns == pytest.approx(cost)
    _, plain = _plan("float", NONE)
    assert not [s for g in plain.groups for s in g.stages if s.sbuf_write and not s.psum_read and s.engine != DMA]


def test_matmult_leaves_bf16_matmuls_and_non_matmul_ops_alone():
    for name, shapes, dt in (("aten::mm", ((M, K), (K, N)), "c10::BFloat16"), ("aten::add", ((M, N), (M, N)), "float")):
        _, a = _plan(dt, MATMULT, name, shapes)
        _, b = _plan(dt, NONE, name, shapes)
        assert schedule_kernel(a, MATMULT).duration == schedule_kernel(b, NONE).duration


def test_fp32_matmul_kernel_is_faster_under_matmult_when_tensor_bound():
    """A large FP32 matmul is Tensor-bound at the FP32 rate; under auto-cast its MATMULs take a quarter of that,
    and the kernel, now bound by the FP32 operand loads (twice BF16's bytes) and the cast pass, less than half,
    never less than the BF16 peak time."""
    big = ((4096, 4096), (4096, 4096))
    _, a = _plan("float", MATMULT, shapes=big)
    _, b = _plan("float", NONE, shapes=big)
    ta, tb = schedule_kernel(a, MATMULT).duration, schedule_kernel(b, NONE).duration
    assert ta < 0.5 * tb
    ideal_bf16 = 2 * 4096 ** 3 / MATMULT.peak("bfloat16") * 1e9
    assert ta >= ideal_bf16 and math.isfinite(ta)


def test_neuron_config_carries_auto_cast_to_the_simulated_runtime():
    from neuron_profiler.runtime.factory import make_runtime
    cfg = NeuronConfig(runtime="simulated", target="trn1", auto_cast="matmult")
    assert cfg.to_dict()["auto_cast"] == "matmult"
    rt = make_runtime(cfg, 0)
    assert isinstance(rt, SimulatedRuntime) and rt.params().auto_cast == "matmult"
    assert rt.config()["auto_cast"] == "matmult"
    assert make_runtime(NeuronConfig(runtime="simulated", target="trn1"), 0).params().auto_cast == "none"
    with pytest.raises(ValueError, match="auto_cast"):
        NeuronConfig(auto_cast="all")
