"""The timeline's view payload: one level-of-detail query turned into the compact JSON the canvas draws.

``view_payload`` packs :func:`explorer.viewport.query_view`'s shapes per row as parallel arrays
(``[row, start, duration, count, colour, name, id]``; times in ns from the trace start, ``id`` = table row id
or -1 for a merged shape), the highlights (search matches and picks) and the counters (max per pixel column,
with the counter's overall range for its scale: ``[row, ts, values, lo, hi, end]``). A cumulative counter
(``RowInfo.derived``) is scaled to its values after the first :data:`SETTLE` of its span, where the ratio has
settled (the early swing is drawn clipped), and ``end`` is its final value, the whole trace's (None for
recorded counters). Only the names and colours used in the view are sent.
"""
from __future__ import annotations

import numpy as np

from .rows import TimelineIndex, color_of
from .viewport import ViewData


def _remap(codes: np.ndarray, labels: list[str], table: dict[str, int], out: list[str]) -> np.ndarray:
    """Codes into the payload's label list ``out`` (extended with the labels first used here)."""
    uniq, inv = np.unique(codes, return_inverse=True)
    mapped = np.empty(len(uniq), dtype=np.int64)
    for i, c in enumerate(uniq.tolist()):
        lab = labels[c] if 0 <= c < len(labels) else "(none)"
        if lab not in table:
            table[lab] = len(out)
            out.append(lab)
        mapped[i] = table[lab]
    return mapped[inv]


#: share of a cumulative counter's span left out of its scale: the elapsed time is short there, so the ratio
#: (MFU, bytes/s) swings far above what it settles to, and a scale to that early maximum flattens the rest
SETTLE = 0.1


def counter_range(index: TimelineIndex, track: int, settle: float = 0.0) -> tuple[float, float]:
    """(min, max) of a counter over the whole trace (its scale stays put while zooming); cached. ``settle``: the
    share of the counter's time span, from its first sample, whose values the range leaves out (they are drawn
    clipped); the range of the whole counter when nothing is left."""
    key = ("counter_range", track, settle)
    if key not in index.memo:
        ts, v = index.counters[track]
        ok = np.isfinite(v)
        if settle > 0 and len(ts):
            late = ok & (ts >= ts[0] + settle * (ts[-1] - ts[0]))
            ok = late if late.any() else ok
        v = v[ok]
        index.memo[key] = (float(min(v.min(), 0.0) if settle else v.min()), float(v.max())) if len(v) else (0.0, 1.0)
    return index.memo[key]


def counter_end(index: TimelineIndex, track: int) -> float | None:
    """The last finite value of a counter (a cumulative counter's value over the whole trace); None if none."""
    v = index.counters[track][1]
    v = v[np.isfinite(v)]
    return float(v[-1]) if len(v) else None


def view_payload(index: TimelineIndex, view: ViewData, color: str = "op") -> dict:
    """The JSON-ready dict of one view (see module docstring)."""
    o = index.origin
    names: list[str] = []
    name_ix: dict[str, int] = {}
    cnames: list[str] = []
    cname_ix: dict[str, int] = {}
    rows = []
    for i, sh in view.shapes.items():
        if not len(sh):
            continue
        info = index.infos[i]
        ids = index.ids[i][sh.rep]
        ccodes, clabels = index.color_codes(info.table, color)
        ncodes, nlabels = index.color_codes(info.table, "op")
        c = _remap(ccodes[ids], clabels, cname_ix, cnames)
        n = _remap(ncodes[ids], nlabels, name_ix, names)
        rid = np.where(sh.count > 1, -1, ids)
        rows.append([i, (sh.start - o).tolist(), (sh.end - sh.start).tolist(), sh.count.tolist(), c.tolist(),
                     n.tolist(), rid.tolist()])
    hl = [[i, (s.start - o).tolist(), (s.end - s.start).tolist()] for i, s in view.highlight.items() if len(s)]
    counters = []
    for i, (ts, val) in view.counters.items():
        info = index.infos[i]
        cumulative = info.derived and len(index.counters.get(info.track, ((), ()))[0]) > 0
        lo, hi = counter_range(index, info.track, SETTLE if cumulative else 0.0)
        end = counter_end(index, info.track) if cumulative else None
        v = np.where(np.isfinite(val), val, 0.0)
        counters.append([i, (ts - o).tolist(), v.tolist(), lo, hi, end])
    return {"t0": view.t0, "t1": view.t1, "thr": float(view.threshold_ns), "n": view.n_shapes, "rows": rows,
            "hl": hl, "counters": counters, "pending": view.pending, "names": names,
            "colors": [color_of(c) for c in cnames], "cnames": cnames}
