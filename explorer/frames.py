"""Every analysis frame a page shows, fetched through one per-trace cache: computed once per open trace and
shared by all pages, viewers and callbacks (the store's ``memo``: concurrent requests wait for the first).

Pages call these instead of ``analysis.*`` directly, so nothing is computed twice and callbacks only fetch.
:func:`warm` computes the frames of every page in the background after a trace opens.
"""
from __future__ import annotations

import logging
import threading

import analysis

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


def warm(ctx, key: str) -> threading.Thread:
    """Compute the frames of every page of ``key`` in a background thread (errors are logged: the page
    shows them when asked)."""
    state = ViewState(trace=key)
    ctx = type(ctx)(store=ctx.store, width_px=ctx.width_px, wait_s=None)  # the warm-up itself waits

    def run():
        for fn in (lambda: summary(ctx, state), lambda: explorer_comparison(ctx, state), lambda: steps(ctx, state),
                   lambda: recommendations(ctx, state),
                   lambda: hot_ops(ctx, state, "op"), lambda: roofline(ctx, state), lambda: collectives(ctx, state),
                   lambda: dma(ctx, state, "queues"), lambda: dma(ctx, state, "sizes")):
            try:
                fn()
            except Exception:  # noqa: BLE001 - shown by the page that needs it
                LOG.debug("warm-up of %s: a frame failed", key, exc_info=True)

    th = threading.Thread(target=run, name=f"warm {key}", daemon=True)
    th.start()
    return th
