"""Pages pushed when their analyses are ready: no fixed reload interval.

A page whose sections are still computing (:class:`explorer.store.FramePending`) is sent at once with those
sections as placeholders and a token naming the computations (``pending_marker``: a ``dcc.Store`` with a
pattern id). A clientside callback then waits on ``GET /api/frames/wait?token=T`` (a long-poll: the server
answers as soon as one of the token's frames is computed, or after ``timeout`` s, at most 25), and when one is
ready bumps ``page-refresh``, on which the router rebuilds the page from the cache (the ready sections filled,
the rest pending again with a new token). Network errors back off (1 s, 2 s, 4 s ... up to 30 s); Dash has no
server push, so the long-poll is the push.
"""
from __future__ import annotations

from dash import ALL, Input, Output, dcc
from flask import request

from .store import TraceStore, pending_futures

WAIT_MAX_S = 25.0

#: the clientside callback: long-poll each token until one of its frames is ready, then ask for a rebuild
WAIT_JS = """async function(tokens) {
    const live = (tokens || []).filter(t => t);
    if (!live.length) { return window.dash_clientside.no_update; }
    let backoff = 1000;
    for (let round = 0; round < 240; round++) {
        try {
            const r = await fetch('/api/frames/wait?timeout=20&token=' + encodeURIComponent(live[0]),
                                  {cache: 'no-store'});
            const j = await r.json();
            if (j.ready) {
                return {n: Date.now(), path: window.location.pathname, search: window.location.search};
            }
            backoff = 1000;
        } catch (e) {
            await new Promise(res => setTimeout(res, backoff));  // server gone or restarting: back off
            backoff = Math.min(backoff * 2, 30000);
        }
    }
    return window.dash_clientside.no_update;
}"""


def pending_marker(store: TraceStore):
    """A ``dcc.Store`` naming the frames this request found still computing, or None when all were ready."""
    token = store.watch(pending_futures())
    return dcc.Store(id={"type": "pending-watch", "token": token}, data=token) if token else None


def register_push(app, store: TraceStore) -> None:
    """The long-poll endpoint and the clientside callback that waits on it (``page-refresh`` is the router's
    trigger: a ``dcc.Store`` in the app layout)."""
    def wait_frames():
        from .api import _json

        token = str(request.args.get("token", ""))[:64]
        try:
            timeout = min(max(float(request.args.get("timeout", "20")), 0.0), WAIT_MAX_S)
        except ValueError:
            timeout = 20.0
        return _json(store.wait_watch(token, timeout))

    app.server.add_url_rule("/api/frames/wait", "frames_wait", wait_frames, methods=["GET"])
    app.clientside_callback(WAIT_JS, Output("page-refresh", "data"),
                            Input({"type": "pending-watch", "token": ALL}, "data"), prevent_initial_call=True)
