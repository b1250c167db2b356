"""``instruction_work`` built with fewer n-long arrays (host-op level labels gathered once, ``cat_pick`` on a
per-primary-row lookup, the work source found block by block): the same columns, categories and codes as the
definitions written row by row, on every real trace and bundled sample."""
from __future__ import annotations

import numpy as np
import pandas as pd
from realdata import REAL_TRACE_FILES, SAMPLE_TRACES, real_trace

import analysis
from analysis.analyses import work
from analysis.core.categorical import cat_pick, cat_values, column, empty_cat
from analysis.core.tables import COPY_ENGINES, row_positions


def _pick_by_row(primary: pd.Series, pos, fallback: pd.Series, use_primary) -> list:
    """cat_pick's values one row at a time: primary[pos] (-1: its last row) where use_primary and non-empty,
    else fallback."""
    p, f = primary.astype(object).tolist(), fallback.astype(object).tolist()
    out = []
    for i in range(len(f)):
        j = i if pos is None else int(pos[i])
        v = p[j] if use_primary is None or use_primary[i] else None
        out.append(v if isinstance(v, str) and v != "" else f[i])
    return [None if pd.isna(v) else v for v in out]


def _values(cat) -> list:
    return [None if pd.isna(v) else v for v in cat]


def test_cat_pick_equals_the_row_by_row_pick():
    """Missing values, empty strings, -1 positions (the last row, unless masked), categories of both sides in
    order; the codes come in the dtype pandas keeps."""
    prim = pd.Series(pd.Categorical(["a", "", "b", None, "c"], categories=["c", "", "a", "b", "unused"]))
    fb = pd.Series(pd.Categorical(["x", None, "a", "y", "", "z"]))
    pos = np.array([0, 1, 2, 3, -1, 4])
    for use in (None, np.array([True, True, False, True, True, True]), pos >= 0):
        got = cat_pick(prim, pos, fb, use)
        assert list(got.categories) == ["c", "", "a", "b", "unused", "x", "y", "z"]
        assert _values(got) == _pick_by_row(prim, pos, fb, use), use
        assert got.codes.dtype == np.int8
    assert _values(cat_pick(prim, None, fb.iloc[:5], None)) == ["a", None, "b", "y", "c"]
    assert _values(cat_pick(prim, None, fb.iloc[:5], None)) == _pick_by_row(prim, None, fb.iloc[:5], None)
    out_of_range = np.array([0, 7, 2, -3, 1, 4])  # only where masked out
    use = np.array([True, False, True, False, True, True])
    assert _values(cat_pick(prim, out_of_range, fb, use)) == _pick_by_row(prim, out_of_range, fb, use)


def _same(a: pd.Categorical, b: pd.Categorical, path=None) -> None:
    """The same categories in the same order and the same codes (in the same dtype)."""
    assert list(a.categories) == list(b.categories), path
    assert a.codes.dtype == b.codes.dtype and np.array_equal(a.codes, b.codes)


def _paths():
    return [real_trace(r) for r in REAL_TRACE_FILES] + sorted(SAMPLE_TRACES.glob("*.nprof"))


def test_labels_and_work_source_equal_the_row_level_definitions_on_every_trace():
    """op / module / stack against the picks made on every instruction row (the launching host op's module,
    else the one its stack names), and work_source against the masked comparison, on real traces and samples."""
    seen = set()
    for path in _paths():
        t = analysis.load(path)
        w = analysis.instruction_work(t)
        ins = t.analysis_table("instructions")
        ho = t.whole_table("host_ops", ["name", "module", "stack"])
        fo = column(ins, "framework_op", -1).to_numpy().astype(np.int64)
        hpos = row_positions(ho.index, fo) if len(ho) else np.full(len(ins), -1)
        has = hpos >= 0
        empty = empty_cat(len(ins), ins.index)
        if len(ho):
            ilabel = pd.Series(cat_pick(ins["name"], None, ins["opcode"], None), index=ins.index) if len(ins) else empty
            want_op = cat_pick(ho["name"], hpos, ilabel, has)
            module = cat_pick(ho["module"], hpos, empty, has)
            stack = cat_pick(ho["stack"], hpos, empty, has)
            want_module = work.module_from_stack(pd.Series(module), pd.Series(stack))
            _same(w["op"].array, want_op, path)
            _same(w["module"].array, want_module, path)
            _same(w["stack"].array, stack, path)
            seen.add("modules from stacks" if (want_module.astype(str) != module.astype(str)).any() else "modules")
        copy = cat_values(column(ins, "engine"), COPY_ENGINES)
        want = "instructions" if any(c in ins.columns and (ins[c].to_numpy()[~copy] > 0).any()
                                     for c in ("raw_flops", "hbm_read_bytes", "hbm_write_bytes")) else "shapes"
        assert work.work_source(t) == want, path
        seen.add(want)
        np.testing.assert_array_equal(w["flops"].to_numpy(), w["hardware_flops"] - w["transpose_flops"])
    assert {"modules from stacks", "instructions", "shapes"} <= seen


def test_any_positive_stops_at_the_first_block_and_skips_excluded_rows():
    v = np.zeros(10, np.int64)
    excluded = np.zeros(10, bool)
    assert not work._any_positive(v, excluded, block=3)
    v[7] = 5
    assert work._any_positive(v, excluded, block=3)
    excluded[7] = True  # a copy engine's bytes do not count
    assert not work._any_positive(v, excluded, block=3)
