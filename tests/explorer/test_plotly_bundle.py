"""The explorer's plotly.js is a partial bundle (explorer/assets/vendor/plotly-explorer.min.js, built from
tools/plotly_bundle/entry.js): every figure it is asked to draw must use a trace type the bundle registers, else
the graph would stay empty in the browser."""
from __future__ import annotations

import re
from pathlib import Path

import plotly.graph_objects as go
import pytest

from explorer.app import build_page
from explorer.pages.common import Ctx
from explorer.state import PAGES, ViewState
from explorer.store import TraceStore

REPO = Path(__file__).resolve().parents[2]
BUNDLE = REPO / "explorer" / "assets" / "vendor" / "plotly-explorer.min.js"


def _bundled() -> set[str]:
    """The trace types of tools/plotly_bundle/entry.js (scatter is in plotly.js's core)."""
    entry = (REPO / "tools" / "plotly_bundle" / "entry.js").read_text()
    return {"scatter"} | set(re.findall(r"require\('plotly\.js/lib/(\w+)'\)", entry)) - {"core"}


def _figures(component):
    """Every figure of the dcc.Graph components in a layout tree."""
    fig = getattr(component, "figure", None)
    if fig is not None:
        yield fig
    kids = getattr(component, "children", None)
    for k in kids if isinstance(kids, (list, tuple)) else ([kids] if kids is not None else []):
        yield from _figures(k)


def _types(fig) -> set[str]:
    data = fig.to_plotly_json()["data"] if hasattr(fig, "to_plotly_json") else fig.get("data", [])
    return {t.get("type") or "scatter" for t in data}


def test_the_bundle_is_built_from_the_entry_and_pins_plotly_js_of_the_python_package():
    import plotly

    head = BUNDLE.read_text()[:400]
    py_js = (Path(plotly.__file__).parent / "package_data" / "plotly.min.js").read_text()[:200]
    version = re.search(r"plotly\.js v([\d.]+)", py_js).group(1)
    assert f"plotly.js v{version} " in head  # the same plotly.js as Dash's full bundle: same figure schema
    assert _bundled() == {"scatter", "bar", "pie", "heatmap", "treemap"}


@pytest.mark.parametrize("which", ["single.nprof", "group:run/synthetic", "gpu"])
def test_every_page_draws_only_bundled_trace_types(served_dir, gpu_dir, which):
    ctx = Ctx(TraceStore(gpu_dir if which == "gpu" else served_dir))
    key = ctx.store.default_key() if which == "gpu" else which
    seen: set[str] = set()
    for page in PAGES:
        for fig in _figures(build_page(ctx, ViewState(page=page, trace=key))):
            seen |= _types(fig)
    assert seen and seen <= _bundled(), seen - _bundled()


def test_no_figure_code_builds_a_trace_type_outside_the_bundle():
    """Figures built in callbacks (not on a page's first layout) too: every plotly trace class or add_<trace>
    named in analysis/ and explorer/."""
    names = {n.lower() for n in dir(go) if n[0].isupper() and hasattr(getattr(go, n), "_path_str")
             and "." not in getattr(go, n)._path_str and n not in ("Figure", "FigureWidget", "Layout", "Frame")}
    used: set[str] = set()
    for py in [*(REPO / "analysis").rglob("*.py"), *(REPO / "explorer").rglob("*.py")]:
        src = py.read_text()
        used |= {m.lower() for m in re.findall(r"\bgo\.([A-Z][A-Za-z]+)\(", src)} & names
        used |= set(re.findall(r"\.add_([a-z]+)\(", src)) & names
        used |= set(re.findall(r"[\"']type[\"']\s*:\s*[\"']([a-z]+)[\"']", src)) & names
    assert "bar" in used and used <= _bundled(), used - _bundled()
