"""``op_profile``'s per-key totals from one reduction per invocation, without the per-row ``instruction_work``.

Every device row belongs to a *unit*: its launching host op (an invocation), else its instruction label (the
instruction name, or its opcode where the name is empty). All rows of a unit share their alignment keys (op,
module and shape are the launching op's, else the label, '' and ''), so the keys are looked up on one row per
unit and the rows' sums are made once per unit (a few thousand units on a 5M-row trace) before being added per
group of keys. This is what Compare needs of its partner trace, which no other page has computed.

The values are those of the per-row path (``diff._op_profile`` on ``instruction_work``): the same functions
give the labels, FLOPs, bytes and dtypes, the same rule the device time (each invocation's union counted once
in its group, the union of a group's rows without a launching op). :func:`unit_profile` returns None where it
does not apply and ``op_profile`` takes the per-row path: a window, traces whose work is derived from shapes
(imported GPU traces), rows naming a host op the table lacks, host ops without a name (their rows take each
row's label), and FLOP/byte values that are not whole numbers or total 2**53 or more (a float sum's rounding
could then depend on its order). ``tests/analysis/test_op_units.py`` checks that both paths agree.
"""
from __future__ import annotations

from collections.abc import Callable
from typing import NamedTuple

import numpy as np
import pandas as pd

from ..core.categorical import as_cat, categorical, column
from ..core.devicetime import group_time
from ..core.intervals import first_rows
from ..core.tables import row_positions
from .activity import invocation_time
from .work import _fill_dtype, _instruction_level, _labels, instruction_placement, work_source

#: from this total on, a float sum of whole numbers may round differently in another order
_EXACT = float(1 << 53)


class UnitProfile(NamedTuple):
    """Per group of keys (ids 0..n-1 in order of first appearance): ``parts`` (each key's codes and labels, per
    kept unit), ``first_unit`` (each group's first kept unit), ``columns`` (rows, flops, hbm_bytes, mm,
    device_time_ns, calls), ``dtypes`` and ``engines`` (str, of each group's first row) and ``placement`` (device
    and nc_idx per row, for ``primary_device``)."""
    parts: list
    first_unit: np.ndarray
    columns: dict
    dtypes: np.ndarray
    engines: np.ndarray
    placement: pd.DataFrame


def unit_profile(trace, keys: tuple[str, ...], key_codes: Callable, group_ids: Callable) -> UnitProfile | None:
    """``op_profile``'s groups by ``keys`` from the units (module doc), or None where the per-row path must be
    taken. ``key_codes(trace, frame, key)`` and ``group_ids(parts)`` are diff's, applied to one row per unit."""
    if trace.window_bounds is not None or work_source(trace) != "instructions":
        return None
    ins = trace.analysis_table("instructions")
    ho = trace.whole_table("host_ops", ["name", "module", "stack", "duration_ns"])
    if not len(ins):
        return None
    fo = column(ins, "framework_op", -1).to_numpy().astype("int64", copy=False)
    hpos = row_positions(ho.index, fo) if len(ho) else np.full(len(ins), -1)
    has_ho = hpos >= 0
    if (fo[~has_ho] >= 0).any():
        return None
    unit = np.where(has_ho, hpos, len(ho) + _label_codes(ins, ~has_ho))
    sums = _unit_sums(ins, unit)
    if sums is None:
        return None
    ids, first = first_rows(unit)  # units ascending, the first row of each
    order = np.argsort(first, kind="stable")  # in order of their first row: groups numbered by first appearance
    ids, first = ids[order], first[order]
    linked = ids < len(ho)
    if linked.any() and not _named(ho, hpos[first[linked]]):
        return None
    rep = ins.iloc[first]
    op, module, _ = _labels(trace, rep, ho, hpos[first], has_ho[first])
    frame = pd.DataFrame({"op": op, "module": module, "framework_op": fo[first]}, index=rep.index)
    parts = [key_codes(trace, frame, k) for k in keys]
    gid = group_ids(parts)
    keep = gid >= 0
    g = gid[keep]
    ng = int(g.max()) + 1 if len(g) else 0
    _, first_unit = first_rows(g)  # each group's first kept unit
    cols = _group_sums(sums, ids[keep], g, ng)
    cols["device_time_ns"] = _device_time(trace, ins, fo, unit, ids[keep], first[keep], g, linked[keep], ng)
    calls = np.bincount(g[linked[keep]], minlength=ng)
    cols["calls"] = np.where(calls > 0, calls, cols["rows"]).astype(np.int64)
    dtypes, engines = _dtypes_engines(trace, ins.iloc[first[keep][first_unit]], ho)
    placed = instruction_placement(trace)[["device", "nc_idx"]]
    if not keep.all():  # primary_device counts the rows that form groups, as the per-row path does
        kept = np.zeros(int(unit.max()) + 1, bool)
        kept[ids[keep]] = True
        placed = placed[kept[unit]]
    return UnitProfile([(c[keep], lab) for c, lab in parts], first_unit, cols, dtypes, engines, placed)


