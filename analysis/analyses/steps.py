"""Training / inference steps: ``ProfilerStep#N`` annotations and our own step markers, else the training
loop's ``optimizer.step()`` calls."""
from __future__ import annotations

import pandas as pd

from ..registry import Column, register

#: ``ProfilerStep#12`` (torch.profiler), and our capture's markers such as ``NeuronStep#12`` / ``step#12``.
STEP_PATTERN = r"^(?:ProfilerStep|NeuronStep|[Ss]tep)\s*#\s*(\d+)$"
#: the range ``torch.optim`` records around every ``optimizer.step()`` (``Optimizer.step#AdamW.step``)
OPTIMIZER_STEP_PATTERN = r"^Optimizer\.step#[^#]+\.step$"

STEP_SPEC = (Column("step", "count", "Step", "Step number N of ProfilerStep#N"),
             Column("start_ts", "ns", "Start", "Step start"),
             Column("end_ts", "ns", "End", "Step end"),
             Column("duration_ns", "ns", "Step time", "end - start"))
STEP_COLUMNS = [c.name for c in STEP_SPEC]


@register("steps", columns=STEP_SPEC, figure="steps_figure")
def steps(trace) -> pd.DataFrame:
    """One row per step, sorted by step number.

    Columns: step (int), start_ts, end_ts (ns), duration_ns. Host annotations are preferred over GPU-side
    copies (``gpu_user_annotation``); when one step appears several times (threads), its span is the union.
    A trace without step markers takes its steps from the training loop: from the end of one
    ``optimizer.step()`` to the end of the next (``Optimizer.step#<Optimizer>.step`` ranges; see
    ``_optimizer_steps``). Empty when the trace has neither.
    """
    ho = trace.table("host_ops", ["name", "category", "start_ts", "duration_ns"])
    out = pd.DataFrame({c: pd.Series(dtype="int64") for c in STEP_COLUMNS})
    if not len(ho):
        return out
    names = ho["name"]
    cats = pd.Series(names.cat.categories if hasattr(names, "cat") else names.unique()).astype(str)
    num = cats.str.extract(STEP_PATTERN)[0]
    ok = num.notna().to_numpy()
    if ok.any():
        return _marker_steps(_host_rows(ho, set(cats[ok])))
    opt = cats[cats.str.match(OPTIMIZER_STEP_PATTERN)]
    if len(opt):
        return _optimizer_steps(_host_rows(ho, set(opt)), out)
    return out


def _host_rows(ho: pd.DataFrame, names: set[str]) -> pd.DataFrame:
    """The rows of ``ho`` named one of ``names``; host annotations preferred over GPU-side copies."""
    rows = ho[ho["name"].isin(names)]
    cat = rows["category"].astype(str)
    return rows[cat != "gpu_user_annotation"] if (cat != "gpu_user_annotation").any() else rows


def _marker_steps(rows: pd.DataFrame) -> pd.DataFrame:
    n = rows["name"].astype(str).str.extract(STEP_PATTERN)[0].astype("int64")
    df = pd.DataFrame({"step": n.to_numpy(), "start_ts": rows["start_ts"].to_numpy(),
                       "end_ts": (rows["start_ts"] + rows["duration_ns"]).to_numpy()})
    out = df.groupby("step", as_index=False).agg(start_ts=("start_ts", "min"), end_ts=("end_ts", "max"))
    out["duration_ns"] = out["end_ts"] - out["start_ts"]
    return out.sort_values("step").reset_index(drop=True).astype("int64")


def _optimizer_steps(rows: pd.DataFrame, empty: pd.DataFrame) -> pd.DataFrame:
    """Steps of a trace without step markers (e.g. ``neuron-profile capture -- python train.py`` without
    ``--active``): step k runs from the end of the k-th ``optimizer.step()`` to the end of the (k+1)-th. With
    several optimizers the most frequent one (ties: the first name) paces the loop. What precedes the first
    ``optimizer.step()`` (model construction, data loading, the first iteration) and what follows the last are
    not steps: N calls give N - 1 steps, numbered 1..N-1."""
    names = rows["name"].astype(str)
    counts = names.value_counts()
    pace = sorted(counts.index[counts == counts.max()])[0]
    ends = pd.Series((rows["start_ts"] + rows["duration_ns"])[names == pace].to_numpy()).sort_values().to_numpy()
    if len(ends) < 2:
        return empty
    out = pd.DataFrame({"step": range(1, len(ends)), "start_ts": ends[:-1], "end_ts": ends[1:]})
    out["duration_ns"] = out["end_ts"] - out["start_ts"]
    return out.astype("int64")


@register("step_window", returns="value", memo=False)
def step_window(trace, first: int, last: int | None = None) -> tuple[int, int]:
    """(start_ns, end_ns) spanning steps ``first``..``last`` inclusive. ``ValueError`` names the available
    steps when a requested one is missing."""
    last = first if last is None else last
    st = steps(trace)
    sel = st[(st["step"] >= first) & (st["step"] <= last)]
    if sel.empty:
        avail = st["step"].tolist()
        raise ValueError(f"no steps {first}..{last} in {trace.name}; available steps: {avail or 'none'}")
    return int(sel["start_ts"].min()), int(sel["end_ts"].max())
