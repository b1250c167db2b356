"""The Summary page says which step boundary its step times use (the device's step, analysis.steps)."""
from __future__ import annotations

import json

import plotly

import analysis
from analysis.analyses.steps import STEP_BOUNDARY
from explorer.pages import summary
from explorer.pages.common import Ctx
from explorer.state import ViewState
from explorer.store import TraceStore


def test_summary_states_the_step_boundary_above_the_steps(served_dir):
    ctx = Ctx(TraceStore(served_dir))
    assert len(analysis.load(served_dir / "single.nprof").steps())  # the fixture has profiler steps
    s = json.dumps(summary.layout(ctx, ViewState(trace="single.nprof")), cls=plotly.utils.PlotlyJSONEncoder)
    assert "Step boundary: " + STEP_BOUNDARY in s
    assert s.index("Step boundary: ") < s.index("steps-table")
