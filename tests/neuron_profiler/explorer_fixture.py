"""A Neuron Explorer profile written from the published schema 7.4.0 (aws-neuron-sdk
``profile-schema-reference.rst``; ``shared/reference/neuron-explorer-data-model.md`` section 6.3): table and
field names exactly as documented, values made up but consistent (no real Explorer output was available).

One trn2 NeuronCore (LNC2: physical cores 0 and 1 of NeuronCore 4 on device 1): 2 framework layers
(linear, relu) -> 2 HLO ops -> 12 instructions (MATMULs on TensorMatrix, Vector and Scalar ops), 3 DMA
transfers (aggregated, with their packets), an all_reduce triggered by the last Sync instruction, semaphore
updates, engine active times, flow edges, system events (framework -> neuron_rt -> neuron_hw) and the
Summary table Explorer computes.
"""
from __future__ import annotations

import json
from pathlib import Path
from typing import Any

T0 = 1_796_000_000_123_456_789  # exact int64 ns; loses its last digits through float64
#: bf16 MATMULs: 2 * 128 * 128 * 512 FLOP each
MATMUL_FLOPS = 2 * 128 * 128 * 512

METADATA = {"profile_schema_version": "7.4.0", "ntff_version": 3, "num_physical_cores": 2, "vnc_enabled": True,
            "first_hw_timestamp": T0, "last_hw_timestamp": T0 + 2000, "first_ts": T0, "last_ts": T0 + 2000,
            "dma_ddr_bandwidth": 435e9, "num_dma_engines_per_neuroncore": 16, "hbm_ddr_bandwidth": 725e9,
            "tensor_engine_num_rows": 128, "tensor_engine_num_cols": 128, "tensor_engine_clock_freq": 2.4e9,
            "vector_engine_clock_freq": 0.96e9, "vector_engine_num_channels": 128,
            "scalar_engine_clock_freq": 0.96e9, "scalar_engine_num_channels": 128,
            "gpsimd_engine_clock_freq": 1.2e9, "gpsimd_engine_num_channels": 8, "neuroncore_clock_freq": 2.4e9,
            "ticks_per_nanosec": 1.4, "instance_type": "trn2.48xlarge", "runtime_version": "2.27.0",
            "collectives_version": "2.27.0", "driver_version": "2.21.0", "explorer_version": "2.31.0",
            "compiler_version": "2.20.0", "neuroncore_idx": 4, "neuron_device_idx": 1, "ultraserver_id": "",
            "ultraserver_type": "", "ultraserver_size": 0, "ultraserver_instance_index": 0, "s3_bucket_path": "",
            "profile_name": "train", "explorer_build_time": "2026-08-01", "is_simulation": False}

SUMMARY = {"total_time": 2000, "neuroncore_cycle_count": 4800, "model_flops": 4 * MATMUL_FLOPS,
           "hardware_flops": 4 * MATMUL_FLOPS, "transpose_flops": 0, "mfu_estimated_percent": 21.3,
           "hfu_estimated_percent": 21.3, "mbu_estimated_percent": 4.4, "mfu_max_achievable_estimated_percent": 60.0,
           "tensor_engine_active_time_percent": 36.0, "vector_engine_active_time_percent": 12.0,
           "scalar_engine_active_time_percent": 8.0, "gpsimd_engine_active_time_percent": 0.0,
           "sync_engine_active_time_percent": 2.0, "dma_active_time_percent": 30.0, "cc_op_count": 1,
           "hbm_read_bytes": 40960, "hbm_write_bytes": 8192, "mm_arithmetic_intensity": 1365.3}


