"""Explorer benchmark: a 5M-event trace, server time and bytes per viewport, paint time in Chromium,
interaction latency, and the render time of every page.

    python bench/bench_explorer.py [--events 5000000] [--views 60] [--no-browser] [--no-pages] [--alone]
                                   [--no-page-browser] [--pages-first PAGE,...] [--timeline PAGE [--cached]]

Prints:
- open + index time of the trace;
- server time per viewport request (LOD query + payload + JSON, the /api/timeline/view work), median and
  p90 over random windows from the whole trace down to 1/100000 of it (target: median < 100 ms);
- bytes per view (target < 1 MB);
- per page: the time to build its layout right after the trace is open (first, cold) and again (cached),
  target < 3 s; the cold figure is mostly analysis time. The pages are built one after another on one store, so
  a page's first build reuses what the pages before it computed (the shared per-trace work: instruction work,
  device activity); ``--alone`` also builds each page first on a store of its own (trace opened and indexed,
  nothing computed), the figure of a page opened first;
- per page in headless Chromium (``/usr/bin/chromium``, a fresh user-data dir), on a server started as
  ``neuron-explorer`` starts (trace opened and indexed, its pages' analyses precomputed in the background), a
  fresh server per page: the first paint (the page's layout shown) and the complete render (no section still
  computing, every graph drawn, every grid built, the timeline painted) of the page opened first, then the
  complete render again once the precompute is over (cached); target < 3 s. Compare opens the second 5M trace;
- the server's resident memory with both traces open and every page built (a child process);
- ``--timeline PAGE``: one first open of PAGE as a timeline in ms (each precomputed frame as it finishes, each
  request as the server starts and answers it, each change of the page in Chromium), to see where the time
  between "computed" and "drawn" goes;
- in headless Chromium: navigation to a painted timeline relative to an empty plotly page (target < 2x),
  zoom-to-redraw (key W until the new view is painted) and click-to-details (click in a slice until the
  details panel shows it).
"""
from __future__ import annotations

import argparse
import statistics
import sys
import tempfile
import time
from pathlib import Path

import numpy as np

ROOT = Path(__file__).resolve().parents[1]
sys.path[:0] = [str(ROOT), str(ROOT / "tests" / "explorer")]


def viewport_requests(index, views: int, width: int = 1400, seed: int = 0):
    import orjson

    from explorer.tiles import view_payload
    from explorer.viewport import query_view

    rng = np.random.default_rng(seed)
    span = index.end - index.origin
    times, sizes, shapes = [], [], []
    for k in range(views):
        frac = 10.0 ** -rng.uniform(0, 5) if k else 1.0
        w = max(int(span * frac), 1000)
        t0 = int(rng.integers(0, max(span - w, 1)))
        a = time.perf_counter()
        v = query_view(index, t0, t0 + w, width)
        body = orjson.dumps(view_payload(index, v, "op"))
        times.append(time.perf_counter() - a)
        sizes.append(len(body))
        shapes.append(v.n_shapes)
    return times, sizes, shapes


def paint_times(url_timeline: str, url_empty: str, repeats: int = 5) -> tuple[float, float]:
    from explorer_browser import browser

    js_ready = ("() => { const v = window.neuronTimeline && window.neuronTimeline.view();"
                " if (v && v.painted > 0 && v.painted === v.seq) { return true; }"
                " const gd = document.querySelector('#empty-graph .js-plotly-plot');"
                " return !!(gd && gd._fullLayout && document.querySelectorAll('.main-svg').length > 0); }")

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
        zoom_http = interactions(ctx, url_timeline)
        once(ctx, url_empty)  # warm the HTTP cache for plotly.js and the Dash bundles
        once(ctx, url_timeline)
        empty, tl = [], []
        for _ in range(repeats):  # interleaved, so load from other processes hits both alike
            empty.append(once(ctx, url_empty))
            tl.append(once(ctx, url_timeline))
    return statistics.median(tl), statistics.median(empty), zoom_http


