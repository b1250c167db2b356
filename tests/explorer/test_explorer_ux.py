"""The explorer on the bundled sample folder (what the Quickstart opens): Compare's default partner is a trace of
the same model or run and aligns by op when the module names differ; the picker and the page title name the
model and run; the simulated banner names the model, target and assumptions; Collectives of a single trace links
the runs served; the SQL chart cuts long labels."""
from __future__ import annotations

import json

import pytest
from realdata import sample_trace
from test_explorer_pages import _find

import analysis
from explorer.app import build_page
from explorer.pages import compare
from explorer.pages.common import Ctx
from explorer.state import ViewState
from explorer.store import TraceStore


@pytest.fixture(scope="module")
def samples():
    return Ctx(TraceStore(sample_trace("gpt_train_step.nprof").parent))


def _dump(component) -> str:
    import plotly

    return json.dumps(component, cls=plotly.utils.PlotlyJSONEncoder)


@pytest.mark.parametrize("base, partner, keys", [
    ("gpt_train_step.nprof", "gpt_train_step_compiled.nprof", ["op"]),
    ("gpt_train_step_compiled.nprof", "gpt_train_step.nprof", ["op"]),
    ("ddp_train_rank0.nprof", "ddp_train_rank1.nprof", ["op", "module", "shape"]),
    ("group:ddp_train", "ddp_train_rank1.nprof", ["op", "module", "shape"]),
])
def test_compare_defaults_pair_the_same_model_or_run(samples, base, partner, keys):
    page = compare.layout(samples, ViewState(page="compare", trace=base))
    assert _find(page, "cmp-b").value == partner
    assert _find(page, "cmp-keys").value == keys
    # oracle: analysis.diff of the default pair by the default keys has rows present in both traces
    a = _find(page, "cmp-a").value
    df = analysis.diff(samples.store.trace(a), samples.store.trace(partner), keys=tuple(keys))
    both = int(((df["calls_a"] > 0) & (df["calls_b"] > 0)).sum())
    assert both > 0 and f"{both:,} present in both" in _dump(page)
    assert "B is " in _dump(_find(page, "cmp-why"))


def test_compare_never_defaults_to_an_unrelated_trace(samples):
    page = compare.layout(samples, ViewState(page="compare", trace="cnn_inference.nprof"))
    assert _find(page, "cmp-b").value is None
    s = _dump(page)
    assert "No default for B" in s and "choose two traces" in s
    # the user's choice is kept, whatever it is
    chosen = compare.layout(samples, ViewState(page="compare", trace="cnn_inference.nprof",
                                               other="gpt_train_step.nprof"))
    assert _find(chosen, "cmp-b").value == "gpt_train_step.nprof"


def test_picker_labels_and_title_name_model_and_run(samples):
    labels = {e.key: e.label for e in samples.store.entries()}
    assert labels["gpt_train_step_compiled.nprof"].startswith(
        "gpt_train_step_compiled.nprof — GPT (14.8 M parameters) · run gpt_train_step_compiled")
    assert labels["ddp_train_rank1.nprof"].endswith("run ddp_train · rank 1 of 2")
    assert labels["group:ddp_train"] == "ddp_train (2 ranks) — GPT"
    page = build_page(samples, ViewState(page="hot_ops", trace="gpt_train_step.nprof"))
    title = _find(page, "trace-title").children
    assert title == "GPT (14.8 M parameters) · run gpt_train_step"
    assert _find(page, "doc-title").data == f"Hot ops · {title} — neuron-explorer"
    group = build_page(samples, ViewState(page="summary", trace="group:ddp_train", rank=1))
    assert _find(group, "trace-title").children == "ddp_train (2 ranks) — GPT · showing rank 1"


def test_simulated_banner_names_model_target_and_assumptions(samples):
    page = build_page(samples, ViewState(page="summary", trace="gpt_train_step.nprof"))
    sim = samples.store.trace("gpt_train_step.nprof").header.simulation
    text = _dump(_find(page, "sim-banner"))
    assert f"device events simulated by {sim.model} for trn2, not measured on hardware" in text
    assert "Assumptions: topology trn2.48xlarge" in text and "host timeline is projected" in text
    assert f"; {len(sim.assumptions) - 1} model constants, listed below" in text
    details = _find(page, "sim-assumptions")
    items = details.children[1].children
    assert len(items) == len(sim.assumptions) and f"The {len(sim.assumptions)} assumptions" in _dump(details)


def test_sql_chart_keeps_one_bar_per_row_and_cuts_long_labels():
    import pandas as pd

    from explorer.pages.query import _chart

    long = "void cutlass::Kernel2<cutlass_80_wmma_tensorop_bf16_s161616gemm_bf16_32x32_128x2_tn_align8>(Params)"
    df = pd.DataFrame({"name": [long, "aten::mm", "aten::mm"], "total_ns": [3_000_000, 2_000_000, 1_000_000]})
    fig = _chart(df, "total_ns", 0)
    bar = fig.data[0]
    assert list(bar.x) == [0, 1, 2] and list(bar.y) == [3.0, 2.0, 1.0]  # ms; the repeated name keeps two bars
    assert list(bar.hovertext) == [long, "aten::mm", "aten::mm"]
    ticks = list(fig.layout.xaxis.ticktext)
    assert ticks[0] == long[:27] + "…" and ticks[1:] == ["aten::mm", "aten::mm"]


def test_collectives_of_a_single_trace_links_the_runs_served(samples):
    page = build_page(samples, ViewState(page="collectives", trace="gpt_train_step.nprof"))
    link = _find(page, "cc-run-0")
    assert link is not None and "trace=group%3Addp_train" in link.href and link.children.startswith("ddp_train (2")
