"""HTA compatibility lives in one module (analysis/analyses/hta.py): its µs rounding by hand, its quantisation of
an activity frame, and no other analysis module rounding to µs on its own."""
from __future__ import annotations

import re
from pathlib import Path

import numpy as np
import pandas as pd

from analysis.analyses import hta

REPO = Path(__file__).resolve().parents[2]


def test_inward_rounding_by_hand():
    ns = np.array([-1500, -1000, -1, 0, 1, 999, 1000, 1001], dtype=np.int64)
    assert hta.ceil_us(ns).tolist() == [-1000, -1000, 0, 0, 1000, 1000, 1000, 2000]
    assert hta.floor_us(ns).tolist() == [-2000, -1000, -1000, 0, 0, 0, 1000, 1000]


def test_quantise_rounds_inward_and_sorts_by_the_rounded_start():
    act = pd.DataFrame({"start_ts": [1500, 1001, 2000], "end_ts": [1900, 3999, 2500], "name": ["a", "b", "c"]},
                       index=pd.Index([7, 8, 9], name="row"))
    q = hta.quantise(act, sort=True)
    # starts up (2000, 2000, 2000), ends down (1000, 3000, 2000): equal starts keep their order (stable)
    assert q["start_ts"].tolist() == [2000, 2000, 2000] and q["end_ts"].tolist() == [1000, 3000, 2000]
    assert q.index.tolist() == [7, 8, 9] and list(q.columns) == list(act.columns)
    later = pd.DataFrame({"start_ts": [2001, 1999], "end_ts": [5000, 5000], "name": ["x", "y"]})
    assert hta.quantise(later, sort=True)["name"].tolist() == ["y", "x"]  # 3000 after 2000
    assert hta.quantise(later)["name"].tolist() == ["x", "y"]  # not sorted unless asked
    assert act["start_ts"].tolist() == [1500, 1001, 2000]  # the input is left as it was


def test_no_other_analysis_module_rounds_to_microseconds():
    pattern = re.compile(r"//\s*1_?000\b")
    for p in (REPO / "analysis").rglob("*.py"):
        if p.name != "hta.py":
            assert not pattern.search(p.read_text()), p
