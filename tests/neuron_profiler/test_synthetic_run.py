"""Synthetic multi-rank runs on the simulated runtime: the injected stragglers and slow links are in the data."""
import json

import numpy as np
import pytest

from neuron_profiler.synthetic_run import write_synthetic_run
from neuron_profiler.trace import read_trace


@pytest.fixture(scope="module")
def run(tmp_path_factory):
    out = tmp_path_factory.mktemp("run")
    truth = write_synthetic_run(out, ranks=8, events_per_rank=20_000, tp_size=4, stragglers={3: 2.0},
                                slow_links={6: 3.0})
    return truth, [read_trace(p) for p in truth["paths"]]


def test_files_truth_and_size(run):
    truth, tfs = run
    assert [t.header.rank for t in tfs] == list(range(8)) and {t.header.world_size for t in tfs} == {8}
    assert len({t.header.run_id for t in tfs}) == 1
    assert truth["slow_groups"] == ["tp4"] and truth["stragglers"] == {"3": 2.0}
    saved = json.loads((__import__("pathlib").Path(truth["paths"][0]).parent / "truth.json").read_text())
    assert saved["groups"]["tp4"] == [4, 5, 6, 7]
    for t in tfs:
        n = t.row_counts["instructions"] + t.row_counts["dma"] + t.row_counts["collectives"]
        assert 10_000 < n < 40_000


def test_collectives_end_together_and_the_straggler_arrives_last(run):
    _, tfs = run
    dp = [t.table("collectives").query("process_group == 'dp'").sort_values("sequence_number") for t in tfs]
    starts = np.stack([d["start_ts"].to_numpy() for d in dp])
    ends = starts + np.stack([d["duration_ns"].to_numpy() for d in dp])
    assert np.ptp(ends, axis=0).max() <= 1  # the transfer runs on every member once the last one arrived
    # each row starts at the rank's arrival: the straggler (rank 3) is last, the others were there before it
    assert (np.argmax(starts, axis=0) == 3).all() and (np.ptp(starts, axis=0) > 0).all()
    # the straggler is the last to be ready: its host's op stream ended latest before each collective
    host = np.stack([t.table("host_ops").query("name == 'record_param_comms'").sort_values("start_ts")
                     ["start_ts"].to_numpy() for t in tfs])
    assert (np.argmax(host, axis=0) == 3).all()


def test_the_straggler_computes_more_with_the_same_messages(run):
    _, tfs = run
    busy = [t.table("instructions", ["duration_ns"])["duration_ns"].sum() for t in tfs]
    assert busy[3] > max(busy[:3] + busy[4:])  # stragglers={3: 2.0}: twice the tokens per op
    sizes = [sorted(t.table("collectives")["input_size"]) for t in tfs]
    assert sizes[3] == sizes[0]


def test_cli_writes_the_run_and_its_truth(tmp_path, capsys):
    from neuron_profiler.synthetic_run import main

    assert main([str(tmp_path), "--ranks", "4", "--events", "2000", "--straggler", "1:1.5",
                 "--slow-link", "2:3", "--run-id", "cli"]) == 0
    truth = json.loads((tmp_path / "cli" / "truth.json").read_text())
    assert truth["stragglers"] == {"1": 1.5} and truth["slow_groups"] == ["tp0"] and len(truth["paths"]) == 4
    assert main([str(tmp_path), "--ranks", "4", "--straggler", "9:2"]) == 2
    assert "outside the run" in capsys.readouterr().err


def test_slow_link_slows_only_its_tensor_parallel_group(run):
    _, tfs = run
    dur = {pg: g["duration_ns"].mean() for t in tfs for pg, g in t.table("collectives").groupby("process_group")}
    assert dur["tp4"] == pytest.approx(3.0 * dur["tp0"], rel=0.01)
