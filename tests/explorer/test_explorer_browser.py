"""The app in headless Chromium, one test per interaction: every page loads without console errors (a
captured Neuron trace, a multi-rank run, an imported GPU trace); a click in the middle of a slice opens its
details; an area selection shows its aggregates; W zooms, S zooms out, D pans; a SQL query shows rows and its
link opens the event on the timeline; a bare /roofline works; a roofline pick lists its instructions. Waits
are on conditions, never fixed sleeps. Screenshots go to tests/explorer/artifacts/, and every page's to
docs/screenshots/ when EXPLORER_DOC_SCREENSHOTS=1."""
from __future__ import annotations

import os
import shutil
from pathlib import Path

import numpy as np
import pytest
from explorer_browser import ARTIFACTS, browser, chromium_executable, collect_errors, serve, wait_idle, wait_painted

import analysis
from explorer.app import create_app
from explorer.state import PAGES

pytestmark = [pytest.mark.browser, pytest.mark.slow]
DOCS = Path(__file__).resolve().parents[2] / "docs" / "screenshots"
SAMPLES = Path(__file__).resolve().parents[2] / "sample_traces"
PAGE_IDS = {p: f"#{p.replace('_', '-')}-page" for p in PAGES}


@pytest.fixture(scope="module")
def chromium():
    """One Chromium for the module (Playwright's sync API allows one running instance per thread)."""
    exe = chromium_executable()
    ARTIFACTS.mkdir(exist_ok=True)
    with browser(exe) as ctx:
        yield ctx


@pytest.fixture(scope="module")
def site(served_dir, chromium, tmp_path_factory):
    os.environ["NEURON_EXPLORER_DATA_DIR"] = str(tmp_path_factory.mktemp("userdata"))
    app = create_app(served_dir, wait_s=None)  # pages wait for their analyses (no reloads mid-test)
    with serve(app) as url:
        yield url, chromium


@pytest.fixture(scope="module")
def samples(chromium):
    assert (SAMPLES / "gpt_train_step.nprof").is_file(), "bundled sample missing: python sample_traces/regenerate.py"
    app = create_app(SAMPLES, wait_s=None)
    with serve(app) as url:
        yield url, chromium, app


def _shot(page, name: str, doc: str | None = None) -> None:
    ARTIFACTS.mkdir(exist_ok=True)
    page.screenshot(path=str(ARTIFACTS / f"{name}.png"), full_page=True)
    if doc and os.environ.get("EXPLORER_DOC_SCREENSHOTS") == "1":
        DOCS.mkdir(parents=True, exist_ok=True)
        shutil.copy(ARTIFACTS / f"{name}.png", DOCS / doc)


def _open(page, url: str, page_id: str) -> None:
    # pages wait for their analyses (wait_s=None) while the background precompute works through every served
    # trace: on a loaded 2-core machine the first page of a fresh server once took over 60 s
    page.goto(url)
    page.wait_for_selector(page_id, timeout=120000)
    wait_idle(page, timeout=120000)
    if page_id == "#timeline-page":
        wait_painted(page)


def _every_page(page, url: str, key: str, tag: str, docs: bool = False) -> None:
    for p in PAGES:
        _open(page, f"{url}/{p}?trace={key}", PAGE_IDS[p])
        assert page.locator(".error-box").count() == 0, (p, page.locator(".error-box").all_inner_texts())
        _shot(page, f"{p}_{tag}", f"{p}{'' if tag == 'sample' else '_' + tag}.png" if docs else None)


@pytest.mark.parametrize("key", ["single.nprof", "group:run/synthetic"])
def test_pages_load_without_console_errors(site, key):
    url, ctx = site
    page = ctx.new_page()
    errors = collect_errors(page)
    try:
        _every_page(page, url, key, "group" if key.startswith("group") else "single")
        if key.startswith("group"):
            _open(page, f"{url}/collectives?trace={key}", "#collectives-page")
            page.wait_for_selector("#cc-skew .js-plotly-plot", timeout=60000)  # a condition, not a count
    finally:
        page.close()
    assert errors == []


