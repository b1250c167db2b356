"""The bundled sample traces (sample_traces/regenerate.py) are real capture output, small, and consistent."""
from __future__ import annotations

import json

import pytest
from realdata import sample_trace

from neuron_profiler.trace import read_trace

SAMPLES = ["gpt_train_step.nprof", "cnn_inference.nprof", "ddp_train_rank0.nprof", "ddp_train_rank1.nprof"]


@pytest.mark.parametrize("name", SAMPLES)
def test_sample_is_small_complete_capture(name):
    path = sample_trace(name)
    assert path.stat().st_size < 2_000_000
    tf = read_trace(path)
    h = tf.header
    assert tf.complete and h.producer == "neuron_profiler.capture" and h.simulated
    assert json.loads(h.capture_config_json)["target"] == "trn2" and h.devices[0].kind == "trn2"
    assert tf.row_counts["host_ops"] > 50 and tf.row_counts["instructions"] > 50 and tf.row_counts["dma"] > 0
    flows = tf.table("flows")
    assert ((flows["src_table"] == "host_ops") & (flows["dst_table"] == "instructions")).any()


def test_gpt_sample_is_a_training_step():
    tf = read_trace(sample_trace("gpt_train_step.nprof"))
    names = set(tf.table("host_ops")["name"].astype(str))
    assert {"aten::bmm", "aten::embedding", "Optimizer.step#AdamW.step"} <= names
    assert any(n.startswith("autograd::engine::evaluate_function") for n in names)
    engines = set(tf.table("instructions")["engine"].astype(str))
    assert {"Vector", "Scalar", "GpSimd"} <= engines and engines & {"Tensor", "TensorMatrix"}
    units = set(tf.table("tracks")["name"].astype(str))
    assert {"CPU Utilization", "Host Memory Used"} & units  # CPU_UTIL / HOST_MEMORY modes


def test_cnn_sample_is_inference():
    ops = read_trace(sample_trace("cnn_inference.nprof")).table("host_ops")
    names = set(ops["name"].astype(str))
    assert "aten::convolution" in names and not any(n.startswith("autograd::") for n in names)
    assert (ops.loc[ops["name"] == "aten::convolution", "flops"] > 0).all()


def test_ddp_samples_match_across_ranks():
    a, b = (read_trace(sample_trace(f"ddp_train_rank{r}.nprof")) for r in (0, 1))
    assert (a.header.rank, b.header.rank) == (0, 1) and a.header.world_size == b.header.world_size == 2
    assert a.header.run_id == b.header.run_id
    ka, kb = ([tuple(r) for r in t.table("collectives")[["process_group", "sequence_number", "operation"]]
               .astype(str).itertuples(index=False)] for t in (a, b))
    assert ka and sorted(ka) == sorted(kb)
    assert any("all_reduce" in k[2] for k in ka)
