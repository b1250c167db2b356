"""The banner above every page: what produced the trace (simulated device events: which model, for which
target, with a link to how the simulation works) and how complete the file is (the reader's loss report)."""
from __future__ import annotations

from dash import html

DOCS = {"simulation": "simulation.md", "explorer": "explorer.md", "format": "format.md"}


def simulation_line(trace) -> str | None:
    """"Simulated …" sentence of a trace with simulated device events, else None."""
    if not getattr(trace, "simulated", False):
        return None
    sim = getattr(trace.header, "simulation", None)
    model = getattr(sim, "model", "") or "the simulated Neuron runtime"
    target = getattr(sim, "target", "") or ", ".join(sorted({d.kind for d in trace.header.devices})) or "Trainium"
    text = f"Simulated trace: the device events were produced by {model} for {target}, not measured on hardware."
    if getattr(sim, "host_timeline", "") == "projected":
        text += " The host timeline is projected for the target; the measured one is shown beside it on the Timeline."
    n = len(getattr(sim, "assumptions", {}) or {})
    if n:
        text += f" The model used {n} documented assumptions."
    return text


def loss_line(trace) -> str | None:
    """The reader's one-line loss report of a truncated or partial file (``Trace.loss_report()``), else None."""
    report = getattr(trace, "loss_report", None)
    line = report() if callable(report) else None
    return str(line) if line else None


def banner(ctx, state):
    """The banner of the state's trace (None when there is nothing to say)."""
    trace = ctx.store.trace(state.trace, state.rank)
    parts = []
    sim = simulation_line(trace)
    if sim:
        parts.append(html.Div([sim, " ", html.A("How the simulation works (docs/simulation.md)",
                                                 href="/doc/simulation", target="_blank", id="sim-doc-link")],
                              className="nx-banner nx-banner-sim", id="sim-banner"))
    loss = loss_line(trace)
    if loss:
        parts.append(html.Div(f"Incomplete trace file: {loss}", className="nx-banner nx-banner-loss", id="loss-banner"))
    return html.Div(parts) if parts else None
