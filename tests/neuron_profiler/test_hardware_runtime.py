"""HardwareRuntime: clear failure without a Neuron device; Neuron Explorer Parquet -> trace conversion on fixtures
built with pyarrow from the documented schema 7.4.0 field names."""
from __future__ import annotations

import json
from types import SimpleNamespace

import pytest

pa = pytest.importorskip("pyarrow")
pq = pytest.importorskip("pyarrow.parquet")

from neuron_profiler.runtime.base import RuntimeUnavailableError  # noqa: E402
from neuron_profiler.runtime.hardware import HardwareRuntime, convert_explorer_parquet, inspect_env  # noqa: E402
from neuron_profiler.trace import TraceFormatError, read_trace  # noqa: E402

T0 = 1_796_000_000_123_456_789  # exact int64 ns; loses its last digits through float64


def _write(path, rows):
    pq.write_table(pa.Table.from_pylist(rows), path)


@pytest.fixture()
def explorer_dir(tmp_path):
    d = tmp_path / "profiles" / "global" / "train@latest"
    d.mkdir(parents=True)
    _write(d / "Metadata.parquet", [{"profile_schema_version": "7.4.0", "ntff_version": 3, "num_physical_cores": 2,
                                     "instance_type": "trn2.48xlarge", "neuroncore_idx": 4, "neuron_device_idx": 1,
                                     "tensor_engine_num_rows": 128, "tensor_engine_num_cols": 128,
                                     "tensor_engine_clock_freq": 2.8e9, "vector_engine_clock_freq": 1.4e9,
                                     "vector_engine_num_channels": 128, "num_dma_engines_per_neuroncore": 16,
                                     "is_simulation": False}])
    instr = [{"start_ts": T0 + 10 * i, "end_ts": T0 + 10 * i + 7, "duration_ns": 7,
              "engine": ["Tensor", "Vector", "Scalar"][i % 3], "pcore_idx": i % 2,
              "opcode": ["MATMUL", "TensorTensor", "ACTIVATE"][i % 3], "operands": f"op{i}", "hlo_name": f"dot.{i}",
              "raw_flops": 1000 * (i % 3 == 0), "hbm_read_bytes": 64, "hbm_write_bytes": 32, "sbuf_read_bytes": 16,
              "sbuf_write_bytes": 8, "psum_read_bytes": 4, "psum_write_bytes": 2, "tensor_instruction_type": ""}
             for i in range(6)]
    _write(d / "Instruction_0.parquet", instr[:4])  # Explorer splits big tables into X_0, X_1, ...
    _write(d / "Instruction_1.parquet", instr[4:])
    _write(d / "DmaPacketAggregated.parquet", [
        {"start_ts": T0 + 5, "end_ts": T0 + 25, "duration_ns": 20, "id": 1, "pcore_idx": 0, "queue_name": "qSyncIO0",
         "queue_type": "input", "variable": "x", "transfer_bytes": 4096, "source": "HBM", "dest": "SBUF"},
        {"start_ts": T0 + 30, "end_ts": T0 + 40, "duration_ns": 10, "id": 2, "pcore_idx": 1, "queue_name": "qSyncIO1",
         "queue_type": "output", "variable": "y", "transfer_bytes": 2048, "source": "SBUF", "dest": "HBM"}])
    _write(d / "CcOp.parquet", [
        {"start_ts": T0 + 100, "end_ts": T0 + 300, "duration_ns": 200, "operation": "all_reduce", "algorithm": "ring",
         "num_elements": 1024, "dtype": "bfloat16", "stream_id": 0, "input_size": 2048, "output_size": 2048,
         "algorithm_bandwidth": 1.0e10, "bus_bandwidth": 1.5e10, "replica_group_id": 3, "replica_group": "0,1,2,3"}])
    return tmp_path / "profiles"


def test_hardware_runtime_unavailable_here(tmp_path):
    assert HardwareRuntime.available() is False
    with pytest.raises(RuntimeUnavailableError, match="torch_neuronx.*|Neuron device"):
        HardwareRuntime.check_available()
    pytest.importorskip("torch")
    from neuron_profiler.config import NeuronConfig
    with pytest.raises(RuntimeUnavailableError, match="runtime='simulated'"):
        NeuronConfig(runtime="hardware", profile_output_dir=tmp_path)


