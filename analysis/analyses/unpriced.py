"""Why a device row's work is unknown: :func:`unpriced_reason`, one reason per row of ``instruction_work``
whose FLOPs or bytes are not known (the op model's note of its launching host op, or that no host op launched
it), '' where both are known."""
from __future__ import annotations

import numpy as np
import pandas as pd

from ..core.categorical import as_cat, category_names, code_dtype, empty_cat
from ..core.commkernels import is_collective_op
from ..core.tables import row_positions
from .work import host_op_work, instruction_work

__all__ = ["unpriced_reason"]


def unpriced_reason(trace) -> pd.Series:
    """Per device instruction (same index as ``instruction_work``): why its FLOPs or bytes are unknown ('' where
    both are known): the op model's note of its launching host op, or that no host op launched it."""
    return trace.memo("unpriced_reason", lambda: _unpriced_reason(trace))


def _reason(note: str, op: str) -> str:
    """The op model's note, said in terms of what the op is where its name tells."""
    if is_collective_op(op):
        return "a collective: its traffic is measured by bus bandwidth (collectives analysis), not HBM bytes"
    if op.startswith(("triton_", "CompiledFunction", "## Call CompiledFxGraph", "Torch-Compiled Region")):
        return (f"{op}: a torch.compile (Inductor / Triton) kernel: the ops it fused are not recorded with "
                "their shapes")
    return note or f"{op}: no op model for it"


#: ``_unpriced_reason`` counts its keys over their range when it is under this many times the rows, else sorts
_COUNT_RANGE = 4


def _unpriced_reason(trace) -> pd.Series:
    """Reasons computed once per distinct (host op note, op name) pair on the codes, never per row: the same
    Categorical (sorted categories of the values present) as one string per row would give."""
    w = instruction_work(trace)
    n = len(w)
    unknown = ~(w["flops_known"].to_numpy() & w["bytes_known"].to_numpy())
    if not unknown.any():
        return pd.Series(pd.Categorical.from_codes(np.zeros(n, np.int8), [""] if n else []), index=w.index)
    fo = w["framework_op"].to_numpy()
    hw = host_op_work(trace)
    pos = row_positions(hw.index, fo) if len(hw) else np.full(n, -1)
    note = as_cat(hw["note"].astype(str)) if len(hw) else empty_cat(0)
    op = as_cat(w["op"])
    n_op = len(op.cat.categories) + 1  # + the missing code (-1 -> last)
    has = unknown & (pos >= 0)
    # key of each priced-by-note row: (note code, op code); -1 no reason (known), -2 no launching host op
    key = np.full(n, -1, np.int64)
    key[unknown & (pos < 0)] = -2
    note_codes = np.asarray(note.cat.codes, dtype=np.int64)
    op_codes = np.asarray(op.cat.codes, dtype=np.int64) % n_op
    key[has] = (note_codes[pos[has]] % (len(note.cat.categories) + 1)) * n_op + op_codes[has]
    key += 2  # >= 0: the distinct keys by a count over their range, not a sort of n keys, where the range is small
    small = int(key.max()) < _COUNT_RANGE * (n + 256)  # many distinct notes x ops: a huge range, sort instead
    present, inverse = (np.flatnonzero(np.bincount(key)), None) if small else np.unique(key, return_inverse=True)
    notes = np.append(category_names(note), "nan")
    ops = np.append(category_names(op), "nan")
    text = ["" if k == 1 else "a kernel without a launching host op: its work is not recorded" if k == 0
            else _reason(notes[(k - 2) // n_op], ops[(k - 2) % n_op]) for k in present]
    cats = sorted(set(text))
    at = {c: i for i, c in enumerate(cats)}
    codes: np.ndarray = np.array([at[x] for x in text], dtype=code_dtype(len(cats)))
    if inverse is not None:
        return pd.Series(pd.Categorical.from_codes(codes[inverse], cats), index=w.index)
    lut: np.ndarray = np.zeros(int(present[-1]) + 1, dtype=codes.dtype)
    lut[present] = codes
    return pd.Series(pd.Categorical.from_codes(lut[key], cats), index=w.index)
