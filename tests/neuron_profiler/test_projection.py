"""Projection of real GPU traces onto a Trainium target (neuron-trace project)."""
import json

import numpy as np
import pytest

from neuron_profiler.cli import main
from neuron_profiler.projection import KEPT_HOST_WORK, project_trace
from neuron_profiler.trace import read_trace

BERT = "TraceLens/h100/gaunernst_bert-small-uncased__1016001.json.gz"
NCCL = "HolisticTraceAnalysis/nccl_parser_config/nccl_data.json.gz"


def test_gpu_trace_projects_onto_trn2(realtraces_dir):
    from neuron_profiler.importers.kineto import load_kineto_builder
    src = realtraces_dir / BERT
    orig = load_kineto_builder(src)
    b = project_trace(src, "trn2")
    h = b.header
    assert [d.kind for d in h.devices] == ["trn2"] and "H100" in h.metadata["projected_from_devices"]
    assert h.simulation.source == "projection" and h.simulation.target == "trn2"
    host, oh = b.table("host_ops"), orig.table("host_ops")
    host = host[host["name"].astype(str) != KEPT_HOST_WORK]
    tracks = orig.table("tracks")
    on_host = oh["track"].isin(tracks.index[tracks["kind"].astype(str).isin(["instance", "process", "thread"])])
    assert len(host) == int(on_host.sum())
    np.testing.assert_array_equal(np.sort(host["measured_start_ts"].to_numpy()),
                                  np.sort(oh[on_host]["start_ts"].to_numpy()))
    ins = b.table("instructions")
    assert len(ins) > 100 and not b.table("tracks")["kind"].astype(str).isin(["stream"]).any()  # no GPU streams left
    lowered = set(host["name"].astype(str).to_numpy()[ins["framework_op"].unique()])
    assert "aten::addmm" in lowered and "aten::linear" not in lowered


def test_projection_names_the_ops_it_could_not_price(realtraces_dir):
    b = project_trace(realtraces_dir / NCCL, "trn2")  # recorded without shapes
    unpriced = list(b.header.simulation.unpriced_ops)
    assert "aten::cudnn_convolution" in unpriced and b.rows("instructions") == 0
    assert b.rows("collectives") > 0  # collectives are priced from their message sizes


def test_projecting_a_projection_starts_from_what_was_measured(realtraces_dir, tmp_path):
    first = project_trace(realtraces_dir / BERT, "trn2").write(tmp_path / "a.nprof")
    again = project_trace(first, "trn2")
    a, b = read_trace(first).table("host_ops"), again.table("host_ops")
    np.testing.assert_array_equal(a["start_ts"].to_numpy(), b["start_ts"].to_numpy())
    np.testing.assert_array_equal(a["measured_start_ts"].to_numpy(), b["measured_start_ts"].to_numpy())


def test_cli_project(realtraces_dir, tmp_path, capsys):
    out = tmp_path / "bert.trn1.nprof"
    assert main(["project", str(realtraces_dir / BERT), "--target", "trn1", "-o", str(out)]) == 0
    line = capsys.readouterr().out
    assert "projected onto trn1" in line and read_trace(out).header.devices[0].kind == "trn1"
    assert main(["project", str(tmp_path / "missing.json"), "-o", str(out)]) == 2
    with pytest.raises(SystemExit):
        main(["project", str(out), "--target", "trn9"])


def _step(b):
    h = b.table("host_ops")
    st = h[h["name"].astype(str).str.startswith("ProfilerStep#")]
    return int(st["duration_ns"].iloc[0]), int(st["measured_duration_ns"].iloc[0])


def test_projection_keeps_the_host_work_the_target_also_does(realtraces_dir):
    """The H100 BERT step (4.43 ms measured) projected onto trn2 came out 2.7x faster only because its Python
    time was dropped; the source host's time between ops is now kept, and the header says what was kept and
    what the dispatch model replaced."""
    from neuron_profiler.importers.kineto import load_kineto_builder
    src = realtraces_dir / BERT
    b = project_trace(src, "trn2")
    projected, measured = _step(b)
    assert 0.6 * measured < projected < 1.2 * measured
    info = json.loads(b.header.metadata["projection_host_time"])
    assert info["dropped_host_work_ns"] == 0 and info["kept_host_work_ns"] > 0.4 * measured
    # oracle: on every host thread that dispatches (framework ops, CUDA calls), kept + replaced time partition
    # the span from its first to its last row (a thread of Python frames only keeps nothing)
    source = load_kineto_builder(src)
    oh, tracks = source.table("host_ops"), source.table("tracks")
    host = oh[oh["track"].isin(tracks.index[tracks["kind"].astype(str) == "thread"])]
    span = sum(int((g.start_ts + g.duration_ns).max() - g.start_ts.min()) for _, g in host.groupby("track")
               if g["category"].astype(str).isin(["cpu_op", "cuda_runtime", "cuda_driver"]).any())
    assert info["kept_host_work_ns"] + info["replaced_by_dispatch_model_ns"] == span
    kept = b.table("host_ops")
    kept = kept[kept["name"].astype(str) == KEPT_HOST_WORK]
    assert int(kept["duration_ns"].sum()) == info["kept_host_work_ns"]  # each costs the target its measured time
    assert (kept["duration_ns"] == kept["measured_duration_ns"]).all()
    # without it, the old projection: the Python time is dropped, and the header says so
    lean = project_trace(src, "trn2", keep_host_work=False)
    assert _step(lean)[0] < 0.5 * measured
    assert json.loads(lean.header.metadata["projection_host_time"])["dropped_host_work_ns"] == info["kept_host_work_ns"]
