"""Collectives on the device timeline with torch.distributed semantics, shared links, the HBM cap of one chip,
and the step as the device's step (synthetic host op streams; hand-computed expectations)."""
import numpy as np
import pytest

import analysis
from neuron_profiler.hardware import model_param, raw_table
from neuron_profiler.runtime.simulated.collectives import Topology
from neuron_profiler.runtime.simulated.synthetic import comm, op, simulate

BF = "c10::BFloat16"
MM = ([[2048, 2048], [2048, 2048]], [BF, BF])
LAT = model_param("cc_step_latency_ns")


def _ends(b):
    """(kernel end per framework op, collectives table) of a simulated builder."""
    ins, d = b.table("instructions"), b.table("dma")
    ends = {}
    for t in (ins, d):
        for fop, e in zip(t["framework_op"], t["start_ts"] + t["duration_ns"]):
            ends[int(fop)] = max(ends.get(int(fop), 0), int(e))
    starts = {}
    for t in (ins, d):
        for fop, s in zip(t["framework_op"], t["start_ts"]):
            starts[int(fop)] = min(starts.get(int(fop), 1 << 62), int(s))
    return starts, ends, b.table("collectives")


def _mm_ar_mm(async_op):
    # host: matmul, all-reduce (8 ranks, one per chip: NeuronLink), matmul using its result
    return [op("aten::mm", 0, 100, *MM), comm("allreduce", 200, 100, 32 << 20, 8, "BFloat16", async_op=async_op),
            op("aten::mm", 400, 100, *MM)]


def test_blocking_all_reduce_holds_the_compute_after_it():
    starts, ends, c = _ends(simulate(_mm_ar_mm(False), "trn2", world_size=8, num_cores=1))
    c_end = int(c.start_ts.iloc[0] + c.duration_ns.iloc[0])
    assert c.start_ts.iloc[0] >= ends[0]             # its input: the matmul before it
    assert starts[2] >= c_end                        # the matmul after it waits for it (critical path)


def test_async_all_reduce_runs_beside_compute_until_a_consumer():
    starts, ends, c = _ends(simulate(_mm_ar_mm(True), "trn2", world_size=8, num_cores=1))
    c_end = int(c.start_ts.iloc[0] + c.duration_ns.iloc[0])
    assert starts[2] < c_end                         # async_op=True: compute goes on beside it
    # the next step's start (the next forward) consumes it: its first kernel starts after the collective
    rows = _mm_ar_mm(True) + [op("ProfilerStep#2", 600, 400, category="user_annotation"),
                              op("aten::mm", 700, 100, *MM)]
    starts, ends, c = _ends(simulate(rows, "trn2", world_size=8, num_cores=1))
    c_end = int(c.start_ts.iloc[0] + c.duration_ns.iloc[0])
    assert starts[2] < c_end <= starts[4]


def test_imported_collectives_without_the_flag_stay_asynchronous_until_a_nccl_wait():
    wait = op("record_param_comms", 350, 10, [], [], args={"Collective name": "wait", "Group size": 8})
    rows = _mm_ar_mm(None)
    starts, ends, c = _ends(simulate(rows, "trn2", world_size=8, num_cores=1))
    assert starts[2] < int(c.start_ts.iloc[0] + c.duration_ns.iloc[0])
    starts, ends, c = _ends(simulate(rows[:2] + [wait] + rows[2:], "trn2", world_size=8, num_cores=1))
    assert starts[3] >= int(c.start_ts.iloc[0] + c.duration_ns.iloc[0])  # Work.wait() of NCCL


