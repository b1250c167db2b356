"""Small hand-built traces with known answers for the analysis tests (built with TraceBuilder)."""
from __future__ import annotations

from neuron_profiler.hardware import gpu_spec, neuron_device
from neuron_profiler.trace import TraceBuilder, make_header
from schemas import pb

TRN2_PEAK_BF16 = neuron_device("trn2").spec.peak_flops_per_s["bfloat16"]
TRN2_HBM_CORE = neuron_device("trn2").spec.hbm_bandwidth_per_core_bytes_per_s
TRN2_DMA_CORE = neuron_device("trn2").spec.dma_bandwidth_per_core_bytes_per_s
TRN2_MEM_ROOF = min(TRN2_HBM_CORE, TRN2_DMA_CORE)  # the roofline's per-core memory roof
MM_FLOPS = int(TRN2_PEAK_BF16 * 1e-6)  # one microsecond of peak work


def neuron_builder(rank: int = 0, world_size: int = 1, target: str = "trn2", run_id: str = "tests-run"
                   ) -> tuple[TraceBuilder, dict]:
    """A Neuron trace of one rank; ranks built with the same ``run_id`` form one run (as our capture does)."""
    hdr = make_header("tests.analysis", source_format="synthetic", rank=rank, world_size=world_size, run_id=run_id,
                      simulated=True, devices=[neuron_device(target)])
    b = TraceBuilder(hdr)
    t = {}
    t["proc"] = b.add_track(kind="process", name=f"rank {rank}", pid=100 + rank, rank=rank)
    t["thread"] = b.add_track(kind="thread", name="thread 1 (python)", parent=t["proc"], pid=100 + rank, tid=1,
                              rank=rank)
    t["dev"] = b.add_track(kind="device", name="device 0", parent=t["proc"], device=0, rank=rank)
    t["core"] = b.add_track(kind="core", name="nc0", parent=t["dev"], device=0, nc_idx=0, rank=rank)
    for eng in ("Tensor", "TensorMatrix", "Vector", "Scalar"):
        t[eng] = b.add_track(kind="engine", name=eng, parent=t["core"], device=0, nc_idx=0, rank=rank)
    t["qSyncIO0"] = b.add_track(kind="dma_queue", name="qSyncIO0", parent=t["core"], device=0, nc_idx=0, rank=rank)
    t["cc"] = b.add_track(kind="cc_core", name="CC-core 0", parent=t["dev"], device=0, nc_idx=0, rank=rank)
    return b, t


def two_matmul_trace():
    """Two bf16 matmuls of MM_FLOPS each (1 µs at peak) lasting 1000 ns, one Vector op of 500 ns.

    Device span 1000..4000 ns (total_time 3000): MFU = 2·MM_FLOPS / (peak · 3 µs) = 66.67 %; rows
    mm1 [1000,2000), vec [2000,2500), mm2 [3000,4000) -> device active 2500 / 3000, one idle gap of 500 ns.
    HBM: each matmul reads 100 000 B and writes 50 000 B -> MBU = 300 000 B / 3 µs / 725 GB/s.
    Steps: ProfilerStep#1 [500, 2600), ProfilerStep#2 [2600, 4500).
    """
    b, t = neuron_builder()
    host = b.add_rows("host_ops", {
        "track": t["thread"], "name": ["ProfilerStep#1", "aten::mm", "aten::relu", "ProfilerStep#2", "aten::mm"],
        "category": ["user_annotation", "cpu_op", "cpu_op", "user_annotation", "cpu_op"],
        "start_ts": [500, 600, 900, 2600, 2700], "duration_ns": [2100, 200, 100, 1900, 200],
        "module": ["", "Net.fc1", "Net.act", "", "Net.fc2"],
        "input_shapes": ["[]", "[[128,512],[512,128]]", "[[128,128]]", "[]", "[[128,512],[512,128]]"],
        "input_dtypes": ["[]", '["c10::BFloat16","c10::BFloat16"]', '["c10::BFloat16"]', "[]",
                         '["c10::BFloat16","c10::BFloat16"]']})
    ins = b.add_rows("instructions", {
        "track": [t["TensorMatrix"], t["Vector"], t["TensorMatrix"]],
        "start_ts": [1000, 2000, 3000], "duration_ns": [1000, 500, 1000],
        "engine": ["TensorMatrix", "Vector", "TensorMatrix"], "opcode": ["MATMUL", "ACTIVATE", "MATMUL"],
        "name": ["dot.1", "relu.2", "dot.3"], "framework_op": [host + 1, host + 2, host + 4],
        "raw_flops": [MM_FLOPS, 0, MM_FLOPS], "hbm_read_bytes": [100_000, 0, 100_000],
        "hbm_write_bytes": [50_000, 0, 50_000], "dtype": ["bfloat16", "bfloat16", "bfloat16"]})
    b.add_flows("host_ops", [host + 1, host + 2, host + 4], "instructions", [ins, ins + 1, ins + 2], kind="launch")
    return b


