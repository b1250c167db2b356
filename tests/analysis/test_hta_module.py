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


def test_json_us_is_pythons_float_parse_of_the_decimal_text():
    """Oracle: ``float()`` of the µs text Kineto writes (what HTA's ``json`` parser does), on epoch µs (~1.7e15,
    float64 steps of 0.25 µs: ties, both sides of them), CUDA-clock µs (~1e12), small and negative values (the
    exact-division path), and random ns."""
    rng = np.random.default_rng(7)
    base = 1_712_195_495_519_689_000
    ns = np.concatenate([
        base + np.array([0, 47, 124, 125, 126, 375, 625, 874, 875, 876, 999]),
        1_419_247_332_972_313 + np.arange(0, 4000, 7),
        np.array([0, 1, 999, 1000, 1_023_999, 1_024_000, 1_024_001, -1, -1500, -1_024_001]),
        rng.integers(-10 ** 18, 2 * 10 ** 18, 2000),
    ]).astype(np.int64)

    def text(v: int) -> str:
        return f"{'-' if v < 0 else ''}{abs(v) // 1000}.{abs(v) % 1000:03d}"

    got = hta.json_us(ns)
    assert got.tolist() == [float(text(int(v))) for v in ns]
    assert got[1] == 1712195495519689.0 and got[3] == 1712195495519689.0  # .047 and .125 (a tie: to even)
    assert got[4] == 1712195495519689.25 and got[9] == 1712195495519690.0  # .126, .876


def test_hta_round_reads_float64_then_rounds_inward_by_hand():
    """ts .047 µs after a whole µs on the epoch clock reads as the whole µs, so HTA's ceil keeps it (the exact ns
    would round up); end = ts + dur in float64 (0.25 µs steps) before the floor."""
    o = 1_000_000_000  # a baseTimeNanoseconds-like origin: only ns - origin is what HTA parsed
    start = np.array([1_712_195_495_519_689_047, 1_712_195_495_519_689_126, 1_000_000_000_001], dtype=np.int64) + o
    dur = np.array([1_900, 1_873, 2_000], dtype=np.int64)
    s, e = hta.hta_round(start, dur, o)
    # 689.047 -> 689.0 (ceil 689); end 689.0 + 1.9 = 690.9 -> 691.0 (floor 691): 2 µs where the exact ns give 1
    # 689.126 -> 689.25 (ceil 690); end 689.25 + 1.873 = 691.123 -> 691.0 (floor 691)
    # 1e9 µs + 0.001 (float64 steps of 1.2e-7 µs there): exact, ceil 1_000_000_001; end 1_000_000_002.001 -> 002
    assert ((s - o) // 1000).tolist() == [1_712_195_495_519_689, 1_712_195_495_519_690, 1_000_000_001]
    assert ((e - o) // 1000).tolist() == [1_712_195_495_519_691, 1_712_195_495_519_691, 1_000_000_002]
    assert ((s - o) % 1000 == 0).all() and ((e - o) % 1000 == 0).all()
    es, ee = hta.hta_round(start - o, dur)  # no origin: the exact ns rounded inward
    assert (es // 1000).tolist() == [1_712_195_495_519_690, 1_712_195_495_519_690, 1_000_000_001]
    assert (ee // 1000).tolist() == [1_712_195_495_519_690, 1_712_195_495_519_690, 1_000_000_002]


def test_temporal_breakdown_says_its_mode_and_why_hta_idle_differs():
    """The explorer's temporal-breakdown figure is the exact-ns one (the Summary's Device idle); its note gives
    HTA 0.5.0's idle share beside it, labelled, with the one-sentence reason (24.7 % against 77 % here)."""
    from realdata import SAMPLE_TRACES

    import analysis
    from analysis import figures

    t = analysis.load(SAMPLE_TRACES / "gpt_train_step.nprof", cache=False)
    exact = t.temporal_breakdown().iloc[0]["idle_time_pctg"]
    compat = t.temporal_breakdown(hta_compatible=True).iloc[0]["idle_time_pctg"]
    summary = analysis.summary(t).set_index("metric")["value"]["idle_percent"]
    assert abs(summary - exact) < 0.01 and compat > exact + 40  # 24.68 % and 76.97 % when this was written
    assert hta.EXACT_LABEL in figures.temporal_breakdown_figure(t).layout.title.text
    assert hta.MODE_LABEL in figures.temporal_breakdown_figure(t, hta_compatible=True).layout.title.text
    note = figures.temporal_breakdown_note(t)
    assert f"{exact:.1f} % idle ({hta.EXACT_LABEL})" in note and f"{compat:.1f} % ({hta.MODE_LABEL})" in note
    assert note.endswith(hta.IDLE_WHY) and hta.IDLE_WHY.count(". ") == 0  # one sentence


def test_unions_from_the_rounded_intervals_alone_equal_the_unions_of_the_whole_activity():
    """hta_unions sorts only (start, end, kernel type) when the HTA activity is not kept; oracle: the unions of
    the full quantised activity frame (every column), on real Kineto traces and a simulated sample."""
    from realdata import real_trace, sample_trace

    import analysis

    for path in (real_trace("HolisticTraceAnalysis/df_index_resolver/df_index_resolver.json.gz"),
                 real_trace("HolisticTraceAnalysis/nccl_parser_config/nccl_data.json.gz"),
                 sample_trace("gpt_train_step.nprof")):
        t = analysis.load(path)
        got = hta.hta_unions(t)
        act = hta._hta_activity(analysis.load(path))
        assert got["rows"] == len(act) > 0, path
        for k in (None, *hta.KERNEL_TYPES):
            s, e = hta.union_of_kind(act, k)
            assert np.array_equal(got[k][0], s) and np.array_equal(got[k][1], e), (path, k)
