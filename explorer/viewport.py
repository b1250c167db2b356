"""One timeline view: query the rows for a window and draw them as a plotly figure.

Drawing choice (measured in headless Chromium on this 2-core machine, see docs/explorer.md): one SVG
``go.Scatter`` line trace per colour with ``None`` separators paints 4,000 segments in ~0.3 s, while
``Scattergl`` needs ~0.5-1 s (software WebGL) and ``Bar`` shapes are far slower. So the server caps a
view at ``BUDGET`` merged shapes and sends thick line segments.
"""
from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from .rows import TABLE_CODE, EVENT_TABLES, TimelineIndex, color_of
from .timeline import Shapes, bin_counter, query_rows

BUDGET = 4000
MAX_LEGEND = 16  # more colour labels than this: no legend (hover names the event)
ROW_PX = 20
ID_SHIFT = 1 << 40  # customdata = table code * ID_SHIFT + row id


@dataclass
class ViewData:
    """Result of one viewport query: visible row positions, their shapes, counter points."""

    t0: int
    t1: int
    rows: list[int]                       # index into TimelineIndex.infos, in display order
    shapes: dict[int, Shapes]             # row index -> shapes
    highlight: dict[int, Shapes]          # row index -> search matches and picked events
    counters: dict[int, tuple[np.ndarray, np.ndarray]]
    threshold_ns: float

    @property
    def n_shapes(self) -> int:
        return int(sum(len(s) for s in self.shapes.values()) + sum(len(s) for s in self.highlight.values()))


def visible_rows(index: TimelineIndex, groups: list[str] | None) -> list[int]:
    """Row indexes of the chosen groups in the chosen order (None = all, in default order)."""
    if groups is None:
        return list(range(len(index.infos)))
    out = []
    for g in groups:
        out += [i for i, info in enumerate(index.infos) if info.group == g]
    return out


def highlight_masks(index: TimelineIndex, rows: list[int], q: str,
                    picked: dict[str, np.ndarray] | None = None) -> dict[int, np.ndarray]:
    """Per event row, a bool mask of the events to highlight: those :meth:`TimelineIndex.match` finds for
    ``q`` and those ``picked`` marks (table -> bool per row id, see :meth:`TimelineIndex.picked`)."""
    q = (q or "").strip().lower()
    out: dict[int, np.ndarray] = {}
    picked = picked or {}
    if not q and not picked:
        return out
    for i in rows:
        info = index.infos[i]
        if info.table not in TABLE_CODE:
            continue
        ids = index.ids[i]
        m = index.match(info.table, q)[ids] if q else np.zeros(len(ids), dtype=bool)
        if info.table in picked:
            m |= picked[info.table][ids]
        if m.any():
            out[i] = m
    return out


def query_view(index: TimelineIndex, t0: int | None, t1: int | None, width_px: int = 1400,
               groups: list[str] | None = None, q: str = "", budget: int = BUDGET,
               picked: dict[str, np.ndarray] | None = None) -> ViewData:
    """Shapes of the visible rows in [t0, t1] (ns relative to the trace start; None = whole trace);
    search matches of ``q`` and the ``picked`` events (table -> bool per row id) are highlighted."""
    span = max(index.end - index.origin, 1)
    a = 0 if t0 is None else int(np.clip(t0, -span, 2 * span))
    b = span if t1 is None else int(np.clip(t1, a + 1, 3 * span))
    rows = visible_rows(index, groups)
    ev = [i for i in rows if index.rows[i] is not None]
    masks = highlight_masks(index, ev, q, picked)
    abs0, abs1 = index.origin + a, index.origin + b
    hl_budget = budget // 4 if masks else 0
    shapes, thr = query_rows([index.rows[i] for i in ev], abs0, abs1, width_px, budget - hl_budget)
    hl = {}
    if masks:
        m_rows = list(masks)
        res, _ = query_rows([index.rows[i] for i in m_rows], abs0, abs1, width_px, hl_budget,
                            masks=[masks[i] for i in m_rows])
        hl = {i: s for i, s in zip(m_rows, res) if len(s)}
    counters = {}
    for i in rows:
        info = index.infos[i]
        if info.table == "counters":
            ts, val = index.counters[info.track]
            counters[i] = bin_counter(ts, val, abs0, abs1, width_px)
    return ViewData(a, b, rows, dict(zip(ev, shapes)), hl, counters, thr)


