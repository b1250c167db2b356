"""Analyses on the captured sample traces (sample_traces/, from the simulated trn2 runtime).

Skipped with a message while the capture helper's sample traces are absent.
"""
from pathlib import Path

import numpy as np
import pandas as pd
import pytest

import analysis
from analysis.core.intervals import merge as merge_intervals
from analysis.core.intervals import union_ns

SAMPLES = Path(__file__).resolve().parents[2] / "sample_traces"
NAMES = ["gpt_train_step", "cnn_inference", "ddp_train_rank0", "ddp_train_rank1"]


def _sample(name: str):
    p = SAMPLES / f"{name}.nprof"
    if not p.is_file():
        pytest.fail(f"captured sample trace {p} is missing (python sample_traces/regenerate.py)")
    return analysis.load(p)


@pytest.mark.parametrize("name", NAMES)
def test_captured_trace_consistency(name):
    t = _sample(name)
    s = t.summary_dict()
    ins, dma = t.instructions, t.dma
    spec = t.header.devices[0].spec
    # header peaks drive MFU / MBU exactly as documented
    cores = int(s["active_cores"])
    assert s["peak_flops_per_s"] == spec.peak_flops_per_s["bfloat16"] * cores
    assert s["hbm_bandwidth_bytes_per_s"] == spec.hbm_bandwidth_per_core_bytes_per_s * cores
    tens = ins[ins["engine"].isin(["Tensor", "TensorMatrix"]) & (ins["tensor_instruction_type"] != "TRANSPOSE")]
    assert s["model_flops"] == tens["raw_flops"].sum() > 0
    assert s["mfu_estimated_percent"] == pytest.approx(
        100 * s["model_flops"] / (s["peak_flops_per_s"] * s["total_time"] * 1e-9))
    assert s["mbu_estimated_percent"] == pytest.approx(
        100 * s["hbm_total_bytes"] / (s["hbm_bandwidth_bytes_per_s"] * s["total_time"] * 1e-9))
    # HBM traffic on instructions = DMA traffic from / to HBM
    assert s["hbm_read_bytes"] == dma.loc[dma["source"] == "HBM", "transfer_bytes"].sum()
    assert s["hbm_write_bytes"] == dma.loc[dma["dest"] == "HBM", "transfer_bytes"].sum()
    assert s["dma_transfer_average_bytes"] == pytest.approx(dma["transfer_bytes"].mean())
    assert analysis.dma_sizes(t)["transfers"].sum() == len(dma)
    assert analysis.dma_throughput(t, bins=50)["bytes"].sum() == pytest.approx(dma["transfer_bytes"].sum())
    # device time of an op = per invocation, the union of its instructions and DMA (oracle: one union per host op)
    act = t.device_activity()
    linked = act[act["framework_op"] >= 0]
    per_call = {f: union_ns(g["start_ts"].to_numpy(), g["end_ts"].to_numpy())
                for f, g in linked.groupby("framework_op")}
    names = t.host_ops["name"].astype(str)
    h = t.hot_ops()
    expect = pd.Series(per_call).groupby(names.reindex(list(per_call)).to_numpy()).sum()
    assert h.loc[expect.index, "device_time_self_ns"].to_numpy() == pytest.approx(expect.to_numpy())
    # the exclusive shares of all ops add up to the union of device activity inside the steps
    st = t.steps()
    ms, me = merge_intervals(st["start_ts"].to_numpy(), st["end_ts"].to_numpy())
    inside = sum(union_ns(act["start_ts"].to_numpy(), act["end_ts"].to_numpy(), a, b) for a, b in zip(ms, me))
    assert (act["framework_op"].to_numpy() >= 0).all() or (act["table"].to_numpy() == 0).all()
    assert h["share_of_step_time_percent"].sum() == pytest.approx(100 * inside / (me - ms).sum())
    assert analysis.check(t).ok
    r = t.roofline()
    assert r["flops"].sum() == pytest.approx(analysis.instruction_work(t)["flops"].sum())
    mm = r[r["op"].str.contains("conv|mm|matmul|linear|bmm")]  # matrix work (its time may go to DMA)
    assert len(mm) and (mm["peak_flops_per_s"] == mm["dtype"].map(
        lambda d: spec.peak_flops_per_s.get(d, np.nan))).all()
    # a steady-state window: the last step
    st = t.steps()
    assert len(st) >= 1
    w = t.select_steps(int(st["step"].iloc[-1]))
    assert w.summary_dict()["total_time"] == st["duration_ns"].iloc[-1]
    rec = t.recommendations()
    fp32_mm = ((analysis.instruction_work(t)["dtype"] == "float32") & analysis.instruction_work(t)["is_matmul"]).any()
    assert ("fp32_matmuls" in set(rec["rule"])) == bool(fp32_mm)


def test_ddp_pair_collectives_across_ranks():
    _sample("ddp_train_rank0")
    ts = analysis.load(SAMPLES)
    assert "ddp_train" in ts.runs
    ddp = ts.by_run("ddp_train")
    assert ddp.ranks == [0, 1]
    m = ddp.collectives()
    assert len(m) == sum(len(t.collectives) for t in ddp) and (m["ranks_seen"] == 2).all()
    assert (m.groupby("collective")["arrival_delay_ns"].min() == 0).all()
    # a whole folder of several runs never matches across runs
    assert ts.collectives()["collective"].str.startswith("ddp_train:").all()
    # the folder's other traces (their own runs) stand alone: no cross-rank finding without shared collectives
    assert sorted(len(g) for g in ts.groups()) == [1, 1, 1, 2]  # GPT eager, GPT compiled, CNN; the DDP pair
    rr = analysis.run_recommendations(ts)
    assert set(rr["run"]) <= {"ddp_train"}
