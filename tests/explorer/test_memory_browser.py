"""The Memory page in headless Chromium: on a captured trace (the bundled GPT sample re-simulated with the
current runtime: SBUF/PSUM allocations and HBM counters), on each rank of a 2-rank DDP run and on a trace
without allocation events (a format 2.2 file; a real H100 Kineto trace, whose device memory is its HBM):
no console error, no error box, charts drawn where the
trace has the data, "unknown: not recorded" where it has not. The screenshot of the captured trace goes to
docs/screenshots/memory.png (memory_ddp.png, memory_gpu.png) when EXPLORER_DOC_SCREENSHOTS=1."""
from __future__ import annotations

import os
import shutil
from pathlib import Path

import pytest
from explorer_browser import ARTIFACTS, browser, chromium_executable, collect_errors, serve, wait_idle
from realdata import real_trace

from explorer.app import create_app
from neuron_profiler.cli import main

pytestmark = [pytest.mark.browser, pytest.mark.slow]
REPO = Path(__file__).resolve().parents[2]
SAMPLES = REPO / "sample_traces"
KINETO_GPU = "TraceLens/h100/gaunernst_bert-small-uncased__1016001.json.gz"
DOC_SHOTS = {"gpt_train_step.nprof": "memory.png", "group:run/ddp_train&rank=0": "memory_ddp.png"}


@pytest.fixture(scope="module")
def served(tmp_path_factory) -> Path:
    d = tmp_path_factory.mktemp("memory")
    (d / "run").mkdir()
    jobs = [("gpt_train_step", d / "gpt_train_step.nprof")] + \
        [(f"ddp_train_rank{r}", d / "run" / f"ddp_train_rank{r}.nprof") for r in range(2)]
    for name, out in jobs:
        assert main(["project", str(SAMPLES / f"{name}.nprof"), "-o", str(out)]) == 0
    shutil.copy(REPO / "tests" / "data" / "format_2_2" / "cnn_inference.nprof", d / "old_cnn.nprof")  # no allocations
    shutil.copy(real_trace(KINETO_GPU), d / "gpu.json.gz")  # Kineto, profile_memory: device memory, no SBUF
    return d


@pytest.fixture(scope="module")
def site(served):
    exe = chromium_executable()
    app = create_app(served, wait_s=None)
    with browser(exe) as ctx, serve(app) as url:
        yield url, ctx


def _open(page, url: str) -> None:
    page.goto(url)
    page.wait_for_selector("#memory-page", timeout=60000)
    wait_idle(page, timeout=60000)
    assert page.locator(".error-box").count() == 0, page.locator(".error-box").all_inner_texts()


def _value(page, metric: str) -> str:
    return page.locator(f'#memory-cards [data-metric="{metric}"]').get_attribute("data-value")


@pytest.mark.parametrize("key", ["gpt_train_step.nprof", "group:run/ddp_train&rank=0", "group:run/ddp_train&rank=1"])
def test_memory_page_draws_buffers_and_hbm(site, key):
    url, ctx = site
    page = ctx.new_page()
    errors = collect_errors(page)
    try:
        _open(page, f"{url}/memory?trace={key}")
        for chart in ("#memory-gantt-sbuf", "#memory-gantt-psum", "#memory-occupancy", "#memory-hbm"):
            page.wait_for_selector(f"{chart} .main-svg", timeout=60000)
        assert float(_value(page, "sbuf_peak_bytes")) > 0
        assert 0 < float(_value(page, "sbuf_peak_percent")) <= 100
        assert float(_value(page, "hbm_peak_bytes")) > 0
        assert "Unknown" not in page.inner_text("#memory-page")
        page.wait_for_selector("#memory-buffers-table .ag-row", timeout=30000)
        ARTIFACTS.mkdir(exist_ok=True)
        shot = ARTIFACTS / f"memory_{key.split('&')[0].replace(':', '_').replace('/', '_')}.png"
        page.screenshot(path=str(shot), full_page=True)
        if key in DOC_SHOTS and os.environ.get("EXPLORER_DOC_SCREENSHOTS") == "1":
            shutil.copy(shot, REPO / "docs" / "screenshots" / DOC_SHOTS[key])
    finally:
        page.close()
    assert errors == []


def test_memory_page_says_not_recorded_without_allocations(site):
    url, ctx = site
    page = ctx.new_page()
    errors = collect_errors(page)
    try:
        _open(page, f"{url}/memory?trace=old_cnn.nprof")
        text = page.inner_text("#memory-page")
        assert "Unknown: not recorded: this trace has no SBUF/PSUM allocation events" in text
        assert "Unknown: not recorded: no 'HBM Usage' counter" in text
        assert _value(page, "sbuf_peak_bytes") == "nan"
        assert page.locator("#memory-page .js-plotly-plot").count() == 0  # no empty charts
    finally:
        page.close()
    assert errors == []


def test_memory_page_of_a_gpu_trace_shows_device_memory_only(site):
    """A Kineto import: SBUF/PSUM "not recorded", the device's allocated bytes (profile_memory) drawn as HBM."""
    url, ctx = site
    page = ctx.new_page()
    errors = collect_errors(page)
    try:
        _open(page, f"{url}/memory?trace=gpu.json.gz")
        page.wait_for_selector("#memory-hbm .main-svg", timeout=60000)
        text = page.inner_text("#memory-page")
        assert "Unknown: not recorded: this trace has no SBUF/PSUM allocation events" in text
        assert _value(page, "sbuf_peak_bytes") == "nan" and float(_value(page, "hbm_peak_bytes")) > 0
        assert page.locator("#memory-gantt-sbuf").count() == 0
        ARTIFACTS.mkdir(exist_ok=True)
        page.screenshot(path=str(ARTIFACTS / "memory_gpu.png"), full_page=True)
        if os.environ.get("EXPLORER_DOC_SCREENSHOTS") == "1":
            shutil.copy(ARTIFACTS / "memory_gpu.png", REPO / "docs" / "screenshots" / "memory_gpu.png")
    finally:
        page.close()
    assert errors == []
