"""The app in headless Chromium: every page loads without console errors, a zoom triggers a finer level of
detail, the roofline shows ceilings and points, clicking an event opens its details. Screenshots go to
tests/explorer/artifacts/ (and three to docs/screenshots/ when EXPLORER_DOC_SCREENSHOTS=1)."""
from __future__ import annotations

import os
import shutil
from pathlib import Path

import pytest

from explorer.app import create_app
from explorer.state import PAGES
from explorer_browser import ARTIFACTS, browser, collect_errors, serve, timeline_shapes, wait_idle

pytestmark = [pytest.mark.browser, pytest.mark.slow]
DOCS = Path(__file__).resolve().parents[2] / "docs" / "screenshots"


@pytest.fixture(scope="module")
def chromium():
    """One Chromium for the module (Playwright's sync API allows one running instance per thread)."""
    import shutil as _sh

    exe = _sh.which("chromium") or "/usr/bin/chromium"
    if not Path(exe).exists():
        if os.environ.get("CI") == "true":
            pytest.fail("chromium is not installed; .ci/run must install Debian's chromium package")
        pytest.skip("chromium is not installed (apt-get install -y chromium)")
    ARTIFACTS.mkdir(exist_ok=True)
    with browser(exe) as ctx:
        yield ctx


@pytest.fixture(scope="module")
def site(served_dir, chromium):
    app = create_app(served_dir)
    with serve(app) as url:
        yield url, chromium


SAMPLES = Path(__file__).resolve().parents[2] / "sample_traces"
DOC_SHOTS = {"sample_timeline_zoomed": "timeline.png", "sample_roofline": "roofline.png", "sample_ranks": "ranks.png"}


def _shot(target, name: str) -> None:
    """Screenshot a whole page, or one element (a Playwright Locator)."""
    ARTIFACTS.mkdir(exist_ok=True)
    if hasattr(target, "goto"):
        target.screenshot(path=str(ARTIFACTS / f"{name}.png"), full_page=True)
    else:
        target.screenshot(path=str(ARTIFACTS / f"{name}.png"))
    if os.environ.get("EXPLORER_DOC_SCREENSHOTS") == "1" and name in DOC_SHOTS:
        DOCS.mkdir(parents=True, exist_ok=True)
        shutil.copy(ARTIFACTS / f"{name}.png", DOCS / DOC_SHOTS[name])


def _steady_step_fraction(app) -> float:
    """Where the last profiler step's device work starts, as a fraction of the sample's whole timeline."""
    import analysis

    tr = app._explorer_ctx.store.trace("gpt_train_step.nprof")
    origin, end = tr.time_range
    last = analysis.steps(tr).iloc[-1]
    ins = tr.instructions
    first = int(ins["start_ts"][ins["start_ts"] >= last["start_ts"]].min())
    return (first - origin) / (end - origin)


def _drag_zoom(page, at: float, pixels: int) -> None:
    """Drag a zoom box ``pixels`` wide starting at fraction ``at`` of the timeline's plot width."""
    box = page.locator("#tl-graph .nsewdrag").first.bounding_box()
    y = box["y"] + box["height"] * 0.7
    x0 = box["x"] + box["width"] * at
    page.mouse.move(x0, y)
    page.mouse.down()
    page.mouse.move(x0 + pixels, y, steps=3)
    page.mouse.up()


@pytest.mark.parametrize("key", ["single.nprof", "group:run/synthetic"])
def test_pages_load_without_console_errors(site, key):
    url, ctx = site
    page = ctx.new_page()
    errors = collect_errors(page)
    try:
        for p in PAGES:
            page.goto(f"{url}/{p}?trace={key}")
            wait_idle(page)
            assert page.locator(f"#{p.replace('_', '-')}-page").count() == 1, p
            assert page.locator(".error-box").count() == 0, page.inner_text(".error-box")
            _shot(page, f"{p}_{'group' if key.startswith('group') else 'single'}")
        if key.startswith("group"):
            page.goto(f"{url}/collectives?trace={key}")
            wait_idle(page)
            assert page.locator("#cc-skew .js-plotly-plot").count() == 1
    finally:
        page.close()
    assert errors == []


