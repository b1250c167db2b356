"""Exports that other tools read as we mean them (issue 12, "Exports"): Perfetto decoded with Perfetto's own
classes, Chrome JSON rebuilt into our tables from its round-trip contract, Parquet queried with DuckDB."""
from __future__ import annotations

import gzip
import importlib.util
import json
from collections import Counter
from pathlib import Path

import numpy as np
import pandas as pd
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st
from realdata import sample_trace

from neuron_profiler.exporters import perfetto as perfetto_export
from neuron_profiler.exporters.chrome import export_chrome
from neuron_profiler.exporters.parquet import export_parquet
from neuron_profiler.exporters.perfetto import export_perfetto
from neuron_profiler.exporters.protowire import Batch
from neuron_profiler.synthetic_trace import write_synthetic_trace
from neuron_profiler.trace import (
    TABLES,
    TraceBuilder,
    make_header,
    read_trace,
    simulated_by,
    simulation_note,
)
from neuron_profiler.trace.columns import columns_of
from schemas import pb

pf = pytest.importorskip("perfetto.protos.perfetto.trace.perfetto_trace_pb2")
EVENT_TABLES = ("host_ops", "instructions", "dma", "collectives", "allocations")


@pytest.fixture(scope="module")
def synthetic(tmp_path_factory: pytest.TempPathFactory) -> Path:
    return write_synthetic_trace(tmp_path_factory.mktemp("syn") / "syn.nprof", 30_000, steps=3, chunk_rows=4096)


def _nested_trace(tmp_path: Path) -> Path:
    """Hand-made edge cases: nested and equal-start slices, zero-length slices at a parent's start and end,
    overlapping DMA transfers, a slice without a track, a flow, two counters."""
    dev = pb.Device(index=0, kind="trn2", name="Trainium2", simulated=True)
    hdr = make_header("tests", simulated=True, devices=[dev])
    hdr.simulation.model, hdr.simulation.target = "neuron_profiler.simulated test", "trn2"
    b = TraceBuilder(hdr)
    proc = b.add_track("process", "rank 0", pid=42)
    th = b.add_track("thread", "python", proc, pid=42, tid=7)
    dev = b.add_track("device", "device 0", proc, device=0)
    q = b.add_track("dma_queue", "qSyncIO0", dev, device=0)
    c = b.add_track("counter", "DMA Throughput", dev, device=0, unit="bytes/s")
    b.add_rows("host_ops", {"track": [th] * 7 + [-1], "name": ["step", "fwd", "mm", "mark", "end", "mm2", "z", "x"],
                            "start_ts": [0, 0, 10, 0, 100, 20, 50, 5], "duration_ns": [100, 60, 20, 0, 0, 20, 0, 1]})
    b.add_rows("dma", {"track": q, "start_ts": [5, 8, 12, 50], "duration_ns": [10, 10, 1, 5], "variable": list("abcd")})
    b.add_rows("counters", {"track": c, "ts": [0, 10], "value": [1.0, 2.5]})
    b.add_flows("host_ops", [2], "dma", [1], "launch")
    return b.write(tmp_path / "nested.nprof")


def _decode(path: Path) -> tuple[list, dict[int, pf.TrackDescriptor], dict[str, str]]:
    trace = pf.Trace()
    trace.ParseFromString(path.read_bytes())
    tracks = {p.track_descriptor.uuid: p.track_descriptor for p in trace.packet if p.HasField("track_descriptor")}
    meta = {m.name: m.string_value for p in trace.packet if p.HasField("chrome_events")
            for m in p.chrome_events.metadata}
    return list(trace.packet), tracks, meta


def _slices(packets: list) -> dict[int, list[tuple[int, int]]]:
    """Per Perfetto track, the (begin, end) of each slice, matching ends to begins as trace_processor does (the
    innermost open slice); asserts every end has a begin and nothing stays open."""
    open_: dict[int, list[int]] = {}
    out: dict[int, list[tuple[int, int]]] = {}
    for p in packets:
        if not p.HasField("track_event"):
            continue
        ev = p.track_event
        if ev.type == ev.TYPE_SLICE_BEGIN:
            open_.setdefault(ev.track_uuid, []).append(p.timestamp)
        elif ev.type == ev.TYPE_SLICE_END:
            assert open_.get(ev.track_uuid), f"slice end without begin on track {ev.track_uuid}"
            out.setdefault(ev.track_uuid, []).append((open_[ev.track_uuid].pop(), p.timestamp))
    assert not any(open_.values()), "slices left open"
    return out


