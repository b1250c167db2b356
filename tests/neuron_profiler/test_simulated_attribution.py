"""Where a simulated op's device time goes: DMA triggers cost their trigger on the Sync engine, and a DMA-bound
op is attributed to DMA (not to the Sync engine that triggers its transfers) in the roofline and hot ops."""
from __future__ import annotations

import pytest

import analysis
from neuron_profiler.runtime.simulated.calibration import op_device_span_ns
from neuron_profiler.runtime.simulated.engines import sync_ns
from neuron_profiler.runtime.simulated.params import CoreParams
from neuron_profiler.runtime.simulated.synthetic import op, simulate

BF = "c10::BFloat16"
P2 = CoreParams.for_target("trn2")
# an HBM-bound elementwise add (3 x 32 MiB moved, one Vector pass) and the bundled GPT sample's P @ V bmm
ADD = ("aten::add", [[4096, 4096], [4096, 4096], []], [BF, BF, "Scalar"])
BMM = ("aten::bmm", [[64, 256, 256], [64, 256, 64]], [BF, BF])


def _sim(name, shapes, dtypes):
    b = simulate([op(name, 0, 100, shapes, dtypes)])
    return b, analysis.Trace.from_builder(b)


@pytest.mark.parametrize("case", [ADD, BMM], ids=["add", "bmm"])
def test_dma_triggers_occupy_the_sync_engine_for_their_instructions_only(case):
    b, _ = _sim(*case)
    ins = b.table("instructions")
    trig = ins[ins.opcode == "DmaTrigger"]
    span = op_device_span_ns(b, 0)
    # one trigger instruction per tile transfer (args "instructions"), each sync_instruction_cycles long
    n = sum(int(a.split('"instructions": ')[1].rstrip("}")) if "instructions" in a else 1 for a in trig.args)
    assert trig.duration_ns.sum() == pytest.approx(n * sync_ns(P2), rel=0.05, abs=len(trig) * 2)
    assert trig.duration_ns.sum() < 0.15 * span  # before: the triggers spanned the whole transfer (~100 %)
    # the Sync engine still runs one instruction at a time
    sync = ins[ins.engine == "Sync"].sort_values("start_ts")
    assert (sync.start_ts.to_numpy()[1:] >= (sync.start_ts + sync.duration_ns).to_numpy()[:-1]).all()


@pytest.mark.parametrize("case", [ADD, BMM], ids=["add", "bmm"])
def test_a_dma_bound_op_is_attributed_to_dma_in_the_roofline_and_hot_ops(case):
    b, t = _sim(*case)
    d = b.table("dma")
    roof = t.roofline()
    assert list(roof.engine) == ["DMA"]
    by_engine = t.hot_ops(by="engine")
    assert by_engine.index[0] == "DMA"
    assert by_engine.loc["DMA", "instructions"] == len(d)
    assert by_engine.loc["Sync", "device_time_self_ns"] < 0.1 * by_engine.loc["DMA", "device_time_self_ns"]


def test_a_compute_bound_matmul_stays_on_the_tensor_engine():
    _, t = _sim("aten::mm", [[2048, 2048], [2048, 2048]], [BF, BF])
    assert list(t.roofline().engine) == ["TensorMatrix"]
