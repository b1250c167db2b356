"""In Chromium, what a first open costs the browser beyond the server's analysis: the Summary of a trace loads no
plotly.js (its charts are HTML bars holding the analysis's numbers), and a page with plotly graphs loads
plotly.js once, while its sections are still computing on the server, not after they arrive
(explorer/assets/plotlyPreload.js), as is AG Grid's code (the app's hidden grid: explorer.app.grid_preload)."""
from __future__ import annotations

import os
import threading

import pytest
from explorer_browser import browser, chromium_executable, collect_errors, serve

import analysis
from analysis import figures
from explorer.app import create_app

pytestmark = [pytest.mark.browser, pytest.mark.slow]
PLOTLY = "/assets/vendor/plotly-explorer.min.js"


@pytest.fixture(scope="module")
def chromium():
    exe = chromium_executable()
    with browser(exe) as ctx:
        yield ctx


def _recording_page(chromium):
    """A new page, its console errors and the URLs it requests (both lists fill as the page runs)."""
    page = chromium.new_page()
    errors = collect_errors(page)
    requests: list[str] = []
    page.on("request", lambda r: requests.append(r.url))
    return page, errors, requests


def test_summary_loads_no_plotly_and_its_bars_hold_the_analysis(served_dir, chromium, tmp_path):
    os.environ["NEURON_EXPLORER_DATA_DIR"] = str(tmp_path)
    app = create_app(served_dir, wait_s=None, precompute=False)
    trace = analysis.load(served_dir / "single.nprof")
    steps = analysis.steps(trace)
    tb = trace.temporal_breakdown().iloc[0]
    assert 0 < len(steps) <= 40  # the synthetic trace has a few steps: drawn as bars
    with serve(app) as url:
        page, errors, requests = _recording_page(chromium)
        page.goto(f"{url}/summary?trace=single.nprof")
        page.wait_for_selector("#steps-fig .nx-bar-row", state="attached", timeout=60000)
        page.wait_for_selector("#step-breakdown-fig .nx-bar-seg", state="attached", timeout=60000)
        page.wait_for_function("() => !document.querySelector('[data-dash-is-loading=\"true\"]')", timeout=60000)
        rows = page.eval_on_selector_all("#steps-fig .nx-bar-row",
                                         "els => els.map(e => [e.dataset.name, Number(e.dataset.value)])")
        assert [n for n, _ in rows] == [str(s) for s in steps["step"]]  # one bar per step, in order
        for (_, ms), ns in zip(rows, steps["duration_ns"]):
            assert ms == pytest.approx(ns / 1e6, rel=1e-9)
        segs = page.eval_on_selector_all("#step-breakdown-fig .nx-bar-seg",
                                         "els => els.map(e => [e.dataset.name, Number(e.dataset.value)])")
        assert dict(segs) == pytest.approx({"idle": tb["idle_time_pctg"], "compute": tb["compute_time_pctg"],
                                            "non-compute": tb["non_compute_time_pctg"]}, rel=1e-9)
        assert sum(v for _, v in segs) == pytest.approx(100.0, abs=0.02)  # shares of the span (rounded to 0.01)
        assert page.locator("#summary-page .js-plotly-plot").count() == 0
        assert not [u for u in requests if PLOTLY in u]  # plotly.js never loaded
        assert not errors, errors
        page.close()


def test_plotly_loads_once_while_a_section_computes(served_dir, chromium, monkeypatch, tmp_path):
    os.environ["NEURON_EXPLORER_DATA_DIR"] = str(tmp_path)
    gate = threading.Event()

    def slow(real):
        def wait_then(*a, **k):
            gate.wait(60)
            return real(*a, **k)
        return wait_then

    # every section of Hot ops waits for the test's signal: no graph is on the page before it
    monkeypatch.setattr(analysis, "hot_ops", slow(analysis.hot_ops))
    monkeypatch.setattr(figures, "module_treemap_figure", slow(figures.module_treemap_figure))
    monkeypatch.setattr(analysis, "source_lines", slow(analysis.source_lines))
    app = create_app(served_dir, wait_s=0.3, precompute=False)
    with serve(app) as url:
        page, errors, requests = _recording_page(chromium)
        page.goto(f"{url}/hot_ops?trace=single.nprof")
        page.wait_for_selector("#hot-ops-page .nx-pending", timeout=60000)  # the section waits for the server
        # meanwhile plotly.js is loaded and run (the page's graphs will need it)
        page.wait_for_function("() => window.Plotly && typeof window.Plotly.react === 'function'", timeout=60000)
        # and AG Grid's code (the app's hidden grid), which the page's table will need
        page.wait_for_function("() => performance.getEntriesByType('resource')"
                               ".some(e => e.name.includes('dash_ag_grid/async-community'))", timeout=60000)
        assert page.locator("#hot-ops-page .dash-graph").count() == 0 and not gate.is_set()
        gate.set()
        page.wait_for_function("() => { const g = document.querySelector('#ho-bar .js-plotly-plot');"
                               " return !document.querySelector('.nx-pending') && g && g._fullLayout; }",
                               timeout=60000)
        bars = page.evaluate("() => document.querySelector('#ho-bar .js-plotly-plot').data[0].y.length")
        assert bars >= 1  # the top-ops chart is drawn with its rows
        assert sum(PLOTLY in u for u in requests) == 1  # loaded once: the Graph waited for the preload
        assert not errors, errors
        page.close()