def _us(ns: np.ndarray, origin: int) -> np.ndarray:
    return np.round((ns - origin) / 1000.0, 3)


def _segments(x0: np.ndarray, x1: np.ndarray, y: float) -> tuple[list, list]:
    n = len(x0)
    xs = np.empty(3 * n, dtype=object)
    xs[0::3], xs[1::3], xs[2::3] = x0.tolist(), x1.tolist(), None
    ys = np.empty(3 * n, dtype=object)
    ys[0::3] = ys[1::3] = y
    ys[2::3] = None
    return xs.tolist(), ys.tolist()


def build_figure(index: TimelineIndex, view: ViewData, color: str = "op", sel: tuple[str, int] | None = None,
                 revision: str = "timeline") -> dict:
    """A plotly figure dict: one line trace per (colour, merged?) with ``None`` separators."""
    o = index.origin
    buckets: dict[tuple[str, bool], dict[str, list]] = {}
    ypos, ylab, heads = _row_positions(index, view.rows)
    for i in view.rows:
        info = index.infos[i]
        y = ypos[i]
        sh = view.shapes.get(i)
        if sh is None or not len(sh):
            continue
        codes, labels = index.color_codes(info.table, color)
        ids = index.ids[i][sh.rep]
        keys = codes[ids]
        tcode = TABLE_CODE[info.table]
        dur = (sh.end - sh.start)
        merged = sh.count > 1
        x0, x1 = _us(sh.start, o), _us(np.maximum(sh.end, sh.start + max(view.threshold_ns * 0.6, 1)), o)
        for k in np.unique(keys):
            lab = labels[k] if k >= 0 else "(none)"
            for mflag in (False, True):
                m = (keys == k) & (merged == mflag)
                if not m.any():
                    continue
                b = buckets.setdefault((lab, mflag), {"x": [], "y": [], "text": [], "cd": []})
                xs, ys = _segments(x0[m], x1[m], y)
                b["x"] += xs
                b["y"] += ys
                if mflag:
                    txt = [f"{c} events ({lab}…) on {info.label}<br>{d / 1000:.3f} µs span" for c, d in
                           zip(sh.count[m].tolist(), dur[m].tolist())]
                    cd = [-1] * int(m.sum())
                else:
                    txt = [f"{lab}<br>{info.label} · {d / 1000:.3f} µs" for d in dur[m].tolist()]
                    cd = (tcode * ID_SHIFT + ids[m]).tolist()
                b["text"] += [v for t in txt for v in (t, t, None)]
                b["cd"] += [v for c in cd for v in (c, c, None)]
    lw = ROW_PX * 0.7
    data = []
    shown = set()
    legend = len({lab for lab, _ in buckets}) <= MAX_LEGEND
    for (lab, mflag), b in sorted(buckets.items()):
        data.append({"type": "scatter", "mode": "lines", "x": b["x"], "y": b["y"], "text": b["text"],
                     "customdata": b["cd"], "hovertemplate": "%{text}<extra></extra>", "name": lab,
                     "legendgroup": lab, "showlegend": legend and lab not in shown,
                     "line": {"color": color_of(lab), "width": lw * (0.55 if mflag else 1.0)},
                     "opacity": 0.6 if mflag else 1.0, "connectgaps": False})
        shown.add(lab)
    for i, s in view.highlight.items():
        y = ypos[i]
        xs, ys = _segments(_us(s.start, o), _us(np.maximum(s.end, s.start + max(view.threshold_ns * 0.6, 1)), o), y)
        data.append({"type": "scatter", "mode": "lines", "x": xs, "y": ys, "name": "highlight",
                     "hoverinfo": "skip", "showlegend": False,
                     "line": {"color": "rgba(255,215,0,0.9)", "width": lw * 0.35}})
    for i, (ts, val) in view.counters.items():
        y = ypos[i]
        info = index.infos[i]
        allv = index.counters[info.track][1]
        allv = allv[np.isfinite(allv)]
        vmax = float(np.abs(allv).max()) if len(allv) else 1.0
        vmax = vmax if vmax > 0 else 1.0
        data.append({"type": "scatter", "mode": "lines", "x": _us(ts, o).tolist(),
                     "y": (y + 0.4 - 0.8 * val / vmax).round(4).tolist(), "line": {"color": "#555", "width": 1.2,
                                                                                  "shape": "hv"},
                     "text": [f"{info.label}: {v:.4g} {info.unit}" for v in val.tolist()],
                     "hovertemplate": "%{text}<extra></extra>", "showlegend": False, "name": info.label})
    if sel is not None:
        _add_selection(index, view, sel, data, ypos)
    shapes = [{"type": "line", "xref": "paper", "x0": 0, "x1": 1, "y0": y - 0.5, "y1": y - 0.5,
               "line": {"color": "#bbb", "width": 1}} for y in heads]
    n = len(ylab)
    top = 70 if legend and buckets else 20
    layout = {"uirevision": revision, "height": max(200, ROW_PX * n + 60 + top),
              "margin": {"l": 170, "r": 10, "t": top, "b": 40}, "showlegend": legend,
              "xaxis": {"range": [view.t0 / 1000.0, view.t1 / 1000.0], "title": {"text": "time (µs from trace start)"},
                        "showgrid": True, "zeroline": False},
              "yaxis": {"range": [n - 0.5, -0.5], "tickvals": list(range(n)), "ticktext": ylab,
                        "fixedrange": True, "showgrid": False, "zeroline": False, "automargin": True},
              "hovermode": "closest", "dragmode": "zoom", "shapes": shapes,
              "legend": {"orientation": "h", "y": 1.02, "yanchor": "bottom", "x": 0, "font": {"size": 10}},
              "plot_bgcolor": "white", "meta": {"n_shapes": view.n_shapes, "threshold_ns": view.threshold_ns}}
    return {"data": data, "layout": layout}