def _our_track(uuid: int, tracks: dict[int, pf.TrackDescriptor], n: int) -> int:
    """Our track row of a Perfetto track (lanes "<name> [k]" are children of their track)."""
    while uuid > n:
        uuid = tracks[uuid].parent_uuid
    return uuid - 1


@pytest.mark.parametrize("window_rows", [1 << 20, 1000])
def test_perfetto_matches_our_tables(synthetic: Path, tmp_path: Path, window_rows: int,
                                     monkeypatch: pytest.MonkeyPatch) -> None:
    """Same slices (start, end) per track as our tables, packets in time order, counters, flows, hierarchy; with
    small windows too (slices then end windows after they begin)."""
    monkeypatch.setattr(perfetto_export, "WINDOW_ROWS", window_rows)
    out = export_perfetto(synthetic, tmp_path / "t.pftrace")
    packets, tracks, meta = _decode(out)
    tf = read_trace(synthetic)
    n = tf.row_counts["tracks"]
    ts = [p.timestamp for p in packets if p.HasField("track_event")]
    assert ts == sorted(ts), "packets of the sequence are not in time order"
    assert {p.trusted_packet_sequence_id for p in packets} == {perfetto_export.SEQ_ID}
    got: dict[int, Counter] = {}
    for uuid, spans in _slices(packets).items():
        got.setdefault(_our_track(uuid, tracks, n), Counter()).update(spans)
    want: dict[int, Counter] = {}
    for t in EVENT_TABLES:
        df = tf.table(t, columns=["track", "start_ts", "duration_ns"])
        for trk, s, d in zip(df["track"], df["start_ts"], df["duration_ns"]):
            want.setdefault(int(trk), Counter())[(int(s), int(s + d))] += 1
    assert got == want
    counters = [(p.track_event.track_uuid - 1, p.timestamp, p.track_event.double_counter_value) for p in packets
                if p.track_event.type == p.track_event.TYPE_COUNTER]
    c = tf.table("counters")
    assert sorted(counters) == sorted(zip(c["track"].tolist(), c["ts"].tolist(), c["value"].tolist()))
    flows = tf.table("flows")
    assert sum(len(p.track_event.flow_ids) for p in packets) == len(flows) > 0
    assert sorted(i for p in packets for i in p.track_event.terminating_flow_ids) == list(range(1, len(flows) + 1))
    parents = tf.table("tracks")["parent"].tolist()
    for row, parent in enumerate(parents):
        td = tracks[row + 1]
        if not td.HasField("process") and not td.HasField("thread") and parent >= 0:
            assert td.parent_uuid == parent + 1, td
    assert meta["neuron_profiler.simulated"] == "yes"
    assert simulated_by(tf.header).startswith("simulated by ")
    assert any(td.name.endswith(f"({simulated_by(tf.header)})") for td in tracks.values())


def test_perfetto_nesting_edge_cases(tmp_path: Path) -> None:
    src = _nested_trace(tmp_path)
    packets, tracks, meta = _decode(export_perfetto(src, tmp_path / "n.pftrace"))
    spans = _slices(packets)
    by_name = {td.name or td.thread.thread_name or td.process.process_name: u for u, td in tracks.items()}
    assert sorted(spans[by_name["python"]]) == sorted([(0, 100), (0, 60), (10, 30), (0, 0), (100, 100), (50, 50)])
    assert spans[by_name["python [1]"]] == [(20, 40)]  # mm2 overlaps mm without nesting: a child lane
    assert spans[by_name["(no track)"]] == [(5, 6)]
    assert sorted(spans[by_name["qSyncIO0"]] + spans[by_name["qSyncIO0 [1]"]]) == [(5, 15), (8, 18), (12, 13), (50, 55)]
    assert tracks[by_name["rank 0"]].process.pid == 42 and tracks[by_name["python"]].thread.tid == 7
    dev = by_name["device 0 (simulated by neuron_profiler.simulated test for trn2)"]
    assert tracks[dev].parent_uuid == by_name["rank 0"]
    assert tracks[by_name["DMA Throughput"]].counter.unit_name == "bytes/s"
    assert "neuron_profiler.simulated test for trn2" in meta["neuron_profiler.simulation"]
    names = {d.iid: d.name for p in packets for d in p.interned_data.event_names}
    begins = [names[p.track_event.name_iid] for p in packets if p.track_event.type == p.track_event.TYPE_SLICE_BEGIN]
    assert sorted(begins) == sorted(["step", "fwd", "mm", "mark", "end", "mm2", "z", "x", "a", "b", "c", "d"])


