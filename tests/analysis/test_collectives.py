"""collectives(): bandwidths; collectives_across_ranks(): skew, wait vs transfer, stragglers."""
import pytest
from _traces import collective_rank

import analysis
from analysis.analyses.collectives import straggler_ranks


def _pair():
    # seq 0: rank 0 arrives at 1000, rank 1 at 1600 (skew 600); both end at 2600 -> transfer 1000
    # seq 1: rank 0 arrives at 5000 (late), rank 1 at 4800; both end at 6000
    r0 = analysis.Trace.from_builder(collective_rank(0, [1000, 5000], [1600, 1000], seqs=[0, 1]))
    r1 = analysis.Trace.from_builder(collective_rank(1, [1600, 4800], [1000, 1200], seqs=[0, 1]))
    return r0, r1


def test_per_collective_bandwidth():
    r0, _ = _pair()
    c = analysis.collectives(r0)
    assert list(c.index) == [0, 1] and c["operation"].tolist() == ["all_reduce"] * 2
    assert c.loc[0, "algbw_bytes_per_s"] == pytest.approx((1 << 20) / 1.6e-6)
    assert c.loc[0, "busbw_bytes_per_s"] == pytest.approx((1 << 20) / 1.6e-6 * 2 * (2 - 1) / 2)
    assert c.loc[1, "end_ts"] == 6000


def test_across_ranks_skew_wait_transfer():
    m = analysis.collectives_across_ranks(list(_pair()))
    assert len(m) == 4 and set(m["collective"]) == {"pg0#0", "pg0#1"}
    s0 = m[m["collective"] == "pg0#0"].set_index("rank")
    assert (s0["arrival_skew_ns"] == 600).all()
    assert s0.loc[0, "wait_ns"] == 600 and s0.loc[1, "wait_ns"] == 0
    assert s0.loc[0, "transfer_ns"] == 1000 and s0.loc[1, "transfer_ns"] == 1000
    assert (s0["last_arrival_rank"] == 1).all() and (s0["ranks_seen"] == 2).all()
    assert s0.loc[0, "busbw_bytes_per_s"] == pytest.approx((1 << 20) / 1e-6)
    s1 = m[m["collective"] == "pg0#1"].set_index("rank")
    assert (s1["last_arrival_rank"] == 0).all() and s1.loc[1, "wait_ns"] == 200
    st = straggler_ranks(m).set_index("rank")
    assert st.loc[1, "times_last"] == 1 and st.loc[1, "total_wait_caused_ns"] == 600
    assert st.loc[0, "total_wait_caused_ns"] == 200
    assert straggler_ranks(m)["rank"].iloc[0] == 1


def test_skew_matrix_and_traceset(tmp_path):
    r0, r1 = _pair()
    for i, tr in enumerate((r0, r1)):
        tr._source.write(tmp_path / f"rank{i:05d}_window000.nprof")
    ts = analysis.load(tmp_path)
    m = ts.collectives()
    mat = analysis.collective_skew_matrix(m)
    assert list(mat.index) == ["pg0#0", "pg0#1"] and list(mat.columns) == [0, 1]
    assert mat.loc["pg0#0", 1] == 600 and mat.loc["pg0#1", 0] == 200 and mat.loc["pg0#1", 1] == 0
    with pytest.raises(ValueError, match="valid:"):
        analysis.collective_skew_matrix(m, "nope")


def test_missing_sequence_numbers_match_by_order():
    r0 = analysis.Trace.from_builder(collective_rank(0, [100, 900], [50, 50]))
    r1 = analysis.Trace.from_builder(collective_rank(1, [130, 905], [20, 45]))
    m = analysis.collectives_across_ranks([r0, r1])
    assert sorted(set(m["collective"])) == ["pg0#0?", "pg0#1?"]
    assert m[m["collective"] == "pg0#0?"]["arrival_skew_ns"].iloc[0] == 30
