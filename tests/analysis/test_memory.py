"""The memory viewer's numbers against the trace and hand-computed values: a small MLP trained with AdamW,
captured through the stock torch.profiler with the simulated trn2 runtime.

- SBUF/PSUM allocations never exceed the capacity of the hardware table, and live buffers never share bytes
  (an independent sweep over the raw ``allocations`` table);
- ``memory_occupancy`` equals the sum of live allocations recomputed at every point from the raw table;
- the ``State Buffer Usage`` / ``PSUM Usage`` counters agree with the placed buffers;
- HBM: weights = the parameters' bytes, gradients = the same, AdamW state = twice; at the last optimizer step
  the level is weights + gradients + optimizer state exactly (activations freed after the backward pass);
- a trace without allocation events (a format 2.2 file, a Kineto import) says "not recorded".
"""
from __future__ import annotations

import warnings
from pathlib import Path

import numpy as np
import pytest

import analysis
from neuron_profiler.hardware import neuron_spec
from neuron_profiler.runtime.simulated.memory import place
from neuron_profiler.trace import read_trace

torch = pytest.importorskip("torch")
REPO = Path(__file__).resolve().parents[2]


def _capture(out: Path) -> tuple[Path, int]:
    from torch.profiler import ProfilerActivity, profile, schedule

    from neuron_profiler import NeuronConfig, NeuronProfiler

    torch.manual_seed(0)
    model = torch.nn.Sequential(torch.nn.Linear(256, 512), torch.nn.GELU(), torch.nn.Linear(512, 256),
                                torch.nn.GELU(), torch.nn.Linear(256, 10))
    opt = torch.optim.AdamW(model.parameters(), lr=1e-3)
    x, y = torch.randn(64, 256), torch.randint(0, 10, (64,))
    cfg = NeuronConfig(profile_output_dir=out, run_id="mem", target="trn2")
    npf = NeuronProfiler(cfg)
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", UserWarning)
        with profile(activities=[ProfilerActivity.CPU, ProfilerActivity.PrivateUse1], experimental_config=cfg,
                     record_shapes=True, schedule=schedule(wait=1, warmup=1, active=2, repeat=1),
                     on_trace_ready=npf.export_trace) as prof:
            for _ in range(4):
                opt.zero_grad(set_to_none=True)
                torch.nn.functional.cross_entropy(model(x), y).backward()
                opt.step()
                prof.step()
    weights = sum(p.numel() * p.element_size() for p in model.parameters())
    return npf.paths[0], weights


@pytest.fixture(scope="module")
def captured(tmp_path_factory):
    path, weights = _capture(tmp_path_factory.mktemp("mem"))
    return analysis.load(path), read_trace(path), weights


@pytest.mark.slow  # the capture takes ~8 s
def test_allocations_never_exceed_capacity_nor_overlap(captured):
    t, tf, _ = captured
    a = tf.table("allocations")
    assert len(a) > 50 and set(a["buffer"].astype(str)) == {"SBUF", "PSUM"}
    spec = neuron_spec("trn2")
    for buf, cap in (("SBUF", spec.sbuf_bytes_per_core), ("PSUM", spec.psum_bytes_per_core)):
        g = a[a["buffer"].astype(str) == buf]
        parts = g["num_partitions"].to_numpy()
        assert (g["partition"].to_numpy() + parts <= 128).all()
        assert (g["end_address"].to_numpy() * parts <= cap).all(), buf  # inside every partition's share
        s, e = g["start_ts"].to_numpy(), (g["start_ts"] + g["duration_ns"]).to_numpy()
        lo, hi = g["start_address"].to_numpy(), g["end_address"].to_numpy()
        # independent sweep: at every allocation start, the buffers live then hold disjoint bytes within capacity
        for i in range(len(g)):
            live = (s <= s[i]) & (e > s[i])
            assert ((hi[live] - lo[live]) * parts[live]).sum() <= cap, (buf, i)
            o = np.argsort(lo[live])
            assert (lo[live][o][1:] >= hi[live][o][:-1]).all(), f"{buf} buffers share bytes at {s[i]}"