def test_click_in_the_middle_of_a_slice_opens_its_details(site):
    url, ctx = site
    page = ctx.new_page()
    errors = collect_errors(page)
    _open(page, f"{url}/timeline?trace=single.nprof", "#timeline-page")
    v = page.evaluate("() => window.neuronTimeline.view()")
    page.locator("#tl-canvas").focus()
    for _ in range(40):  # zoom in with the keyboard until some single event is at least 60 px wide
        s = page.evaluate("() => window.neuronTimeline.findSlice(60)")
        if s:
            break
        page.keyboard.press("w")
        v = wait_painted(page, v["painted"])
    assert s, "no slice 60 px wide after zooming in"
    page.mouse.move(s["x"], s["y"])
    page.wait_for_selector(".tl-tooltip", state="visible", timeout=10000)  # hover in the middle shows it
    page.mouse.click(s["x"], s["y"])
    page.wait_for_selector("#tl-details-title", timeout=20000)
    assert f"sel={s['table']}%3A{s['id']}" in page.url
    assert f"{s['table']} #{s['id']}" in page.inner_text("#tl-details")
    _shot(page, "timeline_details")
    page.close()
    assert errors == []


def test_area_selection_shows_the_aggregate(site, served_dir):
    url, ctx = site
    page = ctx.new_page()
    errors = collect_errors(page)
    _open(page, f"{url}/timeline?trace=single.nprof", "#timeline-page")
    box = page.locator("#tl-canvas").bounding_box()
    x0 = page.evaluate("() => window.neuronTimeline.plotX(0.30)")
    x1 = page.evaluate("() => window.neuronTimeline.plotX(0.45)")
    page.mouse.move(x0, box["y"] + 40)
    page.mouse.down()
    page.mouse.move(x1, box["y"] + box["height"] - 20, steps=6)
    page.mouse.up()
    page.wait_for_selector("#tl-area-title", timeout=20000)
    area = page.evaluate("() => window.neuronTimeline.view().area")
    assert area and area["t1"] > area["t0"] and len(area["rows"]) > 3
    # the panel's event count is the server-side aggregate of exactly that area
    from explorer.selection import area_stats
    from explorer.store import TraceStore

    idx = TraceStore(served_dir).timeline("single.nprof")
    tracks, _, _ = area_stats(idx, area["t0"], area["t1"], area["rows"])
    title = page.inner_text("#tl-area-title")
    assert int(tracks["events"].sum()) > 0 and f"{int(tracks['events'].sum()):,} events" in title
    page.wait_for_selector("#tl-area-names", timeout=10000)
    _shot(page, "timeline_area")
    page.close()
    assert errors == []


def test_keyboard_zoom_and_pan(site):
    url, ctx = site
    page = ctx.new_page()
    errors = collect_errors(page)
    _open(page, f"{url}/timeline?trace=single.nprof", "#timeline-page")
    v0 = page.evaluate("() => window.neuronTimeline.view()")
    page.locator("#tl-canvas").focus()
    page.keyboard.press("w")
    page.keyboard.press("w")
    v1 = wait_painted(page, v0["painted"])
    assert (v1["t1"] - v1["t0"]) < 0.6 * (v0["t1"] - v0["t0"])
    page.keyboard.press("d")
    v2 = wait_painted(page, v1["painted"])
    assert v2["t0"] > v1["t0"] and abs((v2["t1"] - v2["t0"]) - (v1["t1"] - v1["t0"])) < 1e-6 * (v1["t1"] - v1["t0"]) + 2
    page.keyboard.press("s")
    v3 = wait_painted(page, v2["painted"])
    assert (v3["t1"] - v3["t0"]) > (v2["t1"] - v2["t0"])
    page.wait_for_function("() => location.search.includes('t0=')")  # the window is in the shareable URL
    page.close()
    assert errors == []


