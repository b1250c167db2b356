"""The timeline's Dependencies panel on a captured trace: it lists exactly the analysis' predecessors and
successors, each a link that opens that event on the timeline."""
from __future__ import annotations

import json
import shutil
from pathlib import Path

import plotly
import pytest

import analysis
from explorer.dependencies import dependencies_panel
from explorer.pages.common import Ctx
from explorer.pages.timeline import layout
from explorer.state import ViewState
from explorer.store import TraceStore

SAMPLE = Path(__file__).resolve().parents[2] / "sample_traces" / "gpt_train_step.nprof"


def _dump(component) -> str:
    return json.dumps(component, cls=plotly.utils.PlotlyJSONEncoder)


@pytest.fixture(scope="module")
def ctx(tmp_path_factory):
    d = tmp_path_factory.mktemp("deps")
    shutil.copy(SAMPLE, d / SAMPLE.name)
    return Ctx(TraceStore(d))


def _a_matmul_with_semaphore_successors(trace) -> int:
    ins = trace.table("instructions", ["opcode"])
    for rid in ins.index[ins["opcode"] == "MATMUL"][:200]:
        d = analysis.event_dependencies(trace, "instructions", int(rid))
        if (d["relation"] == "semaphore").any() and (d["direction"] == "successor").sum() >= 2:
            return int(rid)
    raise AssertionError("no MATMUL with semaphore successors in the sample")


def test_panel_lists_every_dependency_as_a_timeline_link(ctx):
    trace = ctx.store.timeline(SAMPLE.name).trace
    rid = _a_matmul_with_semaphore_successors(trace)
    deps = analysis.event_dependencies(trace, "instructions", rid)
    state = ViewState(page="timeline", trace=SAMPLE.name, sel=("instructions", rid))
    s = _dump(dependencies_panel(ctx, state))
    assert "error-box" not in s
    n_pred, n_succ = int((deps["direction"] == "predecessor").sum()), int((deps["direction"] == "successor").sum())
    assert f"instructions #{rid}: {n_pred} predecessors, {n_succ} successors" in s
    assert s.count("nx-dep-link") == len(deps)
    for t, r in zip(deps["table"], deps["row_id"]):
        assert f"sel={t}%3A{r}" in s and f"({t} #{r})" in s
    via = deps.loc[deps["via_row"] >= 0, "via_row"]
    assert all(f"sel=instructions%3A{v}" in s for v in via if v != rid)
    assert "tl-deps-graph" in s and "Waited for it (successors)" in s


def test_timeline_page_has_the_dependencies_tab(ctx):
    s = _dump(layout(ctx, ViewState(page="timeline", trace=SAMPLE.name)))
    assert '"Dependencies"' in s and '"tl-deps"' in s and "Click a slice to see what it waited for" in s
    s2 = _dump(dependencies_panel(ctx, ViewState(page="timeline", trace=SAMPLE.name, sel=("instructions", 10 ** 9))))
    assert "0 predecessors, 0 successors" in s2 and "error-box" not in s2
