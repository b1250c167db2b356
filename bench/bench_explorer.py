"""Explorer benchmark: a 5M-event trace, server time and bytes per viewport, paint time in Chromium.

    python bench/bench_explorer.py [--events 5000000] [--views 60] [--no-browser]

Prints:
- open + index time of the trace;
- server time per viewport request (the timeline callback's work: LOD query + figure + JSON), median and
  p90 over random windows from the whole trace down to 1/100000 of it (target: median < 100 ms);
- bytes per view (target < 1 MB);
- time from navigation to a painted timeline in headless Chromium, relative to an empty plotly page
  (a Dash page with one empty dcc.Graph) in the same run (target < 2x).
"""
from __future__ import annotations

import argparse
import statistics
import sys
import tempfile
import time
from pathlib import Path

import numpy as np
import plotly

ROOT = Path(__file__).resolve().parents[1]
sys.path[:0] = [str(ROOT), str(ROOT / "tests" / "explorer")]


def viewport_requests(index, views: int, width: int = 1400, seed: int = 0):
    from explorer.viewport import build_figure, query_view

    rng = np.random.default_rng(seed)
    span = index.end - index.origin
    times, sizes, shapes = [], [], []
    for k in range(views):
        frac = 10.0 ** -rng.uniform(0, 5) if k else 1.0
        w = max(int(span * frac), 1000)
        t0 = int(rng.integers(0, max(span - w, 1)))
        a = time.perf_counter()
        v = query_view(index, t0, t0 + w, width)
        fig = build_figure(index, v, "op")
        body = plotly.io.json.to_json_plotly(fig)
        times.append(time.perf_counter() - a)
        sizes.append(len(body.encode()))
        shapes.append(v.n_shapes)
    return times, sizes, shapes


def paint_times(url_timeline: str, url_empty: str, repeats: int = 5) -> tuple[float, float]:
    from explorer_browser import browser

    js_ready = ("() => { const gd = document.querySelector('#tl-graph .js-plotly-plot') ||"
                " document.querySelector('#empty-graph .js-plotly-plot');"
                " return gd && gd._fullLayout && document.querySelectorAll('.main-svg').length > 0 &&"
                " !document.querySelector('[data-dash-is-loading=\"true\"]'); }")

    def once(ctx, url) -> float:
        page = ctx.new_page()
        t = time.perf_counter()
        page.goto(url)
        page.wait_for_function(js_ready, timeout=120000, polling=20)
        page.evaluate("() => new Promise(r => requestAnimationFrame(() => requestAnimationFrame(r)))")
        dt = time.perf_counter() - t
        page.close()
        return dt

    with browser() as ctx:
        zoom_http = http_zooms(ctx, url_timeline)
        once(ctx, url_empty)  # warm the HTTP cache for plotly.js and the Dash bundles
        once(ctx, url_timeline)
        empty, tl = [], []
        for _ in range(repeats):  # interleaved, so load from other processes hits both alike
            empty.append(once(ctx, url_empty))
            tl.append(once(ctx, url_timeline))
    return statistics.median(tl), statistics.median(empty), zoom_http