def interactions(ctx, url_timeline: str, n: int = 10) -> tuple[list[float], list[float], list[float]]:
    """(zoom-to-redraw ms, click-to-details ms, server ms per view request) measured in the page."""
    page = ctx.new_page()
    page.goto(url_timeline)
    ready = "(p) => { const v = window.neuronTimeline.view(); return v && v.painted > p && v.painted === v.seq; }"
    page.wait_for_function(ready, arg=0, timeout=120000)
    page.locator("#tl-canvas").focus()
    zooms, clicks = [], []
    for _ in range(n):
        p = page.evaluate("() => window.neuronTimeline.view().painted")
        t = time.perf_counter()
        page.keyboard.press("w")
        page.wait_for_function(ready, arg=p, timeout=60000, polling=5)
        zooms.append((time.perf_counter() - t) * 1000)
    for _ in range(40):  # zoom on until a slice is wide enough to click in its middle
        s = page.evaluate("() => window.neuronTimeline.findSlice(40)")
        if s:
            break
        p = page.evaluate("() => window.neuronTimeline.view().painted")
        page.keyboard.press("w")
        page.wait_for_function(ready, arg=p, timeout=60000)
    for k in range(n if s else 0):
        s = page.evaluate("() => window.neuronTimeline.findSlice(40)")
        page.mouse.move(s["x"], s["y"])
        t = time.perf_counter()
        page.mouse.click(s["x"], s["y"])
        page.wait_for_function("(id) => { const e = document.querySelector('#tl-details');"
                               " return e && e.innerText.includes(id); }", arg=f"{s['table']} #{s['id']}",
                               timeout=60000, polling=5)
        clicks.append((time.perf_counter() - t) * 1000)
        p = page.evaluate("() => window.neuronTimeline.view().painted")
        page.keyboard.press("d" if k % 2 else "a")
        page.wait_for_function(ready, arg=p, timeout=60000)
    srv = page.evaluate("() => performance.getEntriesByType('resource').filter(e => e.name.includes('/api/timeline/'))"
                        ".map(e => e.responseStart - e.requestStart)")
    page.close()
    return zooms, clicks, srv


#: a page is rendered when the router has filled it, no section is still computing, no Dash callback is running,
#: every plotly graph is drawn, every grid built and the timeline canvas painted
PAGE_READY_JS = """() => {
  const main = document.querySelector('#page');
  if (!main || !main.firstElementChild) { return 0; }
  const first = 1;
  if (document.querySelector('#page .nx-pending, [data-dash-is-loading="true"]')) { return first; }
  for (const gd of document.querySelectorAll('#page .dash-graph')) {
    const p = gd.querySelector('.js-plotly-plot');
    if (!p || !p._fullLayout) { return first; }
  }
  for (const g of document.querySelectorAll('#page .nx-grid')) {
    if (!g.querySelector('.ag-root-wrapper')) { return first; }
  }
  if (document.querySelector('#tl-canvas')) {
    const v = window.neuronTimeline && window.neuronTimeline.view();
    if (!(v && v.painted > 0 && v.painted === v.seq)) { return first; }
  }
  return 2;
}"""


def browser_render(ctx, url: str, timeout: float = 180.0) -> tuple[float, float, bool]:
    """(first paint s, complete render s, error shown) of ``url`` in a new tab: polled from here, so a page that
    reloads itself (the old "computing" placeholder) is followed through its reloads."""
    page = ctx.new_page()
    t = time.perf_counter()
    page.goto(url, wait_until="commit")
    first = None
    while time.perf_counter() - t < timeout:
        try:
            r = page.evaluate(PAGE_READY_JS)
        except Exception:  # noqa: BLE001 - the page is reloading: its context went away, poll again
            r = 0
        if r and first is None:
            first = time.perf_counter() - t
        if r == 2:
            page.evaluate("() => new Promise(r => requestAnimationFrame(() => requestAnimationFrame(r)))")
            break
        time.sleep(0.02)
    done = time.perf_counter() - t
    err = page.evaluate("() => !!document.querySelector('#page .error-box')")
    page.close()
    return first if first is not None else done, done, err


