"""Where every field of the Neuron Explorer data model goes in a ``.nprof`` trace (schema 7.4.0).

``MAPPING[table][field]`` is a destination in words: a trace column (``instructions.start_ts``), ``args``
(kept in the row's ``args`` JSON under the field's own name), a track (``track``: the field names the
row's track), a header entry, ``derived`` (recomputed from other fields, e.g. ``end_ts`` = start + duration),
or ``not kept`` with the reason (the trace format has no column for it: format 2.1's ``dma``, ``collectives``
and ``counters`` tables have no ``args``). ``docs/importers.md`` lists it; a test
checks that every field of the data-model tables has an entry.
"""
from __future__ import annotations

from neuron_profiler.importers.neuron_explorer.schema import TABLES

ARGS = "args"
_NO_ARGS = "not kept: the {t} table of format 2.1 has no args column"


def _row(table: str, explicit: dict[str, str], rest: str) -> dict[str, str]:
    return {f: explicit.get(f, rest) for f in TABLES[table]} | {k: v for k, v in explicit.items()
                                                               if k not in TABLES[table]}


_INSTR_COLS = {
    "start_ts": "instructions.start_ts", "end_ts": "derived (start_ts + duration_ns; used when duration_ns is absent)",
    "duration_ns": "instructions.duration_ns", "engine": "instructions.engine (capitalised: Tensor, Vector, ...)",
    "timeline_track": "track (engine track name under the NeuronCore; engine when absent)",
    "pcore_idx": "track (NeuronCore = Metadata.neuroncore_idx + pcore_idx)", "opcode": "instructions.opcode",
    "hlo_name": "instructions.name", "raw_flops": "instructions.raw_flops",
    "hbm_read_bytes": "instructions.hbm_read_bytes", "hbm_write_bytes": "instructions.hbm_write_bytes",
    "sbuf_read_bytes": "instructions.sbuf_read_bytes", "sbuf_write_bytes": "instructions.sbuf_write_bytes",
    "psum_read_bytes": "instructions.psum_read_bytes", "psum_write_bytes": "instructions.psum_write_bytes",
    "tensor_instruction_type": "instructions.tensor_instruction_type",
    "raw_framework_id": "instructions.framework_op (the FrameworkInstruction row with this id; else the "
                        "HloInstruction of raw_hlo_id) and args",
}
_DMA_COLS = {
    "start_ts": "dma.start_ts", "end_ts": "derived (start_ts + duration_ns)", "duration_ns": "dma.duration_ns",
    "pcore_idx": "track (DMA queue under the NeuronCore)", "queue_name": "track (DMA queue track name)",
    "transfer_bytes": "dma.transfer_bytes", "queue_type": "dma.queue_type", "variable": "dma.variable",
    "id": "flows (Flow rows referring to this DMA)",
}
_HIER = {"start_ts": "host_ops.start_ts", "end_ts": "host_ops.duration_ns (end_ts - start_ts)"}

