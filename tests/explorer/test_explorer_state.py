"""URL state: round trip and tolerance of malformed input."""
from __future__ import annotations

import pytest

from explorer.state import PAGES, ViewState, decode, encode


@pytest.mark.parametrize("state", [
    ViewState(),
    ViewState(page="timeline", trace="run/rank00000_window000.nprof", rank=1, t0=100, t1=5000,
              sel=("instructions", 42), q="aten::mm & co", color="module"),
    ViewState(page="compare", trace="a b.nprof", other="group:run/rank*_w.nprof"),
    ViewState(page="timeline", trace="t.nprof", rows=(3, 0, 1), pick=5, sel=("instructions", 9)),
    ViewState(page="roofline", trace="t.nprof", roof_color="engine", engines=("Tensor", "odd, name"),
              bounds=("memory",)),
    *[ViewState(page=p, trace="x.nprof") for p in PAGES],
])
def test_round_trip(state):
    href = encode(state)
    path, _, search = href.partition("?")
    assert decode(path, search) == state


@pytest.mark.parametrize("path,search,expect", [
    ("/nope", "", ViewState()),
    ("/timeline", "t0=10&t1=5", ViewState(page="timeline")),
    ("/timeline", "t0=abc&t1=1e3", ViewState(page="timeline", t1=1000)),
    ("/timeline", "sel=os:1", ViewState(page="timeline")),
    ("/timeline", "sel=instructions:-3", ViewState(page="timeline")),
    ("/timeline", "sel=dma:7&color=__import__", ViewState(page="timeline", sel=("dma", 7))),
    ("/timeline", "rows=2.x.-1.2.0&pick=-4", ViewState(page="timeline", rows=(2, 0))),
    ("/roofline", "roof_color=op&engines=&bounds=memory", ViewState(page="roofline", bounds=("memory",))),
    (None, None, ViewState()),
])
def test_malformed_values_fall_back_to_defaults(path, search, expect):
    assert decode(path, search) == expect


def test_href_replaces_fields():
    s = ViewState(page="summary", trace="t.nprof", t0=1, t1=2)
    assert decode(*s.href(page="timeline", t0=None, t1=None).split("?")) == ViewState(page="timeline", trace="t.nprof")
