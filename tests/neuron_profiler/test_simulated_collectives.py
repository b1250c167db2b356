"""Simulated runtime, collectives: detection from record_param_comms args, ring model, NCCL busbw."""
import numpy as np
import pytest

from neuron_profiler.hardware import model_param
from neuron_profiler.runtime.simulated import SimulatedRuntime
from neuron_profiler.runtime.simulated.collectives import Topology, normalize_collective
from neuron_profiler.runtime.simulated.synthetic import comm, op, simulate


def _simulate(rows, target="trn2", world_size=8, num_cores=1):
    """One rank per chip by default (num_cores=1), so a group of n ranks spans n chips over NeuronLink."""
    return simulate(rows, target, world_size=world_size, num_cores=num_cores)


def _topo(num_cores=1):
    return Topology.for_target("trn2", num_cores)


LAT = model_param("cc_step_latency_ns")


@pytest.mark.parametrize("raw,canon", [
    ("allreduce", "all_reduce"), ("all_reduce", "all_reduce"), ("_allgather_base", "all_gather"),
    ("all_gather_into_tensor", "all_gather"), ("allgather", "all_gather"), ("reduce_scatter_tensor", "reduce_scatter"),
    ("_reduce_scatter_base", "reduce_scatter"), ("broadcast", "broadcast"), ("all_to_all", "all_to_all"),
    ("alltoall_base", "all_to_all"), ("send", "send"), ("recv", "recv"), ("barrier", "barrier"),
    ("nccl:all_reduce", "all_reduce"),
])
def test_normalize_collective(raw, canon):
    assert normalize_collective(raw) == canon


@pytest.mark.parametrize("n", [2, 8, 16])
def test_all_reduce_ring_over_neuronlink(n):
    nelems = 16 << 20
    b = _simulate([comm("allreduce", 1000, 500, nelems, n, "Float", seq=7, pg="3")])
    c = b.table("collectives").iloc[0]
    nbytes = nelems * 4
    topo = _topo()
    # a group over all 16 chips of the torus drives both Hamiltonian cycles (every link); fewer chips, one cycle
    frac = topo.full_torus_fraction if n == topo.chips_per_instance else topo.ring_fraction
    link = topo.neuronlink_bytes_per_s * frac
    t = 2 * (n - 1) / n * nbytes / link * 1e9 + 2 * (n - 1) * LAT
    assert c.duration_ns == pytest.approx(t, abs=1)
    assert (c.operation, c.algorithm, c.process_group, c.group_size, c.sequence_number) == (
        "all_reduce", "ring (NeuronLink)", "3", n, 7)
    assert c.input_size == nbytes and c.output_size == nbytes and c.num_elements == nelems and c["dtype"] == "float32"
    assert c.replica_group == ",".join(map(str, range(n)))
    algbw = nbytes / (c.duration_ns * 1e-9)
    assert c.algorithm_bandwidth == pytest.approx(algbw)
    assert c.bus_bandwidth == pytest.approx(algbw * 2 * (n - 1) / n)
    assert c.bus_bandwidth < link  # busbw approaches, never exceeds, the ring's link bandwidth


def test_small_messages_take_the_mesh_and_large_ones_the_ring():
    topo = _topo()
    members = list(range(16))
    small, algo_s = topo.duration("all_reduce", 4096, members)
    big, algo_b = topo.duration("all_reduce", 1 << 30, members)
    assert algo_s.startswith("mesh") and algo_b.startswith("ring")
    assert small < 2 * 15 * LAT  # fewer latency steps than a ring


def test_levels_one_chip_neuronlink_and_efa():
    # trn2: 8 cores per chip, 16 chips per trn2.48xlarge
    topo = _topo(8)
    one_chip, a1 = topo.duration("all_reduce", 64 << 20, list(range(8)))
    two_chips, a2 = topo.duration("all_reduce", 64 << 20, list(range(16)))
    two_inst, a3 = topo.duration("all_reduce", 64 << 20, list(range(256)))
    assert "one chip" in a1 and "NeuronLink" in a2 and "EFA" in a3
    assert two_inst > two_chips  # crossing instances is slower than staying on NeuronLink
    assert topo.place(130) == (1, 0, 2)  # rank 130: instance 1, chip 0 of it, core 2


