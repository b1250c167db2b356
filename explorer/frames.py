"""Every analysis frame a page shows, fetched through one per-trace cache: computed once per open trace and
shared by all pages, viewers and callbacks (the store's ``memo``: concurrent requests wait for the first).

Pages call these instead of ``analysis.*`` directly, so nothing is computed twice and callbacks only fetch.
:func:`warm` computes the frames of every page in the background after a trace opens.
"""
from __future__ import annotations

import logging
import threading
import time
from collections.abc import Callable

import analysis
from analysis import figures

from .state import ViewState

LOG = logging.getLogger("explorer")


def _trace(ctx, state):
    return ctx.store.trace(state.trace, state.rank)


def _memo(ctx, state, key, fn):
    return ctx.store.memo(state.trace, (state.rank, key), fn, wait=ctx.wait_s)


def summary(ctx, state, region: tuple[int, int] | None = None):
    """``analysis.summary`` of the trace, or of the window ``region`` (absolute ns)."""
    t = _trace(ctx, state)
    return _memo(ctx, state, ("summary", region),
                 lambda: analysis.summary(t if region is None else t.window(*region)))


def explorer_comparison(ctx, state):
    """``analysis.neuron_explorer_comparison``: Neuron Explorer's Summary beside ours (empty when the trace
    was not imported from Neuron Explorer)."""
    t = _trace(ctx, state)
    return _memo(ctx, state, "neuron_explorer_comparison", lambda: analysis.neuron_explorer_comparison(t))


def steps(ctx, state):
    t = _trace(ctx, state)
    return _memo(ctx, state, "steps", lambda: analysis.steps(t))


def recommendations(ctx, state):
    t = _trace(ctx, state)
    return _memo(ctx, state, "recommendations", lambda: analysis.recommendations(t))


def hot_ops(ctx, state, by: str = "op"):
    t = _trace(ctx, state)
    return _memo(ctx, state, ("hot_ops", by), lambda: analysis.hot_ops(t, by=by))


def roofline(ctx, state):
    t = _trace(ctx, state)
    return _memo(ctx, state, "roofline", lambda: analysis.roofline(t))


def roofline_point_rows(ctx, state, point: int):
    t = _trace(ctx, state)
    return _memo(ctx, state, ("roofline_point", point), lambda: analysis.roofline_point_rows(t, point))


def collectives(ctx, state):
    t = _trace(ctx, state)
    return _memo(ctx, state, "collectives", lambda: analysis.collectives(t))


def source_lines(ctx, state):
    """``analysis.source_lines``: device time per Python source line (the Timeline's source view)."""
    t = _trace(ctx, state)
    return _memo(ctx, state, "source_lines", lambda: analysis.source_lines(t))


def dma(ctx, state, what: str):
    """``analysis.dma_queues`` / ``dma_sizes`` (``what`` = "queues" / "sizes")."""
    t = _trace(ctx, state)
    fn = {"queues": analysis.dma_queues, "sizes": analysis.dma_sizes}[what]
    return _memo(ctx, state, ("dma", what), lambda: fn(t))


def figure(ctx, state, name: str, build):
    """A figure of the trace built once (``build(trace)``), e.g. the temporal breakdown."""
    t = _trace(ctx, state)
    return _memo(ctx, state, ("figure", name), lambda: build(t))


def group(ctx, state, name: str, fn):
    """A frame of the whole group (``fn(TraceSet)``): rank balance, rank timeline, collectives across ranks."""
    obj = ctx.store.open(state.trace)
    return ctx.store.memo(state.trace, ("group", name), lambda: fn(obj), wait=ctx.wait_s)


def diff(ctx, a: str, b: str, keys: tuple[str, ...]):
    """``analysis.diff`` of two served traces, cached on the first one's slot."""
    ta, tb = ctx.store.trace(a), ctx.store.trace(b)
    return ctx.store.memo(a, ("diff", b, tuple(keys)), lambda: analysis.diff(ta, tb, keys=tuple(keys)),
                          wait=ctx.wait_s)


#: the figures pages ask for by name (:func:`figure`), with the builder the page uses: the precompute builds the
#: same (name, builder) so a page finds its frame ready
FIGURES = {
    "summary_items": analysis.summary_items, "time_split": analysis.time_split,
    "flops_breakdown": analysis.flops_breakdown,
    "dma_bytes_by:source": lambda t: analysis.dma_bytes_by(t, by="source"),
    "dma_bytes_by:data_type": lambda t: analysis.dma_bytes_by(t, by="data_type"),
    "temporal": figures.temporal_breakdown_figure, "temporal-note": figures.temporal_breakdown_note,
    "module_treemap": figures.module_treemap_figure, "dma_throughput": figures.dma_throughput_figure,
    # the Summary's figures: built once per trace (a plotly figure costs ~30 ms to build, each page build)
    "fig:time_split": figures.time_split_figure, "fig:engines": figures.engine_utilisation_figure,
    "fig:flops_breakdown": figures.flops_breakdown_figure, "fig:steps": figures.steps_figure,
    "fig:dma_bytes_by:source": lambda t: figures.dma_bytes_figure(t, by="source"),
    "fig:dma_bytes_by:data_type": lambda t: figures.dma_bytes_figure(t, by="data_type"),
}