def test_overlapping_collectives_split_their_link():
    """Two async all-reduces of different groups at once on NeuronLink split its bandwidth: both end together,
    when the link has moved both (2 transfers + latency), and busbw never exceeds the link."""
    nbytes, n = 64 << 20, 8
    rows = [comm("allreduce", 0, 10, nbytes // 2, n, "BFloat16", pg="tp", async_op=True),
            comm("allreduce", 20, 10, nbytes // 2, n, "BFloat16", pg="dp", async_op=True)]
    c = simulate(rows, "trn2", world_size=n, num_cores=1).table("collectives").sort_values("start_ts")
    topo = Topology.for_target("trn2", 1)
    link = topo.neuronlink_bytes_per_s * topo.ring_fraction
    xfer = 2 * (n - 1) / n * nbytes / link * 1e9
    lat = 2 * (n - 1) * LAT
    ends = (c.start_ts + c.duration_ns).to_numpy()
    assert abs(int(ends[1] - ends[0])) <= c.start_ts.iloc[1] - c.start_ts.iloc[0] + 2
    assert int(ends.max() - c.start_ts.min()) == pytest.approx(2 * xfer + lat, rel=1e-3)
    assert (c.bus_bandwidth <= link * (1 + 1e-9)).all()


def test_a_short_blocking_collective_is_not_queued_behind_a_long_one():
    """A small tensor-parallel all-reduce issued while a big gradient bucket is on the link gets half the
    link (twice its time alone), not the rest of the bucket's transfer; the bucket is stretched by as much."""
    n = 8
    big = comm("allreduce", 0, 10, 256 << 20, n, "BFloat16", pg="dp", async_op=True)
    small = comm("allreduce", 20, 10, 1 << 20, n, "BFloat16", pg="tp", seq=1, async_op=False)
    alone = simulate([big], "trn2", world_size=n, num_cores=1).table("collectives")
    small_alone = simulate([small], "trn2", world_size=n, num_cores=1).table("collectives")
    c = simulate([big, small], "trn2", world_size=n, num_cores=1).table("collectives").set_index("process_group")
    topo = Topology.for_target("trn2", 1)
    cost = topo.cost("all_reduce", 2 << 20, list(range(n)))  # a small message: the one-shot mesh
    frac = topo.mesh_fraction if cost.algorithm.startswith("mesh") else topo.ring_fraction
    xfer_small = 2 * (n - 1) / n * (2 << 20) / (topo.neuronlink_bytes_per_s * frac) * 1e9
    assert cost.transfer_ns == pytest.approx(xfer_small)
    assert c.loc["tp", "duration_ns"] == pytest.approx(small_alone.duration_ns.iloc[0] + xfer_small, abs=3)
    assert c.loc["dp", "duration_ns"] == pytest.approx(alone.duration_ns.iloc[0] + xfer_small, abs=3)


def test_shared_link_processor_sharing():
    from neuron_profiler.runtime.simulated.collectives import SharedLink
    link = SharedLink()
    assert link.add("a", 0.0, 100.0) == {"a": 100.0}
    assert link.add("b", 50.0, 10.0) == {"b": 70.0, "a": 110.0}   # a: 50 left, b: 10 -> b at 50+20, a at 110
    assert link.add("c", 200.0, 5.0) == {"c": 205.0}                # the others are done


@pytest.mark.parametrize("target", ["trn1", "trn2"])
def test_one_chip_all_reduce_is_capped_by_hbm_and_dma(target):
    """Two ranks on the two cores of one chip: the ring moves each byte out of one core's HBM and into the
    other's, so busbw <= min(DMA per core, HBM per core / 2) <= the roofline's memory roof."""
    t = raw_table()["neuron"][target]
    hbm = t["hbm_bandwidth_per_core_bytes_per_s"]["value"]
    dma = t["dma_bandwidth_per_core_bytes_per_s"]["value"]
    c = simulate([comm("allreduce", 0, 10, 256 << 20, 2, "BFloat16")], target, world_size=2).table("collectives")
    assert c.algorithm.iloc[0] == "ring (one chip)"
    cap = min(dma, hbm / model_param("cc_intra_chip_hbm_bytes_per_byte"))
    assert 0.95 * cap < c.bus_bandwidth.iloc[0] <= cap  # large message: near the cap, never above it
    assert c.bus_bandwidth.iloc[0] <= min(hbm, dma)


def test_step_includes_the_device_tail_and_unwaited_collectives():
    """A one-step window whose host range ends while the device still runs: the step lasts until the device
    finished the step's kernels and its un-waited all-reduce."""
    rows = [op("ProfilerStep#0", 0, 2000, category="user_annotation"), op("aten::mm", 100, 100, *MM),
            op("aten::mm", 300, 100, *MM), comm("allreduce", 500, 100, 32 << 20, 8, "BFloat16", async_op=True)]
    b = simulate(rows, "trn2", world_size=8, num_cores=1)
    st = analysis.Trace.from_builder(b).steps()
    starts, ends, c = _ends(b)
    dev_end = max(max(ends.values()), int((c.start_ts + c.duration_ns).max()))
    host = b.table("host_ops")
    host_end = int(host.start_ts.iloc[0] + host.duration_ns.iloc[0])
    assert dev_end > host_end  # the host left the step long before the device finished it
    assert st["end_ts"].tolist() == [dev_end] and st["host_end_ts"].tolist() == [host_end]
    assert st["duration_ns"].iloc[0] == dev_end - int(host.start_ts.iloc[0])


def test_dp_step_includes_its_gradient_all_reduce_and_consecutive_steps_do_not_overlap():
    """DDP-like steps: backward matmuls, an async gradient all-reduce bucket, the optimizer step (its first
    consumer). Each step ends after its all-reduce and the optimizer's kernel; the next one starts there."""
    rows = []
    for s in range(2):
        t0 = s * 1000
        rows += [op(f"ProfilerStep#{s}", t0, 1000, category="user_annotation"), op("aten::mm", t0 + 10, 50, *MM),
                 comm("allreduce", t0 + 100, 50, 64 << 20, 8, "BFloat16", seq=s, async_op=True),
                 op("Optimizer.step#SGD.step", t0 + 200, 300, category="user_annotation"),
                 op("aten::add_", t0 + 250, 50, [[2048, 2048], [2048, 2048], []], [BF, BF, "Scalar"])]
    b = simulate(rows, "trn2", world_size=8, num_cores=1)
    tr = analysis.Trace.from_builder(b)
    st = tr.steps()
    c = b.table("collectives")
    c_end = (c.start_ts + c.duration_ns).to_numpy()
    starts, ends, _ = _ends(b)
    for s in range(2):
        assert st["end_ts"].iloc[s] >= c_end[s]
        assert st["end_ts"].iloc[s] == ends[5 * s + 4]      # the optimizer's add_, after the all-reduce
        assert starts[5 * s + 4] >= c_end[s]
    assert st["start_ts"].iloc[1] == st["end_ts"].iloc[0]
    assert (st["duration_ns"] > c.duration_ns.to_numpy()).all()
    assert st["optimizer_steps"].tolist() == [1, 1]
    s = tr.summary_dict()
    assert "optimizer_step_time_mean_ns" not in s  # one optimizer step per step: the step time says it all


def test_gradient_accumulation_reports_time_per_optimizer_step():
    rows = []
    for s in range(4):  # four micro-steps, the optimizer in the last
        t0 = s * 1000
        rows += [op(f"ProfilerStep#{s}", t0, 1000, category="user_annotation"), op("aten::mm", t0 + 10, 50, *MM)]
    rows += [op("Optimizer.step#AdamW.step", 3500, 200, category="user_annotation")]
    tr = analysis.Trace.from_builder(simulate(rows, "trn2"))
    st = tr.steps()
    assert st["optimizer_steps"].tolist() == [0, 0, 0, 1]
    s = tr.summary_dict()
    assert s["optimizer_step_time_mean_ns"] == pytest.approx(st["duration_ns"].sum())
    assert s["optimizer_step_time_mean_ns"] == pytest.approx(4 * s["step_time_mean_ns"])


def test_topology_from_the_instance_type():
    t1 = Topology.for_target("trn1", 2)
    t1n = Topology.for_target("trn1", 2, "trn1n.32xlarge")
    assert (t1.instance, t1.chips_per_instance, t1.efa_bytes_per_s) == ("trn1.32xlarge", 16, 800e9 / 8)
    assert (t1n.instance, t1n.efa_bytes_per_s) == ("trn1n.32xlarge", 1600e9 / 8)
    assert Topology.for_target("trn2", 8).efa_bytes_per_s == 3200e9 / 8
    members = list(range(64))  # two trn1 instances (32 ranks each)
    assert t1n.duration("all_reduce", 1 << 30, members)[0] < t1.duration("all_reduce", 1 << 30, members)[0]
    with pytest.raises(ValueError, match="known: trn1.2xlarge, trn1.32xlarge, trn1n.32xlarge"):
        Topology.for_target("trn1", 2, "trn9.huge")
    assert np.isclose(t1.place(33)[0], 1)


def test_zero1_reduce_scatter_then_all_gather():
    """ZeRO-1: gradients reduce-scattered asynchronously, consumed by the optimizer step (its shard update runs
    after), parameters all-gathered (blocking) before the next forward's matmul; the step ends after it all."""
    n, numel = 8, 16 << 20
    rows = [op("ProfilerStep#0", 0, 3000, category="user_annotation"), op("aten::mm", 10, 50, *MM),
            comm("reduce_scatter_tensor", 100, 50, numel, n, "BFloat16", out_nelems=numel // n, seq=0,
                 async_op=True),
            op("Optimizer.step#AdamW.step", 200, 300, category="user_annotation"),
            op("aten::add_", 250, 50, [[numel // n], [numel // n], []], [BF, BF, "Scalar"]),
            comm("_allgather_base", 600, 50, numel // n, n, "BFloat16", out_nelems=numel, seq=1, async_op=False),
            op("aten::mm", 800, 50, *MM)]
    b = simulate(rows, "trn2", world_size=n, num_cores=1)
    starts, ends, c = _ends(b)
    c = c.set_index("sequence_number")
    rs_end, ag_end = (int(c.loc[s, "start_ts"] + c.loc[s, "duration_ns"]) for s in (0, 1))
    assert list(c["operation"]) == ["reduce_scatter", "all_gather"]
    assert starts[4] >= rs_end                       # the shard update waits for its reduced gradients
    assert c.loc[1, "start_ts"] >= ends[4]           # the all-gather sends the updated shard
    assert starts[6] >= ag_end                       # the next matmul needs the gathered parameters
    st = analysis.Trace.from_builder(b).steps()
    assert st["end_ts"].iloc[0] == ends[6]


def test_runtime_instance_type_sets_the_efa_of_cross_instance_collectives():
    from neuron_profiler.runtime.simulated import SimulatedRuntime
    rows = [comm("allreduce", 0, 10, 64 << 20, 64, "BFloat16")]  # 64 ranks: two trn1 instances of 32 cores
    slow = simulate(rows, "trn1", world_size=64).table("collectives")
    fast = simulate(rows, "trn1", world_size=64, instance="trn1n.32xlarge").table("collectives")
    assert "EFA" in slow.algorithm.iloc[0] and fast.duration_ns.iloc[0] < slow.duration_ns.iloc[0]
    assert SimulatedRuntime("trn1", instance="trn1n.32xlarge").config()["instance"] == "trn1n.32xlarge"
    with pytest.raises(ValueError, match="unknown instance type 'p5.48xlarge' for trn1"):
        SimulatedRuntime("trn1", instance="p5.48xlarge")


def test_a_blocking_collective_orders_the_next_collective_of_another_group():
    """tp all-reduce (blocking) then a dp all-reduce of its result: the second starts after the first ends,
    although it runs on another CC core."""
    rows = [comm("allreduce", 0, 10, 8 << 20, 8, "BFloat16", pg="tp", async_op=False),
            comm("allreduce", 20, 10, 8 << 20, 8, "BFloat16", pg="dp", seq=1, async_op=True)]
    c = simulate(rows, "trn2", world_size=8, num_cores=1).table("collectives").set_index("process_group")
    assert c.loc["dp", "start_ts"] >= c.loc["tp", "start_ts"] + c.loc["tp", "duration_ns"]
    rows[0] = comm("allreduce", 0, 10, 8 << 20, 8, "BFloat16", pg="tp", async_op=True)
    c = simulate(rows, "trn2", world_size=8, num_cores=1).table("collectives").set_index("process_group")
    assert c.loc["dp", "start_ts"] < c.loc["tp", "start_ts"] + c.loc["tp", "duration_ns"]  # async: side by side