def test_sql_query_shows_rows_and_jumps_to_the_timeline(site):
    url, ctx = site
    page = ctx.new_page()
    errors = collect_errors(page)
    _open(page, f"{url}/query?trace=single.nprof", "#query-page")
    page.fill("#q-sql", "SELECT row_id, start_ts, duration_ns, name FROM instructions "
                          "ORDER BY duration_ns DESC LIMIT 7")
    page.locator("#q-sql").blur()
    for _ in range(3):  # the typed text reaches Dash's state asynchronously: run until the result is this query's
        page.click("#q-run")
        page.wait_for_selector("#q-count", timeout=30000)
        wait_idle(page)
        if page.inner_text("#q-count").startswith("7 rows"):
            break
    assert page.inner_text("#q-count").startswith("7 rows")
    assert "sql=SELECT" in page.url  # the query is in the shareable URL
    page.wait_for_function("() => document.querySelectorAll('#q-table .ag-row').length >= 7", timeout=20000)
    _shot(page, "query_result")
    link = page.locator("#q-table a", has_text="show").first
    href = link.get_attribute("href")
    assert "sel=instructions%3A" in href
    link.click()
    page.wait_for_selector("#timeline-page", timeout=30000)
    wait_painted(page)
    page.wait_for_selector("#tl-details-title", timeout=20000)
    assert "/timeline" in page.url and "sel=instructions" in page.url
    page.close()
    assert errors == []


def test_bare_roofline_url_and_a_pick_listed_on_the_timeline(site):
    url, ctx = site
    page = ctx.new_page()
    errors = collect_errors(page)
    _open(page, f"{url}/roofline", "#roofline-page")
    assert page.locator(".error-box").count() == 0 and "no trace selected" not in page.content()
    pt = page.evaluate("""() => { const gd = document.querySelector('#rf-graph .js-plotly-plot');
        const xa = gd._fullLayout.xaxis, ya = gd._fullLayout.yaxis, r = gd.getBoundingClientRect();
        const t = gd._fullData.find(t => t.mode === 'markers');
        const cd = gd.calcdata[t.index][0];
        return {x: r.left + xa._offset + xa.c2p(cd.x), y: r.top + ya._offset + ya.c2p(cd.y)}; }""")
    page.mouse.move(pt["x"], pt["y"])
    page.mouse.click(pt["x"], pt["y"])
    page.wait_for_selector("#rf-timeline-link", timeout=20000)
    page.click("#rf-timeline-link")
    page.wait_for_selector("#timeline-page", timeout=30000)
    wait_painted(page)
    assert "pick=" in page.url
    page.wait_for_function("() => document.querySelectorAll('.nx-res-link').length > 0", timeout=20000)
    page.wait_for_selector("#tl-details-title", timeout=20000)
    page.close()
    assert errors == []


def test_gpu_trace_pages_in_browser(gpu_dir, chromium):
    """An imported Kineto GPU trace (real H100 capture): every page loads without console errors and the
    timeline has a GPU stream row."""
    app = create_app(gpu_dir, wait_s=None)
    key = app._explorer_ctx.store.default_key()
    with serve(app) as url:
        page = chromium.new_page()
        errors = collect_errors(page)
        _every_page(page, url, key, "gpu", docs=True)
        _open(page, f"{url}/timeline?trace={key}", "#timeline-page")
        labels = page.evaluate("() => window.neuronTimeline.active.meta.rows.map(r => r.label)")
        assert any(t.startswith("stream") for t in labels)
        page.close()
    assert errors == []


def test_sample_traces_in_browser_and_doc_screenshots(samples):
    """The bundled captures (a Neuron training step and the 2-rank DDP run): every page loads without console
    errors; the screenshots of docs/screenshots/ come from here."""
    url, ctx, app = samples
    groups = [e.key for e in app._explorer_ctx.store.entries() if e.is_group]
    page = ctx.new_page()
    errors = collect_errors(page)
    _every_page(page, url, "gpt_train_step.nprof", "sample", docs=True)
    _every_page(page, url, groups[0], "ddp", docs=True)
    _open(page, f"{url}/summary?trace={groups[0]}", "#summary-page")
    bars = page.evaluate("() => document.querySelector('#rank-timeline-fig .js-plotly-plot')"
                         ".data.map(t => t.name)")
    assert set(bars) == {"steps", "compute", "communication", "memory"}
    # grid cells show bytes in binary units, as analysis.units does (76,479,576 B / 2**20 = 72.9366 MiB)
    shown = page.evaluate("() => [76479576, 1536, 512, 3 * 2 ** 30].map(v => dashAgGridFunctions.fmtUnit(v, 'bytes'))")
    assert shown == ["72.937 MiB", "1.5 KiB", "512 B", "3 GiB"]
    page.close()
    assert errors == []


