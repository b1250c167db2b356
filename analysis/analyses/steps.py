"""Training / inference steps: ``ProfilerStep#N`` annotations and our own step markers."""
from __future__ import annotations

import pandas as pd

from ..registry import Column, register

#: ``ProfilerStep#12`` (torch.profiler), and our capture's markers such as ``NeuronStep#12`` / ``step#12``.
STEP_PATTERN = r"^(?:ProfilerStep|NeuronStep|[Ss]tep)\s*#\s*(\d+)$"

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
    Empty when the trace has no step markers.
    """
    ho = trace.table("host_ops", ["name", "category", "start_ts", "duration_ns"])
    out = pd.DataFrame({c: pd.Series(dtype="int64") for c in STEP_COLUMNS})
    if len(ho):
        names = ho["name"]
        cats = pd.Series(names.cat.categories if hasattr(names, "cat") else names.unique())
        num = cats.str.extract(STEP_PATTERN)[0]
        ok = num.notna().to_numpy()
        if ok.any():
            step_cats = set(cats[ok])
            rows = ho[names.isin(step_cats)]
            cat = rows["category"].astype(str)
            if (cat != "gpu_user_annotation").any():
                rows = rows[cat != "gpu_user_annotation"]
            n = rows["name"].astype(str).str.extract(STEP_PATTERN)[0].astype("int64")
            df = pd.DataFrame({"step": n.to_numpy(), "start_ts": rows["start_ts"].to_numpy(),
                               "end_ts": (rows["start_ts"] + rows["duration_ns"]).to_numpy()})
            out = df.groupby("step", as_index=False).agg(start_ts=("start_ts", "min"), end_ts=("end_ts", "max"))
            out["duration_ns"] = out["end_ts"] - out["start_ts"]
            out = out.sort_values("step").reset_index(drop=True).astype("int64")
    return out


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
