"""Simulated runtime, emit: tracks, header, engines, counters, flows, event limits, cores, real traces."""
import numpy as np
import pytest

from neuron_profiler.runtime.base import DeviceRuntime
from neuron_profiler.runtime.simulated import SimulatedRuntime
from neuron_profiler.runtime.simulated.counters import MAX_SAMPLES
from neuron_profiler.runtime.simulated.synthetic import random_op_stream, simulate
from neuron_profiler.trace import read_trace

ENGINES = {"Tensor", "TensorMatrix", "Vector", "Scalar", "GpSimd", "Sync"}




def test_interface_and_bad_arguments():
    rt = SimulatedRuntime()
    assert isinstance(rt, DeviceRuntime) and rt.simulated and rt.target == "trn2"
    with pytest.raises(ValueError, match="trn1"):
        SimulatedRuntime("trn9")
    with pytest.raises(ValueError):
        SimulatedRuntime(max_events_per_nc=-1)
    with pytest.raises(ValueError):
        SimulatedRuntime(num_cores=0)


def test_mixed_stream_uses_every_engine_and_track_tree(tmp_path):
    b = simulate(random_op_stream(64))
    ins, tracks = b.table("instructions"), b.table("tracks")
    assert set(ins.engine) == ENGINES
    assert set(ins[ins.engine == "Scalar"].opcode) <= {"ACTIVATE", "SemaphoreWait"}
    assert set(ins[ins.engine == "TensorMatrix"].opcode) <= {"MATMUL", "TRANSPOSE", "SemaphoreWait"}
    assert set(ins[ins.engine == "Tensor"].opcode) <= {"LoadStationary", "SemaphoreWait"}
    assert set(ins[ins.engine == "Sync"].opcode) <= {"DmaTrigger", "SemaphoreWait"}
    # every instruction sits on the engine track of its name, under nc0 under "Trainium2 0" under the instance
    kind = dict(zip(tracks.index, tracks.kind.astype(str)))
    name = dict(zip(tracks.index, tracks.name.astype(str)))
    parent = dict(zip(tracks.index, tracks.parent))
    assert all(name[t] == e and kind[t] == "engine" for t, e in zip(ins.track, ins.engine.astype(str)))
    core = parent[ins.track.iloc[0]]
    assert (kind[core], name[core]) == ("core", "nc0")
    dev = parent[core]
    assert (kind[dev], name[dev]) == ("device", "Trainium2 0") and kind[parent[dev]] == "instance"
    d = b.table("dma")
    assert {name[t] for t in d.track} >= {"qSyncIO0", "qSyncIO1", "qScalarDynamicHW", "qGpSimdDynamic"}
    assert {kind[t] for t in d.track} == {"dma_queue"}
    # instruction rows carry the framework op, its name and dtype
    host = b.table("host_ops")
    assert (ins.name.astype(str).to_numpy() == host.name.astype(str).to_numpy()[ins.framework_op]).all()
    assert set(ins.dtype.astype(str)) >= {"bfloat16", "float32"}
    mm = ins[ins.opcode == "MATMUL"]
    assert (mm.raw_flops > 0).all() and (mm.psum_write_bytes > 0).all() and (mm.sbuf_read_bytes > 0).all()
    trig = ins[ins.opcode == "DmaTrigger"]
    # each DMA trigger carries its transfer's HBM traffic: together, every byte the DMA moved
    d = b.table("dma")
    assert trig.hbm_read_bytes.sum() == pytest.approx(d[d.source == "HBM"].transfer_bytes.sum(), rel=1e-6)
    assert trig.hbm_write_bytes.sum() == pytest.approx(d[d.dest == "HBM"].transfer_bytes.sum(), rel=1e-6)
    # round trip through the file format
    p = b.write(tmp_path / "rank00000_window000.nprof")
    tf = read_trace(p)
    assert tf.row_counts["instructions"] == len(ins) and tf.header.simulated


def test_header_devices_clock_and_footer():
    b = simulate(random_op_stream(8))
    h = b.header
    assert h.simulated and len(h.devices) == 1
    dev = h.devices[0]
    assert (dev.kind, dev.name, dev.simulated, dev.spec.num_cores) == ("trn2", "Trainium2", True, 8)
    assert [c.name for c in h.clock_domains] == ["nc0_device_clock"] and "projected" in h.clock_domains[0].description
    sp = h.sync_points[0]
    assert sp.domain == "nc0_device_clock" and sp.host_ts == sp.device_ts
    assert "trn2" in b.footer_metadata["neuron_simulator"]
    sim = h.simulation
    assert sim.model.startswith("neuron_profiler.simulated") and sim.target == "trn2"
    assert sim.host_timeline == "projected" and sim.documentation == "docs/simulation.md"
    # every model constant is listed with its source
    assert {"model.dma_fixed_latency_ns", "host.kernel_launch_ns", "topology"} <= set(sim.assumptions)
    assert all("(" in v for k, v in sim.assumptions.items() if k.startswith(("model.", "host.")))


def test_flows_launch_each_kernel_and_every_event_names_its_host_op():
    b = simulate(random_op_stream(32))
    f = b.table("flows")
    ins, d, host = b.table("instructions"), b.table("dma"), b.table("host_ops")
    launch = f[f.kind == "launch"]
    assert set(launch.src_table) == {"host_ops"} and set(launch.dst_table) == {"instructions"}
    # one launch link per kernel, to its first instruction
    first = ins.reset_index().sort_values(["framework_op", "start_ts"]).groupby("framework_op").row.first()
    assert sorted(zip(launch.src_row, launch.dst_row)) == sorted(zip(first.index, first.to_numpy()))
    for t in (ins, d):
        assert (t.framework_op >= 0).all() and t.framework_op.isin(host.index).all()
    assert set(f.kind) == {"launch", "dependency"}


