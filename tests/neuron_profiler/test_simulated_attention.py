"""Attention tiled as a flash-attention kernel reads its operands: Q, K, V and O move in long descriptors (all
heads of 128 tokens per load, the layout the projections write), so attention runs at a sane fraction of the
roof; batched matmuls load several rows of a matrix per partition."""
from __future__ import annotations

import pytest

from neuron_profiler.runtime.simulated.calibration import op_device_span_ns
from neuron_profiler.runtime.simulated.dma import efficiency
from neuron_profiler.runtime.simulated.params import CoreParams
from neuron_profiler.runtime.simulated.synthetic import op, simulate

BF = "c10::BFloat16"
SDPA = "aten::_scaled_dot_product_efficient_attention"


def _sdpa(shape, target="trn2"):
    b = simulate([op(SDPA, 0, 100, [shape] * 3 + [[], [], [], []], [BF] * 3 + ["Scalar"] * 4)], target)
    return b, op_device_span_ns(b, 0)


def _roof_ns(flops: float, nbytes: float, p: CoreParams) -> float:
    return max(flops / p.peak("bfloat16"), nbytes / p.hbm_bytes_per_s) * 1e9


@pytest.mark.parametrize("target", ["trn1", "trn2"])
def test_bert_large_attention_reaches_a_third_of_its_roof(target):
    """BERT-Large (16 heads x 64, seq 128, batch 16): 1.07 GFLOP over 16.8 MB, memory bound. Before: 128-byte
    per-head descriptors, 1.4 TFLOP/s (6 % of the roof); now 2 KiB descriptors, ~50 % of the roof."""
    p = CoreParams.for_target(target)
    b, span = _sdpa([16, 16, 128, 64], target)
    ins, d = b.table("instructions"), b.table("dma")
    flops = 4 * 256 * 128 * 128 * 64
    assert ins[ins.opcode == "MATMUL"].raw_flops.sum() == pytest.approx(flops, rel=1e-6)
    q_kv = d[d.variable.astype(str).str.endswith((".q", ".kv", ".out"))]
    assert (q_kv.descriptor_bytes == 16 * 64 * 2).all()  # 16 heads x 64 x BF16 contiguous per partition
    assert efficiency(2048, p) > 0.7
    roof = _roof_ns(flops, d.transfer_bytes.sum(), p)
    assert roof / span > 0.35, (span, roof)


def test_long_sequence_attention_is_compute_bound_at_half_of_peak():
    p = CoreParams.for_target("trn2")
    _, span = _sdpa([1, 32, 4096, 128])
    achieved = 4 * 32 * 4096 * 4096 * 128 / (span * 1e-9)
    assert 0.45 < achieved / p.peak("bfloat16") < 0.9


def test_attention_transposes_q_and_k_tiles_on_the_tensor_engine():
    b, _ = _sdpa([2, 8, 256, 64])
    ins = b.table("instructions")
    tr = ins[ins.opcode == "TRANSPOSE"]
    # P^T: one per 128 keys per query tile; Q: one per query tile; K: one per 128 keys per head (resident)
    n_tiles = 16 * 2
    expected = n_tiles * 2 + n_tiles + 16 * 2
    count = sum(int(a.split('"instructions": ')[1].rstrip("}")) if "instructions" in a else 1 for a in tr.args)
    assert count == pytest.approx(expected, abs=len(tr))


def test_batched_matmul_loads_several_rows_of_a_matrix_per_partition():
    """The GPT sample's P @ V: [64, 256, 256] @ [64, 256, 64]. Each partition reads 2 whole rows of a matrix."""
    b = simulate([op("aten::bmm", 0, 100, [[64, 256, 256], [64, 256, 64]], [BF, BF])])
    d = b.table("dma")
    desc = dict(zip(d.variable.astype(str), d.descriptor_bytes))
    assert desc["bmm.in0"] == 2 * 256 * 2 and desc["bmm.in1"] == 2 * 64 * 2 and desc["bmm.out"] == 2 * 64 * 2