def test_perfetto_of_a_real_simulated_trace(tmp_path: Path) -> None:
    src = sample_trace("gpt_train_step.nprof")
    packets, tracks, meta = _decode(export_perfetto(src, tmp_path / "g.pftrace"))
    tf = read_trace(src)
    n_slices = sum(len(v) for v in _slices(packets).values())
    assert n_slices == sum(tf.row_counts[t] for t in EVENT_TABLES)
    assert meta["neuron_profiler.simulated"] == ("yes" if tf.header.simulated else "no")
    devices = {td.name for td in tracks.values() if td.name.startswith("Trainium2 0")}
    assert devices and all(n.endswith("(simulated by neuron_profiler.simulated 2.0 for trn2)") for n in devices)


@settings(max_examples=40, deadline=None)
@given(st.lists(st.tuples(st.integers(0, (1 << 64) - 1), st.sampled_from([1, 2, 4]), st.integers(1, 1 << 40),
                          st.floats(allow_nan=False), st.lists(st.integers(0, (1 << 64) - 1), max_size=3)),
                min_size=1, max_size=30))
def test_protowire_equals_the_perfetto_classes(events: list) -> None:
    ts, kind, uuid, value, flows = (list(x) for x in zip(*events))
    kind_a = np.array(kind)
    te = Batch(len(ts)).varint(9, kind).varint(10, np.array(uuid) % 1000 + 1, kind_a == 1).varint(11, uuid)
    te.double(44, value, kind_a == 4).repeated_fixed64(47, [len(f) for f in flows],
                                                       np.array([i for f in flows for i in f], dtype=np.uint64))
    pk = Batch(len(ts)).varint(8, np.array(ts, dtype=np.uint64).astype(np.int64)).varint(10, 1).message(11, te)
    ours = pk.varint(13, 2, kind_a == 1).as_repeated(1)
    ref = pf.Trace()
    for t, k, u, v, f in events:
        p = ref.packet.add(timestamp=t, trusted_packet_sequence_id=1)
        p.track_event.type, p.track_event.track_uuid = k, u
        if k == 1:
            p.track_event.name_iid, p.sequence_flags = u % 1000 + 1, 2
        if k == 4:
            p.track_event.double_counter_value = v
        p.track_event.flow_ids.extend(f)
    assert ours == ref.SerializeToString()


# ---------------------------------------------------------------------------------------------- Chrome JSON
def _tables_from_chrome(doc: dict) -> dict[str, pd.DataFrame]:
    """Our tables rebuilt from a Chrome export by the round-trip contract alone (an independent reader)."""
    npr = doc["neuronProfiler"]
    base = doc["baseTimeNanoseconds"]
    out = {"tracks": pd.DataFrame(npr["tracks"]).set_index("row"), "flows": pd.DataFrame(npr["flows"])}
    rows: dict[str, list[dict]] = {t: [] for t in (*EVENT_TABLES, "counters")}
    namecol = {"host_ops": "name", "instructions": "name", "dma": "variable", "collectives": "operation",
               "allocations": "tensor_name"}
    for ev in doc["traceEvents"]:
        if ev["ph"] == "X" and "nprof.table" in ev["args"]:
            a = dict(ev["args"])
            t = a.pop("nprof.table")
            r = {name: c.default for name, c in columns_of(t).items()}  # a column left out holds its default
            r.update({"row": a.pop("nprof.row"), "track": a.pop("nprof.track"), namecol[t]: ev["name"],
                      "start_ts": base + round(ev["ts"] * 1000), "duration_ns": round(ev["dur"] * 1000)})
            if t == "host_ops":
                r["category"] = ev["cat"]
            cols = columns_of(t)
            r.update({k: v for k, v in a.items() if k in cols})
            extra = {k: v for k, v in a.items() if k not in cols}
            if extra:
                r["args"] = json.dumps(extra)
            rows[t].append(r)
        elif ev["ph"] == "C":
            rows["counters"].append({"row": ev["nprof.row"], "track": ev["nprof.track"],
                                     "ts": base + round(ev["ts"] * 1000), "value": ev["args"]["value"]})
    for t, rs in rows.items():
        out[t] = pd.DataFrame(rs, columns=["row", *columns_of(t)]).set_index("row").sort_index()
    return out