@pytest.mark.slow  # the capture takes ~8 s
def test_occupancy_is_the_sum_of_live_allocations(captured):
    t, tf, _ = captured
    a = tf.table("allocations")
    occ = t.memory_occupancy()
    assert len(occ) and set(occ["buffer"]) == {"SBUF", "PSUM"}
    for buf, g in occ.groupby("buffer"):
        r = a[a["buffer"].astype(str) == buf]
        s, e = r["start_ts"].to_numpy(), (r["start_ts"] + r["duration_ns"]).to_numpy()
        size = (r["end_address"] - r["start_address"]).to_numpy() * r["num_partitions"].to_numpy()
        want = np.array([size[(s <= ts) & (e > ts)].sum() for ts in g["ts"].to_numpy()])
        np.testing.assert_array_equal(g["bytes"].to_numpy(), want)
        assert (g["percent"] <= 100.0).all()
    # the occupancy counters of the trace are drawn from the same placed buffers
    tr, c = tf.table("tracks"), tf.table("counters")
    sbuf = c[c["track"].isin(tr.index[tr["name"].astype(str) == "State Buffer Usage"])]
    peak = occ[occ["buffer"] == "SBUF"]["percent"].max()
    assert sbuf["value"].max() == pytest.approx(peak, rel=1e-9)


