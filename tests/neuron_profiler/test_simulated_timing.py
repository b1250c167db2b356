"""Simulated runtime, timing: Tensor/Vector/DMA durations from the hardware table, dependencies, asynchrony."""
import json
import math

import numpy as np
import pytest

from neuron_profiler.hardware import engine_clock_hz, model_param, neuron_spec
from neuron_profiler.runtime.simulated.engines import MAX_INSTR_PER_STEP, inorder_scan
from neuron_profiler.runtime.simulated.synthetic import op, random_op_stream, simulate

BF = "c10::BFloat16"




def _throttle_ns(ins):
    a = ins.args.astype(str)
    return sum(json.loads(x)["dIdt_throttle_ns"] for x in a if x)


def _tensor_time(dtype, target="trn2", m=1024, k=1024, n=2048):
    b = simulate([op("aten::mm", 0, 100, [[m, k], [k, n]], [dtype, dtype])], target)
    ins = b.table("instructions")
    mm = ins[ins.engine == "TensorMatrix"]
    return mm.duration_ns.sum() - _throttle_ns(mm), len(mm), 2 * m * k * n


@pytest.mark.parametrize("target", ["trn1", "trn2", "trn3"])
def test_bf16_matmul_time_is_flops_over_peak(target):
    total, n_instr, flops = _tensor_time(BF, target)
    ideal = flops / neuron_spec(target).peak_flops_per_s["bfloat16"] * 1e9
    overhead = n_instr * (model_param("matmul_min_cycles") / engine_clock_hz(target, "Tensor") * 1e9 + 1)
    assert ideal <= total <= ideal + overhead
    assert 1 <= n_instr <= MAX_INSTR_PER_STEP


def test_didt_throttling_cold_tensor_engine():
    f0, ramp = model_param("tensor_throttle_start_fraction"), model_param("tensor_throttle_ramp_ns")
    big = ([[1024, 1024], [1024, 2048]], [BF, BF])
    # two matmuls dispatched together (the second starts warm), a third after 1 ms of idle (cold again)
    rows = [op("aten::mm", 0, 100, *big), op("aten::mm", 200, 100, *big), op("aten::mm", 10**6, 100, *big)]
    for target, expected in (("trn2", ramp * (1 - f0) / 2), ("trn1", 0)):
        ins = simulate(rows, target).table("instructions")
        mm = ins[ins.engine == "TensorMatrix"]
        per_op = {o: _throttle_ns(g) for o, g in mm.groupby("framework_op")}
        assert per_op == {0: pytest.approx(expected, abs=1), 1: 0, 2: pytest.approx(expected, abs=1)}
        s = mm.sort_values("start_ts")  # stretched first MATMUL still does not overlap the next one
        assert ((s.start_ts + s.duration_ns).to_numpy()[:-1] <= s.start_ts.to_numpy()[1:]).all()
    # a tiny matmul finishes inside the ramp: w = f0 t + (1 - f0) t^2 / (2 R)
    ins = simulate([op("aten::mm", 0, 100, [[128, 128], [128, 512]], [BF, BF])], "trn2").table("instructions")
    mm = ins[ins.engine == "TensorMatrix"]
    extra = _throttle_ns(mm)
    t = mm.duration_ns.sum()
    w = t - extra
    assert f0 * t + (1 - f0) * t * t / (2 * ramp) == pytest.approx(w, abs=2)


def test_fp32_matmul_about_4x_slower():
    bf, _, _ = _tensor_time(BF)
    f32, _, _ = _tensor_time("float")
    assert 3.8 < f32 / bf <= 4.0
    fp8, _, _ = _tensor_time("c10::Float8_e4m3fn")
    assert 0.45 < fp8 / bf < 0.6  # trn2 fp8 at 2x the bf16 rate


def test_load_stationary_precedes_matmul_and_is_faster():
    b = simulate([op("aten::mm", 0, 100, [[512, 512], [512, 2048]], [BF, BF])])
    ins = b.table("instructions")
    ls, mm = ins[ins.engine == "Tensor"], ins[ins.engine == "TensorMatrix"]
    assert (ls.opcode == "LoadStationary").all() and (mm.opcode == "MATMUL").all()
    assert len(ls) == len(mm)
    assert ls.start_ts.min() < mm.start_ts.min()
    assert (ls.duration_ns.to_numpy() < mm.duration_ns.to_numpy()).all()
    for t in (ls, mm):  # no overlap within an engine track
        s = t.sort_values("start_ts")
        assert ((s.start_ts + s.duration_ns).to_numpy()[:-1] <= s.start_ts.to_numpy()[1:]).all()


def test_elementwise_time_scales_with_bytes():
    def vec_time(n):
        b = simulate([op("aten::add", 0, 100, [[n], [n], []], ["float", "float", "Scalar"])])
        ins = b.table("instructions")
        return ins[ins.engine == "Vector"].duration_ns.sum()
    clock, lanes = engine_clock_hz("trn2", "Vector"), 128
    n = 1 << 20
    expected = (2 * n / lanes + model_param("vector_fixed_overhead_cycles")) / clock * 1e9
    assert vec_time(n) == pytest.approx(expected, rel=0.01, abs=2)
    assert vec_time(4 * n) / vec_time(n) == pytest.approx(4.0, rel=0.02)
    assert vec_time(1) > 0  # never zero: fixed overhead