def _assert_same(ours: pd.DataFrame, theirs: pd.DataFrame, table: str) -> None:
    assert list(theirs.index) == list(ours.index), table
    for name, c in columns_of(table).items():
        if table in ("tracks", "flows") or name in theirs:
            a, b = ours[name].astype(object).tolist(), theirs[name].tolist()
            if c.kind == "float":
                np.testing.assert_allclose(np.asarray(b, float), np.asarray(a, float), err_msg=f"{table}.{name}")
            elif c.kind == "string":
                assert [str(x) for x in b] == [str(x) for x in a], f"{table}.{name}"
            else:
                assert [int(x) for x in b] == [int(x) for x in a], f"{table}.{name}"


@pytest.mark.parametrize("name", ["syn.json.gz", "syn.json"])
def test_chrome_export_carries_every_table(synthetic: Path, tmp_path: Path, name: str) -> None:
    out = export_chrome(synthetic, tmp_path / name)
    doc = json.loads(gzip.open(out, "rt").read() if name.endswith(".gz") else out.read_text())
    npr = doc["neuronProfiler"]
    tf = read_trace(synthetic)
    assert npr["version"] == 1 and npr["loss"] is None
    assert npr["header"]["simulated"] is True and int(npr["header"]["worldSize"]) == tf.header.world_size
    rebuilt = _tables_from_chrome(doc)
    for t in TABLES:
        _assert_same(tf.table(t), rebuilt[t], t)
    assert sum(e["ph"] == "s" for e in doc["traceEvents"]) == tf.row_counts["flows"]
    pnames = {e["args"]["name"] for e in doc["traceEvents"] if e["ph"] == "M" and e["name"] == "process_name"}
    assert f"device 0 ({simulated_by(tf.header)})" in pnames
    assert doc["simulation"] == "device events " + simulation_note(tf.header)
    assert doc["simulation"].startswith("device events " + simulated_by(tf.header))
    assert doc["simulationAssumptions"] == dict(tf.header.simulation.assumptions)
    for e in doc["traceEvents"]:  # viewers plot every numeric arg of a counter event: only the value is there
        if e["ph"] == "C":
            assert list(e["args"]) == ["value"]


def test_simulated_by_names_the_model_and_target() -> None:
    h = make_header("tests", simulated=True)
    assert simulated_by(h) == "simulated by an unnamed model for an unnamed target"
    h.simulation.model, h.simulation.target = "neuron_profiler.simulated 2.0", "trn1"
    assert simulated_by(h) == "simulated by neuron_profiler.simulated 2.0 for trn1"
    assert simulated_by(make_header("tests", simulated=False)) == ""


def test_simulation_note_names_model_target_and_assumptions() -> None:
    h = make_header("tests", simulated=True)
    assert simulation_note(h) == "simulated by an unnamed model for an unnamed target; assumptions not recorded"
    sim = h.simulation
    sim.model, sim.target, sim.host_timeline = "neuron_profiler.simulated 2.0", "trn2", "projected"
    sim.assumptions["topology"] = "trn2.48xlarge: 16 chips x 8 NeuronCores"
    sim.assumptions["model.a"] = "1 (MODEL)"
    sim.assumptions["model.b"] = "2 (S22)"
    note = simulation_note(h)
    assert note.startswith("simulated by neuron_profiler.simulated 2.0 for trn2; host timeline projected; ")
    assert "assumptions: topology trn2.48xlarge: 16 chips x 8 NeuronCores; 2 model constants " in note
    assert "neuron-trace info --assumptions" in note
    assert simulation_note(make_header("tests", simulated=False)) == ""