def http_zooms(ctx, url_timeline: str, n: int = 20, seed: int = 1) -> list[tuple[float, int, float]]:
    """Zoom the timeline ``n`` times from the page (``Plotly.relayout``, like a drag) and read each zoom
    callback's HTTP timing: (server ms = responseStart - requestStart, bytes, ms until the new figure is
    drawn)."""
    page = ctx.new_page()
    page.goto(url_timeline)
    page.wait_for_selector("#tl-graph .main-svg", timeout=120000)
    page.wait_for_function("() => !document.querySelector('[data-dash-is-loading=\"true\"]')")
    rng = np.random.default_rng(seed)
    out = []
    r = page.evaluate("() => document.querySelector('#tl-graph .js-plotly-plot').layout.xaxis.range")
    for _ in range(n):
        w = (r[1] - r[0]) * 10.0 ** -float(rng.uniform(0, 4))  # from the whole trace to 1/10000 of it
        a = r[0] + float(rng.uniform(0, max(r[1] - r[0] - w, 0)))
        page.evaluate("() => performance.clearResourceTimings()")
        t = time.perf_counter()
        page.evaluate("([a, b]) => Plotly.relayout(document.querySelector('#tl-graph .js-plotly-plot'),"
                      " {'xaxis.range[0]': a, 'xaxis.range[1]': b})", [a, a + w])
        page.wait_for_function("() => performance.getEntriesByType('resource').some(e =>"
                               " e.name.includes('update-component') && e.transferSize > 1000)", timeout=60000)
        page.evaluate("() => new Promise(r => requestAnimationFrame(() => requestAnimationFrame(r)))")
        drawn = (time.perf_counter() - t) * 1000
        e = page.evaluate("() => performance.getEntriesByType('resource').filter(e =>"
                          " e.name.includes('update-component')).map(e => [e.responseStart - e.requestStart,"
                          " e.encodedBodySize]).sort((x, y) => y[1] - x[1])[0]")
        out.append((float(e[0]), int(e[1]), drawn))
    page.close()
    return out


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--events", type=int, default=5_000_000, help="instruction rows (default 5M)")
    ap.add_argument("--views", type=int, default=60)
    ap.add_argument("--no-browser", action="store_true")
    args = ap.parse_args(argv)

    from explorer.store import TraceStore
    from neuron_profiler.synthetic_trace import write_synthetic_trace

    with tempfile.TemporaryDirectory(prefix="bench-explorer-") as tmp:
        path = Path(tmp) / "big.nprof"
        t = time.perf_counter()
        write_synthetic_trace(path, args.events, cores=2, steps=4)
        print(f"wrote {path.name}: {path.stat().st_size / 1e6:.1f} MB in {time.perf_counter() - t:.1f} s")
        store = TraceStore(tmp)
        t = time.perf_counter()
        index = store.timeline("big.nprof")
        print(f"open + index: {time.perf_counter() - t:.2f} s, {index.n_events():,} events in "
              f"{len(index.infos)} rows")
        times, sizes, shapes = viewport_requests(index, args.views)
        ms = np.array(times) * 1000
        print(f"viewport requests ({args.views}): median {np.median(ms):.1f} ms, p90 {np.percentile(ms, 90):.1f} ms,"
              f" max {ms.max():.1f} ms (target median < 100 ms)")
        print(f"bytes per view: median {np.median(sizes) / 1e3:.0f} kB, max {max(sizes) / 1e3:.0f} kB"
              f" (target < 1000 kB); shapes per view: median {int(np.median(shapes))}, max {max(shapes)}")
        if args.no_browser:
            return 0
        import dash
        from dash import dcc, html

        from explorer.app import create_app
        from explorer_browser import serve

        app = create_app(store=store)
        empty = dash.Dash(__name__)
        empty.layout = html.Div([dcc.Graph(id="empty-graph", figure={"data": [], "layout": {"height": 600}})])
        with serve(app) as url, serve(empty) as url_e:
            tl, em, zooms = paint_times(f"{url}/timeline?trace=big.nprof", url_e + "/")
        srv = [z[0] for z in zooms]
        print(f"zooms in Chromium ({len(zooms)}, HTTP): server {statistics.median(srv):.0f} ms median "
              f"(responseStart - requestStart), {statistics.median([z[1] for z in zooms]) / 1e3:.0f} kB median, "
              f"{max(z[1] for z in zooms) / 1e3:.0f} kB max; zoom -> redrawn {statistics.median([z[2] for z in zooms]):.0f} ms median")
        print(f"navigation -> painted timeline: {tl:.2f} s; empty plotly page: {em:.2f} s; ratio {tl / em:.2f}x"
              f" (target < 2x)")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
