"""HTTP endpoints of the canvas timeline (Flask routes on the Dash server).

``GET /api/timeline/view?trace=KEY[&rank=R]&t0=NS&t1=NS&w=PX[&g=0.3.4][&color=op][&q=TEXT][&pick=N]``
answers one view (``explorer.tiles.view_payload``): the level-of-detail shapes of the shown row groups
``g`` (positions in the index's group list; absent = all) in [t0, t1) ns from the trace start, at one
shape per pixel of ``w``. Every parameter is parsed as a plain bounded int or string; the trace key goes
through the store (only served traces); errors answer a short JSON message, never a traceback.
"""
from __future__ import annotations

import logging

import orjson
from flask import Response, request

from .banner import DOCS
from .pages.common import short_error
from .rows import COLOR_MODES
from .state import _int, _str
from .store import TraceAccessError, TraceStore
from .tiles import view_payload
from .viewport import query_view

LOG = logging.getLogger("explorer")
MAX_WIDTH_PX = 4000


def _json(obj, status: int = 200) -> Response:
    return Response(orjson.dumps(obj, option=orjson.OPT_SERIALIZE_NUMPY), status=status,
                    mimetype="application/json", headers={"Cache-Control": "no-store"})


def _groups(raw: str | None, n: int) -> list[int] | None:
    if raw is None:
        return None
    out = []
    for part in raw.split(".")[:1024]:
        i = _int(part)
        if i is not None and 0 <= i < n and i not in out:
            out.append(i)
    return out


def timeline_view(store: TraceStore, args, picked_of) -> dict:
    """The payload for one request's ``args`` (a mapping of query strings); raises the store's errors."""
    key = _str(args.get("trace"))
    if key is None:
        raise TraceAccessError("no trace selected")
    index = store.timeline(key, _int(args.get("rank")))
    t0, t1 = _int(args.get("t0")), _int(args.get("t1"))
    width = min(max(_int(args.get("w")) or 1200, 100), MAX_WIDTH_PX)
    color = args.get("color") if args.get("color") in COLOR_MODES else "op"
    q = (args.get("q") or "")[:200]
    groups = index.groups
    g = _groups(args.get("g"), len(groups))
    shown = None if g is None else [groups[i] for i in g]
    pick = _int(args.get("pick"))
    view = query_view(index, t0, t1, width, shown, q, picked=picked_of(index, pick))
    return view_payload(index, view, color)


def register_api(server, store: TraceStore, picked_of) -> None:
    """Add the routes to the Flask ``server``; ``picked_of(index, pick)`` gives a roofline pick's marks."""

    @server.route("/doc/<name>")
    def _doc(name: str):
        """A project document (whitelisted names only) as plain text."""
        from pathlib import Path

        fname = DOCS.get(name)
        path = Path(__file__).resolve().parents[1] / "docs" / fname if fname else None
        if path is None or not path.is_file():
            return Response(f"docs/{fname or name} is not part of this installation; see the project's "
                            "repository.", status=404, mimetype="text/plain")
        return Response(path.read_text(encoding="utf-8"), mimetype="text/plain; charset=utf-8")

    @server.route("/api/timeline/view")
    def _timeline_view():
        try:
            return _json(timeline_view(store, request.args, picked_of))
        except TraceAccessError as exc:
            return _json({"error": str(exc)}, 404)
        except Exception as exc:  # noqa: BLE001 - short message to the browser, traceback to the log
            LOG.exception("timeline view failed")
            return _json({"error": short_error(exc)}, 500)