def instructions() -> list[dict[str, Any]]:
    rows = []
    kinds = [("Tensor", "TensorMatrix", "MATMUL", MATMUL_FLOPS), ("Vector", "Vector", "TensorTensor", 0),
             ("Scalar", "Scalar", "ACTIVATE", 0)]
    for i in range(12):
        eng, track, op, flops = kinds[i % 3] if i < 11 else ("Sync", "Sync", "CcTrigger", 0)
        fw = 1 if i < 6 else 2
        rows.append({"start_ts": T0 + 100 * i, "end_ts": T0 + 100 * i + 60, "duration_ns": 60, "engine": eng,
                     "timeline_track": track, "pcore_idx": i % 2, "opcode": op, "operands": f"src{i} dst{i}",
                     "id": 1000 + i, "pc": 64 * i, "hlo_name": f"dot.{fw}" if eng == "Tensor" else f"op.{fw}",
                     "raw_hlo_id": 10 + fw, "raw_framework_id": fw, "raw_flops": flops,
                     "adjusted_flops": flops, "hbm_read_bytes": 4096 if eng == "Tensor" else 0,
                     "hbm_write_bytes": 0 if eng == "Tensor" else 1024, "sbuf_read_bytes": 512,
                     "sbuf_write_bytes": 256, "psum_read_bytes": 64, "psum_write_bytes": 64,
                     "tensor_instruction_type": "", "performance_mode": "", "dma_wait_time_ns": 3})
    return rows