def test_zoom_refines_and_click_opens_details(site):
    url, ctx = site
    page = ctx.new_page()
    errors = collect_errors(page)
    page.goto(f"{url}/timeline?trace=single.nprof")
    wait_idle(page)
    page.wait_for_selector("#tl-graph .js-plotly-plot")
    before = timeline_shapes(page)
    assert 0 < before["n"] <= 4000
    _shot(page, "timeline_full")
    _drag_zoom(page, 0.5, 8)  # an 8-pixel box: ~1/150 of the window
    page.wait_for_function("(r) => { const gd = document.querySelector('#tl-graph .js-plotly-plot');"
                           " return gd.layout.meta && gd.layout.meta.threshold_ns < r; }",
                           arg=before["meta"]["threshold_ns"] / 20, timeout=20000)
    wait_idle(page)
    after = timeline_shapes(page)
    span_b = before["range"][1] - before["range"][0]
    span_a = after["range"][1] - after["range"][0]
    assert span_a < span_b / 50
    assert after["meta"]["threshold_ns"] < before["meta"]["threshold_ns"] / 20
    assert 0 < after["n"] and after["median"] < before["median"]
    assert "t0=" in page.url and "t1=" in page.url  # the window is in the shareable URL
    _shot(page, "timeline_zoomed")
    # click the most isolated single event (no other point nearby to steal the click): details open
    pt = page.evaluate("""() => {
        const gd = document.querySelector('#tl-graph .js-plotly-plot');
        const xa = gd._fullLayout.xaxis, ya = gd._fullLayout.yaxis, r = gd.getBoundingClientRect();
        const pts = [];
        for (const tr of gd.data) {
            if (!tr.x) continue;
            for (let i = 0; i < tr.x.length; i++) {
                if (tr.x[i] === null || tr.y[i] === null) continue;
                pts.push({px: xa.l2p(tr.x[i]), py: ya.l2p(tr.y[i]), cd: tr.customdata ? tr.customdata[i] : -2});
            }
        }
        const cands = [];
        for (const p of pts) {
            if (!(p.cd >= 0) || p.px < 0 || p.px > xa._length) continue;
            let d = 1e9;
            for (const q of pts) {
                if (q.cd !== p.cd && Math.abs(q.py - p.py) < 25) d = Math.min(d, Math.hypot(q.px - p.px, q.py - p.py));
            }
            cands.push({x: r.left + xa._offset + p.px, y: r.top + ya._offset + p.py, d: d});
        }
        cands.sort((a, b) => b.d - a.d);
        return cands.slice(0, 3);
    }""")
    assert pt, "no clickable event on the zoomed timeline"
    # plotly turns a click into a selection from its current hover state, which it updates on the next
    # animation frame after a mouse move: hover first, wait for the hover label, then click. Try the three
    # most isolated events, so a neighbour stealing the hover cannot make the test flaky.
    for cand in pt:
        page.mouse.move(cand["x"] - 3, cand["y"])
        page.mouse.move(cand["x"], cand["y"])
        try:
            page.wait_for_selector("#tl-graph .hoverlayer .hovertext", timeout=3000)
        except Exception:  # noqa: BLE001 - no hover label here: try the next candidate
            continue
        page.mouse.click(cand["x"], cand["y"])
        try:
            page.wait_for_selector("#tl-details-title", timeout=5000)
            break
        except Exception:  # noqa: BLE001
            continue
    page.wait_for_selector("#tl-details-title", timeout=5000)
    title = page.inner_text("#tl-details-title")
    assert "#" in title
    assert "sel=" in page.url
    _shot(page, "timeline_details")
    page.close()
    assert errors == []