def test_all_gather_reduce_scatter_broadcast():
    n, per_rank = 4, 1 << 20
    rows = [comm("_allgather_base", 0, 10, per_rank, n, "c10::BFloat16", out_nelems=per_rank * n, seq=1),
            comm("reduce_scatter_tensor", 10**7, 10, per_rank * n, n, "BFloat16", out_nelems=per_rank, seq=2),
            comm("broadcast", 2 * 10**7, 10, per_rank, n, "Float", seq=3)]
    c = _simulate(rows).table("collectives").set_index("sequence_number")
    topo = _topo()
    link = topo.neuronlink_bytes_per_s * topo.ring_fraction
    big = per_rank * n * 2
    ring = (n - 1) / n * big / link * 1e9 + (n - 1) * LAT
    assert c.loc[1, "operation"] == "all_gather"
    assert c.loc[1, "output_size"] == big and c.loc[1, "input_size"] == big // n
    assert c.loc[1, "duration_ns"] == pytest.approx(ring, abs=1)
    assert c.loc[2, "operation"] == "reduce_scatter" and c.loc[2, "duration_ns"] == pytest.approx(ring, abs=1)
    for s in (1, 2):
        assert c.loc[s, "bus_bandwidth"] == pytest.approx(c.loc[s, "algorithm_bandwidth"] * (n - 1) / n)
    bc = per_rank * 4 / link * 1e9 + LAT
    assert c.loc[3, "duration_ns"] == pytest.approx(bc, abs=1)
    assert c.loc[3, "bus_bandwidth"] == pytest.approx(c.loc[3, "algorithm_bandwidth"])


def test_group_size_one_and_wait_ignored():
    rows = [comm("allreduce", 0, 10, 1024, 1), op("record_param_comms", 100, 10, [], [],
                                                   args={"Collective name": "wait", "Group size": 1})]
    c = _simulate(rows, world_size=1).table("collectives")
    assert len(c) == 1
    assert 0 < c.duration_ns.iloc[0] < 1000 and c.bus_bandwidth.iloc[0] == 0.0


def test_collective_track_flows_and_order():
    rows = [op("aten::mm", 0, 100, [[1024, 1024], [1024, 1024]], ["float", "float"]),
            comm("allreduce", 200, 100, 1 << 20, 8, seq=0), comm("allreduce", 400, 100, 1 << 20, 8, seq=1)]
    b = _simulate(rows)
    c, tracks, ins = b.table("collectives"), b.table("tracks"), b.table("instructions")
    assert set(tracks.loc[c.track, "name"]) == {"CC-core 0"} and set(tracks.loc[c.track, "kind"]) == {"cc_core"}
    assert list(c.framework_op) == [1, 2]
    # waits for the preceding matmul's compute, and the two run back to back on the CC core
    d = b.table("dma")
    mm_end = max((ins.start_ts + ins.duration_ns)[ins.framework_op == 0].max(),
                 (d.start_ts + d.duration_ns)[d.framework_op == 0].max())
    assert c.start_ts.iloc[0] >= mm_end
    assert c.start_ts.iloc[1] >= c.start_ts.iloc[0] + c.duration_ns.iloc[0]
    f = b.table("flows")
    cf = f[f.dst_table == "collectives"]
    assert sorted(zip(cf.src_row, cf.dst_row)) == [(1, 0), (2, 1)] and set(cf.kind) == {"launch"}


