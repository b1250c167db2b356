"""Simulated runtime, the projected timeline: the target's host dispatching, the device running asynchronously."""
import json

import numpy as np
import pandas as pd
import pytest

from neuron_profiler.hardware import host_model_params
from neuron_profiler.runtime.simulated.synthetic import comm, op, simulate

BF = "c10::BFloat16"
H = {k: v[0] for k, v in host_model_params().items()}
MM = ([[2048, 2048], [2048, 2048]], [BF, BF])
TINY = ([[64], [64], []], ["float", "float", "Scalar"])


def _kernels(b):
    """Device span (first start, last end over instructions and DMA) of each host op's kernel."""
    t = pd.concat([b.table(x)[["framework_op", "start_ts", "duration_ns"]] for x in ("instructions", "dma")])
    t = t.assign(end=t.start_ts + t.duration_ns)
    g = t.groupby("framework_op")
    return g.start_ts.min(), g.end.max()


def test_same_program_same_projection_whatever_this_machine_measured():
    rng = np.random.default_rng(0)
    base = [op("aten::mm", 0, 0, *MM), op("aten::gelu", 0, 0, [[2048, 2048]], [BF]),
            op("aten::add", 0, 0, [[2048, 2048], [2048, 2048], []], [BF, BF, "Scalar"])] * 5

    def measured(scale):
        rows, t = [], 1_000_000
        for r in base:
            d = int(rng.integers(1000, 50_000) * scale)
            rows.append({**r, "start_ts": t, "duration_ns": d})
            t += d + int(rng.integers(0, 200_000) * scale)
        return rows
    a, b = simulate(measured(1.0)), simulate(measured(7.0))
    ha, hb = a.table("host_ops"), b.table("host_ops")
    assert not np.array_equal(ha.measured_duration_ns, hb.measured_duration_ns)
    np.testing.assert_array_equal(ha.start_ts - ha.start_ts.min(), hb.start_ts - hb.start_ts.min())
    np.testing.assert_array_equal(ha.duration_ns, hb.duration_ns)
    ia, ib = a.table("instructions"), b.table("instructions")
    np.testing.assert_array_equal(ia.start_ts - ha.start_ts.min(), ib.start_ts - hb.start_ts.min())
    np.testing.assert_array_equal(ia.duration_ns, ib.duration_ns)


def test_measured_host_times_are_kept_next_to_the_projection():
    rows = [op("aten::mm", 1000, 777_000, *MM), op("aten::add", 900_000, 5_000, *TINY)]
    b = simulate(rows)
    h = b.table("host_ops")
    assert list(h.measured_start_ts) == [1000, 900_000] and list(h.measured_duration_ns) == [777_000, 5_000]
    assert b.header.simulation.host_timeline == "projected"
    # projected: dispatch + launch only, back to back from the window start
    per_op = H["eager_op_dispatch_ns"] + H["kernel_launch_ns"]
    assert list(h.start_ts) == [1000, 1000 + per_op] and list(h.duration_ns) == [per_op, per_op]


def test_device_bound_program_runs_back_to_back_and_the_step_waits_for_it():
    rows = [op("ProfilerStep#1", 0, 10 ** 9, category="user_annotation")]
    rows += [op("aten::mm", 10 + 2 * i, 1, *MM) for i in range(20)]
    rows += [op("aten::_local_scalar_dense", 100, 1, [[]], ["float"])]  # loss.item()
    b = simulate(rows)
    start, end = _kernels(b)
    gaps = start.to_numpy()[1:] - end.to_numpy()[:-1]
    assert (gaps == 0).all()  # the host ran ahead: the core never idles between kernels
    h = b.table("host_ops")
    step = h.iloc[0]
    assert step.start_ts + step.duration_ns >= end.max()  # the step ends after the device work (the .item())
    device = (end - start).sum()
    assert device <= step.duration_ns <= device + 20 * (H["eager_op_dispatch_ns"] + H["kernel_launch_ns"]) + 10 ** 5


def test_host_bound_program_stays_host_bound():
    rows = [op("aten::add", i * 10, 5, *TINY) for i in range(50)]
    b = simulate(rows)
    start, end = _kernels(b)
    gaps = start.to_numpy()[1:] - start.to_numpy()[:-1]
    per_op = H["eager_op_dispatch_ns"] + H["kernel_launch_ns"]
    assert (gaps == per_op).all()  # each kernel waits for the host to issue it
    busy = (end - start).sum()
    span = end.max() - start.min()
    assert busy < 0.5 * span


