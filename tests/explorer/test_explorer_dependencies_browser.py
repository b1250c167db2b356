"""The Dependencies tab and the source view in headless Chromium, on the bundled capture and the 2-rank DDP
run: selecting an instruction (as a click does) lists its predecessors and successors; a listed successor opens
on the timeline; the Hot ops page shows device time per source line with the lines' text and a link that opens
the line's longest op on the timeline; no console error. The screenshots docs/screenshots/
timeline_dependencies.png and hot_ops_source.png come from here (EXPLORER_DOC_SCREENSHOTS=1)."""
from __future__ import annotations

import os
import shutil
from pathlib import Path

import pandas as pd
import pytest
from explorer_browser import ARTIFACTS, browser, chromium_executable, collect_errors, serve, wait_idle, wait_painted

import analysis
from explorer.app import create_app

pytestmark = [pytest.mark.browser, pytest.mark.slow]
SAMPLES = Path(__file__).resolve().parents[2] / "sample_traces"
DOCS = Path(__file__).resolve().parents[2] / "docs" / "screenshots"


@pytest.fixture(scope="module")
def samples():
    exe = chromium_executable()
    app = create_app(SAMPLES, wait_s=None)
    with serve(app) as url, browser(exe) as ctx:
        yield url, ctx, app


def _with_semaphore_successor(trace) -> tuple[int, pd.DataFrame]:  # noqa: F821 - annotation only
    ins = trace.table("instructions", ["opcode"])
    for rid in ins.index[ins["opcode"] == "MATMUL"][:300]:
        d = analysis.event_dependencies(trace, "instructions", int(rid))
        if ((d["relation"] == "semaphore") & (d["direction"] == "successor")).any():
            return int(rid), d
    raise AssertionError("no MATMUL gating another engine's instruction")


def _shot(page, name: str) -> None:
    ARTIFACTS.mkdir(exist_ok=True)
    page.screenshot(path=str(ARTIFACTS / f"{name}.png"), full_page=True)
    if os.environ.get("EXPLORER_DOC_SCREENSHOTS") == "1":
        shutil.copy(ARTIFACTS / f"{name}.png", DOCS / f"{name}.png")


def _open_dependencies(page, url: str, key: str, rank: int | None, rid: int, deps: pd.DataFrame, origin: int,
                       me: pd.Series) -> None:
    lo = min(int(deps["start_ts"].min()), int(me["start_ts"])) - origin
    hi = max(int((deps["start_ts"] + deps["duration_ns"]).max()), int(me["start_ts"] + me["duration_ns"])) - origin
    pad = (hi - lo) // 4
    page.goto(f"{url}/timeline?trace={key}&t0={lo - pad}&t1={hi + pad}" + (f"&rank={rank}" if rank is not None else ""))
    page.wait_for_selector("#timeline-page", timeout=60000)
    wait_idle(page, timeout=60000)
    wait_painted(page)
    page.get_by_role("tab", name="Dependencies").click()
    page.evaluate(f"() => window.neuronTimeline.active.select(['instructions', {rid}], null)")  # as a click does
    page.wait_for_selector(f"#tl-deps-title:has-text('instructions #{rid}')", timeout=30000)
    page.wait_for_selector("#tl-deps-graph .js-plotly-plot .main-svg", timeout=30000)  # the chart drawn
    wait_idle(page)
    assert page.locator("#tl-deps .nx-dep-link").count() == len(deps)


@pytest.mark.parametrize("which", ["capture", "ddp"])
def test_dependencies_tab_lists_and_opens_the_events(samples, which):
    url, ctx, app = samples
    store = app._explorer_ctx.store
    if which == "capture":
        key, rank = "gpt_train_step.nprof", None
        trace = store.trace(key)
    else:
        key, rank = next(e.key for e in store.entries() if e.is_group), 1
        trace = store.trace(key, rank)
    rid, deps = _with_semaphore_successor(trace)
    page = ctx.new_page()
    errors = collect_errors(page)
    try:
        me = trace.table("instructions", ["start_ts", "duration_ns"]).loc[rid]
        _open_dependencies(page, url, key, rank, rid, deps, store.timeline(key, rank).origin, me)
        text = page.inner_text("#tl-deps")
        assert "waited for it (successors)" in text.lower() and "semaphore" in text
        if which == "capture":
            _shot(page, "timeline_dependencies")
        succ = deps[(deps["relation"] == "semaphore") & (deps["direction"] == "successor")].iloc[0]
        link = f"#tl-deps .nx-deps-successor a.nx-dep-link:has-text('instructions #{succ['row_id']})')"
        page.locator(link).first.click()
        page.wait_for_selector("#tl-details-title", timeout=30000)
        page.wait_for_function(f"() => location.search.includes('sel=instructions%3A{succ['row_id']}')",
                               timeout=30000)
        wait_idle(page)
        assert f"instructions #{succ['row_id']}" in page.inner_text("#tl-details")
    finally:
        page.close()
    assert errors == []


def test_source_view_shows_lines_and_opens_the_timeline(samples):
    url, ctx, app = samples
    lines = analysis.source_lines(app._explorer_ctx.store.trace("gpt_train_step.nprof"))
    page = ctx.new_page()
    errors = collect_errors(page)
    try:
        page.goto(f"{url}/hot_ops?trace=gpt_train_step.nprof")
        page.wait_for_selector("#src-table .ag-row", timeout=60000)
        page.wait_for_selector("#src-bar .js-plotly-plot .main-svg", timeout=30000)
        wait_idle(page, timeout=60000)
        assert "main(sys.argv[1:])" in page.inner_text("#src-table")  # regenerate.py beside the sample
        ARTIFACTS.mkdir(exist_ok=True)
        box = page.evaluate("() => { const r = document.querySelector('#src-body').getBoundingClientRect();"
                            " return {x: r.left + scrollX, y: r.top + scrollY - 40, width: r.width,"
                            " height: r.height + 40}; }")
        page.screenshot(path=str(ARTIFACTS / "hot_ops_source.png"), full_page=True, clip=box)
        if os.environ.get("EXPLORER_DOC_SCREENSHOTS") == "1":
            shutil.copy(ARTIFACTS / "hot_ops_source.png", DOCS / "hot_ops_source.png")
        first = int(lines["example_op"].iloc[0])
        page.locator("#src-table a", has_text="longest op").first.click()
        page.wait_for_selector("#timeline-page", timeout=60000)
        page.wait_for_function(f"() => location.search.includes('sel=host_ops%3A{first}')", timeout=30000)
        page.wait_for_selector("#tl-details-title", timeout=30000)
        wait_painted(page)
        group = next(e.key for e in app._explorer_ctx.store.entries() if e.is_group)  # the DDP run: no stacks
        page.goto(f"{url}/hot_ops?trace={group}&rank=1")
        page.wait_for_selector("#src-body .note", timeout=60000)
        wait_idle(page, timeout=60000)
        assert "no Python stacks in this trace" in page.inner_text("#src-body")
    finally:
        page.close()
    assert errors == []