MAPPING: dict[str, dict[str, str]] = {
    "Instruction": _row("Instruction", _INSTR_COLS | {"id": "flows (Flow rows referring to this instruction) "
                                                          "and args"}, ARGS),
    "DmaPacketAggregated": _row("DmaPacketAggregated", _DMA_COLS | {
        "source": "dma.source", "dest": "dma.dest",
        "read_bytes": "dma.transfer_bytes when transfer_bytes is absent",
    }, _NO_ARGS.format(t="dma")),
    "DmaPacket": _row("DmaPacket", _DMA_COLS | {
        "packet_aggregation_id": "joins packets to their DmaPacketAggregated row (dma.descriptor_bytes = mean "
                                 "packet transfer_bytes, dma.dma_engine = the packets' engine_idx)",
        "engine_idx": "dma.dma_engine", "transfer_bytes": "dma.transfer_bytes (packets imported as rows only "
                                                          "when DmaPacketAggregated is absent; then also "
                                                          "dma.descriptor_bytes)",
        "read_bytes": "dma.transfer_bytes when transfer_bytes is absent",
    }, _NO_ARGS.format(t="dma")),
    "CcOp": _row("CcOp", {
        "start_ts": "collectives.start_ts", "end_ts": "derived (start_ts + duration_ns)",
        "duration_ns": "collectives.duration_ns", "operation": "collectives.operation (canonical names)",
        "algorithm": "collectives.algorithm", "num_elements": "collectives.num_elements",
        "dtype": "collectives.dtype", "op_id": "collectives.sequence_number",
        "stream_id": "track (one CC-core track per stream: \"CC stream <stream_id>\")",
        "stream_index": "track (the CC stream track's tid)",
        "trigger_engine": "flows kind \"trigger\" from the instruction on this engine's track of the core that "
                          "starts at trigger_start_ts",
        "trigger_start_ts": "flows kind \"trigger\" (see trigger_engine)",
        "cc_trigger_start_delay": "derived (start_ts - trigger_start_ts)",
        "input_size": "collectives.input_size", "output_size": "collectives.output_size",
        "algorithm_bandwidth": "collectives.algorithm_bandwidth (bytes/s: converted with SchemaFields.field_unit, "
                               "else the unit is inferred from sizes and durations, else recomputed)",
        "bus_bandwidth": "collectives.bus_bandwidth (as algorithm_bandwidth)",
        "replica_group_id": "collectives.process_group",
        "replica_group": "collectives.replica_group and collectives.group_size (its member count)",
    }, ""),
    "SemaphoreUpdate": _row("SemaphoreUpdate", {
        "timestamp": "counters.ts", "id": "track (counter \"Semaphore <id>\" under the NeuronCore)",
        "value": "counters.value", "pcore_idx": "track (NeuronCore)",
    }, _NO_ARGS.format(t="counters")),
    "ActiveTime": _row("ActiveTime", {
        "start_ts": "counters (value 1 at start_ts)", "end_ts": "counters (value 0 at end_ts)",
        "duration_ns": "derived (end_ts - start_ts; gives end_ts when absent)",
        "engine": "track (counter \"<Engine> active\" under the NeuronCore)", "pcore_idx": "track (NeuronCore)",
    }, ""),
    "Flow": _row("Flow", {
        "in_id": "flows.src_row / dst_row (the row with this id in in_table)",
        "out_id": "flows.src_row / dst_row (the row with this id in out_table)",
        "in_table": "flows.src_table / dst_table (instruction -> instructions, dma_block -> dma, ...)",
        "out_table": "flows.src_table / dst_table",
        "dependency_type": "flows.kind (lower case, e.g. flow_dependence)",
        "gap_time": "derived (the time between the two events); orients the edge: the earlier event is the source",
    }, ""),
    "Metadata": _row("Metadata", {
        "profile_schema_version": "header.metadata[profile_schema_version] and device.properties",
        "instance_type": "device.kind (trn1/trn2/trn3/inf2 from the instance type; peaks from the hardware "
                         "table) and device.properties",
        "neuron_device_idx": "device.index and device.properties",
        "neuroncore_idx": "track (NeuronCore numbering) and device.properties",
        "is_simulation": "header.simulated and device.simulated",
    }, "device.properties"),
    "Summary": _row("Summary", {}, "header.metadata[neuron_explorer.summary] (a JSON object, Explorer's names)"),
    "SystemProfileEvents": _row("SystemProfileEvents", {
        "name": "host_ops.name", "start_ts": "host_ops.start_ts", "end_ts": "derived (start_ts + duration_ns)",
        "duration_ns": "host_ops.duration_ns", "trace_event_source": "host_ops.category",
        "instance_id": "track (process track \"<instance>/PID:<pid>\") and header.instance_id",
        "process_id": "track (process)", "thread_id": "track (thread \"TID:<tid>\")",
        "nc_idx": "track (neuron_hw events: the NeuronCore's hardware track) and args",
        "flow_id": "flows kind \"dependency\" (framework -> neuron_rt -> neuron_hw events of one flow_id) and args",
    }, ARGS),
    "FrameworkInstruction": _row("FrameworkInstruction", _HIER | {
        "framework_name": "host_ops.name (category framework, track \"Framework layers\")",
        "raw_framework_id": "instructions.framework_op of its instructions; flows kind \"hierarchy\" to its HLO "
                            "rows; args"}, ARGS),
    "FrameworkNode": _row("FrameworkNode", _HIER | {
        "node_name": "host_ops.name (category framework_node, track \"Framework hierarchy\")",
        "parent_name": "host_ops.module (the node path, parent names joined by '.') and args"}, ARGS),
    "HloInstruction": _row("HloInstruction", _HIER | {
        "hlo_name": "host_ops.name (category hlo, track \"HLO\")",
        "raw_hlo_id": "instructions.framework_op when no framework layer; flows kind \"hierarchy\"; args"}, ARGS),
    "PenguinInstruction": _row("PenguinInstruction", _HIER | {
        "penguin_name": "host_ops.name (category penguin, track \"Penguin\")",
        "raw_penguin_id": "flows kind \"hierarchy\" from its HLO row; args"}, ARGS),
    "BirInstruction": _row("BirInstruction", _HIER | {
        "bir_name": "host_ops.name (category bir, track \"BIR\")",
        "raw_bir_id": "flows kind \"hierarchy\" from its Penguin row; args"}, ARGS),
    "SbufAllocation": _row("SbufAllocation", {
        "start_ts": "allocations.start_ts", "end_ts": "allocations.duration_ns (end_ts - start_ts)",
        "start_address": "allocations.start_address", "end_address": "allocations.end_address",
        "partition": "allocations.partition (num_partitions 1)", "tensor_name": "allocations.tensor_name",
        "hlo_name": "allocations.tensor_name when tensor_name is empty", "op_source_type": "allocations.tensor_kind",
        "queue_name": "allocations.spill (1 on a SpillReload queue)", "pcore_idx": "track (NeuronCore)",
    }, "not kept: the allocations table has no args column"),
    "SystemProfileHbmUsage": _row("SystemProfileHbmUsage", {
        "timestamp": "counters.ts (rows of one timestamp summed over the HBM stacks)",
        "total_bytes": "counters (\"HBM Usage\", bytes)", "weights_bytes": "counters (\"HBM Usage: weights\")",
        "tensors_bytes": "counters (\"HBM Usage: tensors\")", "dram_spill_bytes": "counters (\"HBM Usage: spill\")",
        "device_idx": "summed", "hbm_idx": "summed",
    }, "not kept: the HBM Usage counters keep total, weights, tensors and spill"),
    "SystemProfileMetadata": _row("SystemProfileMetadata", {
        "hbm_capacity_bytes": "device.spec.hbm_capacity_bytes (when the hardware table has none)",
    }, "not kept: the trace's own time span and header"),
    "SchemaFields": _row("SchemaFields", {"table_name": "units of non-ns/bytes fields (bandwidths)",
                                          "field_name": "units", "field_unit": "units"},
                         "not kept: the schema's self-description, used only to read units"),
    "DmaQueuesInfo": _row("DmaQueuesInfo", {"name": "joins queues to DMA rows", "pcore_idx": "joins",
                                            "engine_idx": "dma.dma_engine when no DmaPacket gives it"},
                          "not kept: per-queue static description"),
}
#: tables of the data model the importer reads (the others present in a profile are listed as not imported)
MAPPED_TABLES = tuple(MAPPING)
#: the tables ``shared/reference/neuron-explorer-data-model.md`` asks to map, and the DMA alternatives
REQUIRED_TABLES = ("Instruction", ("DmaPacketAggregated", "DmaPacket"), "CcOp", "SemaphoreUpdate", "ActiveTime",
                   "Flow", "Metadata", "Summary", "SystemProfileEvents",
                   ("FrameworkInstruction", "FrameworkNode", "HloInstruction", "PenguinInstruction",
                    "BirInstruction"))
#: time-series tables imported as counter tracks: table -> (time field, [(value field, track name, unit)])
COUNTER_TABLES: dict[str, tuple[str, list[tuple[str, str, str]]]] = {
    "DmaUsage": ("timestamp", [("current_throughput", "DMA Throughput", "bytes/s"),
                               ("total_transfer_bytes", "Cumulative DMA bytes", "bytes")]),
    "HbmUsage": ("timestamp", [("current_throughput", "HBM Throughput", "bytes/s"),
                               ("total_transfer_bytes", "Cumulative HBM bytes", "bytes")]),
    "PendingDma": ("timestamp", [("value", "Pending DMA Count", "count")]),
    "PsumUsage": ("timestamp", [("avg_util_percent", "PSUM Usage", "percent")]),
    "SbufUsage": ("timestamp", [("avg_util_percent", "State Buffer Usage", "percent")]),
}
