"""Sections pushed when their analyses are ready: no fixed reload interval, no page rebuild.

A section whose analysis frame is still computing (:class:`explorer.store.FramePending`, caught by
``pages.common.guarded``) is sent at once as a placeholder: a wrapper ``{"type": "pending-section", "token": T}``
holding a ``{"type": "section-ready", "token": T}`` store, the token naming the computation and how to build
the section again (:meth:`explorer.store.TraceStore.watch`). A clientside callback per placeholder long-polls
``GET /api/frames/wait?token=T1,T2...`` (placeholders shown together share one request; the server answers as
soon as one of their frames is computed, or after ``timeout`` s, at most 25) and sets the ready section's
store; on that the server rebuilds just that section, waiting there for any other frame it needs (computing
already). Network errors back off (1 s, 2 s, 4 s ... up to 30 s). Dash has no server push: the long-poll is
the push.
"""
from __future__ import annotations

import math

from dash import MATCH, Input, Output, dcc, html
from flask import request

from .store import TraceStore, end_request, new_request

WAIT_MAX_S = 25.0
PENDING_CLASS = "note nx-pending"
DONE_CLASS = "nx-section-done"

#: each placeholder's clientside callback: its token joins the page's next batch (placeholders shown together
#: share one long-poll, so a page holds few connections); a batch polls until every token of it is ready,
#: resolving each as it is; network errors back off
WAIT_JS = """function(id) {
    if (!id || !id.token) { return window.dash_clientside.no_update; }
    const nx = window.__nxPush = window.__nxPush || {queue: [], timer: null};
    const poll = async (batch) => {
        let backoff = 1000;
        for (let round = 0; batch.size && round < 720; round++) {
            try {
                const r = await fetch('/api/frames/wait?timeout=20&token=' +
                                      [...batch.keys()].map(encodeURIComponent).join(','), {cache: 'no-store'});
                for (const t of ((await r.json()).ready || [])) {
                    const done = batch.get(t);
                    if (done) { batch.delete(t); done(t); }
                }
                backoff = 1000;
            } catch (e) {
                await new Promise(res => setTimeout(res, backoff));  // server gone or restarting: back off
                backoff = Math.min(backoff * 2, 30000);
            }
        }
    };
    return new Promise(resolve => {
        nx.queue.push([id.token, resolve]);
        if (!nx.timer) {
            nx.timer = setTimeout(() => {
                const batch = new Map(nx.queue);
                nx.queue = [];
                nx.timer = null;
                poll(batch);
            }, 30);
        }
    });
}"""


def pending_section(store: TraceStore, future, rebuild) -> html.Div:
    """The placeholder of a section whose frame (``future``) is still computing; ``rebuild()`` builds the
    section again (called once the frame is ready)."""
    token = store.watch([future], rebuild)
    return html.Div([html.Span("Computing this section's analysis… it appears here when ready."),
                     dcc.Store(id={"type": "section-ready", "token": token})],
                    id={"type": "pending-section", "token": token}, className=PENDING_CLASS)


def register_push(app, store: TraceStore) -> None:
    """The long-poll endpoint, the clientside callback waiting on it and the server callback rebuilding a
    ready section."""
    def wait_frames():
        from .api import _json

        tokens = [t for t in str(request.args.get("token", ""))[:64 * 64].split(",") if t][:64]
        try:
            timeout = float(str(request.args.get("timeout", "20"))[:16])
        except ValueError:
            timeout = 20.0
        timeout = min(max(timeout, 0.0), WAIT_MAX_S) if math.isfinite(timeout) else 20.0
        return _json({"ready": store.wait_watch(tokens, timeout)})

    app.server.add_url_rule("/api/frames/wait", "frames_wait", wait_frames, methods=["GET"])
    app.clientside_callback(WAIT_JS, Output({"type": "section-ready", "token": MATCH}, "data"),
                            Input({"type": "pending-section", "token": MATCH}, "id"))

    @app.callback(Output({"type": "pending-section", "token": MATCH}, "children"),
                  Output({"type": "pending-section", "token": MATCH}, "className"),
                  Input({"type": "section-ready", "token": MATCH}, "data"), prevent_initial_call=True)
    def rebuild(token):
        fn = store.watched(str(token or ""))
        if fn is None:  # evicted (hundreds of sections since): the page has to be opened again
            return html.Span("This section expired: reload the page to see it."), "note"
        new_request(section=True)  # one of its frames is ready: wait here for the others (no nested placeholder)
        try:
            return fn(), DONE_CLASS
        finally:
            end_request()  # this server thread serves other requests next