def test_neuron_explorer_profiles_show_both_summaries(explorer_imports, chromium):
    """The Neuron Explorer Parquet profile and its JSON export, imported through the CLI, open on every page
    without console errors; the Summary shows Explorer's numbers beside ours, formatted in each row's unit
    (fixture: our MFU 4·2·128·128·512 FLOP / (bf16 peak × 2 cores × 1400 ns), Explorer's 21.3 %)."""
    app = create_app(explorer_imports, wait_s=None)
    with serve(app) as url:
        page = chromium.new_page()
        errors = collect_errors(page)
        for key in ("ne_parquet.nprof", "ne_json.nprof"):
            _every_page(page, url, key, key.split(".")[0])
            _open(page, f"{url}/summary?trace={key}", "#summary-page")
            page.wait_for_selector("#ne-compare-table .ag-row", timeout=60000)
            peak = app._explorer_ctx.store.trace(key).header.devices[0].spec.peak_flops_per_s["bfloat16"]
            ours = 100 * 4 * 2 * 128 * 128 * 512 / (peak * 2 * 1400e-9)
            row = page.locator("#ne-compare-table .ag-row", has_text="MFU (estimated)").first.inner_text()
            assert f"{ours:.1f} %" in row and "21.3 %" in row, row
            row = page.locator("#ne-compare-table .ag-row", has_text="Total time").first.inner_text()
            assert "1.400 µs" in row and "2.000 µs" in row, row
            _shot(page, f"summary_{key.split('.')[0]}", "summary_neuron_explorer.png" if key.startswith("ne_parquet")
                  else None)
        page.close()
    assert errors == []


@pytest.mark.slow
def test_summary_answer_first_in_browser(samples):
    """The Summary of a captured sample and of the 2-rank DDP run, in Chromium: no console error, the answer
    section first, each card's text the analysis's value in its unit (read back from the DOM), the run's
    title naming the run, the steps folded when there are few."""
    from analysis.units import format_value

    url, ctx, app = samples
    store = app._explorer_ctx.store
    groups = [e.key for e in store.entries() if e.is_group]
    page = ctx.new_page()
    errors = collect_errors(page)
    for key in ("gpt_train_step.nprof", groups[0]):
        _open(page, f"{url}/summary?trace={key}", "#summary-page")
        tr = store.trace(key)
        expect = {}
        for df in (analysis.summary(tr), analysis.summary_items(tr)):
            expect.update({m: format_value(v, u) if np.isfinite(v) else "unknown"
                           for m, v, u in zip(df["metric"], df["value"], df["unit"])})
        shown = page.evaluate("() => Array.from(document.querySelectorAll('.kpi-card')).map(c => "
                              "[c.dataset.metric, c.querySelector('.kpi-value').innerText])")
        assert len(shown) >= 20
        for m, text in shown:
            assert text == expect[m], (key, m, text, expect[m])
        h3 = page.evaluate("() => Array.from(document.querySelectorAll('#summary-page h3')).map(h => h.innerText)")
        assert h3[0].startswith("The answer") and "Compute engines" in h3 and "DMA" in h3
        assert ("Collectives" in h3) == key.startswith("group:")
        title = page.locator("#summary-page h2").first.inner_text()
        assert ("rank 0" not in title and "2 ranks" in title) if key.startswith("group:") else key[:-6] in title
        assert page.locator("#steps-fold").count() == 1 and not page.locator("#steps-fold").get_attribute("open")
        _shot(page, f"summary_answer_{key.split(':')[-1].split('.')[0]}",
              "summary.png" if key == "gpt_train_step.nprof" else "summary_ddp.png")
    page.close()
    assert errors == []