def tables(complete: bool = True) -> dict[str, list[dict[str, Any]]]:
    """Every table of the fixture as rows (``complete=False``: Instruction and Metadata only)."""
    ins = instructions()
    out: dict[str, list[dict[str, Any]]] = {"Metadata": [METADATA], "Instruction": ins}
    if not complete:
        return out
    out["Summary"] = [SUMMARY]
    out["DmaPacketAggregated"] = [
        {"start_ts": T0 + 5 + 300 * k, "end_ts": T0 + 45 + 300 * k, "duration_ns": 40, "id": 500 + k,
         "pcore_idx": k % 2, "block_id": k, "queue_idx": k, "queue_name": f"qSyncIO{k}", "queue_type": "input",
         "op": "copy", "variable": f"x{k}", "read_bytes": 4096, "write_bytes": 4096, "transfer_bytes": 4096,
         "throughput": 1.0, "source": "HBM", "dest": "SBUF", "semaphore_id": 3} for k in range(3)]
    out["DmaPacket"] = [
        {"start_ts": T0 + 5 + 300 * k + 10 * j, "end_ts": T0 + 15 + 300 * k + 10 * j, "duration_ns": 10,
         "pcore_idx": k % 2, "id": 9000 + 4 * k + j, "packet_idx": j, "packet_aggregation_id": 500 + k,
         "engine_idx": 7 + k, "read_bytes": 1024, "write_bytes": 1024, "transfer_bytes": 1024, "throughput": 1.0,
         "queue_type": "input", "variable": f"x{k}", "queue_name": f"qSyncIO{k}", "queue_idx": k, "crc": 0}
        for k in range(3) for j in range(4)]
    out["CcOp"] = [{"start_ts": T0 + 1200, "end_ts": T0 + 1400, "duration_ns": 200, "operation": "AllReduce",
                    "algorithm": "ring", "num_elements": 1024, "dtype": "bfloat16", "op_id": 7, "stream_id": 0,
                    "stream_index": 0, "trigger_engine": "sync", "input_size": 2048, "output_size": 2048,
                    "algorithm_bandwidth": 10.24, "bus_bandwidth": 15.36, "trigger_start_ts": T0 + 1100,
                    "cc_trigger_start_delay": 100, "replica_group_id": 3, "replica_group": "[0,1,2,3]"}]
    out["SchemaFields"] = [{"table_name": "CcOp", "field_name": f, "field_unit": "GB/s", "field_type": "number",
                            "table_description": "", "field_description": "", "field_example": "",
                            "field_required": False, "field_format": "", "field_minimum": "", "field_maximum": "",
                            "field_enum_values": ""} for f in ("algorithm_bandwidth", "bus_bandwidth")]
    out["SemaphoreUpdate"] = [{"timestamp": T0 + 50 * k, "id": 3, "value": k, "update_source": "Sync",
                               "double_set_or_clear": False, "update_mode": "set", "update_operation_type": "inc",
                               "update_trigger_timing": "end", "pcore_idx": 0} for k in range(4)]
    out["ActiveTime"] = [{"start_ts": T0 + 300 * k, "end_ts": T0 + 300 * k + 60, "engine": "tensor",
                          "pcore_idx": k % 2, "duration_ns": 60} for k in range(4)]
    out["Flow"] = [{"in_id": 1000 + 3 * k + 1, "out_id": 500 + k, "in_table": "instruction", "out_table": "dma_block",
                    "dependency_type": "FLOW_DEPENDENCE", "gap_time": 55} for k in range(3)]
    out["SystemProfileEvents"] = [
        {"id": 1, "name": "forward", "start_ts": T0 - 500, "end_ts": T0 + 2500, "duration_ns": 3000,
         "trace_event_source": "framework", "instance_id": "i-0abc", "process_id": 4242, "thread_id": 1,
         "nc_idx": -1, "pcore_idx": -1, "worker_gid": 0, "flow_id": "77", "framework_stream_id": 0,
         "extra_attributes_json": "{}"},
        {"id": 2, "name": "nrt_execute", "start_ts": T0 - 100, "end_ts": T0 + 2100, "duration_ns": 2200,
         "trace_event_source": "neuron_rt", "instance_id": "i-0abc", "process_id": 4242, "thread_id": 2,
         "nc_idx": 4, "pcore_idx": 0, "worker_gid": 0, "flow_id": "77", "framework_stream_id": 0,
         "extra_attributes_json": '{"model": "train"}'},
        {"id": 3, "name": "nc_exec_running", "start_ts": T0, "end_ts": T0 + 2000, "duration_ns": 2000,
         "trace_event_source": "neuron_hw", "instance_id": "i-0abc", "process_id": 4242, "thread_id": 0,
         "nc_idx": 4, "pcore_idx": 0, "worker_gid": 0, "flow_id": "77", "framework_stream_id": 0,
         "extra_attributes_json": ""}]
    out["FrameworkInstruction"] = [
        {"id": k, "raw_framework_id": k, "framework_name": name, "start_ts": T0 + 600 * (k - 1),
         "end_ts": T0 + 600 * k, "hbm_read_bytes": 8192, "tensor_engine_instruction_count": 2}
        for k, name in ((1, "model.linear"), (2, "model.relu"))]
    out["FrameworkNode"] = [
        {"node_name": "model", "parent_name": "", "children_names": "linear,relu", "start_ts": T0,
         "end_ts": T0 + 1200, "mfu": 21.3, "hfu": 21.3},
        {"node_name": "linear", "parent_name": "model", "children_names": "", "start_ts": T0, "end_ts": T0 + 600,
         "mfu": 40.0, "hfu": 40.0}]
    out["HloInstruction"] = [
        {"id": 10 + k, "raw_hlo_id": 10 + k, "raw_framework_id": k, "hlo_name": f"fusion.{k}",
         "start_ts": T0 + 600 * (k - 1), "end_ts": T0 + 600 * k} for k in (1, 2)]
    out["Throttle"] = [{"duration": 30, "k": 1, "n": 2, "timestamp": T0, "type": "didt", "pcore_idx": 0}]
    return out


def write_parquet_profile(root: Path, *, complete: bool = True) -> Path:
    """``<root>/profiles/global/train@latest/<Table>.parquet`` (Instruction split in two parts, as Explorer
    splits big tables); returns the profile directory."""
    import pyarrow as pa
    import pyarrow.parquet as pq

    d = Path(root) / "profiles" / "global" / "train@latest"
    d.mkdir(parents=True, exist_ok=True)
    for name, rows in tables(complete).items():
        if name == "Instruction":
            pq.write_table(pa.Table.from_pylist(rows[:7]), d / "Instruction_0.parquet")
            pq.write_table(pa.Table.from_pylist(rows[7:]), d / "Instruction_1.parquet")
        else:
            pq.write_table(pa.Table.from_pylist(rows), d / f"{name}.parquet")
    return d


def write_json_export(path: Path, *, complete: bool = True) -> Path:
    """The same profile as a JSON export (table-keyed: schema table names, Parquet field names)."""
    doc = {name: rows if name not in ("Metadata", "Summary") else rows[0]
           for name, rows in tables(complete).items()}
    Path(path).write_text(json.dumps(doc))
    return Path(path)
