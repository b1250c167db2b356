"""Device time per Python source line: the lines with the most time under them."""
from __future__ import annotations

import plotly.graph_objects as go

from ..analyses.source_lines import source_lines
from ._common import empty_figure, frame, short


def source_lines_figure(obj, top: int = 20) -> go.Figure:
    """Horizontal bars (ms) of the ``top`` lines by total device time, self time beside it. ``obj``: a Trace
    or an :func:`analysis.source_lines` frame."""
    df = frame(obj, source_lines)
    if df.empty:
        return empty_figure("Source lines", "no Python stacks in this trace (capture with with_stack=True)")
    df = df.head(top).iloc[::-1]
    labels = [short(f"{f}:{n} {fn}", 60) for f, n, fn in zip(df["file"], df["line"], df["function"])]
    fig = go.Figure([go.Bar(y=labels, x=df["total_ns"] / 1e6, orientation="h", name="total (under this line)",
                            marker_color="#9ecae1"),
                     go.Bar(y=labels, x=df["self_ns"] / 1e6, orientation="h", name="self (innermost frame)",
                            marker_color="#1f77b4")])
    fig.update_layout(title="Device time per source line", xaxis_title="ms", barmode="overlay",
                      template="plotly_white", height=max(300, 24 * len(df) + 120),
                      yaxis=dict(automargin=True), legend=dict(orientation="h", y=-0.15))
    return fig
