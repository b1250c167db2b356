"""Issue 26: URL values are validated into a page that says what was wrong, and the timeline API answers 4xx.

Was: ``t0=inf``, ``rank=1e400``, ``pick=inf`` raised OverflowError in the router (``int(float(v))``) and
``sel=instructions:1e20`` became a row id no int64 holds: a blank page without a message; the tile API answered
500 to the same values."""
from __future__ import annotations

import json

import plotly
import pytest

from explorer.app import build_page, create_app
from explorer.pages.common import Ctx
from explorer.state import INT_LIMIT, ViewState, decode, encode, parse_int
from explorer.store import TraceStore

BAD = [("t0=inf", "t0='inf' is not a finite number"), ("rank=1e400", "rank='1e400' is not a finite number"),
       ("pick=inf", "pick='inf' is not a finite number"), ("sel=instructions:1e20", "sel='1e20' is out of range"),
       ("t1=nan", "t1='nan' is not a finite number"), ("t0=99999999999999999999", "t0='99999999999999999999' is o"),
       ("pick=-3", "pick='-3' is out of range"), ("rank=-1", "rank='-1' is out of range"),
       ("sel=nosuchtable:3", "sel='nosuchtable:3' is not TABLE:ROW"), ("t0=5000&t1=10", "t1=10 is not after t0=5000"),
       (f"sel=instructions:{INT_LIMIT + 1}", "is out of range"), ("t0=abc", "t0='abc' is not a finite number")]


def _dump(component) -> str:
    return json.dumps(component, cls=plotly.utils.PlotlyJSONEncoder)


@pytest.fixture(scope="module")
def ctx(served_dir):
    return Ctx(TraceStore(served_dir))


@pytest.mark.parametrize("query, message", BAD)
@pytest.mark.parametrize("page", ["timeline", "summary", "roofline"])
def test_bad_values_give_the_page_and_say_what_was_wrong(ctx, query: str, message: str, page: str) -> None:
    state = decode(f"/{page}", f"?trace=single.nprof&{query}")
    assert len(state.problems) == 1 and message in state.problems[0], state.problems
    s = _dump(build_page(ctx, state))
    assert "url-problems" in s and message.replace("'", "\\u0027")[:12] in s.replace("'", "\\u0027")
    assert f'"{page}-page"' in s and "error-box" not in s  # the page itself, with the value at its default


def test_router_answers_bad_values_with_the_page(served_dir) -> None:
    """Through Dash's callback endpoint, as the browser asks: 200 and the message (was: 500, a blank page)."""
    app = create_app(served_dir)
    c = app.server.test_client()
    deps = c.get("/_dash-dependencies").get_json()
    router = next(d for d in deps if "page.children" in d["output"])
    for query, message in BAD[:4]:
        body = {"output": router["output"],
                "outputs": [{"id": o.split(".")[0], "property": o.split(".")[1]}
                            for o in router["output"].strip(".").split("...")],
                "inputs": [{"id": i["id"], "property": i["property"],
                            "value": "/timeline" if i["property"] == "pathname" else f"?trace=single.nprof&{query}"}
                           for i in router["inputs"]],
                "state": [{"id": s["id"], "property": s["property"], "value": None} for s in router["state"]],
                "changedPropIds": ["url.search"]}
        r = c.post("/_dash-update-component", json=body)
        assert r.status_code == 200, (query, r.status_code)
        text = r.get_data(as_text=True)
        assert "url-problems" in text and "timeline-page" in text and message[:10] in text, query


@pytest.mark.parametrize("query, status, message", [
    ("t0=inf", 400, "t0='inf' is not a finite number"), ("rank=1e400", 400, "rank='1e400'"),
    ("pick=inf", 400, "pick='inf'"), ("t1=-inf", 400, "t1='-inf'"), ("w=nan", 400, "w='nan'"),
    ("w=1e999", 400, "w='1e999'"), ("t0=100&t1=5", 400, "t1=5 is not after t0=100"), ("pick=-1", 400, "out of range"),
])
def test_tile_api_answers_4xx_on_bad_values(served_dir, query: str, status: int, message: str) -> None:
    c = create_app(served_dir).server.test_client()
    r = c.get(f"/api/timeline/view?trace=single.nprof&{query}")
    assert r.status_code == status and message in r.get_json()["error"], (query, r.status_code, r.get_data())
    ok = c.get("/api/timeline/view?trace=single.nprof&t0=0&t1=1000000&w=812.5&pick=2&rank=0")
    assert ok.status_code == 200 and ok.get_json()["n"] >= 0
    r = c.get("/api/timeline/view?trace=single.nprof&pick=99999999")  # a point the trace does not have
    assert r.status_code == 400 and "no roofline point 99999999" in r.get_json()["error"]


def test_parse_int_oracle() -> None:
    assert [parse_int(v, "x") for v in (None, "", " ", "0", "-5", "+7", " 12 ", str(INT_LIMIT), "1e3", "2.9")] == \
        [None, None, None, 0, -5, 7, 12, INT_LIMIT, 1000, 2]
    for v in ("inf", "-inf", "nan", "1e20", "1e400", "0x10", "1_000", "١٢", str(INT_LIMIT + 1), "9" * 30, "abc"):
        with pytest.raises(ValueError):
            parse_int(v, "x")


def test_valid_urls_still_round_trip() -> None:
    s = ViewState(page="timeline", trace="single.nprof", rank=1, t0=10, t1=5000, sel=("dma", 3), pick=2)
    assert decode(*encode(s).split("?")) == s and decode(*encode(s).split("?")).problems == ()
    assert "problems" not in encode(s.with_(problems=("x",)))