def test_activation_runs_on_scalar():
    b = simulate([op("aten::gelu", 0, 100, [[4096, 1024]], [BF])])
    ins = b.table("instructions")
    act = ins[ins.engine == "Scalar"]
    assert (act.opcode == "ACTIVATE").all() and len(act) >= 1
    expected = (4096 * 1024 / 128 + 100) / engine_clock_hz("trn2", "Scalar") * 1e9
    assert act.duration_ns.sum() == pytest.approx(expected, rel=0.02)


def test_dma_duration_is_latency_plus_bytes_over_bandwidth():
    b = simulate([op("aten::mm", 0, 100, [[2048, 4096], [4096, 4096]], [BF, BF]),
                   op("aten::add", 10**6, 100, [[4], [4], []], ["float", "float", "Scalar"])])
    d = b.table("dma")
    bw = neuron_spec("trn2").dma_bandwidth_per_core_bytes_per_s
    # queues active in the same phase share the core's DMA bandwidth: mm loads use 2 queues, the rest 1
    sharing = np.where((d.framework_op == 0) & (d.source == "HBM"), 2, 1)
    expected = np.ceil(model_param("dma_fixed_latency_ns") + d.transfer_bytes.to_numpy() * sharing / bw * 1e9)
    np.testing.assert_array_equal(d.duration_ns.to_numpy(), expected)
    names = b.table("tracks").name.astype(str)
    assert set(names[d[d.framework_op == 0].track]) == {"qSyncIO0", "qSyncIO1", "qSyncIO2"}
    assert d.transfer_bytes.min() < 64 and d.transfer_bytes.max() > 1 << 20  # small and big transfers
    loads, stores = d[d.source == "HBM"], d[d.source == "SBUF"]
    assert set(loads.dest) == {"SBUF"} and set(stores.dest) == {"HBM"}
    assert set(loads.queue_type) <= {"input", "hardware_dynamic", "software_dynamic"}
    assert set(stores.queue_type) == {"output"}
    # the mm's 4096x4096 bf16 weight (32 MiB) is split into several transfers
    assert (loads.variable == "aten::mm.in1").sum() > 1
    assert loads[loads.framework_op == 0].transfer_bytes.sum() == (2048 * 4096 + 4096 * 4096) * 2


def test_no_overlap_within_a_track():
    b = simulate(random_op_stream(300, gap_ns=0))
    for table in ("instructions", "dma"):
        t = b.table(table).sort_values(["track", "start_ts"])
        same = t.track.to_numpy()[1:] == t.track.to_numpy()[:-1]
        end = (t.start_ts + t.duration_ns).to_numpy()
        assert (t.start_ts.to_numpy()[1:][same] >= end[:-1][same]).all(), table


def test_dependencies_load_compute_store():
    b = simulate(random_op_stream(200, gap_ns=0))
    ins, d = b.table("instructions"), b.table("dma")
    host = b.table("host_ops")
    comp = ins[ins.engine != "Sync"].groupby("framework_op").agg(s=("start_ts", "min"))
    comp["e"] = (ins.start_ts + ins.duration_ns)[ins.engine != "Sync"].groupby(ins.framework_op).max()
    ld = d[d.source == "HBM"]
    st = d[d.source == "SBUF"]
    ld_end = (ld.start_ts + ld.duration_ns).groupby(ld.framework_op).max()
    st_start = st.start_ts.groupby(st.framework_op).min()
    assert (comp.s >= ld_end.reindex(comp.index)).all()           # compute waits for its input DMA
    assert (st_start.reindex(comp.index) >= comp.e).all()        # output DMA after compute
    # device never starts an op's work before the host dispatched it
    for t in (ins, d):
        assert (t.start_ts.to_numpy() >= host.start_ts.to_numpy()[t.framework_op.to_numpy()]).all()
    assert (ins.duration_ns > 0).all() and (d.duration_ns > 0).all()


def test_host_bound_gaps_and_device_bound_lag():
    mm = ([[2048, 2048], [2048, 2048]], [BF, BF])
    # host-bound: tiny ops 1 ms apart -> device idle between them, finishing soon after each dispatch
    sparse = [op("aten::add", i * 1_000_000, 1000, [[64], [64], []], ["float", "float", "Scalar"]) for i in range(5)]
    ins = simulate(sparse).table("instructions")
    ends = (ins.start_ts + ins.duration_ns).groupby(ins.framework_op).max().to_numpy()
    starts = ins.start_ts.groupby(ins.framework_op).min().to_numpy()
    assert (starts[1:] - ends[:-1] > 900_000).all()
    # device-bound: big matmuls dispatched every 1 us -> device lags the host more and more
    dense = [op("aten::mm", i * 1000, 500, *mm) for i in range(20)]
    ins = simulate(dense).table("instructions")
    end = (ins.start_ts + ins.duration_ns).groupby(ins.framework_op).max().to_numpy()
    lag = end - np.arange(20) * 1000
    busy = 20 * 2 * 2048 ** 3 / neuron_spec("trn2").peak_flops_per_s["bfloat16"] * 1e9
    assert (np.diff(lag) > 0).all() and lag[-1] > busy


def test_inorder_scan_matches_loop():
    rng = np.random.default_rng(1)
    ready = np.sort(rng.integers(0, 10_000, 500))
    dur = rng.integers(1, 100, 500)
    end, prev = [], -math.inf
    for r, d in zip(ready, dur):
        prev = max(r, prev) + d
        end.append(prev)
    np.testing.assert_array_equal(inorder_scan(ready, dur), end)