def test_inspect_env_mirrors_config():
    from neuron_profiler.config import ProfileMode
    cfg = SimpleNamespace(max_events_per_nc=500, capture_enabled_for_nc=(0, 2, 3),
                          has=lambda m: m in (ProfileMode.DEVICE, ProfileMode.CPU_UTIL))
    env = inspect_env(cfg, "/tmp/x")
    assert env["NEURON_RT_INSPECT_ENABLE"] == "1" and env["NEURON_RT_INSPECT_OUTPUT_DIR"] == "/tmp/x"
    assert env["NEURON_RT_INSPECT_DEVICE_PROFILE"] == "session" and env["NEURON_RT_INSPECT_SYSTEM_PROFILE"] == "0"
    assert env["NEURON_RT_INSPECT_CPU_UTIL"] == "1" and env["NEURON_RT_INSPECT_HOST_MEMORY"] == "0"
    assert env["NEURON_RT_INSPECT_SYS_TRACE_MAX_EVENTS_PER_NC"] == "500"
    assert env["NEURON_RT_INSPECT_EVENT_FILTER_NC"] == "0,2,3"


def test_convert_explorer_parquet(explorer_dir, tmp_path):
    b = convert_explorer_parquet(explorer_dir)
    path = b.write(tmp_path / "hw.nprof")
    tf = read_trace(path)
    h = tf.header
    assert h.source_format == "neuron-explorer-parquet" and h.simulated is False
    assert h.metadata["profile_schema_version"] == "7.4.0"
    dev = h.devices[0]
    assert dev.kind == "trn2" and dev.index == 1 and dev.spec.num_cores == 2 and dev.spec.tensor_engine_num_rows == 128
    assert {e.name: e.clock_hz for e in dev.spec.engines}["Tensor"] == 2.8e9
    ins = tf.table("instructions")
    assert len(ins) == 6
    assert ins["start_ts"].tolist() == [T0 + 10 * i for i in range(6)]  # exact int64 ns
    assert (ins["duration_ns"] == 7).all()
    assert ins["engine"].astype(str).tolist() == ["Tensor", "Vector", "Scalar"] * 2
    assert ins["raw_flops"].tolist() == [1000, 0, 0, 1000, 0, 0] and (ins["hbm_read_bytes"] == 64).all()
    assert ins["name"].astype(str).tolist()[0] == "dot.0" and json.loads(ins["args"].astype(str)[0]) == {"operands": "op0"}
    tracks = tf.table("tracks")
    eng = tracks.loc[ins["track"]]
    assert (eng["kind"] == "engine").all() and set(eng["nc_idx"]) == {4, 5}  # neuroncore_idx + pcore_idx
    assert (eng["name"].astype(str).to_numpy() == ins["engine"].astype(str).to_numpy()).all()
    dma = tf.table("dma")
    assert dma["transfer_bytes"].tolist() == [4096, 2048] and dma["source"].astype(str).tolist() == ["HBM", "SBUF"]
    assert tracks.loc[dma["track"], "name"].astype(str).tolist() == ["qSyncIO0", "qSyncIO1"]
    cc = tf.table("collectives")
    assert len(cc) == 1
    r = cc.iloc[0]
    assert r["operation"] == "all_reduce" and r["algorithm"] == "ring" and r["replica_group"] == "0,1,2,3"
    assert r["duration_ns"] == 200 and r["input_size"] == 2048 and r["bus_bandwidth"] == 1.5e10
    assert tracks.loc[r["track"], "kind"] == "cc_core"


def test_dma_packet_fallback_and_missing_profile(explorer_dir, tmp_path):
    d = next(explorer_dir.rglob("DmaPacketAggregated.parquet"))
    d.unlink()
    _write(d.parent / "DmaPacket.parquet", [{"start_ts": T0, "end_ts": T0 + 50, "pcore_idx": 0, "queue_name": "qPoolIO",
                                              "transfer_bytes": 512, "queue_type": "data"}])
    dma = read_trace(convert_explorer_parquet(explorer_dir).write(tmp_path / "p.nprof")).table("dma")
    assert dma["transfer_bytes"].tolist() == [512] and dma["duration_ns"].tolist() == [50]
    empty = tmp_path / "empty"
    empty.mkdir()
    with pytest.raises(TraceFormatError, match="Instruction.parquet"):
        convert_explorer_parquet(empty)