def _importer_reads_our_chrome_export() -> bool:
    try:
        return importlib.util.find_spec("neuron_profiler.importers.kineto.roundtrip") is not None
    except ModuleNotFoundError:  # kineto is still one module here, not the package of the importers branch
        return False


@pytest.mark.xfail(not _importer_reads_our_chrome_export(), strict=True,
                   reason="the Kineto importer does not read the neuronProfiler key yet: the importers branch adds "
                          "neuron_profiler.importers.kineto.roundtrip; this test runs for real once both are merged")
def test_nprof_chrome_nprof_keeps_event_kinds_and_counts(synthetic: Path, tmp_path: Path) -> None:
    from neuron_profiler.importers.kineto import import_kineto

    js = export_chrome(synthetic, tmp_path / "rt.json.gz")
    back = read_trace(import_kineto(js, tmp_path / "rt.nprof", progress=False))
    tf = read_trace(synthetic)
    assert back.header.simulated == tf.header.simulated
    assert back.row_counts == tf.row_counts
    for t, col in (("tracks", "kind"), ("instructions", "engine"), ("host_ops", "category"), ("dma", "queue_type"),
                   ("collectives", "operation")):
        assert Counter(back.table(t)[col].astype(str)) == Counter(tf.table(t)[col].astype(str)), (t, col)


# ---------------------------------------------------------------------------------------------- Parquet
@pytest.fixture(scope="module")
def run_dir(tmp_path_factory: pytest.TempPathFactory) -> Path:
    d = tmp_path_factory.mktemp("run")
    for r in range(3):
        write_synthetic_trace(d / f"rank{r}.nprof", 12_000 + 3_000 * r, rank=r, world_size=3, seed=5, chunk_rows=2048)
    return d


_BUSY_SQL = """
WITH ev AS (SELECT rank, engine, start_ts AS s, start_ts + duration_ns AS e
            FROM read_parquet('{root}/instructions/*/*.parquet', hive_partitioning = true)
            -- an engine waiting on a semaphore is idle (analysis.analyses.activity.WAIT_OPCODES)
            WHERE opcode <> 'SemaphoreWait'),
     m AS (SELECT *, max(e) OVER (PARTITION BY rank, engine ORDER BY s ROWS BETWEEN UNBOUNDED PRECEDING
                                  AND 1 PRECEDING) AS prev_end FROM ev)
SELECT rank, engine, sum(greatest(0, e - greatest(s, coalesce(prev_end, s)))) AS busy_ns FROM m GROUP BY rank, engine
"""


@pytest.mark.parametrize("run", ["synthetic", "ddp"])
def test_parquet_run_busy_time_from_duckdb_equals_analysis(run_dir: Path, tmp_path: Path, run: str) -> None:
    """One dataset per table, partitioned by rank; DuckDB's per-engine busy time (the union of each engine's
    instructions other than semaphore waits) equals analysis.summary's for each rank."""
    duckdb = pytest.importorskip("duckdb")
    import analysis

    files = (sorted(run_dir.glob("*.nprof")) if run == "synthetic"
             else [sample_trace("ddp_train_rank0.nprof"), sample_trace("ddp_train_rank1.nprof")])
    root = tmp_path / "pq"
    export_parquet(run_dir if run == "synthetic" else files, root)
    busy = duckdb.sql(_BUSY_SQL.format(root=root)).df()
    assert sorted(busy["rank"].unique()) == list(range(len(files)))
    for f in files:
        s = analysis.summary(analysis.load(f)).set_index("metric")["value"]
        rank = read_trace(f).header.rank
        got = busy[busy["rank"] == rank].set_index("engine")["busy_ns"]
        want = {m.removesuffix("_active_percent"): v * s["total_time"] / 100 for m, v in s.items()
                if m.endswith("_active_percent") and m != "device_active_percent" and not m.startswith(("dma_", "cc_"))}
        assert set(got.index) == set(want) and len(want) >= 5
        for engine, v in want.items():
            assert got[engine] == pytest.approx(v, rel=1e-9), (rank, engine)