@pytest.mark.slow  # the capture takes ~8 s
def test_hbm_weights_gradients_and_adamw_state_match_the_model(captured):
    t, tf, weights = captured
    h = t.hbm_usage()
    peak = h.groupby("kind")["bytes"].max()
    assert peak["weights"] == weights and peak["gradients"] == weights
    assert peak["optimizer state"] == 2 * weights  # AdamW: exp_avg and exp_avg_sq per parameter
    host = tf.table("host_ops")
    step = host[host["name"].astype(str).str.startswith("Optimizer.step#")].iloc[-1]
    mid = int(step["start_ts"] + step["duration_ns"] // 2)
    tot = h[h["kind"] == "total"].sort_values("ts")
    level = tot["bytes"].to_numpy()[np.searchsorted(tot["ts"].to_numpy(), mid, side="right") - 1]
    assert level == 4 * weights  # activations were freed when the backward pass ended
    assert peak["total"] >= 4 * weights and peak["activations"] > 0
    s = t.memory_summary().set_index("metric")
    assert s.at["hbm_peak_bytes", "value"] == peak["total"]
    assert s.at["hbm_capacity_bytes", "value"] == neuron_spec("trn2").hbm_capacity_bytes
    assert s.at["sbuf_peak_percent", "value"] <= 100.0


def test_placement_clips_what_does_not_fit_and_marks_it_spilled():
    # 2 partitions of 1 KiB; three buffers live together asking 1.5 KiB, 1 KiB and 0.5 KiB per partition
    p = place(np.array([0, 10, 20]), np.array([100, 100, 30]), np.array([3072, 2048, 1024]), 2, 2048)
    assert p.end_address.max() <= 1024
    assert list(p.bytes) == [2048, 0, 0] and list(p.spill) == [True, True, True]
    # freed first, then reused at the same address
    q = place(np.array([0, 50]), np.array([50, 90]), np.array([2048, 2048]), 2, 2048)
    assert list(q.start_address) == [0, 0] and not q.spill.any()


def test_traces_without_allocations_say_not_recorded():
    t = analysis.load(REPO / "tests" / "data" / "format_2_2" / "cnn_inference.nprof")  # no allocations table
    s = t.memory_summary().set_index("metric")
    assert s.at["allocations_recorded", "value"] == 0
    assert s.at["sbuf_peak_bytes", "note"].startswith("not recorded")
    assert np.isnan(s.at["sbuf_peak_bytes", "value"])
    assert t.memory_allocations().empty and t.memory_occupancy().empty


def test_kineto_device_memory_is_the_hbm_usage():
    """A GPU trace recorded with profile_memory=True: hbm_usage is the device's "Total Allocated" bytes; its peak
    is the largest value of the trace's own [memory] events on that device (read here from the JSON)."""
    import gzip
    import json

    from realdata import real_trace

    path = real_trace("TraceLens/h100/gaunernst_bert-small-uncased__1016001.json.gz")
    events = json.load(gzip.open(path, "rt"))["traceEvents"]
    mem = [e["args"] for e in events if e.get("name") == "[memory]" and e.get("args", {}).get("Device Type") == 1]
    want = max(a["Total Allocated"] for a in mem)
    t = analysis.load(path)
    h = t.hbm_usage()
    assert set(h["kind"]) == {"allocated"} and len(h) == len(mem)
    s = t.memory_summary().set_index("metric")
    assert s.at["hbm_peak_bytes", "value"] == want
    assert s.at["hbm_capacity_bytes", "value"] == t.devices["hbm_capacity_bytes"].iloc[0] > 0
    assert s.at["allocations_recorded", "note"].startswith("not recorded")  # Kineto: no SBUF/PSUM


def test_a_matmul_too_big_for_sbuf_spills_and_says_so():
    """A 4096^3 bf16 matmul: its resident slab fits half the SBUF, the other operand is re-read on the spill-reload
    queue; the buffers it reloads into are flagged spill, and the summary's spill bytes are those DMA bytes."""
    from neuron_profiler.runtime.simulated.synthetic import op, simulate

    bf = "c10::BFloat16"
    b = simulate([op("aten::mm", 1_000_000, 5_000, [[4096, 4096], [4096, 4096]], [bf, bf])])
    t = analysis.Trace.from_builder(b)
    a = t.memory_allocations()
    sb = a[a["buffer"] == "SBUF"]
    assert sb["spill"].any() and (sb[sb["spill"]]["tensor_name"].str.contains("mm.reload")).all()
    assert set(sb["tensor_kind"]) == {"tiles", "resident"}
    d = b.table("dma")
    names = b.table("tracks")["name"].astype(str)
    reload = d["transfer_bytes"][names.reindex(d["track"]).str.contains("SpillReload").to_numpy()].sum()
    s = t.memory_summary().set_index("metric")
    assert reload > 0 and s.at["spill_reload_bytes", "value"] == reload
    assert s.at["spilled_buffers", "value"] == sb["spill"].sum()
    assert s.at["sbuf_peak_percent", "value"] <= 100.0


def test_top_buffers_are_the_most_byte_time():
    from neuron_profiler.runtime.simulated.synthetic import random_op_stream, simulate

    t = analysis.Trace.from_builder(simulate(random_op_stream(60)))
    a = t.memory_allocations()
    top = t.memory_allocations(top=5)
    bt = (a["bytes"] * a["duration_ns"]).sort_values(ascending=False).to_numpy()
    assert len(a) > 5 and list(top["bytes"] * top["duration_ns"]) == list(bt[:5])


def test_long_series_are_drawn_thinned_with_their_peak():
    import pandas as pd

    from analysis.figures.memory import MAX_POINTS, hbm_usage_figure, memory_occupancy_figure

    rng = np.random.default_rng(0)
    ts = np.cumsum(rng.integers(1, 100, 3 * MAX_POINTS))
    v = rng.random(len(ts)) * 100
    occ = pd.DataFrame({"core": "nc0", "buffer": "SBUF", "ts": ts, "bytes": v * 1e5, "capacity_bytes": 1e7,
                        "percent": v})
    f = memory_occupancy_figure(occ)
    assert len(f.data[0].x) == MAX_POINTS and max(f.data[0].y) == v.max() and "time bins" in f.layout.title.text
    h = pd.DataFrame({"device": "d", "kind": "weights", "ts": ts, "bytes": v * 2**30, "capacity_bytes": np.nan,
                      "percent": np.nan})
    f = hbm_usage_figure(pd.concat([h.assign(kind="total"), h]))
    assert len(f.data[0].x) <= MAX_POINTS + 1 and max(f.data[0].y) == pytest.approx(v.max())
