"""analysis.area_stats (the timeline's area selection) and analysis.regions (the Region Highlighter), against
hand-computed values and the tables they come from."""
from __future__ import annotations

import numpy as np
import pandas as pd
from realdata import sample_trace

import analysis


def test_area_stats_by_hand():
    # range [100, 300): track A has [50, 150) and [120, 200) (union clipped: [100, 200) = 100 ns), an event
    # ending at 100 (outside) and one starting at 300 (outside); track B has [250, 400) (clipped: 50 ns)
    ev = pd.DataFrame({"track": ["A", "A", "A", "A", "B"], "name": ["mm", "add", "mm", "mm", "add"],
                       "start_ts": [50, 120, 0, 300, 250], "end_ts": [150, 200, 100, 310, 400]})
    ctr = pd.DataFrame({"counter": ["hbm"] * 4, "unit": ["bytes"] * 4, "ts": [99, 100, 299, 300],
                        "value": [1e9, 2.0, 4.0, -1.0]})
    tracks, names, counters = analysis.area_stats(ev, 100, 300, ctr)
    assert tracks.to_dict("list") == {"track": ["A", "B"], "events": [2, 1], "busy_ns": [100, 50],
                                      "busy_percent": [50.0, 25.0]}
    # clipped durations: mm 50 (A: [100, 150)); add 80 (A: [120, 200)) + 50 (B) = 130
    assert names.to_dict("list") == {"name": ["add", "mm"], "events": [2, 1], "total_ns": [130.0, 50.0],
                                     "mean_ns": [65.0, 50.0], "max_ns": [80.0, 50.0]}
    assert counters.to_dict("list") == {"counter": ["hbm"], "unit": ["bytes"], "min": [2.0], "mean": [3.0],
                                        "max": [4.0], "samples": [2]}


def test_area_stats_of_nothing_has_the_documented_columns():
    ev = pd.DataFrame({"track": pd.Series([], dtype=object), "name": pd.Series([], dtype=object),
                       "start_ts": np.zeros(0, np.int64), "end_ts": np.zeros(0, np.int64)})
    tracks, names, counters = analysis.area_stats(ev, 0, 10)
    cols = analysis.registry.REGISTRY["area_stats"].column_names
    assert set(tracks.columns) | set(names.columns) | set(counters.columns) == set(cols)
    assert len(tracks) == len(names) == len(counters) == 0


def test_regions_are_the_steps_collectives_and_modules():
    t = analysis.load(sample_trace("ddp_train_rank0.nprof"))
    r = t.regions()
    assert list(r.columns) == [c.name for c in analysis.registry.columns_of("regions")]
    st = t.steps()
    steps = r[r["kind"] == "step"]
    assert steps["start_ts"].tolist() == st["start_ts"].tolist() and steps["end_ts"].tolist() == st["end_ts"].tolist()
    assert steps["key"].tolist() == [f"step:{int(s)}" for s in st["step"]]
    cc = t.table("collectives")
    col = r[r["kind"] == "collective"]
    assert len(col) == min(len(cc), 200) > 0
    assert col["name"].tolist() == cc["operation"].astype(str).tolist()[:200]
    assert (col["end_ts"] > col["start_ts"]).all()
    mods = r[r["kind"] == "module"]
    host = t.table("host_ops")
    for m, a, b in zip(mods["name"], mods["start_ts"], mods["end_ts"]):  # oracle: the calls of that module
        top = host["module"].astype(str).str.split(".").str[:2].str.join(".")  # "a.b" of "a.b.c", "a" of "a"
        calls = host[top == m]
        assert a == calls["start_ts"].min() and b == (calls["start_ts"] + calls["duration_ns"]).max()
    assert len(t.regions(max_per_kind=1).query("kind == 'collective'")) == 1
