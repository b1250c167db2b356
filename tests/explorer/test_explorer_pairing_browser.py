"""Compare's defaults in Chromium on the bundled sample folder (what the Quickstart opens): the eager GPT step is
paired with its compiled twin and the DDP rank with the other rank, each sharing ops with it (the "present in
both" count read from the page equals analysis.diff's on the same pair and keys); the tab title names the model
and run; no console error."""
from __future__ import annotations

import os
import re
from pathlib import Path

import pytest
from explorer_browser import browser, chromium_executable, collect_errors, serve, wait_idle

import analysis
from explorer.app import create_app

pytestmark = [pytest.mark.browser, pytest.mark.slow]
SAMPLES = Path(__file__).resolve().parents[2] / "sample_traces"


@pytest.fixture(scope="module")
def site(tmp_path_factory):
    exe = chromium_executable()
    os.environ["NEURON_EXPLORER_DATA_DIR"] = str(tmp_path_factory.mktemp("userdata"))
    app = create_app(SAMPLES, wait_s=None)
    with serve(app) as url, browser(exe) as ctx:
        yield url, ctx, app


@pytest.mark.parametrize("base, partner, keys, model", [
    ("gpt_train_step.nprof", "gpt_train_step_compiled.nprof", ("op",), "GPT"),
    ("ddp_train_rank0.nprof", "ddp_train_rank1.nprof", ("op", "module", "shape"), "GPT"),
])
def test_compare_default_partner_shares_ops_in_browser(site, base, partner, keys, model):
    url, ctx, app = site
    page = ctx.new_page()
    errors = collect_errors(page)
    page.goto(f"{url}/compare?trace={base}")
    page.wait_for_selector("#compare-page #cmp-table .ag-row", timeout=120000)
    wait_idle(page, timeout=120000)
    b = page.locator("#cmp-b").input_value()
    assert b.startswith(partner + " — " + model), b
    chips = page.locator("#compare-page .mantine-MultiSelect-pill").all_inner_texts()
    assert tuple(c.strip() for c in chips) == keys
    shown = re.search(r"([\d,]+) rows by [a-z, ]+; ([\d,]+) present in both", page.inner_text("#cmp-body"))
    assert shown, page.inner_text("#cmp-body")
    store = app._explorer_ctx.store
    df = analysis.diff(store.trace(base), store.trace(partner), keys=keys)
    both = int(((df["calls_a"] > 0) & (df["calls_b"] > 0)).sum())
    assert (int(shown.group(1).replace(",", "")), int(shown.group(2).replace(",", ""))) == (len(df), both)
    assert both > 0
    assert page.title().startswith(f"Compare · {model} (") and " · run " in page.title()
    page.close()
    assert errors == []


def test_compare_without_a_related_trace_leaves_b_to_choose(site):
    """The CNN sample has no other trace of its model or run: B starts empty with the reason, no console
    error; the body is built once (not again when the selects mount); choosing a B then compares."""
    url, ctx, _ = site
    page = ctx.new_page()
    errors = collect_errors(page)
    rebuilds = []  # answers of the selects' callback that built Compare's body again (204: no update)
    page.on("response", lambda r: rebuilds.append(r) if "/_dash-update-component" in r.url and r.status == 200
            and "cmp-body.children" in (r.request.post_data or "") else None)
    page.goto(f"{url}/compare?trace=cnn_inference.nprof")
    page.wait_for_selector("#compare-page #cmp-why", timeout=120000)
    wait_idle(page, timeout=120000)
    assert page.locator("#cmp-b").input_value() == ""
    assert "No default for B" in page.inner_text("#cmp-why")
    assert "choose two traces" in page.inner_text("#cmp-body")
    assert rebuilds == []  # the selects mounting with the page's values do not build the body again
    page.locator("#cmp-b").click()
    page.get_by_role("option", name=re.compile(r"^gpt_train_step\.nprof")).click()
    page.wait_for_selector("#compare-page #cmp-table .ag-row", timeout=120000)
    wait_idle(page, timeout=120000)
    assert len(rebuilds) == 1 and "present in both" in page.inner_text("#cmp-body")
    assert "other=gpt_train_step.nprof" in page.url
    page.close()
    assert errors == []
