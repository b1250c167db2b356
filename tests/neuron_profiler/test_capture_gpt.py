"""A GPT-style training step profiled with the stock torch.profiler + NeuronConfig and the simulated runtime."""
from __future__ import annotations

import json
import os
import warnings

import numpy as np
import pytest

torch = pytest.importorskip("torch")
from torch.profiler import ProfilerActivity, profile, schedule  # noqa: E402

from examples.models import GPT, GPTConfig, gpt_batch, gpt_train_step  # noqa: E402
from neuron_profiler import NeuronConfig, NeuronProfiler, ProfileMode  # noqa: E402
from neuron_profiler.trace import read_trace  # noqa: E402

SMALL = GPTConfig(vocab_size=128, block_size=16, n_layer=1, n_head=2, n_embd=32)


def _profile_gpt(cfg, steps=3, sched=None, **kw):
    torch.manual_seed(0)
    model = GPT(SMALL)
    opt = torch.optim.AdamW(model.parameters(), lr=1e-3)
    x, y = gpt_batch(SMALL, batch=2)
    npf = NeuronProfiler(cfg)
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", UserWarning)
        with profile(activities=[ProfilerActivity.CPU, ProfilerActivity.PrivateUse1], experimental_config=cfg,
                     record_shapes=True, with_modules=True, schedule=sched or schedule(wait=1, warmup=1, active=1),
                     on_trace_ready=npf.export_trace, **kw) as prof:
            for _ in range(steps):
                gpt_train_step(model, opt, x, y)
                prof.step()
    return npf


def _matmul_flops(name, shapes):
    if name in ("aten::mm", "aten::bmm"):
        a, b = shapes[0], shapes[1]
    else:  # addmm / baddbmm: (bias, a, b)
        a, b = shapes[1], shapes[2]
    assert a[-1] == b[-2]
    batch = int(np.prod(a[:-2])) if len(a) > 2 else 1
    return 2 * batch * a[-2] * b[-1] * a[-1]


def test_gpt_train_step_trace(tmp_path):
    cfg = NeuronConfig(profile_output_dir=tmp_path, run_id="gpt", target="trn2", runtime="simulated")
    npf = _profile_gpt(cfg)
    assert len(npf.paths) == 1
    tf = read_trace(npf.paths[0])
    h = tf.header
    assert h.simulated and len(h.devices) >= 1 and h.devices[0].kind == "trn2"
    assert json.loads(h.capture_config_json)["modes"] == ["DEVICE", "RUNTIME"]
    ops = tf.table("host_ops")
    names = set(ops["name"].astype(str))
    assert {"aten::bmm", "aten::embedding", "aten::softmax" if "aten::softmax" in names else "aten::_softmax"} <= names
    ins = tf.table("instructions")
    engines = set(ins["engine"].astype(str))
    assert {"Vector", "Scalar", "GpSimd"} <= engines and engines & {"Tensor", "TensorMatrix"}
    assert len(tf.table("dma")) > 0 and (tf.table("dma")["transfer_bytes"] > 0).all()
    flows = tf.table("flows")
    launch = flows[(flows["src_table"] == "host_ops") & (flows["dst_table"] == "instructions")]
    assert len(launch) > 0
    assert set(launch["src_row"]) <= set(ops.index) and set(launch["dst_row"]) <= set(ins.index)
    # FLOPs of every matmul host op = 2*M*N*K from its recorded shapes
    mm = ops[ops["name"].isin(["aten::mm", "aten::addmm", "aten::bmm", "aten::baddbmm"])]
    assert len(mm) >= 10
    for _, r in mm.iterrows():
        assert r["flops"] == _matmul_flops(r["name"], json.loads(r["input_shapes"]))
    # device work starts no earlier than the host op that launched it
    src = ops.loc[launch["src_row"].to_numpy(), "start_ts"].to_numpy()
    dst = ins.loc[launch["dst_row"].to_numpy(), "start_ts"].to_numpy()
    assert (dst >= src).all()
    # module hierarchy with qualified names
    mods = set(ops["module"].astype(str))
    assert "GPT.blocks.0.attn.c_attn" in mods and "GPT.lm_head" in mods
    # what ran, for pairing traces: the model class and its parameter count (oracle: torch's count of a fresh
    # model of the same config; the tied LM head counted once), and the program
    assert h.metadata["model"] == "GPT"
    assert int(h.metadata["model_parameters"]) == sum(p.numel() for p in GPT(SMALL).parameters())
    assert h.metadata["script"] and "/" not in h.metadata["script"]
    assert h.metadata["cwd"] == os.getcwd()  # relative stack paths are read against it (the explorer's source view)


def test_gpt_device_matmul_flops_match_host_shapes(tmp_path):
    """Every matmul host op (forward addmm, backward mm, attention bmm) reaches the Tensor engine with 2*M*N*K FLOPs."""
    cfg = NeuronConfig(profile_output_dir=tmp_path, run_id="flops", runtime="simulated")
    tf = read_trace(_profile_gpt(cfg).paths[0])
    ops, ins = tf.table("host_ops"), tf.table("instructions")
    mm = ops[ops["name"].isin(["aten::mm", "aten::addmm", "aten::bmm", "aten::baddbmm"])]
    per_op = ins[ins["engine"].isin(["Tensor", "TensorMatrix"])].groupby("framework_op")["raw_flops"].sum()
    got = {row: int(per_op.get(row, 0)) for row in mm.index}
    want = {row: _matmul_flops(r["name"], json.loads(r["input_shapes"])) for row, r in mm.iterrows()}
    assert got == want


def test_max_events_per_nc_drops_are_recorded(tmp_path):
    cfg = NeuronConfig(profile_output_dir=tmp_path, run_id="cap", runtime="simulated", max_events_per_nc=50)
    tf = read_trace(_profile_gpt(cfg).paths[0])
    assert sum(tf.dropped_events.values()) > 0
    per_core = len(tf.table("instructions")) + len(tf.table("dma")) + len(tf.table("collectives"))
    assert per_core <= 50


def test_capture_enabled_for_nc_filters_cores(tmp_path):
    # rank 0 drives NeuronCore 0: "0-1" keeps its events, "1" filters them all out (host ops stay)
    kept = read_trace(_profile_gpt(NeuronConfig(profile_output_dir=tmp_path, run_id="nc01", runtime="simulated",
                                                capture_enabled_for_nc="0-1")).paths[0])
    ins = kept.table("instructions")
    assert len(ins) > 0 and set(kept.table("tracks").loc[ins["track"].unique(), "nc_idx"]) == {0}
    assert json.loads(kept.header.capture_config_json)["capture_enabled_for_nc"] == "0-1"
    other = read_trace(_profile_gpt(NeuronConfig(profile_output_dir=tmp_path, run_id="nc1", runtime="simulated",
                                                 capture_enabled_for_nc="1")).paths[0])
    assert len(other.table("host_ops")) == len(kept.table("host_ops")) > 0
    assert len(other.table("instructions")) == 0 and len(other.table("dma")) == 0


def test_device_mode_off_means_host_only(tmp_path):
    cfg = NeuronConfig(modes=[ProfileMode.RUNTIME], profile_output_dir=tmp_path, run_id="host")
    tf = read_trace(_profile_gpt(cfg).paths[0])
    assert len(tf.table("host_ops")) > 0 and len(tf.table("instructions")) == 0
    assert tf.header.simulated is False and len(tf.header.devices) == 0
