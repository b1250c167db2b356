"""The terminal report (neuron-analyze) shows what the analyses return, formatted; and the shared formatter."""
from __future__ import annotations

import math
import shutil

import pytest
from realdata import real_trace, sample_trace

import analysis
from analysis.cli import main
from analysis.report import KEY_METRICS, text_report, trace_report
from analysis.units import format_value


@pytest.mark.parametrize("value,unit,text", [
    (89_945_240.0, "ns", "89.95 ms"), (500.0, "ns", "500 ns"), (1_032_519_680.0, "bytes", "984.7 MiB"),
    (4084.0, "count", "4,084"), (0.0923, "percent", "0.0923 %"), (7.864e13, "FLOP/s", "78.64 TFLOP/s"),
    (7.25e11, "bytes/s", "725 GB/s"), (math.nan, "ns", "n/a"), (None, "count", "n/a"),
    (2.847, "FLOP/byte", "2.847 FLOP/byte"),
])
def test_format_value(value, unit, text):
    assert format_value(value, unit) == text


def test_trace_report_shows_the_analyses():
    t = analysis.load(sample_trace("gpt_train_step.nprof"))
    out = trace_report(t, top=4)
    s = analysis.summary(t).set_index("metric")
    for m in KEY_METRICS:  # shown by their labels, never by identifier
        if m in s.index:
            line = next(ln for ln in out.splitlines() if ln.strip().startswith(s.loc[m, "label"] + "  "))
            assert line.rstrip().endswith(format_value(s.loc[m, "value"], s.loc[m, "unit"])), m
            assert m not in out.split("Hot ops")[0], m
    ho = analysis.hot_ops(t)
    lines = out.split("Hot ops")[1].split("Recommendations")[0].splitlines()
    shown = [ln.split()[0] for ln in lines if ln.startswith("  aten::")]
    assert shown == list(ho.index[:4])
    assert "nan" not in "\n".join(lines)  # an unknown rate reads n/a, and the op's note says why
    for op in ho.index[:4]:
        if ho.loc[op, ["achieved_flops_per_s", "achieved_bandwidth_bytes_per_s"]].isna().any() and ho.loc[op, "note"]:
            assert f"  n/a {op}: {ho.loc[op, 'note']}" in lines
    rec = analysis.recommendations(t)
    assert f"Recommendations ({len(rec)})" in out and all(title in out for title in rec["title"].head(4))
    assert "device events simulated by neuron_profiler.simulated 2.0 for trn2)" in out.splitlines()[0]


def test_run_report_starts_with_the_load_balance(tmp_path):
    # a run with a known straggler (the generator's truth): rank 2 computes 1.5x more per step
    from neuron_profiler.synthetic_run import write_synthetic_run

    truth = write_synthetic_run(tmp_path, ranks=4, events_per_rank=4_000, tp_size=2, layers=1, hidden=512,
                                tokens=512, stragglers={2: 1.5})
    ts = analysis.load(tmp_path / "synthetic_run")
    out = text_report(ts, top=2)
    assert out.startswith("Run synthetic_run: 4 traces") and out.count("(rank ") == 4
    table = out.split("Load balance across ranks")[1].split("Across ranks")[0]
    rows = [ln.split() for ln in table.splitlines() if ln.strip()[:1].isdigit()]
    rb = analysis.rank_balance(ts)
    assert [int(r[0]) for r in rows] == rb["rank"].tolist()
    assert [int(r[6]) for r in rows] == rb["times_last"].tolist()
    # the straggler of the load-balance table is a finding with its rank and the time lost
    worst = rb.sort_values("total_wait_caused_ns").iloc[-1]
    rr = analysis.run_recommendations(ts)
    span = max(t.time_range[1] for t in ts) - min(t.time_range[0] for t in ts)
    assert rr["rank"].iloc[0] == worst["rank"] == 2 and list(truth["stragglers"]) in ([2], ["2"])
    assert rr["est_time_saved_ns"].iloc[0] == min(worst["total_wait_caused_ns"], span)  # never more than the span
    assert f"Rank {int(worst['rank'])} arrives last" in out.split("Across ranks")[1].split("=" * 100)[0]


def test_cli_exit_codes_and_rank_filter(tmp_path, capsys):
    for r in (0, 1):
        shutil.copy(sample_trace(f"ddp_train_rank{r}.nprof"), tmp_path)
    assert main([str(tmp_path), "--rank", "1", "--top", "1"]) == 0
    out = capsys.readouterr().out
    assert "ddp_train_rank1" in out and "ddp_train_rank0" not in out and "Load balance" not in out
    assert main([str(tmp_path), "--rank", "7"]) == 2
    assert "no trace of rank 7" in capsys.readouterr().err
    assert main([str(tmp_path / "missing.nprof")]) == 2
    (tmp_path / "bad.nprof").write_bytes(b"not a trace")
    assert main([str(tmp_path / "bad.nprof")]) == 2
    err = capsys.readouterr().err
    assert err.count("\n") == 2 and "not a Neuron trace" in err  # one line per failure


def test_cli_on_a_kineto_trace_without_cache(tmp_path, capsys):
    src = tmp_path / "bert.json.gz"
    shutil.copy(real_trace("TraceLens/h100/gaunernst_bert-small-uncased__1016001.json.gz"), src)
    assert main([str(src), "--no-cache", "--all-metrics"]) == 0
    out = capsys.readouterr().out
    assert "NVIDIA H100" in out and "Hot ops" in out
    assert len(analysis.summary(analysis.load(src, cache=False))) == sum(
        1 for ln in out.split("Hot ops")[0].splitlines()[4:] if ln.startswith("  "))
    assert sorted(p.name for p in tmp_path.iterdir()) == ["bert.json.gz"]  # nothing cached beside it