def test_parquet_dataset_layout_and_metadata(run_dir: Path, tmp_path: Path) -> None:
    ds = pytest.importorskip("pyarrow.dataset")
    pq = pytest.importorskip("pyarrow.parquet")
    root = tmp_path / "pq"
    written = export_parquet(run_dir, root)
    assert len(written) == 3 * len(TABLES)
    for t in TABLES:
        table = ds.dataset(root / t, partitioning="hive").to_table().to_pandas()
        for r in range(3):
            tf = read_trace(run_dir / f"rank{r}.nprof")
            part = table[table["rank"] == r].sort_values("row")
            ours = tf.table(t)
            assert part["row"].tolist() == list(ours.index), t
            col = {"tracks": "kind", "instructions": "engine"}.get(t)
            if col:
                assert part[col].astype(str).tolist() == ours[col].astype(str).tolist()
    tracks = pq.read_table(root / "tracks" / "rank=2" / "part-00000.parquet")
    assert set(tracks.column("track_rank").to_pylist()) == {2}
    meta = pq.read_metadata(root / "instructions" / "rank=1" / "part-00000.parquet").metadata
    h = json.loads(meta[b"neuron_profiler.header"])
    assert h["rank"] == 1 and h["worldSize"] == 3 and h["simulated"] is True and meta[b"neuron_profiler.loss"] == b""
    tf1 = read_trace(run_dir / "rank1.nprof")
    assert meta[b"neuron_profiler.simulation"].decode() == "device events " + simulation_note(tf1.header)


def test_cli_converts_a_run_directory_to_one_dataset(run_dir: Path, tmp_path: Path,
                                                   capsys: pytest.CaptureFixture) -> None:
    from neuron_profiler.cli import main

    assert main(["convert", str(run_dir), "--to", "parquet", "-o", str(tmp_path / "pq")]) == 0
    printed = capsys.readouterr().out.split()
    assert len(printed) == 3 * len(TABLES) and sorted(p.name for p in (tmp_path / "pq" / "dma").iterdir()) == \
        ["rank=0", "rank=1", "rank=2"]


def test_parquet_refuses_two_traces_of_one_rank(run_dir: Path, tmp_path: Path) -> None:
    from neuron_profiler.trace import TraceFormatError

    with pytest.raises(TraceFormatError, match="rank 0 window 0 is already exported"):
        export_parquet([run_dir / "rank0.nprof", run_dir / "rank0.nprof"], tmp_path / "pq")


def test_iter_table_streams_the_whole_table_in_row_order(synthetic: Path) -> None:
    tf = read_trace(synthetic)
    parts = list(tf.iter_table("instructions", columns=["start_ts", "engine"], batch_rows=5000))
    assert len(parts) > 3 and all(4096 <= len(p) <= 5000 + 4096 for p in parts[:-1])
    whole = tf.table("instructions", columns=["start_ts", "engine"])
    joined = pd.concat(parts)
    assert list(joined.index) == list(whole.index)
    assert joined["start_ts"].tolist() == whole["start_ts"].tolist()
    assert joined["engine"].astype(str).tolist() == whole["engine"].astype(str).tolist()


def test_exports_are_the_same_bytes_in_every_process(tmp_path: Path) -> None:
    """The header's protobuf maps (peaks per dtype, metadata) iterate in a per-process order: the exports write
    them with sorted keys, so exporting one trace twice gives the same file."""
    import subprocess
    import sys

    src = sample_trace("cnn_inference.nprof")
    code = ("import sys; from neuron_profiler.exporters.chrome import export_chrome; "
            "from neuron_profiler.exporters.perfetto import export_perfetto; "
            "export_chrome(sys.argv[1], sys.argv[2]); export_perfetto(sys.argv[1], sys.argv[3])")
    outs = []
    for i, seed in enumerate(("1", "2")):
        c, p = tmp_path / f"c{i}.json", tmp_path / f"p{i}.pftrace"
        subprocess.run([sys.executable, "-c", code, str(src), str(c), str(p)], check=True,
                       env={**__import__("os").environ, "PYTHONHASHSEED": seed})
        outs.append((c.read_bytes(), p.read_bytes()))
    assert outs[0][0] == outs[1][0]
    assert outs[0][1] == outs[1][1]