def named(ctx, state, name: str):
    """:func:`figure` of one of :data:`FIGURES`."""
    return figure(ctx, state, name, FIGURES[name])


def base_frames(ctx, state) -> list[tuple[str, Callable[[], object]]]:
    """(name, compute) of the per-trace reductions most pages start from, each memoised on the trace (not held
    by the store): the instruction table's analysis columns, the per-instruction work (FLOPs, bytes, op) and
    the start-sorted device activity. The precompute does them first as frames of their own, so that a page
    opened meanwhile waits for work it needs anyway, not for the rest of another page's frame."""
    t = _trace(ctx, state)

    def done(fn):
        return lambda: (fn(), None)[1]

    return [("instructions", done(lambda: t.analysis_table("instructions"))),
            ("instruction_work", done(lambda: analysis.instruction_work(t))),
            ("device_activity", done(t.device_activity))]


def page_frames(ctx, state) -> list[tuple[str, Callable[[], object]]]:
    """(name, fetch) of every frame the pages of one trace show, in the order they are precomputed: the shared
    reductions (:func:`base_frames`), the Summary (the landing page: its answer, sections, steps and temporal
    breakdown), Roofline (little more once the Summary is done), Hot ops; :data:`LATER` marks where
    :func:`warm`'s extra frames go (Compare's diff); then Collectives, DMA, Memory, the source lines and the SQL
    database. Each fetch goes through the store's per-trace cache, so what a page later asks for is ready."""
    from .pages.hot_ops import warm as hot_ops_page
    from .pages.memory import warm as memory
    from .pages.query import database
    from .pages.roofline import warm as roofline_page
    from .regions import regions

    fig = lambda n: (n, lambda: named(ctx, state, n))  # noqa: E731
    return [*base_frames(ctx, state), ("steps", lambda: steps(ctx, state)),
            ("summary", lambda: summary(ctx, state)), fig("summary_items"), fig("time_split"),
            ("recommendations", lambda: recommendations(ctx, state)), fig("flops_breakdown"),
            fig("dma_bytes_by:source"), fig("dma_bytes_by:data_type"), fig("temporal"),
            *(fig(f"fig:{n}") for n in ("time_split", "engines", "flops_breakdown", "steps", "dma_bytes_by:source",
                                        "dma_bytes_by:data_type")),
            ("regions", lambda: regions(ctx, state)),
            ("neuron_explorer_comparison", lambda: explorer_comparison(ctx, state)), fig("temporal-note"),
            ("roofline", lambda: roofline(ctx, state)), ("roofline page", lambda: roofline_page(ctx, state)),
            ("hot_ops", lambda: hot_ops(ctx, state, "op")), fig("module_treemap"),
            ("hot_ops page", lambda: hot_ops_page(ctx, state)),
            LATER, ("collectives", lambda: collectives(ctx, state)),
            ("dma queues", lambda: dma(ctx, state, "queues")), ("dma sizes", lambda: dma(ctx, state, "sizes")),
            fig("dma_throughput"), ("memory", lambda: memory(ctx, state)),
            ("source_lines", lambda: source_lines(ctx, state)), ("sql", lambda: database(ctx, state))]


#: in :func:`page_frames`, where the ``extra`` frames of :func:`warm` go: after the Summary, Roofline and Hot ops
LATER = ("later", None)


def warm(ctx, key: str, extra: tuple[tuple[str, Callable[[], object]], ...] = ()) -> threading.Thread:
    """Precompute the frames of every page of ``key`` (:func:`page_frames`; ``extra``, e.g. Compare's diff with
    its default partner, after the Summary's sections) in a background thread, one frame after another. It
    yields to pages: while
    a page waits for a frame of its own (computing on the store's pool) it pauses between frames, and it
    stops when the trace has left the store's cache. Errors are logged: the page that needs the frame shows
    them."""
    state = ViewState(trace=key)
    ctx = type(ctx)(store=ctx.store, width_px=ctx.width_px, wait_s=None)  # the warm-up itself waits
    store = ctx.store

    def run():
        try:
            store.open(key)
        except Exception:  # noqa: BLE001 - the page shows why the trace does not open
            return
        todo = page_frames(ctx, state)
        at = todo.index(LATER)
        for name, fn in [*todo[:at], *extra, *todo[at + 1:]]:
            while store.foreground_busy():
                time.sleep(0.02)
            if key not in store.cached_keys():  # evicted: do not open it again for nobody
                return
            t = time.perf_counter()
            try:
                fn()
            except Exception:  # noqa: BLE001 - shown by the page that needs it
                LOG.debug("warm-up of %s: frame %s failed", key, name, exc_info=True)
            LOG.debug("warm-up of %s: %s in %.2f s", key, name, time.perf_counter() - t)

    th = threading.Thread(target=run, name=f"warm {key}", daemon=True)
    th.start()
    return th
