"""Every public analysis on an empty trace and on host-only traces (no device rows): no exception, the
documented columns, and empty / zero / NaN values (never made-up numbers)."""
from __future__ import annotations

import inspect
import math

import numpy as np
import pandas as pd
import plotly.graph_objects as go
import pytest
from _traces import gpu_builder, neuron_builder

import analysis
import analysis.figures as F
from analysis import registry
from analysis.analyses import breakdown as B
from analysis.analyses.dma import THROUGHPUT_COLUMNS
from analysis.analyses.hot_ops import HOT_OPS_COLUMNS
from analysis.analyses.steps import STEP_COLUMNS
from analysis.analyses.summary import SUMMARY_COLUMNS
from analysis.figures import breakdown as FB
from neuron_profiler.hardware import neuron_device
from neuron_profiler.trace import TraceBuilder, make_header


def _empty():
    return analysis.Trace.from_builder(TraceBuilder(make_header("tests", devices=[neuron_device("trn2")])),
                                       name="empty")


def _host_rows(b, thread):
    b.add_rows("host_ops", {"track": thread, "name": ["ProfilerStep#1", "aten::mm"],
                            "category": ["user_annotation", "cpu_op"], "start_ts": [0, 10],
                            "duration_ns": [100, 50], "input_shapes": ["[]", "[[4,4],[4,4]]"],
                            "input_dtypes": ["[]", '["float","float"]']})


def _neuron_host_only():
    b, t = neuron_builder()
    _host_rows(b, t["thread"])
    return analysis.Trace.from_builder(b, name="neuron_host_only")


def _gpu_host_only():
    b, t = gpu_builder()
    _host_rows(b, t["thread"])
    return analysis.Trace.from_builder(b, name="gpu_host_only")


TRACES = {"empty": _empty, "neuron_host_only": _neuron_host_only, "gpu_host_only": _gpu_host_only}

def _callable_without_arguments(spec) -> bool:
    params = list(inspect.signature(spec.func).parameters.values())[1:]
    return all(p.default is not inspect.Parameter.empty or p.kind is p.VAR_KEYWORD for p in params) \
        or spec.subject == "pair"


#: registered analyses that still have rows without device work (from the header or the host ops)
HAS_ROWS = {"summary": "all", "temporal_breakdown": "all", "comm_comp_overlap": "all", "roofline_ceilings": "all",
            "dma_throughput": "span", "steps": "host", "hot_ops": "host", "rank_balance": "all",
            "rank_timeline": "host", "regions": "host", "time_split": "span",
            "flops_breakdown": "all", "summary_items": "all",
            "memory_summary": "all"}  # the last three: one row per item, NaN with the reason
# the registry generates this list: every analysis that runs on a trace without arguments
ANALYSES = sorted(n for n, s in registry.REGISTRY.items()
                  if s.subject in ("trace", "traces", "pair") and s.returns in ("frame", "frames")
                  and _callable_without_arguments(s))


def _call(spec, t):
    if spec.subject == "traces":
        return spec.wrapper([t])
    if spec.subject == "pair":
        return spec.wrapper(t, t)
    return spec.wrapper(t)


@pytest.mark.parametrize("kind", sorted(TRACES))
@pytest.mark.parametrize("name", ANALYSES)
def test_no_device_rows_gives_empty_frames(kind, name):
    spec = registry.REGISTRY[name]
    out = _call(spec, TRACES[kind]())
    frames = list(out) if spec.returns == "frames" else [out]
    assert all(isinstance(df, pd.DataFrame) for df in frames)
    cols = set().union(*(set(df.columns) | {df.index.name} for df in frames))
    assert set(spec.column_names) <= cols, set(spec.column_names) - cols
    expect = HAS_ROWS.get(name)
    if expect is None or (expect == "host" and kind == "empty") or (expect == "span" and kind == "empty"):
        assert all(len(df) == 0 for df in frames), name


def test_the_empty_trace_list_covers_the_registry():
    assert {"summary", "hot_ops", "roofline", "recommendations", "kernel_breakdown", "idle_time_breakdown",
            "instruction_work", "collectives", "collectives_across_ranks", "dma_queues", "dma_sizes", "diff",
            "run_recommendations", "device_activity"} <= set(ANALYSES)