def start_like_cli(folder: Path, key: str):
    """A store and app as ``neuron-explorer`` starts them: the first trace opened and indexed, then its pages'
    analyses precomputed in the background. Returns (store, app, the background work to wait for)."""
    from explorer import frames
    from explorer.app import create_app
    from explorer.store import TraceStore

    store = TraceStore(folder)
    try:  # the CLI (this branch on): the precompute starts when the trace opens, before its index is built
        from explorer.app import start_precompute
        from explorer.pages.common import Ctx
    except ImportError:  # older explorers: the CLI warmed the first trace's frames after the index
        store.timeline(key)
        app = create_app(store=store)
        return store, app, frames.warm(app._explorer_ctx, key)
    store.open(key)
    work = start_precompute(Ctx(store=store, precompute=True), key)
    store.timeline(key)
    return store, create_app(store=store), work


def browser_page_times(folder: Path, key: str, other: str, pages=None) -> list[tuple[str, float, float, float, bool]]:
    """(page, first paint s, complete s, cached complete s, error) of every page opened first in Chromium on a
    server started as the CLI starts it (a fresh server per page: nothing of another page computed)."""
    import gc

    from explorer_browser import browser, serve

    from explorer.state import PAGES

    out = []
    with browser() as bctx:
        for p in pages or PAGES:
            store, app, work = start_like_cli(folder, key)
            with serve(app) as url:
                u = f"{url}/{p}?trace={key}" + (f"&other={other}" if p == "compare" else "")
                first, done, err = browser_render(bctx, u)
                work.join(600)  # the background precompute, so that the next server starts on a quiet machine
                _, cached, _ = browser_render(bctx, u)
            out.append((p, first, done, cached, err))
            print(f"browser {p:12s}: first paint {first:5.2f} s, rendered {done:5.2f} s, cached {cached:5.2f} s"
                  f"{'  (ERROR shown)' if err else ''} (target < 3 s)", flush=True)
            del store, app, work
            gc.collect()
    return out


#: in the page from its start: every change of (page shown, sections computing, graphs drawn, grids built, Dash
#: callbacks running, plotly.js run), with performance.now()
TIMELINE_JS = r"""window.__nxT = []; (function () { let last = '';
  function tick() {
    const q = (s) => document.querySelectorAll(s).length;
    const gs = [...document.querySelectorAll('#page .dash-graph')];
    const drawn = gs.filter(g => { const p = g.querySelector('.js-plotly-plot'); return p && p._fullLayout; }).length;
    const s = `page ${!!document.querySelector('#page > *')} computing ${q('#page .nx-pending')} graphs ` +
      `${drawn}/${gs.length} grids ${q('#page .nx-grid .ag-root-wrapper')}/${q('#page .nx-grid')} callbacks ` +
      `${q('[data-dash-is-loading="true"]')} plotly.js ${!!(window.Plotly && window.Plotly.react)}`;
    if (s !== last) { window.__nxT.push([performance.now(), s]); last = s; }
    requestAnimationFrame(tick);
  } requestAnimationFrame(tick); })();"""


def open_timeline(folder: Path, key: str, other: str, page_name: str, cached: bool = False) -> None:
    """``--timeline PAGE``: one first open of PAGE (``cached``: after the precompute) on a server started as the
    CLI starts it, as a timeline in ms from the navigation: each precomputed frame as it finishes (the
    ``explorer`` logger at DEBUG), each request as the server starts and answers it (Dash callbacks by output,
    the long-polls by token), and each change of the page in the browser (:data:`TIMELINE_JS`)."""
    import logging

    from explorer_browser import browser, serve
    from flask import g, request

    t0, ev = [0.0], []

    def now() -> float:
        return (time.perf_counter() - t0[0]) * 1000 if t0[0] else -1.0

    class Frames(logging.Handler):
        def emit(self, record):
            ev.append((now(), "server", record.getMessage()))

    log = logging.getLogger("explorer")
    log.setLevel(logging.DEBUG)
    log.addHandler(Frames())
    store, app, work = start_like_cli(folder, key)
    if cached:
        work.join(900)

    @app.server.before_request
    def _start():
        g.nx_t = now()
        what = (request.get_json(silent=True) or {}).get("output", "") if request.is_json else ""
        g.nx_what = f"{request.path} {str(what)[:70]} {request.args.get('token', '')[:12]}".rstrip()

    @app.server.after_request
    def _done(resp):
        if "component-suites" not in request.path or "plotly" in request.path:
            ev.append((now(), "server", f"answered {g.nx_what} (started at {g.nx_t:.0f}, "
                                        f"{resp.calculate_content_length() or 0} B)"))
        return resp

    u = f"/{page_name}?trace={key}" + (f"&other={other}" if page_name == "compare" else "")
    with browser() as bctx, serve(app) as url:
        if cached:  # the browser's cache warm too (scripts), as the bench's cached figure
            browser_render(bctx, url + u)
            ev.clear()
        page = bctx.new_page()
        page.add_init_script(TIMELINE_JS)
        t0[0] = time.perf_counter()
        page.goto(url + u, wait_until="commit")
        while page.evaluate(PAGE_READY_JS) != 2:
            time.sleep(0.02)
        ev.append((now(), "browser", "complete (PAGE_READY_JS)"))
        ev.extend((t, "browser", s) for t, s in page.evaluate("window.__nxT"))
    for t, who, what in sorted(ev, key=lambda e: e[0]):
        print(f"{t:8.0f} ms  {who:7s} {what}")
    work.join(900)


