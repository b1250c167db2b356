"""Neuron Explorer profiles in: a Parquet profile directory and its JSON export, detected by content, through
``neuron-trace import``, ``analysis.load`` and the explorer's store. Fixtures are written from the published
schema 7.4.0 (``explorer_fixture``); every expected value below is computed from the fixture's own rows."""
from __future__ import annotations

import json
import re
import warnings
from pathlib import Path

import pytest

pytest.importorskip("pyarrow")

import explorer_fixture as fx  # noqa: E402

import analysis  # noqa: E402
from neuron_profiler.cli import main  # noqa: E402
from neuron_profiler.importers import EXPLORER_JSON, EXPLORER_PARQUET, detect_source, load_source  # noqa: E402
from neuron_profiler.importers.neuron_explorer import convert_explorer_parquet  # noqa: E402
from neuron_profiler.importers.neuron_explorer.mapping import MAPPING, REQUIRED_TABLES  # noqa: E402
from neuron_profiler.importers.neuron_explorer.schema import TABLES  # noqa: E402
from neuron_profiler.trace import TraceFormatError, read_trace  # noqa: E402

#: section 6.3 of the data-model reference (shared/reference/neuron-explorer-data-model.md), kept with the tests
REFERENCE = Path(__file__).resolve().parents[1] / "data" / "neuron_explorer_tables.md"


@pytest.fixture()
def profile(tmp_path):
    return fx.write_parquet_profile(tmp_path / "ne")


def _load(path):
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        return load_source(path)


def test_detected_by_content_not_by_name(profile, tmp_path):
    assert detect_source(profile) == EXPLORER_PARQUET
    assert detect_source(tmp_path / "ne") == EXPLORER_PARQUET          # a folder holding exactly one profile
    j = fx.write_json_export(tmp_path / "export.json")
    assert detect_source(j) == EXPLORER_JSON
    odd = tmp_path / "export.txt"                                      # the suffix does not matter
    odd.write_bytes(j.read_bytes())
    assert detect_source(odd) == EXPLORER_JSON


def test_parquet_profile_maps_the_data_model(profile):
    b = _load(profile)
    h = b.header
    assert h.source_format == "neuron-explorer-parquet" and not h.simulated
    assert h.metadata["profile_schema_version"] == "7.4.0"
    (dev,) = h.devices
    assert (dev.kind, dev.index, dev.name) == ("trn2", 0, "Trainium2 (Neuron device 1)")
    assert dev.spec.peak_flops_per_s and "hardware table" in dev.spec.source  # peaks from the hardware table
    assert dev.properties["instance_type"] == "trn2.48xlarge" and dev.properties["ntff_version"] == "3"
    rows = fx.instructions()
    ins, tracks = b.table("instructions"), b.table("tracks")
    assert ins["start_ts"].tolist() == [r["start_ts"] for r in rows]   # exact int64 ns, both parts, in order
    assert ins["engine"].astype(str).tolist() == [r["engine"] for r in rows]
    assert ins["raw_flops"].sum() == 4 * fx.MATMUL_FLOPS
    assert tracks.loc[ins["track"], "name"].astype(str).tolist() == [r["timeline_track"] for r in rows]
    assert sorted(set(tracks.loc[ins["track"], "nc_idx"])) == [4, 5]  # neuroncore_idx + pcore_idx
    args0 = json.loads(str(ins["args"].iloc[0]))
    assert args0["operands"] == "src0 dst0" and args0["id"] == 1000 and args0["pc"] == 0
    assert "start_ts" not in args0 and "hlo_name" not in args0       # columns are not repeated in args
    # framework_op: the FrameworkInstruction of raw_framework_id
    host = b.table("host_ops")
    fw = host.loc[ins["framework_op"].to_numpy()]
    assert fw["name"].astype(str).tolist() == ["model.linear"] * 6 + ["model.relu"] * 6
    assert set(fw["category"].astype(str)) == {"framework"}
    assert host.loc[host["category"] == "framework_node", "module"].astype(str).tolist() == ["model", "model.linear"]


