"""Figure builders return plotly Figures whose data are the analysis numbers."""
import numpy as np
import pandas as pd
import plotly.graph_objects as go
import pytest
from _traces import collective_rank, two_matmul_trace

import analysis
from analysis import figures as F


@pytest.fixture
def trn():
    return analysis.Trace.from_builder(two_matmul_trace())


def test_hot_ops_and_summary_figures(trn):
    fig = F.hot_ops_figure(trn)
    assert isinstance(fig, go.Figure)
    self_bar = next(d for d in fig.data if d.name == "self")
    h = trn.hot_ops()
    bars = dict(zip(self_bar.y, self_bar.x))
    assert bars["aten::mm"] == pytest.approx(h.loc["aten::mm", "device_time_self_ns"] / 1e3)
    s = F.summary_figure(trn).data[0]
    assert dict(zip(s.y, s.x))["MFU (estimated)"] == pytest.approx(trn.summary_dict()["mfu_estimated_percent"])
    assert list(F.steps_figure(trn).data[0].y) == pytest.approx([2.1e-3, 1.9e-3])


def test_roofline_figure_has_ceilings_and_points(trn):
    fig = F.roofline_figure(trn)
    lines = [d for d in fig.data if d.mode == "lines"]
    pts = [d for d in fig.data if d.mode == "markers"]
    assert any("bfloat16" in d.name for d in lines)
    assert pts and pts[0].text[0] == "aten::mm"
    assert pts[0].x[0] == pytest.approx(trn.roofline()["arithmetic_intensity"].iloc[0])
    assert fig.layout.xaxis.type == "log"


def test_other_figures_and_empty_states(trn):
    for fig in (F.dma_throughput_figure(trn), F.dma_queues_figure(trn), F.dma_sizes_figure(trn),
                F.collectives_figure(trn), F.recommendations_figure(trn)):
        assert isinstance(fig, go.Figure) and not fig.data and fig.layout.annotations   # "no ... " note
    pair = [analysis.Trace.from_builder(collective_rank(r, [1000 + 300 * r], [900], seqs=[0])) for r in (0, 1)]
    fig = F.skew_heatmap(pair)
    hm = fig.data[0]
    assert np.asarray(hm.z).tolist() == [[0.0, 0.3]]
    m = analysis.collectives_across_ranks(pair)
    assert list(hm.y) == [f"all_reduce #0 (group {m['process_group'].iloc[0]})"]  # words, not the "pg#seq" key
    assert "arrival delay" in fig.layout.title.text and "_ns" not in fig.layout.title.text
    assert hm.zmin == 0 and list(fig.layout.yaxis.tickvals) == list(hm.y)  # no delay is white; every row labelled
    two_runs = pd.concat([m, m.assign(collective="other:" + m["collective"])])
    ys = list(F.skew_heatmap(two_runs).data[0].y)
    assert len(ys) == 2 and len(set(ys)) == 2  # the same collective of two runs: two rows, not one merged
    d = analysis.diff(trn, trn)
    same = F.diff_figure(d)  # a trace against itself: no bar, the reason instead of an empty axis
    assert not same.data and f"each of the {len(d):,} aligned rows" in same.layout.annotations[0].text
    changed = d.copy()
    changed.loc[changed.index[0], "delta_ns"] = 1000.0
    changed.loc[changed.index[0], "slower_per_call_ns"] = 1000.0
    assert len(F.diff_figure(changed).data) == 3
    assert F.collectives_figure(pair[0]).data[0].name == "all_reduce"


def test_breakdown_builders_are_reexported():
    import analysis.figures.breakdown as B

    assert F.temporal_breakdown_figure is B.temporal_breakdown_figure
    assert analysis.temporal_breakdown is analysis.analyses.breakdown.temporal_breakdown
    with pytest.raises(AttributeError, match="no_such_figure"):
        _ = F.no_such_figure


def test_roofline_figure_plots_given_rows_by_engine_with_row_labels(trn):
    r = trn.roofline()
    fig = F.roofline_figure(trn, ops=r[r["op"] == "aten::mm"], color_by="engine")
    pts = [d for d in fig.data if d.mode == "markers"]
    assert [d.name for d in pts] == sorted(set(r.loc[r["op"] == "aten::mm", "engine"]))
    labels = [int(c[3]) for d in pts for c in d.customdata]
    assert sorted(labels) == sorted(r.index[(r["op"] == "aten::mm") & (r["flops"] > 0)])
    with pytest.raises(ValueError, match="bound, engine"):
        F.roofline_figure(trn, color_by="op")


def test_roofline_figure_of_a_trace_without_ops_draws_ceilings_only(trn):
    fig = F.roofline_figure(trn, ops=trn.roofline().iloc[:0].astype(object))
    assert fig.data and all(d.mode == "lines" for d in fig.data)


def test_module_treemap_figure_nests_modules(trn):
    import pandas as pd

    h = pd.DataFrame({"device_time_self_ns": [1000.0, 2000.0, 3000.0, 500.0]},
                     index=pd.Index(["Net", "Net.fc1", "Net.block.fc2", ""], name="module"))
    tm = F.module_treemap_figure(h).data[0]
    assert list(tm.ids) == ["Net", "Net.fc1", "Net.block.fc2"]
    assert list(tm.parents) == ["", "Net", "Net"]          # Net.block is not listed: nearest listed ancestor
    assert list(tm.values) == pytest.approx([1.0, 2.0, 3.0])
    assert list(F.module_treemap_figure(trn).data[0].ids) == [str(m) for m in trn.hot_ops(by="module").index]
