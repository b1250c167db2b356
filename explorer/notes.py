"""Notes (annotations): a time range with a text, kept beside the trace, never inside it.

Stored as JSON in the user's data directory (``platformdirs.user_data_dir("neuron-explorer")/notes``, or
``$NEURON_EXPLORER_DATA_DIR/notes``), one file per trace keyed by a hash of its resolved path, never in the
served folder. Notes also travel in the shareable URL (``note=T0,T1,TEXT``, repeated; times in ns from the
trace start): a link shows them next to the stored ones. Files and URL values are parsed as plain JSON /
strings, validated and bounded; nothing is evaluated.
"""
from __future__ import annotations

import hashlib
import json
import logging
import os
import tempfile
import threading
import time
from pathlib import Path

from dash import ALL, Input, Output, State, dcc, html, no_update
from dash.exceptions import PreventUpdate

from .labels import fmt_ns
from .state import timeline_state

LOG = logging.getLogger("explorer")
MAX_NOTES = 500
MAX_TEXT = 500
_LOCK = threading.Lock()


def data_dir() -> Path:
    """Where the explorer keeps its own files (``$NEURON_EXPLORER_DATA_DIR`` or the platform data dir)."""
    env = os.environ.get("NEURON_EXPLORER_DATA_DIR")
    if env:
        return Path(env)
    import platformdirs

    return Path(platformdirs.user_data_dir("neuron-explorer", appauthor=False))


def notes_file(trace_path: Path) -> Path:
    """The notes file of a trace (a hash of its resolved path: no user path in the file name)."""
    digest = hashlib.sha256(str(Path(trace_path).resolve()).encode()).hexdigest()[:32]
    return data_dir() / "notes" / f"{digest}.json"


def clean(items) -> list[dict]:
    """Valid notes only: ``{"t0": int, "t1": int, "note": str}`` with t1 > t0, text bounded, at most
    :data:`MAX_NOTES`."""
    out = []
    for it in items if isinstance(items, list) else []:
        if not isinstance(it, dict):
            continue
        t0, t1, text = it.get("t0"), it.get("t1"), it.get("note")
        if isinstance(t0, bool) or isinstance(t1, bool) or not isinstance(t0, int) or not isinstance(t1, int):
            continue
        if not isinstance(text, str) or t1 <= t0 or abs(t0) > 2**62 or abs(t1) > 2**62:
            continue
        text = text.strip()[:MAX_TEXT]
        if text:
            out.append({"t0": t0, "t1": t1, "note": text})
        if len(out) >= MAX_NOTES:
            break
    return out


def load_notes(trace_path: Path | None) -> list[dict]:
    """The stored notes of a trace ([] when none or unreadable; a bad file is logged, not trusted)."""
    if trace_path is None:
        return []
    f = notes_file(trace_path)
    try:
        if not f.is_file() or f.stat().st_size > 4 * 2**20:
            return []
        return clean(json.loads(f.read_text(encoding="utf-8")).get("notes"))
    except (OSError, ValueError, AttributeError) as exc:
        LOG.warning("ignoring unreadable notes file %s: %s", f, exc)
        return []


def save_notes(trace_path: Path, notes: list[dict]) -> Path:
    """Write the notes of a trace atomically (temporary file + rename); returns the file."""
    f = notes_file(trace_path)
    f.parent.mkdir(parents=True, exist_ok=True)
    body = json.dumps({"trace": str(Path(trace_path).resolve()), "saved": int(time.time()), "notes": clean(notes)},
                      indent=1)
    with _LOCK:
        fd, tmp = tempfile.mkstemp(dir=f.parent, prefix=".notes-", suffix=".tmp")
        with os.fdopen(fd, "w", encoding="utf-8") as fh:
            fh.write(body)
        os.replace(tmp, f)
    return f


def from_url(values: tuple[str, ...] | None) -> list[dict]:
    """Notes of ``note=T0,T1,TEXT`` URL values."""
    out = []
    for v in values or ():
        parts = v.split(",", 2)
        if len(parts) == 3:
            try:
                out.append({"t0": int(parts[0]), "t1": int(parts[1]), "note": parts[2]})
            except ValueError:
                continue
    return clean(out)


def to_url(notes: list[dict]) -> tuple[str, ...]:
    return tuple(f"{n['t0']},{n['t1']},{n['note']}" for n in clean(notes))


def _merge(a: list[dict], b: list[dict]) -> list[dict]:
    seen, out = set(), []
    for n in a + b:
        k = (n["t0"], n["t1"], n["note"])
        if k not in seen:
            seen.add(k)
            out.append(n)
    return sorted(out, key=lambda n: (n["t0"], n["t1"]))


def notes_for(ctx, state) -> list[dict]:
    """The notes shown for a state: stored for its trace, plus those in its URL."""
    try:
        path = ctx.store.trace(state.trace, state.rank).path
    except Exception:  # noqa: BLE001 - no trace, no notes
        path = None
    return _merge(load_notes(path), from_url(getattr(state, "notes", None)))


def note_list(notes: list[dict], state, with_delete: bool = True):
    """The notes as a list with a link to each range on the timeline, and a shareable link with all."""

    if not notes:
        return html.Div("No notes for this trace yet.", className="note")
    items = []
    for k, n in enumerate(notes):
        href = state.href(page="timeline", t0=n["t0"], t1=n["t1"], sel=None)
        row = [dcc.Link(f"{fmt_ns(n['t0'])} – {fmt_ns(n['t1'])}", href=href, className="nx-note-range"),
               html.Span(" " + n["note"])]
        if with_delete:
            row.append(html.Button("×", id={"type": "tl-note-del", "k": k}, n_clicks=0, className="nx-x",
                                   title="delete this note"))
        items.append(html.Li(row))
    share = state.href(page="timeline", notes=to_url(notes))
    return html.Div([html.Ol(items, className="nx-notes", id="notes-list"),
                     dcc.Link("link with these notes", href=share, className="nx-hint", id="notes-share")])


def register_notes(app, ctx) -> None:
    """Add / delete callbacks of the timeline's Notes panel."""

    @app.callback(Output("tl-notes", "data"), Output("tl-notes-list", "children"), Output("tl-note-text", "value"),
                  Input("tl-note-add", "n_clicks"), Input({"type": "tl-note-del", "k": ALL}, "n_clicks"),
                  State("tl-note-text", "value"), State("tl-area", "data"), State("tl-meta", "data"),
                  prevent_initial_call=True)
    def change(_add, dels, text, area, meta):
        from dash import ctx as dash_ctx

        trig = dash_ctx.triggered_id
        state = timeline_state(meta or {})
        path = ctx.store.trace(state.trace, state.rank).path
        notes = load_notes(path)
        if trig == "tl-note-add":
            if not area or not (text or "").strip():
                return no_update, html.Div([html.Div("Select an area and write a note first.", className="note"),
                                            note_list(notes, state)]), no_update
            notes = _merge(notes, clean([{"t0": int(area["t0"]), "t1": int(area["t1"]), "note": text}]))
        elif isinstance(trig, dict) and trig.get("type") == "tl-note-del" and any(dels or []):
            k = int(trig["k"])
            if 0 <= k < len(notes):
                notes = notes[:k] + notes[k + 1:]
        else:
            raise PreventUpdate
        first = not notes_file(path).parent.is_dir()
        f = save_notes(path, notes)
        (LOG.warning if first else LOG.info)("neuron-explorer: notes of %s are kept in %s", path, f)
        return notes, note_list(notes, state), ""