def test_dma_packets_give_descriptor_bytes_and_engines(profile):
    dma = _load(profile).table("dma")
    assert dma["transfer_bytes"].tolist() == [4096] * 3
    assert dma["descriptor_bytes"].tolist() == [1024] * 3              # the mean packet of each transfer
    assert dma["dma_engine"].tolist() == [7, 8, 9]
    assert dma["source"].astype(str).tolist() == ["HBM"] * 3 and dma["queue_type"].astype(str).tolist() == ["input"] * 3


def test_dma_packets_alone_become_the_dma_rows(profile):
    (profile / "DmaPacketAggregated.parquet").unlink()
    dma = _load(profile).table("dma")
    pk = fx.tables()["DmaPacket"]
    assert dma["start_ts"].tolist() == [r["start_ts"] for r in pk]
    assert dma["descriptor_bytes"].tolist() == [1024] * len(pk) and dma["dma_engine"].tolist() == [r["engine_idx"]
                                                                                                 for r in pk]
    assert dma["duration_ns"].tolist() == [10] * len(pk)


def test_collective_units_trigger_and_group(profile):
    b = _load(profile)
    (cc,) = b.table("collectives").itertuples()
    assert cc.operation == "all_reduce" and cc.group_size == 4 and cc.sequence_number == 7
    assert cc.algorithm_bandwidth == pytest.approx(10.24e9) and cc.bus_bandwidth == pytest.approx(15.36e9)  # GB/s
    flows = b.table("flows")
    trig = flows[flows["kind"] == "trigger"]
    assert len(trig) == 1
    assert b.table("instructions").loc[int(trig["src_row"].iloc[0]), "start_ts"] == fx.T0 + 1100


def test_counters_flows_and_system_events(profile):
    b = _load(profile)
    tracks, ctr, flows, host = b.table("tracks"), b.table("counters"), b.table("flows"), b.table("host_ops")
    sem = ctr[ctr["track"].isin(tracks.index[tracks["name"] == "Semaphore 3"])]
    assert sem["value"].tolist() == [0, 1, 2, 3]
    act = ctr[ctr["track"].isin(tracks.index[tracks["name"] == "Tensor active"])]
    assert sorted(act["value"].tolist()) == [0] * 4 + [1] * 4
    dep = flows[flows["kind"] == "flow_dependence"]
    assert len(dep) == 3 and set(dep["src_table"].astype(str)) == {"dma"}  # the DMA ends before its consumer
    assert b.header.metadata["neuron_explorer.flow_direction"].startswith("out -> in")
    sysev = host[host["category"].isin(["framework", "neuron_rt", "neuron_hw"])
                 & host["name"].isin(["forward", "nrt_execute", "nc_exec_running"])]
    assert sysev["category"].astype(str).tolist() == ["framework", "neuron_rt", "neuron_hw"]
    chain = flows[flows["kind"] == "dependency"]
    assert [str(host.loc[r, "name"]) for r in chain["src_row"]] == ["forward", "nrt_execute"]
    assert b.header.instance_id == "i-0abc" and "not exactly aligned" in b.header.metadata[
        "neuron_explorer.clock_domains"]
    hier = flows[flows["kind"] == "hierarchy"]
    assert [(str(host.loc[s, "name"]), str(host.loc[d, "name"])) for s, d in zip(hier["src_row"], hier["dst_row"])] \
        == [("model.linear", "fusion.1"), ("model.relu", "fusion.2")]


def test_summary_numbers_kept_and_ours_are_numbers(profile):
    t = analysis.load(profile)
    assert isinstance(t, analysis.Trace) and t.name == "train@latest"
    theirs = json.loads(t.header.metadata["neuron_explorer.summary"])
    assert theirs == fx.SUMMARY                                        # Explorer's names and values, as a JSON object
    from analysis.analyses.summary import summary_dict

    ours = summary_dict(t)
    # model FLOPs / (the hardware table's bf16 peak per core x 2 active cores x the analysed span: first to
    # last device activity, instructions, DMA and collectives, from the fixture's rows)
    tabs = fx.tables()
    rows = tabs["Instruction"] + tabs["DmaPacketAggregated"] + tabs["CcOp"]
    span = max(r["end_ts"] for r in rows) - min(r["start_ts"] for r in rows)
    peak = t.header.devices[0].spec.peak_flops_per_s["bfloat16"]
    assert ours["mfu_estimated_percent"] == pytest.approx(100 * 4 * fx.MATMUL_FLOPS / (peak * 2 * span * 1e-9),
                                                          rel=1e-6)


