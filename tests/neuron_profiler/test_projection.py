"""Projection of real GPU traces onto a Trainium target (neuron-trace project)."""
import numpy as np
import pytest

from neuron_profiler.cli import main
from neuron_profiler.projection import project_trace
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