def test_roofline_shows_ceilings_and_points(site):
    url, ctx = site
    page = ctx.new_page()
    errors = collect_errors(page)
    page.goto(f"{url}/roofline?trace=single.nprof")
    wait_idle(page)
    info = page.evaluate("""() => { const gd = document.querySelector('#rf-graph .js-plotly-plot');
        return {ceilings: gd.data.filter(t => t.mode === 'lines').length,
                points: gd._fullData.filter(t => t.mode === 'markers').reduce((a, t) => a + t._length, 0),
                drawn: document.querySelectorAll('#rf-graph .scatterlayer .point').length}; }""")
    assert info["ceilings"] >= 2 and info["points"] >= 3 and info["drawn"] >= 3
    _shot(page, "roofline")
    # colouring by engine redraws through analysis.figures and lands in the shareable URL
    page.click("#rf-color input[value=engine]")
    page.wait_for_function("() => location.search.includes('roof_color=engine')", timeout=15000)
    wait_idle(page)
    names = page.evaluate("""() => document.querySelector('#rf-graph .js-plotly-plot').data
        .filter(t => t.mode === 'markers').map(t => t.name)""")
    assert names and not any(n.endswith(" bound") for n in names)
    # clicking a point offers its events; following the link highlights exactly them on the timeline
    pt = page.evaluate("""() => { const gd = document.querySelector('#rf-graph .js-plotly-plot');
        const xa = gd._fullLayout.xaxis, ya = gd._fullLayout.yaxis, r = gd.getBoundingClientRect();
        const t = gd._fullData.find(t => t.mode === 'markers');
        const cd = gd.calcdata[t.index][0];
        return {x: r.left + xa._offset + xa.c2p(cd.x), y: r.top + ya._offset + ya.c2p(cd.y)}; }""")
    page.mouse.move(pt["x"], pt["y"])
    page.mouse.click(pt["x"], pt["y"])
    page.wait_for_selector("#rf-timeline-link", timeout=15000)
    page.click("#rf-timeline-link")
    page.wait_for_selector("#tl-graph .js-plotly-plot", timeout=20000)
    wait_idle(page)
    assert "/timeline" in page.url and "pick=" in page.url and "sel=instructions" in page.url
    n_hl = page.evaluate("""() => document.querySelector('#tl-graph .js-plotly-plot').data
        .filter(t => t.name === 'highlight').length""")
    assert n_hl > 0
    assert page.locator("#tl-details-title").count() == 1
    page.close()
    assert errors == []


def test_gpu_trace_pages_in_browser(gpu_dir, chromium):
    """An imported Kineto GPU trace (real H100 capture): every page loads without console errors and the
    timeline has a GPU stream row."""
    app = create_app(gpu_dir)
    key = app._explorer_ctx.store.default_key()
    with serve(app) as url:
        page = chromium.new_page()
        errors = collect_errors(page)
        for p in PAGES:
            page.goto(f"{url}/{p}?trace={key}")
            wait_idle(page)
            assert page.locator(f"#{p.replace('_', '-')}-page").count() == 1, p
            assert page.locator(".error-box").count() == 0, page.inner_text(".error-box")
            _shot(page, f"{p}_gpu")
        page.goto(f"{url}/timeline?trace={key}")
        wait_idle(page)
        ticks = page.evaluate("() => document.querySelector('#tl-graph .js-plotly-plot').layout.yaxis.ticktext")
        assert any(t.startswith("stream") for t in ticks)
        page.close()
    assert errors == []


def test_sample_traces_in_browser(chromium):
    """The bundled captures (a Neuron training step and a 2-rank DDP run): every page loads without
    console errors; the docs screenshots come from here."""
    assert (SAMPLES / "gpt_train_step.nprof").is_file(), "bundled sample missing: python sample_traces/regenerate.py"
    app = create_app(SAMPLES)
    groups = [e.key for e in app._explorer_ctx.store.entries() if e.is_group]
    with serve(app) as url:
        page = chromium.new_page()
        errors = collect_errors(page)
        for key in ["gpt_train_step.nprof", *groups[:1]]:
            for p in PAGES:
                page.goto(f"{url}/{p}?trace={key}")
                wait_idle(page)
                assert page.locator(f"#{p.replace('_', '-')}-page").count() == 1, (key, p)
                assert page.locator(".error-box").count() == 0, page.inner_text(".error-box")
                _shot(page, f"sample_{p}" if key == "gpt_train_step.nprof" else f"sample_{p}_group")
                if p == "summary" and key in groups:  # the ranks of the DDP run on one time axis, and their balance
                    bars = page.evaluate("() => document.querySelector('#rank-timeline-fig .js-plotly-plot')"
                                         ".data.map(t => t.name + ':' + t.y.length)")
                    assert {b.split(":")[0] for b in bars} == {"steps", "compute", "communication", "memory"}, bars
                    assert page.locator("#rank-balance-fig .js-plotly-plot").count() == 1
                    _shot(page.locator("#rank-timeline-fig").locator("xpath=.."), "sample_ranks")
        page.goto(f"{url}/timeline?trace=gpt_train_step.nprof")
        wait_idle(page)
        before = timeline_shapes(page)
        _drag_zoom(page, _steady_step_fraction(app), 10)  # device work of the last (steady-state) step
        page.wait_for_function("(r) => document.querySelector('#tl-graph .js-plotly-plot').layout.meta.threshold_ns < r",
                               arg=before["meta"]["threshold_ns"] / 5, timeout=20000)
        page.mouse.move(1, 1)  # no hover label over the documentation screenshot
        wait_idle(page)
        _shot(page, "sample_timeline_zoomed")
        page.close()
    assert errors == []
