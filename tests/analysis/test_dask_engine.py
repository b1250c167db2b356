"""engine="dask" of the cross-rank analyses: the same frames as the pandas path (the reference), on a small
LocalCluster over a synthetic run whose stragglers and slow links are known (the generator's truth)."""
from __future__ import annotations

import pandas as pd
import pytest

import analysis
from analysis import distributed as D
from analysis.analyses.ranks import cross_rank_report
from neuron_profiler.synthetic_run import write_synthetic_run

distributed = pytest.importorskip("distributed")
pytestmark = pytest.mark.slow  # a LocalCluster per module: ~15 s in all

STRAGGLERS, SLOW_LINKS = {2: 2.0}, {5: 3.0}


@pytest.fixture(scope="module")
def run(tmp_path_factory):
    truth = write_synthetic_run(tmp_path_factory.mktemp("dask_run"), ranks=8, events_per_rank=4_000, tp_size=4,
                                stragglers=STRAGGLERS, slow_links=SLOW_LINKS)
    return truth, analysis.load(truth["paths"][0].rsplit("/", 1)[0])


@pytest.fixture(scope="module")
def client():
    # two worker processes of one thread: the tasks really cross a process boundary (pickled parts)
    with distributed.LocalCluster(n_workers=2, threads_per_worker=1, processes=True, host="127.0.0.1",
                                  dashboard_address="127.0.0.1:0") as cluster, distributed.Client(cluster) as c:
        yield c


@pytest.fixture(scope="module")
def both(run, client):
    _, ts = run
    return cross_rank_report(ts), cross_rank_report(ts, engine="dask", scheduler=client)


def test_dask_and_pandas_give_identical_frames(both):
    ref, dk = both
    assert set(ref) == set(dk) and len(ref["rank_balance"]) == 8 and len(ref["rank_timeline"])
    for name in ref:
        pd.testing.assert_frame_equal(ref[name], dk[name], obj=name)


def test_both_find_every_injected_straggler_and_slow_link(run, both):
    truth, _ = run
    for x in both:
        s = x["stragglers"]
        assert sorted(s.loc[s["straggler"], "rank"]) == sorted(int(r) for r in truth["stragglers"])
        sl = x["slow_links"]
        assert sorted(sl.loc[sl["slow_link"], "process_group"]) == truth["slow_groups"] == ["tp4"]
        # the slow group's transfers are the injected factor slower than the healthy group's
        assert sl.set_index("process_group").loc["tp4", "slowdown_vs_peers"] == pytest.approx(3.0, rel=0.01)
        rec = x["run_recommendations"]
        assert set(rec["rule"]) == {"straggler", "slow_link"}
        assert rec.loc[rec["rule"] == "straggler", "rank"].tolist() == [2]
        # every step: the straggler made the others wait most
        st = x["slowest_ranks_per_step"]
        assert len(st) == truth["steps"] and (st["last_arrival_rank"] == 2).all()


def test_the_public_functions_take_the_engine(run, both, client):
    _, ts = run
    ref, _ = both
    pd.testing.assert_frame_equal(analysis.rank_balance(ts, engine="dask", scheduler=client), ref["rank_balance"])
    pd.testing.assert_frame_equal(analysis.collectives_across_ranks(ts, engine="dask", scheduler=client),
                                  ref["collectives_across_ranks"])
    pd.testing.assert_frame_equal(ts.stragglers(), ref["stragglers"])
    # a window of a trace is analysed as that window on the workers too
    lo, hi = ts[0].time_range
    wins = [t.window(lo, lo + (hi - lo) // 2) for t in ts]
    pd.testing.assert_frame_equal(analysis.rank_timeline(wins, engine="dask", scheduler=client),
                                  analysis.rank_timeline(wins))


def test_local_cluster_by_default(run):
    _, ts = run
    sub = ts.traces[:4]  # one tensor-parallel group: the straggler's
    out = analysis.stragglers(sub, engine="dask", workers=1)
    pd.testing.assert_frame_equal(out, analysis.stragglers(sub))
    assert out.loc[out["straggler"], "rank"].tolist() == [2]


def test_bad_engine_scheduler_and_in_memory_traces_are_one_line_errors(run, monkeypatch):
    _, ts = run
    monkeypatch.setattr(D, "CONNECT_TIMEOUT_S", 1)
    with pytest.raises(ValueError, match=r"cannot connect to the Dask scheduler at 'tcp://127.0.0.1:9'") as e:
        analysis.rank_balance(ts, engine="dask", scheduler="tcp://127.0.0.1:9")
    assert "\n" not in str(e.value)
    with pytest.raises(ValueError, match="unknown engine 'spark'; valid: pandas, dask"):
        analysis.rank_balance(ts, engine="spark")
    with pytest.raises(ValueError, match="scheduler must be an address"):
        analysis.rank_balance(ts, engine="dask", scheduler=8786)
    with pytest.raises(ValueError, match="for engine='dask'"):
        analysis.rank_balance(ts, scheduler="tcp://127.0.0.1:9")
    from analysis import Trace
    from neuron_profiler.trace import TraceBuilder, make_header

    mem = [Trace.from_builder(TraceBuilder(make_header("tests")), name="mem")]
    with pytest.raises(ValueError, match="trace 'mem' has none"):
        analysis.rank_balance(mem, engine="dask", workers=1)


def test_missing_dask_is_a_one_line_error(run, monkeypatch):
    _, ts = run
    import builtins

    real = builtins.__import__

    def no_dask(name, *a, **k):
        if name == "distributed" or name.startswith("distributed."):
            raise ImportError("No module named 'distributed'")
        return real(name, *a, **k)

    monkeypatch.setattr(builtins, "__import__", no_dask)
    with pytest.raises(ImportError, match=r"pip install 'neuron-profiler\[dask\]'"):
        analysis.rank_balance(ts, engine="dask")


def test_cli_runs_the_run_report_on_dask(run, capsys, monkeypatch):
    from analysis.cli import main

    truth, ts = run
    folder = truth["paths"][0].rsplit("/", 1)[0]
    assert main([folder, "--workers", "1"]) == 0
    out = capsys.readouterr().out
    assert "Rank 2 arrives last" in out and "Process group tp4" in out and "Slowest ranks per step" in out
    assert "Hot ops" not in out  # with dask only the run report: the ranks are not loaded here
    monkeypatch.setattr(D, "CONNECT_TIMEOUT_S", 1)
    assert main([folder, "--scheduler", "tcp://127.0.0.1:9"]) == 2
    err = capsys.readouterr().err
    assert err.count("\n") == 1 and "cannot connect to the Dask scheduler" in err
    assert main([folder, "--engine", "pandas", "--workers", "2"]) == 2
    assert "need --engine dask" in capsys.readouterr().err


def test_release_frees_a_rank_and_it_loads_again(run):
    truth, _ = run
    t = analysis.load(truth["paths"][2])
    w = t.window(*t.time_range)
    before = analysis.rank_balance([w])
    assert t._shared["tables"]  # loaded by the analysis
    w.release()
    assert not t._shared["tables"] and not t._shared["memo"] and "whole" not in t._shared
    pd.testing.assert_frame_equal(analysis.rank_balance([w]), before)  # loads again on demand


def test_map_files_keeps_the_order_and_raises_a_task_error(client):
    items = [(str(i),) for i in range(12)]
    assert D.map_files(int, items, scheduler=client) == list(range(12))
    with pytest.raises(ValueError, match="invalid literal for int"):
        D.map_files(int, [("1",), ("not a number",)], scheduler=client)