def rss_mib() -> tuple[float, float]:
    """(current, peak) resident memory of this process, MiB (Linux /proc)."""
    vals = {}
    for line in Path("/proc/self/status").read_text().splitlines():
        k, _, v = line.partition(":")
        if k in ("VmRSS", "VmHWM"):
            vals[k] = int(v.split()[0]) / 1024
    return vals.get("VmRSS", float("nan")), vals.get("VmHWM", float("nan"))


def server_memory(folder: Path, key: str, other: str) -> None:
    """In this (fresh) process: start as the CLI does, wait for the precompute, build every page (Compare
    opening the second trace), print the resident memory."""
    from explorer.app import build_page
    from explorer.state import PAGES, ViewState

    base = rss_mib()[0]
    store, app, work = start_like_cli(folder, key)
    work.join(900)
    ctx = type(app._explorer_ctx)(store=store)
    for p in PAGES:
        build_page(ctx, ViewState(page=p, trace=key, other=other))
    now, peak = rss_mib()
    print(f"server memory, {key} and {other} open, every page built: RSS {now / 1024:.2f} GiB, "
          f"peak {peak / 1024:.2f} GiB (python + libraries before opening: {base:.0f} MiB)", flush=True)


def page_times(store, key: str) -> list[tuple[str, float, float]]:
    """(page, first build s, second build s) of every page's layout on an open trace."""
    from explorer.app import build_page
    from explorer.pages.common import Ctx
    from explorer.state import PAGES, ViewState

    ctx = Ctx(store)
    out = []
    for p in PAGES:
        times = []
        for _ in range(2):
            t = time.perf_counter()
            s = str(build_page(ctx, ViewState(page=p, trace=key, other="big_b.nprof")))
            times.append(time.perf_counter() - t)
            assert "error-box" not in s, (p, s[s.find("error-box") - 300: s.find("error-box") + 300])
        out.append((p, times[0], times[1]))
    return out


def alone_times(folder: Path, key: str) -> list[tuple[str, float]]:
    """(page, first build s) of every page built first on a fresh store (nothing computed yet)."""
    import gc

    from explorer.app import build_page
    from explorer.pages.common import Ctx
    from explorer.state import PAGES, ViewState
    from explorer.store import TraceStore

    out = []
    for p in PAGES:
        store = TraceStore(folder)
        store.timeline(key)
        t = time.perf_counter()
        build_page(Ctx(store), ViewState(page=p, trace=key, other="big_b.nprof"))
        out.append((p, time.perf_counter() - t))
        del store
        gc.collect()  # a Trace and its windows reference each other: free the last page's frames now
    return out


