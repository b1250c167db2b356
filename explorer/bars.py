"""Small bar charts drawn as HTML: the Summary's few-bar figures (where the time goes, engine utilisation, the
TensorE FLOPs split, DMA bytes by source / data type, the step times and the temporal breakdown per rank)
rendered from the plotly figure ``analysis.figures`` builds, as plain boxes sized in percent.

A plotly graph costs the browser ~0.1-0.2 s to draw whatever its size (axes, text measuring, drag layers); a
chart of 2-10 bars says the same as a few styled boxes, which cost nothing to draw. The numbers, labels,
colours and hover texts are the figure's own (one source of truth: ``analysis.figures``); each bar carries its
value in ``data-value`` (tests read it there). Figures of other kinds are not handled here: pages keep them as
plotly graphs. A page without plotly graphs does not load plotly.js (4.8 MB, 1-2 s of the browser's time on a
small machine, ``assets/plotlyPreload.js``).
"""
from __future__ import annotations

import re

from dash import html

_PLACEHOLDER = re.compile(r"%\{[^}]*\}")


def _hover(trace, fallback: str) -> str:
    """The trace's hover text where it is plain text (plotly's own placeholders are not evaluated here)."""
    tpl = getattr(trace, "hovertemplate", None)
    if isinstance(tpl, str) and tpl and not _PLACEHOLDER.search(tpl):
        return tpl.replace("<extra></extra>", "").replace("<br>", "\n")
    return fallback


def _note(fig) -> html.Div:
    """An empty figure (``analysis.figures._common.empty_figure``): its title and message as a note."""
    title = fig.layout.title.text or ""
    msg = "; ".join(str(a.text) for a in fig.layout.annotations or ())
    return html.Div(f"{title}: {msg}" if title else msg, className="note nx-bars-empty",
                    style={"color": "#555", "fontStyle": "italic", "margin": "8px 0"})


def stacked_bar(fig, id: str) -> html.Div:
    """One horizontal stacked bar of 0-100 % (``barmode="stack"``, one single-value bar trace per part), its
    legend below: the parts' names (with their shares) in their colours."""
    parts = [t for t in fig.data if t.type == "bar" and t.x is not None and len(t.x)]
    if not parts:
        return html.Div(_note(fig), id=id)
    title = fig.layout.title.text or ""
    segs, legend = [], []
    for t in parts:
        v = float(t.x[0])
        colour = t.marker.color or "#999"
        label = t.text if isinstance(t.text, str) else ""
        segs.append(html.Div(label, title=_hover(t, f"{t.name}"), className="nx-bar-seg",
                             style={"width": f"{max(v, 0.0):.4f}%", "background": colour},
                             **{"data-value": repr(v), "data-name": str(t.name)}))
        legend.append(html.Span([html.Span(className="nx-bar-key", style={"background": colour}), str(t.name)],
                                className="nx-bar-legend-item"))
    out = [html.Div(title, className="nx-bars-title")] if title else []
    out += [html.Div(segs, className="nx-bar-stack"), html.Div(legend, className="nx-bar-legend")]
    return html.Div(out, id=id, className="nx-bars")


def bar_list(fig, id: str, tips: dict[str, str] | None = None) -> html.Div:
    """Horizontal bars, one per category (one ``orientation="h"`` bar trace), top to bottom as plotly draws them
    (its y axis runs bottom up), each bar's length its share of the x axis range. Hover text: ``tips`` (by
    category), else the trace's ``hovertext``, else the category and its bar text."""
    t = next((t for t in fig.data if t.type == "bar" and t.x is not None and len(t.x)), None)
    if t is None:
        return html.Div(_note(fig), id=id)
    xs = [float(x) for x in t.x]
    top = (fig.layout.xaxis.range or [0, max([100.0, *xs])])[1] or 1.0
    texts = list(t.text) if t.text is not None and not isinstance(t.text, str) else [f"{x:.4g}" for x in xs]
    hover = list(t.hovertext) if t.hovertext is not None and not isinstance(t.hovertext, str) else None
    colour = t.marker.color if isinstance(t.marker.color, str) else "#457b9d"
    rows = []
    for i in reversed(range(len(xs))):
        tip = (tips or {}).get(str(t.y[i])) or (hover[i] if hover else f"{t.y[i]}: {texts[i]}")
        rows.append(html.Div([
            html.Div(str(t.y[i]), className="nx-bar-label", title=str(t.y[i])),
            html.Div([html.Div(className="nx-bar-fill",
                               style={"width": f"{min(max(xs[i], 0.0) / top * 100, 100.0):.4f}%",
                                      "background": colour}),
                      html.Span(texts[i], className="nx-bar-text")], className="nx-bar-track"),
        ], title=str(tip), className="nx-bar-row", **{"data-value": repr(xs[i]), "data-name": str(t.y[i])}))
    title = fig.layout.title.text or ""
    axis = fig.layout.xaxis.title.text or ""
    out = [html.Div(title, className="nx-bars-title")] if title else []
    out += rows + ([html.Div(axis, className="nx-bars-axis")] if axis else [])
    return html.Div(out, id=id, className="nx-bars")


