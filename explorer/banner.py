"""The banner above every page: what the trace is of (model, run, rank: ``analysis.identity``, also the browser
tab's title), what produced it (simulated device events: which performance model, for which target, under which
assumptions, with a link to how the simulation works) and how complete the file is (the reader's loss report)."""
from __future__ import annotations

from dash import Input, Output, dcc, html

import analysis
from neuron_profiler.trace import simulated_by

from .state import PAGE_TITLES

DOCS = {"simulation": "simulation.md", "explorer": "explorer.md", "format": "format.md"}


def simulation_line(trace) -> str | None:
    """"Simulated trace: …" sentence of a trace with simulated device events: the performance model and target
    (``neuron_profiler.trace.simulated_by``), the instance topology and the number of model constants it
    assumed (listed under the banner), the host timeline; else None."""
    if not getattr(trace, "simulated", False):
        return None
    h = trace.header
    text = f"Simulated trace: device events {simulated_by(h)}, not measured on hardware."
    sim = h.simulation if h.HasField("simulation") else None
    assumptions = dict(sim.assumptions) if sim is not None else {}
    topology = assumptions.pop("topology", "")
    said = ([f"topology {topology}"] if topology else []) + \
        ([f"{len(assumptions)} model constants, listed below"] if assumptions else [])
    text += f" Assumptions: {'; '.join(said)}." if said else " The trace records no assumptions."
    if sim is not None and sim.host_timeline == "projected":
        text += " The host timeline is projected for the target; the measured one is shown beside it on the Timeline."
    return text


def what_line(ctx, state, trace) -> str:
    """What the shown trace is of: the picker's label of a multi-rank run, else the trace's identity
    ("GPT (14.8 M parameters) · run gpt_train_step · rank 0 of 2"), else its name."""
    try:
        entry = ctx.store.entry(state.trace)
    except Exception:  # noqa: BLE001
        entry = None
    if entry is not None and entry.is_group:
        return f"{entry.label} · showing rank {trace.rank}"
    try:
        what = analysis.identity(trace).describe()
    except Exception:  # noqa: BLE001 - a trace without identity: its name
        what = ""
    if not what:
        return trace.name
    return what if trace.name in what else f"{what} ({trace.name})"


def page_title(page: str, what: str) -> str:
    """The browser tab's title: "Summary · GPT (…) · run gpt_train_step — neuron-explorer"."""
    return f"{PAGE_TITLES.get(page, page)} · {what} — neuron-explorer"


def loss_line(trace) -> str | None:
    """The reader's one-line loss report of a truncated or partial file (``Trace.loss_report()``), else None."""
    report = getattr(trace, "loss_report", None)
    line = report() if callable(report) else None
    return str(line) if line else None


def _assumptions(trace):
    sim = getattr(trace.header, "simulation", None)
    items = sorted(dict(getattr(sim, "assumptions", {}) or {}).items())
    if not items:
        return []
    return [html.Details([html.Summary(f"The {len(items)} assumptions of the model"),
                          html.Ul([html.Li([html.Code(k), f" = {v}"]) for k, v in items],
                                  className="nx-assumptions")], id="sim-assumptions")]


def banner(ctx, state):
    """The banner of the state's trace: its title line, then the simulation and loss notes when they apply."""
    trace = ctx.store.trace(state.trace, state.rank)
    what = what_line(ctx, state, trace)
    parts = [html.Div(what, className="nx-trace-title", id="trace-title"),
             dcc.Store(id="doc-title", data=page_title(state.page, what)), dcc.Store(id="doc-title-sink")]
    sim = simulation_line(trace)
    if sim:
        parts.append(html.Div([sim, " ", html.A("How the simulation works (docs/simulation.md)",
                                                 href="/doc/simulation", target="_blank", id="sim-doc-link"),
                               *_assumptions(trace)],
                              className="nx-banner nx-banner-sim", id="sim-banner"))
    loss = loss_line(trace)
    if loss:
        parts.append(html.Div(f"Incomplete trace file: {loss}", className="nx-banner nx-banner-loss", id="loss-banner"))
    return html.Div(parts)


def register(app) -> None:
    """The browser tab follows the page: its title is the banner's ``doc-title``."""
    app.clientside_callback("function(t) { if (t) { document.title = t; } return window.dash_clientside.no_update; }",
                            Output("doc-title-sink", "data"), Input("doc-title", "data"))