def test_counters_units_bounds_and_values():
    b = simulate(random_op_stream(3000, gap_ns=0))
    tracks, c = b.table("tracks"), b.table("counters")
    ct = tracks[tracks.kind == "counter"]
    assert dict(zip(ct.name.astype(str), ct.unit.astype(str))) == {
        "DMA Throughput": "bytes/s", "Pending DMA Count": "count", "State Buffer Usage": "percent",
        "PSUM Usage": "percent", "Estimated Instant MFU": "percent", "Throttling": "percent",
        "HBM Usage": "bytes", "HBM Usage: activations": "bytes"}  # no backward pass: activations only
    by = {str(tracks.name[t]): g for t, g in c.groupby("track")}
    assert len(by["DMA Throughput"]) <= MAX_SAMPLES
    # total bytes recovered from the throughput samples (bin rate x bin width)
    g = by["DMA Throughput"].sort_values("ts")
    moved = (g.value.to_numpy()[:-1] * np.diff(g.ts.to_numpy()) * 1e-9).sum()
    assert moved == pytest.approx(b.table("dma").transfer_bytes.sum(), rel=1e-6)
    mfu = by["Estimated Instant MFU"].value
    assert 0 < mfu.max() <= 100.0 + 1e-6
    for name in ("State Buffer Usage", "PSUM Usage", "Throttling"):
        assert by[name].value.between(0, 100).all(), name
    pend = by["Pending DMA Count"].value
    assert pend.max() >= 1 and (pend == pend.round()).all()


def test_max_events_per_nc_keeps_first_events():
    full = simulate(random_op_stream(50))
    n_full = full.rows("instructions") + full.rows("dma")
    b = simulate(random_op_stream(50), max_events_per_nc=100)
    kept = b.rows("instructions") + b.rows("dma")
    assert kept == 100 and b.dropped_events == {"nc0": n_full - 100}
    last_kept = max(b.table("instructions").start_ts.max(), b.table("dma").start_ts.max())
    all_starts = np.sort(np.concatenate([full.table("instructions").start_ts, full.table("dma").start_ts]))
    assert last_kept <= all_starts[100]
    assert simulate(random_op_stream(5), max_events_per_nc=10**6).dropped_events == {}


def test_capture_enabled_for_nc():
    b = simulate(random_op_stream(16), rank=1, capture_enabled_for_nc={1, 3})
    tracks = b.table("tracks")
    assert list(tracks[tracks.kind == "core"].name.astype(str)) == ["nc1"] and b.rows("instructions") > 0
    b = simulate(random_op_stream(16), rank=0, capture_enabled_for_nc={1, 3})
    assert b.rows("instructions") == 0 and b.rows("dma") == 0 and b.rows("counters") == 0
    assert (b.table("tracks").kind != "core").all()
    assert len(b.header.devices) == 1  # the device is still described


def test_rank_places_core_and_chip():
    b = simulate(random_op_stream(4), target="trn1", rank=3)  # trn1: 2 cores per chip -> chip 1, nc1
    tracks = b.table("tracks")
    assert list(tracks[tracks.kind == "core"].name.astype(str)) == ["nc1"]
    assert list(tracks[tracks.kind == "device"].name.astype(str)) == ["Trainium 1"]
    assert b.header.devices[0].index == 1 and (tracks[tracks.kind == "engine"]["rank"] == 3).all()
    b = simulate(random_op_stream(4), target="trn2", rank=5, num_cores=4)  # LNC=2: 4 cores per chip
    tracks = b.table("tracks")
    assert list(tracks[tracks.kind == "core"].name.astype(str)) == ["nc1"]
    assert b.header.devices[0].index == 1 and b.header.devices[0].properties["simulated_num_cores"] == "4"


@pytest.mark.parametrize("target", ["trn1", "inf2", "trn3"])
def test_other_targets(target):
    b = simulate(random_op_stream(16), target=target)
    assert b.header.devices[0].kind == target and b.rows("instructions") > 0


def test_resimulate_real_gpu_trace(realtraces_dir):
    from neuron_profiler.importers.kineto import load_kineto_builder
    src = load_kineto_builder(realtraces_dir / "TraceLens/h100/gaunernst_bert-small-uncased__1016001.json.gz")
    n_dev = len(src.header.devices)
    host = src.table("host_ops")
    SimulatedRuntime("trn2").emit(src, host)
    tracks = src.table("tracks")
    neuron_engines = tracks.index[(tracks.kind == "engine")]
    ins = src.table("instructions")
    sim = ins[ins.track.isin(neuron_engines)]
    assert len(sim) > 100 and {"Tensor", "TensorMatrix", "Vector", "Scalar", "Sync"} <= set(sim.engine.astype(str))
    projected = src.table("host_ops")
    assert (sim.start_ts.to_numpy() >= projected.start_ts.to_numpy()[sim.framework_op.to_numpy()]).all()
    lowered = set(host.name.astype(str).to_numpy()[sim.framework_op.unique()])
    assert "aten::addmm" in lowered and "aten::linear" not in lowered  # leaves only
    assert len(src.header.devices) == n_dev + 1 and src.header.devices[-1].kind == "trn2"