@pytest.mark.parametrize("kind", sorted(TRACES))
def test_hot_ops_by_op_keeps_cpu_only_ops(kind):
    h = analysis.hot_ops(TRACES[kind]())
    assert list(h.columns) == HOT_OPS_COLUMNS and h.index.name == "op"
    if kind == "empty":
        assert len(h) == 0
    else:  # documented: CPU-only ops appear with device time 0 and their host time
        assert h["host_time_ns"].to_dict() == {"ProfilerStep#1": 100.0, "aten::mm": 50.0}
        assert (h["instructions"] == 0).all() and (h["device_time_self_ns"] == 0).all()
        assert h["achieved_flops_per_s"].isna().all()


@pytest.mark.parametrize("kind", sorted(TRACES))
def test_summary_without_device_rows(kind):
    t = TRACES[kind]()
    s = analysis.summary(t)
    assert list(s.columns) == SUMMARY_COLUMNS
    v = dict(zip(s["metric"], s["value"]))
    assert v["device_active_percent"] in (0.0,) or math.isnan(v["device_active_percent"])
    for m in ("mfu_estimated_percent", "hfu_estimated_percent", "mbu_estimated_percent", "idle_percent",
              "comm_comp_overlap_percent", "idle_host_wait_percent", "dma_transfer_average_bytes"):
        assert math.isnan(v[m]), m
    assert math.isnan(v["model_flops"]) and v["active_cores"] == 0 and v["dma_transfer_count"] == 0  # unknown, not 0
    # every NaN says why
    nan_rows = s[s["value"].isna()]
    assert (nan_rows["description"].str.len() > 0).all()
    if kind != "empty":  # the host ops still give the span and the steps
        assert v["total_time"] == 100 and v["step_count"] == 1


@pytest.mark.parametrize("kind", sorted(TRACES))
def test_breakdowns_without_device_rows(kind):
    t = TRACES[kind]()
    tb = t.temporal_breakdown()
    assert list(tb.columns) == B.TEMPORAL_COLUMNS and len(tb) == 1
    ns = [c for c in B.TEMPORAL_COLUMNS[1:] if c.endswith("_ns")]
    pct = [c for c in B.TEMPORAL_COLUMNS[1:] if c.endswith("_pctg")]
    assert (tb[ns].to_numpy() == 0).all()             # no device time
    assert np.isnan(tb[pct].to_numpy(dtype=float)).all()  # shares of a 0 ns span: unknown, not 0 %
    ov = t.comm_comp_overlap()
    assert list(ov.columns) == B.OVERLAP_COLUMNS
    assert ov["comm_time_ns"].iloc[0] == 0 and math.isnan(ov["comp_comm_overlap_pctg"].iloc[0])
    assert len(t.device_activity()) == 0


@pytest.mark.parametrize("kind", sorted(TRACES))
def test_steps_dma_throughput_and_ceilings_without_device_rows(kind):
    t = TRACES[kind]()
    st = analysis.steps(t)
    assert list(st.columns) == STEP_COLUMNS and len(st) == (0 if kind == "empty" else 1)
    th = analysis.dma_throughput(t)
    assert list(th.columns) == THROUGHPUT_COLUMNS
    if kind == "empty":
        assert len(th) == 0
    else:  # a span but no DMA: zero bytes in every bin
        assert len(th) == 200 and (th["bytes"].to_numpy() == 0).all()
    assert (np.diff(th["bin_start_ts"].to_numpy()) >= 0).all()
    assert len(analysis.roofline_ceilings(t)) > 0  # from the header: the device is known either way


@pytest.mark.parametrize("kind", sorted(TRACES))
def test_figures_without_device_rows(kind):
    t = TRACES[kind]()
    figs = [F.summary_figure(t), F.steps_figure(t), F.hot_ops_figure(t), F.module_treemap_figure(t),
            F.roofline_figure(t), F.collectives_figure(t), F.skew_heatmap(analysis.collectives_across_ranks([t])),
            F.dma_throughput_figure(t), F.dma_queues_figure(t), F.dma_sizes_figure(t),
            F.diff_figure(analysis.diff(t, t)), F.recommendations_figure(t), FB.kernel_breakdown_figure(t),
            FB.temporal_breakdown_figure(t), FB.idle_time_figure(t), FB.comm_comp_overlap_figure(t)]
    assert all(isinstance(f, go.Figure) for f in figs)