def test_item_synchronises_only_on_device_results():
    mm = [op("aten::mm", 2 * i, 1, *MM) for i in range(4)]
    sync = op("aten::_local_scalar_dense", 10, 1, [[]], ["float"])
    b = simulate(mm + [sync, op("aten::add", 20, 1, *TINY)])
    h = b.table("host_ops")
    _, end = _kernels(b)
    assert h.start_ts[4] + h.duration_ns[4] >= end[:4].max() + H["sync_latency_ns"]
    # a scalar the host computed (an optimizer step counter) is read without waiting for the device
    host_scalar = [op("aten::add_", 9, 1, [[], [], []], ["float", "float", "Scalar"]), sync]
    b = simulate(mm + host_scalar)
    h = b.table("host_ops")
    assert h.duration_ns[5] == H["eager_op_dispatch_ns"] and 4 not in set(b.table("instructions").framework_op)


def test_sync_markers_from_capture_are_synchronisation_points():
    rows = [op("aten::mm", 0, 1, *MM), op("neuron::sync torch.neuron.synchronize", 5, 0, category="user_annotation")]
    b = simulate(rows)
    h = b.table("host_ops")
    _, end = _kernels(b)
    assert h.start_ts[1] + h.duration_ns[1] >= end.max()


def test_host_blocks_when_the_device_queue_is_full():
    q = int(H["max_inflight_programs"])
    rows = [op("aten::mm", 2 * i, 1, *MM) for i in range(q + 20)]
    b = simulate(rows)
    h = b.table("host_ops")
    start, end = _kernels(b)
    waits = json.loads(b.footer_metadata["projected_host_wait_ns"])
    assert waits["device_queue_full"] > 0
    enq = (h.start_ts + h.duration_ns).to_numpy()
    assert (enq[q:] >= end.to_numpy()[: len(enq) - q]).all()


def test_host_model_overrides_are_used_and_recorded():
    rows = [op("aten::add", i, 1, *TINY) for i in range(5)]
    b = simulate(rows, host_model={"kernel_launch_ns": 50_000})
    start, _ = _kernels(b)
    assert (np.diff(start.to_numpy()) == H["eager_op_dispatch_ns"] + 50_000).all()
    a = b.header.simulation.assumptions
    assert "override" in a["host.kernel_launch_ns"] and "MODEL" in a["host.eager_op_dispatch_ns"]
    with pytest.raises(ValueError, match="kernel_launch_ns"):
        simulate(rows, host_model={"kernel_launch": 1})


def test_nested_ops_cost_the_dispatcher_once_each():
    rows = [op("aten::linear", 0, 100, [[64, 128], [256, 128], [256]], [BF] * 3),
            op("aten::t", 1, 2, [[256, 128]], [BF]),
            op("aten::addmm", 10, 80, [[256], [64, 128], [128, 256]], [BF] * 3)]
    h = simulate(rows).table("host_ops")
    assert h.duration_ns[1] == H["nested_op_dispatch_ns"]
    assert h.duration_ns[2] == H["nested_op_dispatch_ns"] + H["kernel_launch_ns"]
    assert h.duration_ns[0] == H["eager_op_dispatch_ns"] + h.duration_ns[1] + h.duration_ns[2]


def test_collectives_overlap_compute_until_an_optimizer_step_waits_for_them():
    rows = [op("aten::mm", 0, 1, *MM), comm("allreduce", 2, 1, 64 << 20, 8, seq=0),
            op("aten::mm", 4, 1, *MM),
            op("Optimizer.step#SGD.step", 6, 10, category="user_annotation"),
            op("aten::add_", 7, 1, [[2048, 2048], [2048, 2048], []], [BF, BF, "Scalar"])]
    b = simulate(rows, world_size=8)
    c = b.table("collectives").iloc[0]
    start, end = _kernels(b)
    assert c.start_ts >= end[0]                    # the all-reduce waits for the gradient it reduces
    assert start[2] < c.start_ts + c.duration_ns  # the next matmul overlaps it
    assert start[4] >= c.start_ts + c.duration_ns  # the optimizer waits for it


def test_dry_run_decompositions_are_lowered_as_the_op_the_program_called():
    # meta / FakeTensorMode record decompositions: an FP32 upcast and prims inside a BF16 op
    rows = [op("aten::gelu_backward", 0, 100, [[1024, 1024], [1024, 1024]], [BF, BF]),
            op("aten::mul", 1, 40, [[1024, 1024], []], ["float", "double"]),
            op("prims::mul", 2, 20, [[1024, 1024], []], ["float", "double"]),
            op("aten::add", 50, 40, [[1024, 1024], [1024, 1024], []], ["float", "float", "Scalar"]),
            op("prims::add", 51, 20, [[1024, 1024], [1024, 1024]], ["float", "float"])]
    ins = simulate(rows).table("instructions")
    assert set(ins.framework_op) == {0} and set(ins.dtype) == {"bfloat16"}