def _unit(fig) -> str:
    """The value axis's unit as bar texts show it: "%" for a percent axis, else the axis title (e.g. "ms")."""
    ytitle = str(fig.layout.yaxis.title.text or "")
    return "%" if "%" in ytitle else ytitle


def column_bars(fig, id: str) -> html.Div:
    """A vertical bar chart (one bar trace: categories on x, values on y), e.g. the step times, drawn as one
    horizontal bar per category, top to bottom in the x order, each bar's length its share of the largest."""
    t = next((t for t in fig.data if t.type == "bar" and t.y is not None and len(t.y)), None)
    if t is None:
        return html.Div(_note(fig), id=id)
    ys = [float(y) for y in t.y]
    top = max([*ys, 0.0]) or 1.0
    unit = _unit(fig)
    colour = t.marker.color if isinstance(t.marker.color, str) else "#457b9d"
    rows = [html.Div([
        html.Div(str(x), className="nx-bar-label", title=str(x)),
        html.Div([html.Div(className="nx-bar-fill", style={"width": f"{min(max(y, 0.0) / top * 100, 100.0):.4f}%",
                                                           "background": colour}),
                  html.Span(f"{y:.4g} {unit}".rstrip(), className="nx-bar-text")], className="nx-bar-track"),
    ], title=f"{x}: {y:.6g} {unit}".rstrip(), className="nx-bar-row", **{"data-value": repr(y), "data-name": str(x)})
        for x, y in zip(t.x, ys)]
    title = fig.layout.title.text or ""
    return html.Div(([html.Div(title, className="nx-bars-title")] if title else []) + rows, id=id,
                    className="nx-bars")


def stacked_columns(fig, id: str) -> html.Div:
    """Stacked vertical bars (``barmode="stack"``: one bar trace per part, categories on x), e.g. the temporal
    breakdown per rank, drawn as one horizontal stacked bar per category (each part's length its share of the
    largest category total), the parts' legend below."""
    parts = [t for t in fig.data if t.type == "bar" and t.y is not None and len(t.y)]
    if not parts:
        return html.Div(_note(fig), id=id)
    cats = [str(x) for x in parts[0].x]
    vals = [[float(v) for v in t.y] for t in parts]
    top = max(sum(max(v[i], 0.0) for v in vals) for i in range(len(cats))) or 1.0
    unit = _unit(fig)
    colours = [t.marker.color if isinstance(t.marker.color, str) else "#999" for t in parts]
    rows = []
    for i, cat in enumerate(cats):
        segs = [html.Div(f"{v[i]:.0f}{unit}" if v[i] / top >= 0.06 else "", className="nx-bar-seg",
                         title=f"{cat}, {t.name}: {v[i]:.4g} {unit}".rstrip(),
                         style={"width": f"{max(v[i], 0.0) / top * 100:.4f}%", "background": c},
                         **{"data-value": repr(v[i]), "data-name": str(t.name)})
                for t, v, c in zip(parts, vals, colours)]
        rows.append(html.Div([html.Div(cat, className="nx-bar-label", title=cat),
                              html.Div(segs, className="nx-bar-stack", style={"flex": "1 1 auto"})],
                             className="nx-bar-row", **{"data-name": cat}))
    legend = [html.Span([html.Span(className="nx-bar-key", style={"background": c}), str(t.name)],
                        className="nx-bar-legend-item") for t, c in zip(parts, colours)]
    title = fig.layout.title.text or ""
    out = [html.Div(title, className="nx-bars-title")] if title else []
    return html.Div(out + rows + [html.Div(legend, className="nx-bar-legend", style={"marginLeft": "190px"})],
                    id=id, className="nx-bars")