def pages_first(args) -> int:
    """``--pages-first``: each page's first render in Chromium and the server memory, on the traces in ``--data``
    (written once) or in a temporary folder."""
    import subprocess

    from explorer.state import PAGES
    from neuron_profiler.synthetic_trace import write_synthetic_trace

    pages = [p for p in (args.pages_first or ",".join(PAGES)).split(",") if p in PAGES]
    with tempfile.TemporaryDirectory(prefix="bench-explorer-") as tmp:
        d = Path(args.data) if args.data else Path(tmp)
        for name, seed in (("big.nprof", 0), ("big_b.nprof", 1)):
            if not (d / name).is_file():
                write_synthetic_trace(d / name, args.events, cores=2, steps=4, seed=seed)
        load = Path("/proc/loadavg").read_text().split()[:3] if Path("/proc/loadavg").is_file() else []
        print(f"load average before: {' '.join(load)}", flush=True)
        if args.timeline:
            open_timeline(d, "big.nprof", "big_b.nprof", args.timeline, args.cached)
            return 0
        browser_page_times(d, "big.nprof", "big_b.nprof", pages)
        subprocess.run([sys.executable, __file__, "--memory-of", str(d)], check=False)
    return 0


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--events", type=int, default=5_000_000, help="instruction rows (default 5M)")
    ap.add_argument("--views", type=int, default=60)
    ap.add_argument("--no-browser", action="store_true")
    ap.add_argument("--no-pages", action="store_true", help="skip the per-page render times")
    ap.add_argument("--alone", action="store_true", help="also time each page built first on a fresh store")
    ap.add_argument("--no-page-browser", action="store_true",
                    help="skip each page's first render in Chromium (a fresh server per page) and the server memory")
    ap.add_argument("--pages-first", metavar="PAGE,...",
                    help="only each page's first render in Chromium (these pages, default all) and the server memory: "
                         "no viewport figures, no layout builds, no timeline interaction (for A/B runs)")
    ap.add_argument("--timeline", metavar="PAGE", help="one first open of PAGE as a timeline (server frames, requests, "
                    "the page's changes in Chromium) on the traces in --data (written there if absent)")
    ap.add_argument("--cached", action="store_true", help="with --timeline: open PAGE after the precompute")
    ap.add_argument("--data", metavar="DIR", help="use big.nprof and big_b.nprof in DIR (written there if absent)")
    ap.add_argument("--memory-of", metavar="DIR", help=argparse.SUPPRESS)  # the child process measuring memory
    args = ap.parse_args(argv)
    if args.memory_of:
        server_memory(Path(args.memory_of), "big.nprof", "big_b.nprof")
        return 0
    if args.pages_first is not None or args.timeline:
        return pages_first(args)

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
        if not args.no_pages:
            write_synthetic_trace(Path(tmp) / "big_b.nprof", args.events, cores=2, steps=4, seed=1)
            store = TraceStore(tmp)  # lists the second trace too (the Compare page's other side)
            store.timeline("big.nprof")
            for p, first, again in page_times(store, "big.nprof"):
                print(f"page {p:12s}: first {first:6.2f} s, cached {again:5.2f} s (target < 3 s)")
            if args.alone:
                del store
                for p, first in alone_times(Path(tmp), "big.nprof"):
                    print(f"page {p:12s}: first on a fresh store {first:6.2f} s")
                store = TraceStore(tmp)
        if args.no_browser:
            return 0
        if not args.no_pages and not args.no_page_browser:
            del store
            browser_page_times(Path(tmp), "big.nprof", "big_b.nprof")
            import subprocess

            subprocess.run([sys.executable, __file__, "--memory-of", tmp], check=False)
            store = TraceStore(tmp)
            store.timeline("big.nprof")
        import dash
        from dash import dcc, html
        from explorer_browser import serve

        from explorer.app import create_app

        app = create_app(store=store)
        empty = dash.Dash(__name__)
        empty.layout = html.Div([dcc.Graph(id="empty-graph", figure={"data": [], "layout": {"height": 600}})])
        with serve(app) as url, serve(empty) as url_e:
            tl, em, (zooms, clicks, srv) = paint_times(f"{url}/timeline?trace=big.nprof", url_e + "/")
        print(f"view requests from the page ({len(srv)}): server {statistics.median(srv):.0f} ms median "
              f"(responseStart - requestStart)")
        print(f"zoom (key W) -> redrawn: median {statistics.median(zooms):.0f} ms, max {max(zooms):.0f} ms")
        if clicks:
            print(f"click in a slice -> details shown: median {statistics.median(clicks):.0f} ms, "
                  f"max {max(clicks):.0f} ms")
        print(f"navigation -> painted timeline: {tl:.2f} s; empty plotly page: {em:.2f} s; ratio {tl / em:.2f}x"
              f" (target < 2x)")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