def test_missing_tables_and_fields_are_reported(tmp_path):
    d = fx.write_parquet_profile(tmp_path / "min", complete=False)
    with pytest.warns(UserWarning, match="lacks tables .*Summary"):
        b = load_source(d)
    missing = json.loads(b.header.metadata["neuron_explorer.missing"])
    assert "CcOp" in missing["tables"] and "DmaPacketAggregated / DmaPacket" in missing["tables"]
    assert "Summary" in missing["tables"] and "SystemProfileEvents" in missing["tables"]
    assert "kernel_instruction_name" in missing["fields"]["Instruction"]
    full = _load(fx.write_parquet_profile(tmp_path / "full"))
    assert json.loads(full.header.metadata["neuron_explorer.missing"])["tables"] == []
    assert json.loads(full.header.metadata["neuron_explorer.not_imported"]) == {"Throttle": 1}
    assert "update_source" in json.loads(full.header.metadata["neuron_explorer.fields_not_kept"])["SemaphoreUpdate"]


def test_json_export_imports_like_the_parquet_profile(profile, tmp_path):
    j = fx.write_json_export(tmp_path / "export.json")
    a, b = _load(profile), _load(j)
    assert b.header.source_format == "neuron-explorer-json"
    for t in ("instructions", "dma", "collectives", "counters", "flows", "host_ops", "tracks"):
        ta, tb = a.table(t), b.table(t)
        assert len(ta) == len(tb), t
        for c in ta.columns:
            assert ta[c].astype(str).tolist() == tb[c].astype(str).tolist(), (t, c)
    assert a.header.metadata["neuron_explorer.summary"] == b.header.metadata["neuron_explorer.summary"]


def test_legacy_neuron_profile_json(tmp_path):
    """The ``neuron-profile view --output-format json`` shape: summary + instruction rows (timestamp,
    duration, label = timeline track, hlo_name, opcode, operands)."""
    p = tmp_path / "legacy.json"
    p.write_text(json.dumps({"summary": [{"total_time": 300, "event_count": 2}], "instruction": [
        {"timestamp": fx.T0, "duration": 100, "label": "TensorMatrix", "hlo_name": "dot.1", "opcode": "MATMUL",
         "operands": "a b"},
        {"timestamp": fx.T0 + 200, "duration": 100, "label": "Vector", "hlo_name": "add.2", "opcode": "TensorTensor",
         "operands": "c"}], "weird": 1}))
    assert detect_source(p) == EXPLORER_JSON
    b = _load(p)
    ins = b.table("instructions")
    assert ins["start_ts"].tolist() == [fx.T0, fx.T0 + 200] and ins["duration_ns"].tolist() == [100, 100]
    assert b.table("tracks").loc[ins["track"], "name"].astype(str).tolist() == ["TensorMatrix", "Vector"]
    assert json.loads(b.header.metadata["neuron_explorer.summary"]) == {"total_time": 300, "event_count": 2}
    assert json.loads(b.header.metadata["neuron_explorer.unmapped_json_keys"]) == ["weird"]
    assert "Metadata" in json.loads(b.header.metadata["neuron_explorer.missing"])["tables"]
    assert b.header.devices[0].kind == "neuron" and not b.header.devices[0].spec.peak_flops_per_s


