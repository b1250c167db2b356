"""HTA 0.5.0's load-time event selection (``hta_kernel_selection``), to compare our breakdowns with HTA exactly.

Re-exported by :mod:`analysis.breakdown`; see ``docs/hta_definitions.md`` section 1.
"""
from __future__ import annotations

import numpy as np
import pandas as pd

from ..core.categorical import cat_values
from ..core.tables import row_positions


def _host_ops_with_stream(host_ops: pd.DataFrame) -> pd.DataFrame:
    """Host ops whose Kineto args carry an integer ``stream`` other than -1, shaped as instruction rows."""
    import json

    if "args" not in host_ops or len(host_ops) == 0:
        return host_ops.iloc[0:0][[]]
    a = host_ops["args"].astype(str)
    cand = host_ops[a.str.contains('"stream"', regex=False).to_numpy()]
    keep = []
    for r, txt in zip(cand.index, cand["args"].astype(str)):
        try:
            v = json.loads(txt).get("stream")
        except (ValueError, AttributeError):
            continue
        if type(v) is int and v != -1:
            keep.append(r)
    h = host_ops.loc[keep]
    return pd.DataFrame({"track": -1, "start_ts": h["start_ts"].to_numpy(np.int64),
                         "duration_ns": h["duration_ns"].to_numpy(np.int64), "engine": "Host",
                         "opcode": "kernel", "name": h["name"].astype(str).to_numpy(),
                         "correlation_id": h["correlation_id"].to_numpy(np.int64)},
                        index=pd.Index(-1 - np.asarray(keep, dtype=np.int64), name=host_ops.index.name))


def hta_kernel_selection(instructions: pd.DataFrame, host_ops: pd.DataFrame, *,
                         tracks: pd.DataFrame | None = None, include_last_profiler_step: bool = False,
                         hta_rounding: bool = True, host_ops_with_stream: bool = True) -> pd.DataFrame:
    """The instruction rows HTA 0.5.0 ``TraceAnalysis`` analyses (for exact comparisons with HTA).

    HTA (``Trace._filter_irrelevant_gpu_kernels``), when the trace has two or more distinct
    ``ProfilerStep#N`` names, keeps only host events starting before the last ProfilerStep (or ending by its
    end with ``include_last_profiler_step``) and the device events whose correlation id matches one of them
    (one copy per matching host event, as its merge does); device events without a correlation (e.g. MTIA)
    are filtered by their own start. Rows on stream -1 (device-wide "Event Sync") are dropped: HTA's
    breakdowns only take events with a stream. Needs ``tracks`` for the stream test.

    ``host_ops_with_stream``: HTA takes *every* event with an ``args.stream`` as a GPU event, including the
    host-side ``cpu_op`` that torch.compile / Triton launchers annotate with ``stream``; such host ops are
    appended as pseudo kernel rows (opcode "kernel", index -1 - host row) so the numbers match HTA. They are
    CPU time, so our own (non-emulated) breakdowns never include them."""
    ins = instructions
    if tracks is not None and len(tracks) and len(ins):
        pos = row_positions(tracks.index, ins["track"].to_numpy())
        tid = np.where(pos >= 0, tracks["tid"].to_numpy(np.int64)[np.maximum(pos, 0)], -2)  # -2: no such track
        if (tid == -1).any():
            ins = ins[tid != -1]
    if host_ops_with_stream:
        extra = _host_ops_with_stream(host_ops)
        if len(extra):  # (concatenating an empty frame would still union every Categorical)
            ins = pd.concat([ins, extra])
    names = host_ops["name"].astype(str)
    is_step = names.str.contains("ProfilerStep", regex=False).to_numpy()
    if names[is_step].nunique() < 2 or len(ins) == 0:
        return ins

    def r_start(s: np.ndarray) -> np.ndarray:
        return -((-s) // 1000) * 1000 if hta_rounding else s

    h_start = r_start(host_ops["start_ts"].to_numpy(np.int64))
    h_end_raw = host_ops["start_ts"].to_numpy(np.int64) + host_ops["duration_ns"].to_numpy(np.int64)
    h_end = (h_end_raw // 1000) * 1000 if hta_rounding else h_end_raw
    if include_last_profiler_step:
        kept_host = h_start <= h_end[is_step].max()
    else:
        kept_host = h_start < h_start[is_step].max()
    cutoff_ok = kept_host
    corr = host_ops["correlation_id"].to_numpy(np.int64)[cutoff_ok]
    counts = pd.Series(corr).value_counts()
    i_corr = ins["correlation_id"].to_numpy(np.int64)
    gpu_like = (i_corr >= 0) | cat_values(ins["name"], ["Event Sync", "Context Sync"])
    vals, cnt = counts.index.to_numpy(np.int64), counts.to_numpy(np.int64)
    o = np.argsort(vals)
    vals, cnt = vals[o], cnt[o]
    reps = np.zeros(len(i_corr), np.int64)  # host events with the device row's correlation (HTA's merge)
    if len(vals):
        at = np.minimum(np.searchsorted(vals, i_corr), len(vals) - 1)
        hit = vals[at] == i_corr
        reps[hit] = cnt[at[hit]]
    reps = np.where(gpu_like & (i_corr < 0), np.minimum(reps, 1), reps)  # no -1 cross product
    i_start = r_start(ins["start_ts"].to_numpy(np.int64))
    limit = h_end[is_step].max() if include_last_profiler_step else h_start[is_step].max()
    own = (i_start <= limit) if include_last_profiler_step else (i_start < limit)
    reps = np.where(gpu_like, reps, own.astype(np.int64))
    if reps.max(initial=0) <= 1:
        return ins[reps.astype(bool)]
    return ins.iloc[np.repeat(np.arange(len(ins)), reps)]