def _label_codes(ins: pd.DataFrame, rows: np.ndarray) -> np.ndarray:
    """A code (0, 1, ...) per distinct (name, opcode) of the rows selected by the mask ``rows``; 0 elsewhere."""
    out = np.zeros(len(ins), np.int64)
    if rows.any():
        name, opcode = categorical(ins, "name"), categorical(ins, "opcode")
        nc = np.asarray(name.codes, np.int64)[rows] + 1
        oc = np.asarray(opcode.codes, np.int64)[rows] + 1
        out[rows] = pd.factorize(nc * (len(opcode.categories) + 1) + oc)[0]
    return out


def _named(ho: pd.DataFrame, pos: np.ndarray) -> bool:
    """Whether the host ops at ``pos`` all have a name (an empty one falls back to each row's own label)."""
    cat = as_cat(ho["name"]).array
    codes = np.asarray(cat.codes)[pos]
    empty = np.asarray(cat.categories.astype(str) == "")
    return bool((codes >= 0).all() and not (len(empty) and empty[codes].any()))


def _unit_sums(ins: pd.DataFrame, unit: np.ndarray) -> dict | None:
    """Per unit id: rows, FLOPs, HBM bytes and matrix rows (``instruction_work``'s values of each row), or None
    when a value is not a whole number or a total reaches 2**53 (the float sums are then exact in any order)."""
    cols = _instruction_level(ins, as_cat(column(ins, "engine")))
    for c, k in (("raw_flops", "flops"), ("hbm_read_bytes", "rd"), ("hbm_write_bytes", "wr")):
        whole = c in ins.columns and ins[c].dtype.kind in "iub"  # the format's integer columns: no check needed
        if not whole and not bool((np.mod(cols[k], 1.0) == 0).all()):
            return None
    m = int(unit.max()) + 1
    flops = np.bincount(unit, weights=cols["flops"], minlength=m)
    hbm = np.bincount(unit, weights=cols["rd"] + cols["wr"], minlength=m)
    if np.abs(flops).sum() >= _EXACT or np.abs(hbm).sum() >= _EXACT:
        return None
    return {"rows": np.bincount(unit, minlength=m), "flops": flops, "hbm": hbm,
            "mm": np.bincount(unit, weights=cols["is_mm"], minlength=m)}


def _group_sums(sums: dict, ids: np.ndarray, g: np.ndarray, ng: int) -> dict:
    """Rows, flops, hbm_bytes and mm (any matrix row) per group, from the kept units ``ids`` in groups ``g``."""
    return {"rows": np.bincount(g, weights=sums["rows"][ids], minlength=ng).astype(np.int64),
            "flops": np.bincount(g, weights=sums["flops"][ids], minlength=ng),
            "hbm_bytes": np.bincount(g, weights=sums["hbm"][ids], minlength=ng),
            "mm": np.bincount(g, weights=sums["mm"][ids], minlength=ng) > 0}


def _device_time(trace, ins: pd.DataFrame, fo: np.ndarray, unit: np.ndarray, ids: np.ndarray, first: np.ndarray,
                 g: np.ndarray, linked: np.ndarray, ng: int) -> np.ndarray:
    """Device time per group (``analysis.core.devicetime``): each invocation's time (a host-op unit) in its group,
    added in ascending invocation order as the per-row path does, plus the union of the group's rows without a
    launching op (``ids``: the kept units in first-row order, ``first`` their first rows, ``g`` their groups)."""
    t = np.zeros(ng)
    if linked.any():
        inv = fo[first[linked]]
        o = np.argsort(inv, kind="stable")
        elapsed = invocation_time(trace).reindex(inv[o]).fillna(0.0).to_numpy()
        t += np.bincount(g[linked][o], weights=elapsed, minlength=ng)
    if not linked.all():
        lut = np.full(int(unit.max()) + 1, -1, np.int64)
        lut[ids] = g
        rows = np.flatnonzero(fo < 0)
        s = ins["start_ts"].to_numpy()[rows]
        e = s + ins["duration_ns"].to_numpy()[rows]
        t += group_time(lut[unit[rows]], np.full(len(rows), -1), s, e, ng)
    return t


def _dtypes_engines(trace, rows: pd.DataFrame, ho: pd.DataFrame) -> tuple[np.ndarray, np.ndarray]:
    """(canonical dtype, engine) as str of ``rows``: ``instruction_work``'s values of these rows."""
    fo = column(rows, "framework_op", -1).to_numpy().astype("int64", copy=False)
    hpos = row_positions(ho.index, fo) if len(ho) else np.full(len(rows), -1)
    engine = as_cat(column(rows, "engine"))
    dtype = _fill_dtype(trace, _instruction_level(rows, engine)["dtype"], hpos, hpos >= 0, rows.index)
    return (np.asarray(as_cat(pd.Series(dtype)).array, dtype=object).astype(str),
            np.asarray(engine.array, dtype=object).astype(str))