def test_cli_import_without_output_goes_to_the_cache(profile, tmp_path, capsys):
    from neuron_profiler.importers import cache

    assert main(["import", str(tmp_path / "ne")]) == 0
    (line,) = capsys.readouterr().out.split()
    out = Path(line)
    assert out.parent == cache.cache_dir() and read_trace(out).row_counts["instructions"] == 12
    before = sorted(p.name for p in profile.iterdir())
    named = tmp_path / "x.nprof"
    assert main(["import", str(profile), "-o", str(named)]) == 0
    assert read_trace(named).header.source_format == "neuron-explorer-parquet"
    assert sorted(p.name for p in profile.iterdir()) == before        # nothing written into the profile
    j = fx.write_json_export(tmp_path / "export.json")
    assert main(["import", str(j), "-o", str(tmp_path / "j.nprof")]) == 0
    assert read_trace(tmp_path / "j.nprof").row_counts["instructions"] == 12


def test_explorer_lists_and_opens_profiles(profile, tmp_path):
    from explorer.store import TraceStore

    fx.write_json_export(tmp_path / "ne" / "export.json")
    st = TraceStore(tmp_path / "ne")
    keys = [e.key for e in st.entries()]
    assert "profiles/global/train@latest" in keys and "export.json" in keys
    for k in keys:
        t = st.open(k)
        assert len(t.instructions) == 12
        assert json.loads(t.header.metadata["neuron_explorer.summary"])["mfu_estimated_percent"] == 21.3
    one = TraceStore(profile)                                          # the profile directory itself
    assert [e.key for e in one.entries()] == ["train@latest"] and len(one.open("train@latest").instructions) == 12


def test_old_api_and_errors(profile, tmp_path):
    from neuron_profiler.runtime.hardware import convert_explorer_parquet as old

    assert old is convert_explorer_parquet
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        b = convert_explorer_parquet(profile.parent.parent.parent)    # the root above profiles/global/...
    assert b.rows("instructions") == 12
    empty = tmp_path / "empty"
    empty.mkdir()
    with pytest.raises(TraceFormatError, match="Instruction.parquet"):
        convert_explorer_parquet(empty)
    bad = tmp_path / "bad.json"
    bad.write_text('{"Instruction": 5}')
    assert main(["import", str(bad), "-o", str(tmp_path / "b.nprof")]) == 2


def test_every_field_of_the_data_model_maps_somewhere():
    """The tables the data model asks for, and every field of them (schema 7.4.0), have a destination."""
    for req in REQUIRED_TABLES:
        for t in req if isinstance(req, tuple) else (req,):
            assert set(TABLES[t]) <= set(MAPPING[t]), t
            assert all(MAPPING[t][f] for f in TABLES[t]), t


def test_schema_matches_the_reference():
    """``schema.TABLES`` is the reference's section 6.3, field for field."""
    text = REFERENCE.read_text()
    sec = text[text.index("### 6.3 Tables and fields"):text.index("## 7. Summary metrics")]
    for line in sec.splitlines():
        m = re.match(r"\| `([A-Za-z]+)`(?: \([^)]*\))? \| (.*) \|$", line)
        if not m or m.group(1) not in TABLES or "/" in line.split("|")[1]:
            continue
        fields = []
        for f in re.findall(r"`([^`]+)`", m.group(2)):
            b = re.match(r"(.*)\{(.*)\}(.*)", f)
            fields += [b.group(1) + x + b.group(3) for x in b.group(2).split(",")] if b else [f]
        fields = [f for f in fields if "…" not in f]
        assert [f for f in fields if f not in TABLES[m.group(1)]] == [], m.group(1)


def test_a_folder_of_several_profiles_imports_each(tmp_path):
    a = fx.write_parquet_profile(tmp_path / "runs" / "a")
    fx.write_parquet_profile(tmp_path / "runs" / "b")
    assert detect_source(tmp_path / "runs") == "directory"
    out = tmp_path / "out"
    assert main(["import", str(tmp_path / "runs"), "-o", str(out)]) == 0
    got = sorted(p.name for p in out.iterdir())
    assert got == ["000_train@latest.nprof", "001_train@latest.nprof"]
    assert all(read_trace(out / g).row_counts["instructions"] == 12 for g in got)
    ts = analysis.load(tmp_path / "runs")
    assert isinstance(ts, analysis.TraceSet) and len(ts) == 2 and a.is_dir()
