"""``analysis.neuron_explorer_comparison`` on the Neuron Explorer fixture (written from the published schema
7.4.0, ``tests/neuron_profiler/explorer_fixture.py``): every expected value is computed by hand from the
fixture's rows and its Summary table."""
from __future__ import annotations

import json
import math
import warnings

import pytest

pytest.importorskip("pyarrow")

from realdata import explorer_fixture  # noqa: E402

import analysis  # noqa: E402
from neuron_profiler.trace import TraceBuilder, make_header  # noqa: E402

fx = explorer_fixture()


@pytest.fixture(scope="module", params=["parquet", "json"])
def imported(request, tmp_path_factory):
    d = tmp_path_factory.mktemp(request.param)
    src = fx.write_parquet_profile(d) if request.param == "parquet" else fx.write_json_export(d / "export.json")
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")  # the fixture lacks optional fields: the importer says so
        return analysis.load(src)


def _row(df, label):
    rows = df[df["label"] == label]
    assert len(rows) == 1, (label, df["label"].tolist())
    return rows.iloc[0]


def test_both_values_side_by_side_computed_by_hand(imported):
    df = analysis.neuron_explorer_comparison(imported)
    assert list(df.columns) == [c.name for c in analysis.registry.columns_of("neuron_explorer_comparison")]
    # our span: first instruction start (T0) to the all-reduce's end (T0 + 1400); Explorer's total_time 2000
    tot = _row(df, "Total time")
    assert (tot["ours"], tot["neuron_explorer"], tot["difference"], tot["unit"]) == (1400, 2000, -600, "ns")
    peak = imported.header.devices[0].spec.peak_flops_per_s["bfloat16"]  # per core, from the hardware table
    mfu = _row(df, "MFU (estimated)")
    ours = 100 * 4 * fx.MATMUL_FLOPS / (peak * 2 * 1400e-9)   # 4 matmuls, 2 physical cores with work
    assert mfu["ours"] == pytest.approx(ours, rel=1e-9) and mfu["neuron_explorer"] == 21.3
    assert mfu["difference"] == pytest.approx(ours - 21.3, rel=1e-9) and mfu["unit"] == "percent"
    assert "Metadata" in mfu["note"] and "hardware table" in mfu["note"]  # the denominators differ
    assert "one HBM stack" in _row(df, "MBU (estimated)")["note"]
    hbm = _row(df, "HBM read")                                # 4 matmuls x 4096 B vs Explorer's 40960
    assert (hbm["ours"], hbm["neuron_explorer"], hbm["difference"]) == (16384, 40960, -24576)
    flops = _row(df, "Model FLOPs")
    assert flops["ours"] == flops["neuron_explorer"] == 4 * fx.MATMUL_FLOPS and flops["difference"] == 0
    tensor = _row(df, "Tensor busy")                          # 4 x 60 ns of 1400 vs Explorer's 36 %
    assert tensor["ours"] == pytest.approx(100 * 240 / 1400) and tensor["neuron_explorer"] == 36.0
    assert tensor["explorer_field"] == "tensor_engine_active_time_percent"
    gp = _row(df, "GpSimd busy")                              # no GpSimd instruction: 0, and said so
    assert gp["ours"] == 0 and gp["neuron_explorer"] == 0 and "no GpSimd instructions" in gp["note"]
    cc = _row(df, "Collectives")
    assert cc["ours"] == cc["neuron_explorer"] == 1


def test_metrics_only_one_side_has_say_why(imported):
    df = analysis.neuron_explorer_comparison(imported)
    dma = _row(df, "DMA transfers")                           # ours 3; the fixture's Summary has no count
    assert dma["ours"] == 3 and math.isnan(dma["neuron_explorer"]) and math.isnan(dma["difference"])
    assert "not in this profile's Summary" in dma["note"]
    cyc = _row(df, "NeuronCore cycle count")                  # Explorer only
    assert cyc["neuron_explorer"] == 4800 and math.isnan(cyc["ours"]) and cyc["unit"] == "count"
    assert "no counterpart" in cyc["note"] and cyc["metric"] == ""
    steps = _row(df, "Steps")                                 # ours only
    assert steps["ours"] == 0 and math.isnan(steps["neuron_explorer"]) and "no such field" in steps["note"]
    # every Explorer number appears exactly once, with its own value
    theirs = json.loads(imported.header.metadata["neuron_explorer.summary"])
    shown = df[df["explorer_field"] != ""]
    assert sorted(shown["explorer_field"][shown["neuron_explorer"].notna()]) == sorted(theirs)
    for f, v in theirs.items():
        assert shown.loc[shown["explorer_field"] == f, "neuron_explorer"].iloc[0] == v
    # and every metric of analysis.summary once (plus GpSimd busy, 0 here: summary lists busy engines only),
    # plus the summary_items Explorer's Summary also has
    from analysis.analyses.explorer_summary import ITEM_METRICS

    ours = analysis.summary(imported)
    assert sorted(df["metric"][df["metric"] != ""]) == sorted([*ours["metric"], "GpSimd_active_percent",
                                                                *ITEM_METRICS])
    items = analysis.summary_items(imported).set_index("metric")["value"]
    mx = _row(df, "Max achievable MFU")
    assert mx["ours"] == items["mfu_max_achievable_estimated_percent"] and mx["neuron_explorer"] == theirs[
        "mfu_max_achievable_estimated_percent"]
    assert not df["label"].str.contains("_").any()            # words, not identifiers


def test_no_explorer_summary_gives_an_empty_frame_and_bad_metadata_a_clear_error(tmp_path):
    b = TraceBuilder(make_header("tests.analysis"))
    b.write(tmp_path / "plain.nprof")
    df = analysis.neuron_explorer_comparison(analysis.load(tmp_path / "plain.nprof"))
    assert len(df) == 0 and list(df.columns)[:4] == ["label", "unit", "ours", "neuron_explorer"]
    b.header.metadata["neuron_explorer.summary"] = "[1, 2"
    b.write(tmp_path / "bad.nprof")
    with pytest.raises(ValueError, match=r"neuron_explorer\.summary.*not valid JSON"):
        analysis.neuron_explorer_comparison(analysis.load(tmp_path / "bad.nprof"))
