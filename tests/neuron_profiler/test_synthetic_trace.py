"""The synthetic trace generator used by tests, benchmarks and the explorer's demo."""
from __future__ import annotations

from pathlib import Path

import numpy as np
import pytest

from neuron_profiler.synthetic_trace import ENGINES, write_synthetic_trace
from neuron_profiler.trace import read_trace


def test_mix_and_counts_follow_the_parameters(tmp_path: Path) -> None:
    p = write_synthetic_trace(tmp_path / "s.nprof", 24_000, cores=2, steps=3, host_ops_per_step=40, dma_queues=4,
                              n_dma=8_000, collectives_per_step=5, fp32_fraction=0.25, transpose_fraction=0.5,
                              chunk_rows=4096, seed=1)
    tf = read_trace(p)
    ins, dma, host, cc = (tf.table(t) for t in ("instructions", "dma", "host_ops", "collectives"))
    assert len(ins) == 24_000 and len(dma) == 8_000
    assert (host["category"] == "cpu_op").sum() == 3 * 40 and (host["category"] == "user_annotation").sum() == 3
    assert len(cc) == 15 and cc["sequence_number"].tolist() == list(range(15))
    assert cc["start_ts"].is_monotonic_increasing and (cc["start_ts"].diff().dropna() > cc["duration_ns"].iloc[0]).all()
    assert 0.22 < (ins["dtype"] == "float32").mean() < 0.28
    tr = ins["tensor_instruction_type"] == "TRANSPOSE"
    assert set(ins.loc[tr, "engine"].astype(str)) == {"TensorMatrix"}
    assert 0.4 < tr[ins["engine"] == "TensorMatrix"].mean() < 0.6
    tracks = tf.table("tracks")
    assert (tracks["kind"] == "engine").sum() == 2 * len(ENGINES) and (tracks["kind"] == "dma_queue").sum() == 8
    for _, g in ins.groupby("track"):  # one engine never runs two instructions at once
        s = g.sort_values("start_ts")
        assert (s["start_ts"].to_numpy()[1:] >= (s["start_ts"] + s["duration_ns"]).to_numpy()[:-1]).all()
    assert ins["framework_op"].between(0, len(host) - 1).all()
    assert np.isin(ins["framework_op"], host.index[host["category"] == "cpu_op"]).all()


def test_defaults_stay_bfloat16_and_reproducible(tmp_path: Path) -> None:
    a = read_trace(write_synthetic_trace(tmp_path / "a.nprof", 3_000, seed=4)).table("instructions")
    b = read_trace(write_synthetic_trace(tmp_path / "b.nprof", 3_000, seed=4)).table("instructions")
    assert a.equals(b) and set(a["dtype"].astype(str)) == {"bfloat16"}
    with pytest.raises(ValueError, match="dma_queues"):
        write_synthetic_trace(tmp_path / "c.nprof", 10, dma_queues=9)
