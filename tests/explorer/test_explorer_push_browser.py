"""In Chromium: a section still computing shows a placeholder and is filled as soon as its analysis is ready,
pushed through the long-poll (explorer.push), with no reload of the page and no fixed reload interval."""
from __future__ import annotations

import os
import threading

import pytest
from explorer_browser import browser, chromium_executable, collect_errors, serve

import analysis
from explorer.app import create_app

pytestmark = [pytest.mark.browser, pytest.mark.slow]


@pytest.fixture(scope="module")
def chromium():
    exe = chromium_executable()
    with browser(exe) as ctx:
        yield ctx


def test_a_slow_section_is_pushed_without_reload_or_interval(served_dir, chromium, monkeypatch, tmp_path):
    os.environ["NEURON_EXPLORER_DATA_DIR"] = str(tmp_path)
    gate = threading.Event()
    real = analysis.recommendations

    def slow_recommendations(trace, *a, **k):  # the Summary's recommendations wait for the test's signal
        gate.wait(60)
        return real(trace, *a, **k)

    monkeypatch.setattr(analysis, "recommendations", slow_recommendations)
    app = create_app(served_dir, wait_s=0.3, precompute=False)
    with serve(app) as url:
        page = chromium.new_page()
        errors = collect_errors(page)
        requests = []
        page.on("request", lambda r: requests.append(r.url))
        page.goto(f"{url}/summary?trace=single.nprof")
        page.wait_for_selector("#summary-page", timeout=60000)
        page.wait_for_selector(".nx-pending", timeout=60000)  # the recommendations are still computing
        assert page.locator("#summary-page h2").count() >= 1  # the rest of the page is shown meanwhile
        page.evaluate("() => { window.__sameDocument = 42; }")  # gone if the page reloads
        assert not page.locator("[id*='pending-refresh']").count()  # no reload interval in the page
        assert any("/api/frames/wait?" in u for u in requests) or page.wait_for_request(
            lambda r: "/api/frames/wait?" in r.url, timeout=30000)
        gate.set()
        page.wait_for_function("() => !document.querySelector('.nx-pending')", timeout=60000)
        assert page.evaluate("() => window.__sameDocument") == 42  # filled in place: no reload
        assert page.locator("#top-recommendation, #summary-page .note").count() >= 1
        rec = real(analysis.load(served_dir / "single.nprof"))
        if len(rec):  # the pushed section shows the analysis's top recommendation
            assert str(rec.iloc[0]["title"]) in page.inner_text("#summary-page")
        assert sum(u.startswith(f"{url}/summary") for u in requests) == 1  # one document load
        assert not errors, errors
        page.close()