def test_real_nccl_trace_collectives(realtraces_dir):
    from neuron_profiler.importers.kineto import load_kineto_builder
    src = load_kineto_builder(realtraces_dir / "HolisticTraceAnalysis/nccl_parser_config/nccl_data.json.gz")
    ho = src.table("host_ops")
    SimulatedRuntime("trn2").emit(src, ho)
    c, tracks = src.table("collectives"), src.table("tracks")
    sim = c[np.asarray(tracks.loc[c.track, "kind"], dtype=object) == "cc_core"]
    ops = sim.operation.value_counts().to_dict()
    assert ops == {"all_reduce": 15, "broadcast": 6}  # SOURCES.md: allreduce:15, broadcast:6 (+6 "wait")
    assert (sim.group_size == 2).all() and (sim.duration_ns > 0).all()
    assert np.allclose(sim.bus_bandwidth[sim.operation == "all_reduce"],
                       sim.algorithm_bandwidth[sim.operation == "all_reduce"] * 1.0)  # 2(n-1)/n = 1 for n=2


# --- KangaRing and the full torus (aws-neuron-sdk neuron-runtime/explore/intranode-collective-comm.rst) ---
TRN1_NL = 384e9                         # NeuronLink-v2 per chip (hardware table)
TRN1_CHIP_HBM = 2 * 440234147840        # 820 GiB/s per chip
KR_AG = model_param("cc_kangaring_hbm_touches_all_gather")
KR_RS = model_param("cc_kangaring_hbm_touches_reduce_scatter")


def test_tp32_on_trn1_is_a_kangaring_over_the_whole_torus():
    """TP=32 on one trn1.32xlarge: both cores of all 16 chips. KangaRing: 15 hops per phase, the chip's data
    over all 4 links once (30/32 B at 384 GB/s), bounded by 3 (all-gather) / 4 (reduce-scatter) HBM accesses
    per byte of the chip (820 GiB/s): for 128 MiB the HBM is the bound."""
    topo = Topology.for_target("trn1", 2)
    b = 128 << 20
    members = list(range(32))
    ag = topo.cost("all_gather", b, members)
    assert ag.algorithm.startswith("KangaRing")
    assert ag.latency_ns == pytest.approx(15 * LAT)
    wire, hbm = 30 / 32 * b / TRN1_NL * 1e9, KR_AG * b / TRN1_CHIP_HBM * 1e9
    assert hbm > wire and ag.transfer_ns == pytest.approx(hbm, rel=1e-9)
    rs = topo.cost("reduce_scatter", b, members)
    assert rs.transfer_ns == pytest.approx(KR_RS * b / TRN1_CHIP_HBM * 1e9, rel=1e-9)
    ar = topo.cost("all_reduce", b, members)
    assert ar.latency_ns == pytest.approx(2 * 15 * LAT)
    assert ar.transfer_ns == pytest.approx((KR_AG + KR_RS) * b / TRN1_CHIP_HBM * 1e9, rel=1e-9)
    # the flat ring it replaces: 31 hops, 96 GB/s per core (half the links, the chip's two cores sharing them)
    flat = 31 / 32 * b / (TRN1_NL / 2 * topo.ring_fraction) * 1e9 + 31 * LAT
    assert ag.ns < flat / 2


def test_kangaring_on_part_of_the_torus_uses_one_cycle_and_is_wire_bound_when_small_groups():
    """TP=8 (4 chips of trn1, both cores each): one Hamiltonian cycle's links (cc_ring_link_fraction), 3 hops."""
    topo = Topology.for_target("trn1", 2)
    b = 32 << 20
    c = topo.cost("all_gather", b, list(range(8)))
    assert c.algorithm.startswith("KangaRing") and c.latency_ns == pytest.approx(3 * LAT)
    wire = 6 / 8 * b / (TRN1_NL * topo.ring_fraction) * 1e9
    assert c.transfer_ns == pytest.approx(max(wire, KR_AG * b / TRN1_CHIP_HBM * 1e9), rel=1e-9)


def test_groups_with_one_core_per_chip_keep_the_ring():
    """One rank per chip (every other core): no chip holds two members, so no KangaRing; 16 chips: full torus."""
    topo = Topology.for_target("trn1", 2)
    b = 64 << 20
    c = topo.cost("all_gather", b, list(range(0, 32, 2)))
    assert c.algorithm == "ring (NeuronLink)"
    assert c.transfer_ns == pytest.approx(15 / 16 * b / (TRN1_NL * topo.full_torus_fraction) * 1e9, rel=1e-9)