def _row_positions(index: TimelineIndex, rows: list[int]) -> tuple[dict[int, int], list[str], list[int]]:
    """(y of each row, tick labels, y of each group header): a bold header line precedes each row group."""
    ypos: dict[int, int] = {}
    ticks: list[str] = []
    heads: list[int] = []
    last = None
    for i in rows:
        g = index.infos[i].group
        if g != last:
            heads.append(len(ticks))
            ticks.append(f"<b>{g}</b>")
            last = g
        ypos[i] = len(ticks)
        ticks.append(index.infos[i].label)
    return ypos, ticks, heads


def _add_selection(index: TimelineIndex, view: ViewData, sel: tuple[str, int], data: list,
                   ypos: dict[int, int]) -> None:
    table, rid = sel
    if table not in EVENT_TABLES:
        return
    for i in view.rows:
        y = ypos[i]
        info = index.infos[i]
        if info.table != table or index.rows[i] is None:
            continue
        pos = np.flatnonzero(index.ids[i] == rid)
        if len(pos):
            r = index.rows[i]
            s, e = int(r.start[pos[0]]), int(r.end[pos[0]])
            e = max(e, s + int(view.threshold_ns * 0.6) + 1)
            data.append({"type": "scatter", "mode": "lines+markers", "x": [(s - index.origin) / 1000.0,
                                                                         (e - index.origin) / 1000.0],
                         "y": [y, y], "name": "selected", "showlegend": False, "hoverinfo": "skip",
                         "line": {"color": "black", "width": 3}, "marker": {"symbol": "line-ns", "size": ROW_PX,
                                                                            "line": {"width": 2, "color": "black"}}})
            return
