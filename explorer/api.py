"""HTTP endpoints of the canvas timeline (Flask routes on the Dash server).

``GET /api/timeline/view?trace=KEY[&rank=R]&t0=NS&t1=NS&w=PX[&g=0.3.4][&color=op][&q=TEXT][&pick=N]``
answers one view (``explorer.tiles.view_payload``): the level-of-detail shapes of the shown row groups
``g`` (positions in the index's group list; absent = all) in [t0, t1) ns from the trace start, at one
shape per pixel of ``w``. Every parameter is parsed as a plain bounded int or string: an invalid one (``t0=inf``,
``rank=1e400``, ``pick=-1``) answers 400 naming it; the trace key goes through the store (only served traces,
else 404); other errors answer a short JSON message (500), never a traceback. ``pending`` lists the derived
counter rows still being computed (the canvas asks again).

``GET /api/timeline/at?trace=KEY[&rank=R]&row=I&t=NS&tol=NS`` answers the one event a click at ``t`` on row ``I``
selects (:func:`explorer.viewport.event_at`), also where the view drew a merged shape.
"""
from __future__ import annotations

import logging
import math

import orjson
from flask import Response, request

from .banner import DOCS
from .pages.common import short_error
from .rows import COLOR_MODES
from .state import INT_LIMIT, _int, _str, parse_int
from .store import TraceAccessError, TraceStore
from .tiles import view_payload
from .viewport import event_at, query_view

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


class BadRequest(ValueError):
    """A query parameter that is not a valid value (answered 400 with the reason)."""


def _width(v: str | None) -> int:
    """The view's width in pixels: a finite number (the canvas may send a fraction), clamped to [100, 4000]."""
    if v is None or not v.strip():
        return 1200
    try:
        f = float(v) if len(v) <= 24 else math.nan
    except ValueError:
        f = math.nan
    if not math.isfinite(f):
        raise BadRequest(f"w={v[:40]!r} is not a width in pixels")
    return int(min(max(f, 100), MAX_WIDTH_PX))


def _params(args) -> tuple[int | None, int | None, int | None, int | None, int]:
    """(rank, t0, t1, pick, width) of a request; ``BadRequest`` naming the first invalid one."""
    try:
        rank = parse_int(args.get("rank"), "rank", 0, (1 << 31) - 1)
        t0, t1 = parse_int(args.get("t0"), "t0"), parse_int(args.get("t1"), "t1")
        pick = parse_int(args.get("pick"), "pick", 0, INT_LIMIT)
    except ValueError as exc:
        raise BadRequest(str(exc)) from None
    if t0 is not None and t1 is not None and t1 <= t0:
        raise BadRequest(f"t1={t1} is not after t0={t0}")
    return rank, t0, t1, pick, _width(args.get("w"))


def timeline_view(store: TraceStore, args, picked_of) -> dict:
    """The payload for one request's ``args`` (a mapping of query strings); raises ``BadRequest`` for an invalid
    value and the store's errors."""
    key = _str(args.get("trace"))
    if key is None:
        raise TraceAccessError("no trace selected")
    rank, t0, t1, pick, width = _params(args)
    index = store.timeline(key, rank)
    color = args.get("color") if args.get("color") in COLOR_MODES else "op"
    q = (args.get("q") or "")[:200]
    groups = index.groups
    g = _groups(args.get("g"), len(groups))
    shown = None if g is None else [groups[i] for i in g]
    try:
        picked = picked_of(index, pick)
    except ValueError as exc:  # e.g. no roofline point of that number in this trace
        raise BadRequest(f"pick={pick}: {exc}") from None
    view = query_view(index, t0, t1, width, shown, q, picked=picked)
    return view_payload(index, view, color)


def timeline_event(store: TraceStore, args) -> dict:
    """The event under the pointer: ``GET /api/timeline/at?trace=KEY[&rank=R]&row=I&t=NS&tol=NS`` answers
    :func:`explorer.viewport.event_at` (``{"table", "id", "row", "s", "e"}``, or ``{}`` when there is none)."""
    key = _str(args.get("trace"))
    if key is None:
        raise TraceAccessError("no trace selected")
    try:
        rank = parse_int(args.get("rank"), "rank", 0, (1 << 31) - 1)
        row = parse_int(args.get("row"), "row", 0, 1 << 30)
        t = parse_int(args.get("t"), "t")
        tol = parse_int(args.get("tol"), "tol", 0, INT_LIMIT)
    except ValueError as exc:
        raise BadRequest(str(exc)) from None
    if row is None or t is None:
        raise BadRequest("row and t are required")
    index = store.timeline(key, rank)
    return event_at(index, row, float(t), float(tol or 0)) or {}


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

    @server.route("/api/timeline/at")
    def _timeline_at():
        return _answer(lambda: timeline_event(store, request.args))

    @server.route("/api/timeline/view")
    def _timeline_view():
        return _answer(lambda: timeline_view(store, request.args, picked_of))


def _answer(fn) -> Response:
    """``fn()`` as JSON; a bad parameter answers 400, an unknown trace 404, anything else a short 500."""
    try:
        return _json(fn())
    except BadRequest as exc:
        return _json({"error": str(exc)}, 400)
    except TraceAccessError as exc:
        return _json({"error": str(exc)}, 404)
    except Exception as exc:  # noqa: BLE001 - short message to the browser, traceback to the log
        LOG.exception("timeline request failed")
        return _json({"error": short_error(exc)}, 500)