def gpu_builder(name: str = "NVIDIA H100 80GB HBM3", rank: int = 0) -> tuple[TraceBuilder, dict]:
    spec = gpu_spec(name)
    dev = pb.Device(index=0, kind="cuda", name=name, simulated=False)
    if spec is not None:
        dev.spec.CopyFrom(spec)
    hdr = make_header("neuron_profiler.importers.kineto", source_format="kineto-json", rank=rank, devices=[dev])
    b = TraceBuilder(hdr)
    t = {"proc": b.add_track(kind="process", name="rank 0", pid=1, rank=rank)}
    t["thread"] = b.add_track(kind="thread", name="thread 1", parent=t["proc"], pid=1, tid=1, rank=rank)
    t["gpu"] = b.add_track(kind="device", name="GPU 0", device=0, rank=rank)
    t["stream"] = b.add_track(kind="stream", name="stream 7", parent=t["gpu"], device=0, tid=7, rank=rank)
    return b, t


def gpu_mm_trace(m=1024, k=1024, n=1024, kernel_ns=(4000, 1000), with_flops_arg=False):
    """One aten::mm [m,k]x[k,n] bf16 launching two kernels (durations ``kernel_ns``) plus one fp32
    aten::add of [m, n] with one 2000 ns kernel; FLOPs come from shapes (2mkn), bytes from shapes."""
    b, t = gpu_builder()
    host = b.add_rows("host_ops", {
        "track": t["thread"], "name": ["ProfilerStep#3", "aten::mm", "aten::add"],
        "category": ["user_annotation", "cpu_op", "cpu_op"], "start_ts": [0, 100, 300],
        "duration_ns": [20_000, 100, 100], "module": ["", "M.proj", "M.res"],
        "input_shapes": ["[]", f"[[{m},{k}],[{k},{n}]]", f"[[{m},{n}],[{m},{n}],[]]"],
        "input_dtypes": ["[]", '["c10::BFloat16","c10::BFloat16"]', '["float","float","Scalar"]'],
        "flops": [0, 2 * m * k * n if with_flops_arg else 0, 0]})
    s0 = 1000
    d0, d1 = kernel_ns
    b.add_rows("instructions", {
        "track": t["stream"], "start_ts": [s0, s0 + d0, s0 + d0 + d1 + 3000],
        "duration_ns": [d0, d1, 2000], "engine": "Kernel", "opcode": "kernel",
        "name": ["sm90_gemm_bf16", "splitk_reduce", "vectorized_add_kernel"],
        "framework_op": [host + 1, host + 1, host + 2]})
    return b


def collective_rank(rank: int, starts, durs, seqs=None, size=1 << 20, op="all_reduce", group="pg0"):
    """A rank of a 2-rank run with all_reduce collectives at ``starts`` lasting ``durs`` (ns)."""
    b, t = neuron_builder(rank=rank, world_size=2)
    n = len(starts)
    b.add_rows("collectives", {"track": t["cc"], "start_ts": list(starts), "duration_ns": list(durs),
                               "operation": op, "process_group": group, "replica_group": "0,1", "group_size": 2,
                               "sequence_number": list(seqs) if seqs is not None else [-1] * n,
                               "input_size": size, "output_size": size, "dtype": "bfloat16"})
    return b
