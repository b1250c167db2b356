"""Import of the 12 real torch.profiler / Kineto traces: structure checked against the JSON itself."""
from __future__ import annotations

import gzip
import json
import shutil
import warnings
from decimal import Decimal
from functools import cache
from pathlib import Path

import numpy as np
import pytest
from realdata import REAL_TRACE_FILES, REAL_TRACE_PARAMS, real_trace

from neuron_profiler.importers.kineto import import_directory, import_kineto, load_kineto_builder
from neuron_profiler.trace import read_trace

DEVICE_CATS = {"kernel", "Kernel", "gpu_memcpy", "Memcpy", "gpu_memset", "Memset", "mtia_ccp_events", "cuda_sync"}
RUNTIME_CATS = {"cuda_runtime", "cuda_driver", "Runtime", "mtia_runtime"}


@cache
def _json(rel: str) -> dict:
    p = real_trace(rel)
    op = gzip.open if p.suffix == ".gz" else open
    with op(p, "rt") as fh:
        return json.load(fh, parse_float=Decimal)  # exact decimal oracle for the ns checks


@cache
def _built(rel: str):
    with warnings.catch_warnings():
        warnings.simplefilter("error")  # the real traces import without skipped events
        return load_kineto_builder(real_trace(rel))


def _complete(doc: dict) -> list[dict]:
    return [e for e in doc["traceEvents"] if e.get("ph") == "X" and e.get("cat") != "Trace"]


@pytest.mark.parametrize("rel", REAL_TRACE_PARAMS)
def test_real_trace_imports_with_json_counts(rel, tmp_path):
    doc = _json(rel)
    out = import_kineto(real_trace(rel), tmp_path / "t.nprof", progress=False)
    tf = read_trace(out)
    hdr = tf.header
    assert hdr.producer == "neuron_profiler.importers.kineto" and hdr.source_format == "kineto-json"
    dist = doc.get("distributedInfo") or {}
    assert hdr.rank == dist.get("rank", 0)
    assert hdr.world_size == max(dist.get("world_size", 1), hdr.rank + 1)

    xs = _complete(doc)
    dev = [e for e in xs if e.get("cat") in DEVICE_CATS]
    ins = tf.table("instructions")
    host = tf.table("host_ops")
    assert len(ins) == len(dev)
    assert (ins["engine"] == "Kernel").sum() == sum(e["cat"] in ("kernel", "Kernel", "mtia_ccp_events") for e in dev)
    assert len(host) == len(xs) - len(dev)
    # ns timestamps: the earliest kernel starts at round(ts_us * 1000) + baseTimeNanoseconds
    if dev:
        base = doc.get("baseTimeNanoseconds", 0)
        assert int(ins["start_ts"].min()) == min(int(e["ts"] * 1000) for e in dev) + base
        assert int(ins["duration_ns"].sum()) == sum(int(e["dur"] * 1000) for e in dev)
        # "External id" is a column, not part of the args text (which then interns: few distinct strings)
        assert sorted(ins["external_id"].tolist()) == sorted(e.get("args", {}).get("External id", -1) for e in dev)
        assert not ins["args"].astype(str).str.contains('"External id"').any()
    # only devices with events are in the header, and every stream track points at one of them
    tracks = tf.table("tracks")
    used = set(tracks.loc[ins["track"].unique(), "device"].tolist())
    assert used <= set(range(len(hdr.devices)))
    assert len(hdr.devices) == len({d for d in used} | set(tracks.loc[tracks["kind"] == "device", "device"]))
    if not dev:
        assert len(hdr.devices) == 0


@pytest.mark.parametrize("rel", [r for r in REAL_TRACE_FILES if "cpu_only" not in r])
def test_launch_flows_join_runtime_calls_to_device_events(rel):
    b = _built(rel)
    doc = _json(rel)
    host, ins, flows = b.table("host_ops"), b.table("instructions"), b.table("flows")
    launch = flows[flows["kind"] == "launch"]
    assert len(launch) > 0
    src = host.loc[launch["src_row"].to_numpy()]
    dst = ins.loc[launch["dst_row"].to_numpy()]
    assert set(src["category"].astype(str)) <= RUNTIME_CATS
    both = (src["correlation_id"].to_numpy() >= 0) & (dst["correlation_id"].to_numpy() >= 0)
    assert (src["correlation_id"].to_numpy()[both] == dst["correlation_id"].to_numpy()[both]).all()
    assert (src["start_ts"].to_numpy() <= dst["start_ts"].to_numpy()).mean() > 0.99  # launched before run
    # every device event with a correlation that a runtime call also has got its launch flow
    rt_corr = {e["args"]["correlation"] for e in _complete(doc)
               if e.get("cat") in RUNTIME_CATS and "correlation" in e.get("args", {})}
    expect = sum(e.get("args", {}).get("correlation") in rt_corr for e in _complete(doc) if e["cat"] in DEVICE_CATS)
    assert len(launch) >= expect


def test_mtia_device_events_and_flows():
    rel = "HolisticTraceAnalysis/mtia_inference_trace/mtia_inference_rank_0.json.gz"
    b = _built(rel)
    ins = b.table("instructions")
    doc = _json(rel)
    base = doc["baseTimeNanoseconds"]
    s_ids = {f["id"] for f in doc["traceEvents"] if f.get("ph") == "s" and f.get("cat") == "ac2g"}
    f_ts = {int(f["ts"] * 1000) + base for f in doc["traceEvents"]
            if f.get("ph") == "f" and f.get("cat") == "ac2g" and f["pid"] == 17 and f["id"] in s_ids}
    launched = set(b.table("flows").query("kind == 'launch'")["dst_row"])
    assert launched == set(ins.index[ins["start_ts"].isin(f_ts)])
    assert (ins.loc[sorted(launched), "correlation_id"] >= 0).all()
    assert [d.kind for d in b.header.devices] == ["mtia"] and set(ins["opcode"]) == {"mtia_ccp_events"}


def test_nccl_collectives_from_kernels_and_record_param_comms():
    b = _built("HolisticTraceAnalysis/nccl_parser_config/nccl_data.json.gz")
    coll, ins, host = b.table("collectives"), b.table("instructions"), b.table("host_ops")
    assert coll["operation"].value_counts().to_dict() == {"all_reduce": 15, "broadcast": 6}
    assert set(coll["process_group"]) == {"0 (default_pg)"} and set(coll["replica_group"]) == {"0,1"}
    assert (coll["group_size"] == 2).all() and (coll["algorithm"] == "ring").all()
    kern = ins.loc[coll["instruction"].to_numpy()]
    assert kern["name"].astype(str).str.startswith("ncclKernel_").all()
    assert (kern["start_ts"].to_numpy() == coll["start_ts"].to_numpy()).all()
    assert set(host.loc[coll["framework_op"].to_numpy(), "name"].astype(str)) == {"record_param_comms"}
    # sizes from nelems * 4 bytes (Float), bandwidths nccl-tests style
    doc = _json("HolisticTraceAnalysis/nccl_parser_config/nccl_data.json.gz")
    nelems = sorted(e["args"]["In msg nelems"] for e in _complete(doc)
                    if e["cat"] == "kernel" and "Collective name" in e["args"])
    assert sorted(coll["num_elements"].tolist()) == nelems
    ar = coll[coll["operation"] == "all_reduce"]
    assert (ar["input_size"] == ar["num_elements"] * 4).all()
    algbw = ar["input_size"] / (ar["duration_ns"] * 1e-9)
    np.testing.assert_allclose(ar["algorithm_bandwidth"], algbw)
    np.testing.assert_allclose(ar["bus_bandwidth"], algbw * 2 * (2 - 1) / 2)
    assert (coll["sequence_number"] == -1).all()  # this NCCL 2.17 trace has no "Seq" arg


def test_nccl_kernels_without_metadata_still_become_collectives():
    b = _built("HolisticTraceAnalysis/trace_filter/sampled_rank-0.json.gz")
    coll = b.table("collectives")
    assert len(coll) == 10 and set(coll["operation"]) == {"send_recv"}
    assert (coll["input_size"] == 0).all() and (coll["instruction"] >= 0).all()
    assert (b.header.rank, b.header.world_size) == (0, 128)
    # no deviceProperties in this trace: the GPU is imported without peaks and the header says so
    (d,) = b.header.devices
    assert d.index == 0 and d.kind == "cuda" and not d.spec.peak_flops_per_s
    assert "no deviceProperties entry" in b.header.metadata["devices_without_spec"]


def test_fwdbwd_flows_link_ops_with_the_same_sequence_number():
    rel = "HolisticTraceAnalysis/nccl_parser_config/nccl_data.json.gz"
    b = _built(rel)
    fl = b.table("flows").query("kind == 'fwdbwd'")
    n_pairs = sum(1 for e in _json(rel)["traceEvents"] if e.get("cat") == "fwdbwd" and e.get("ph") == "s")
    assert len(fl) == n_pairs
    host = b.table("host_ops")
    src, dst = host.loc[fl["src_row"].to_numpy()], host.loc[fl["dst_row"].to_numpy()]
    assert (src["start_ts"].to_numpy() < dst["start_ts"].to_numpy()).all()
    assert dst["name"].astype(str).str.contains("Backward").mean() > 0.9


def test_gpu_user_annotations_are_host_ops_on_stream_tracks_not_kernels():
    rel = "HolisticTraceAnalysis/nccl_parser_config/nccl_data.json.gz"
    b = _built(rel)
    host, tracks = b.table("host_ops"), b.table("tracks")
    ann = host[host["category"] == "gpu_user_annotation"]
    assert len(ann) == sum(e["cat"] == "gpu_user_annotation" for e in _complete(_json(rel)))
    assert set(tracks.loc[ann["track"].to_numpy(), "kind"]) == {"stream"}
    assert not set(ann["name"].astype(str)) & set(b.table("instructions")["name"].astype(str))


def test_python_stacks_and_memory_counters():
    rel = "TraceLens/h100/gaunernst_bert-small-uncased__1016001.json.gz"
    b = _built(rel)
    host = b.table("host_ops")
    ops = host[host["category"] == "cpu_op"]
    stacks = ops["stack"].astype(str)
    assert (stacks != "").mean() > 0.9
    py_names = set(host.loc[host["category"] == "python_function", "name"].astype(str))
    assert set(stacks.iloc[0].split("\n")) <= py_names
    tracks, ctr = b.table("tracks"), b.table("counters")
    mem = [e for e in _json(rel)["traceEvents"] if e.get("name") == "[memory]"]
    for name in ("Total Allocated", "Total Reserved"):
        ids = tracks.index[(tracks["kind"] == "counter") & (tracks["name"] == name)]
        assert set(tracks.loc[ids, "unit"]) == {"bytes"}
        vals = ctr[ctr["track"].isin(ids)]
        assert len(vals) == len(mem)
        assert sorted(vals["value"]) == sorted(float(e["args"][name]) for e in mem)


def test_cpu_only_trace():
    b = _built("HolisticTraceAnalysis/cpu_only/rank-34.Jul_15_10_52_41.1074.pt.trace.json.gz")
    assert (b.header.rank, b.header.world_size) == (34, 300)
    assert len(b.header.devices) == 0 and b.rows("instructions") == 0 and b.rows("host_ops") == 15
    assert "pg_config" in b.header.metadata["kineto.distributedInfo"]


def test_device_properties_and_specs():
    b = _built("HolisticTraceAnalysis/df_index_resolver/df_index_resolver.json.gz")
    assert [d.index for d in b.header.devices] == [1]  # deviceProperties lists 2 GPUs; only GPU 1 has events
    d = b.header.devices[0]
    assert d.kind == "cuda" and "V100" in d.name and d.properties["numSms"] == "80"
    assert d.spec.peak_flops_per_s and d.spec.hbm_bandwidth_bytes_per_s > 0
    mi = _built("TraceLens/torch_compile_triton/trace.json.gz").header.devices[0]
    assert mi.kind == "rocm" and "MI300X" in mi.name
    mt = _built("HolisticTraceAnalysis/mtia_inference_trace/mtia_inference_rank_0.json.gz").header
    assert mt.devices[0].name == "ARTEMIS"


def test_round_trip_builder_equals_reader(tmp_path):
    rel = "HolisticTraceAnalysis/nccl_parser_config/nccl_data.json.gz"
    b = _built(rel)
    tf = read_trace(b.write(tmp_path / "rt.nprof"))
    for table in ("tracks", "host_ops", "instructions", "collectives", "flows", "counters"):
        a, r = b.table(table), tf.table(table)
        assert len(a) == len(r) == tf.row_counts[table]
        for col in a.columns:
            assert a[col].astype(str).tolist() == r[col].astype(str).tolist(), (table, col)


def test_import_directory_multi_rank(tmp_path):
    src = tmp_path / "run"
    src.mkdir()
    for r in (0, 1):
        shutil.copy(real_trace(f"HolisticTraceAnalysis/trace_filter/sampled_rank-{r}.json.gz"), src)
    out = import_directory(src, tmp_path / "out", progress=False)
    heads = [read_trace(p).header for p in out]
    assert sorted(h.rank for h in heads) == [0, 1] and {h.world_size for h in heads} == {128}
    assert len({h.run_id for h in heads}) == 1 and heads[0].run_id
    assert sorted(p.name for p in out) == ["rank00000_sampled_rank-0.nprof", "rank00001_sampled_rank-1.nprof"]


def test_default_output_goes_to_the_cache_never_beside_the_source(tmp_path):
    """Without an output path the import lands in the import cache; a read-only source folder stays untouched
    (also for root, who may write anywhere) and an output the user names is used as given."""
    from neuron_profiler.importers import cache

    ro = tmp_path / "ro"
    ro.mkdir()
    src = ro / "t.json.gz"
    shutil.copy(real_trace("HolisticTraceAnalysis/triton_example/triton_example.json.gz"), src)
    ro.chmod(0o555)
    try:
        out = import_kineto(src, progress=False)
        assert out.parent == cache.cache_dir() and out.name.startswith("t.") and out.suffix == ".nprof"
        assert sorted(p.name for p in ro.iterdir()) == ["t.json.gz"]
        assert read_trace(out).header.metadata[cache.KEY_METADATA] == cache.cache_key(src)
        named = import_kineto(src, tmp_path / "o.nprof", progress=False)
        assert named == tmp_path / "o.nprof" and read_trace(named).row_counts == read_trace(out).row_counts
        assert import_kineto(src, tmp_path, progress=False) == tmp_path / "t.nprof"  # a directory: <stem>.nprof
    finally:
        ro.chmod(0o755)


def test_legacy_and_vendor_categories_and_ns_timestamps(tmp_path):
    """2021 categories (Operator/Kernel/Runtime/Memcpy/Memset + async flows), integer-us timestamps,
    privateuse1 runtime, displayTimeUnit "ns" (still us in ts), and an ns-precise 3-decimal ts."""
    ev = [
        {"ph": "X", "cat": "Operator", "name": "aten::add", "pid": 1, "tid": 2, "ts": 100, "dur": 50,
         "args": {"Trace name": "PyTorch Profiler", "Trace iteration": 0, "External id": 7}},
        {"ph": "X", "cat": "Runtime", "name": "cudaLaunchKernel", "pid": 1, "tid": 2, "ts": 110, "dur": 5,
         "args": {"correlation": 11, "external id": 7}},
        {"ph": "X", "cat": "Kernel", "name": "add_kernel", "pid": 0, "tid": 7, "ts": 120, "dur": 3,
         "args": {"correlation": 11, "External id": 7, "device": 0, "stream": 7}},
        {"ph": "X", "cat": "Memcpy", "name": "Memcpy HtoD (Pageable -> Device)", "pid": 0, "tid": 7, "ts": 130,
         "dur": 2, "args": {"correlation": 12, "device": 0, "stream": 7, "bytes": 4096}},
        {"ph": "X", "cat": "Memset", "name": "Memset (Device)", "pid": 0, "tid": 7, "ts": 140, "dur": 1,
         "args": {"device": 0, "stream": 7, "bytes": 64}},
        {"ph": "X", "cat": "Runtime", "name": "cudaMemsetAsync", "pid": 1, "tid": 2, "ts": 135, "dur": 2},
        {"ph": "s", "id": 99, "pid": 1, "tid": 2, "ts": 135, "cat": "async", "name": "launch"},
        {"ph": "f", "id": 99, "pid": 0, "tid": 7, "ts": 140, "cat": "async", "name": "launch", "bp": "e"},
        {"ph": "X", "cat": "privateuse1_runtime", "name": "nrtExecute", "pid": 1, "tid": 2,
         "ts": 4458676522690.655, "dur": 0.001, "args": {}},
        {"ph": "s", "id": 11, "pid": 1, "tid": 2, "ts": 110, "cat": "async", "name": "launch"},
        {"ph": "f", "id": 11, "pid": 0, "tid": 7, "ts": 120, "cat": "async", "name": "launch", "bp": "e"},
    ]
    p = tmp_path / "legacy.json"
    p.write_text(json.dumps({"schemaVersion": 1, "displayTimeUnit": "ns", "traceEvents": ev}))
    b = load_kineto_builder(p)
    ins, host = b.table("instructions"), b.table("host_ops")
    assert ins["engine"].astype(str).tolist() == ["Kernel", "Memcpy", "Memset"]
    assert ins["start_ts"].tolist() == [120_000, 130_000, 140_000]
    assert ins["hbm_write_bytes"].tolist() == [0, 4096, 64] and ins["hbm_read_bytes"].tolist() == [0, 0, 0]
    assert ins.loc[0, "framework_op"] == host.index[host["name"] == "aten::add"][0]
    pu = host[host["category"] == "privateuse1_runtime"].iloc[0]
    assert (pu["start_ts"], pu["duration_ns"]) == (4458676522690655, 1)
    launch = b.table("flows").query("kind == 'launch'")
    assert sorted(launch["dst_row"].tolist()) == [0, 2]  # by correlation, and by the flow alone (memset)
    assert host.loc[launch.sort_values("dst_row")["src_row"], "name"].tolist() == ["cudaLaunchKernel",
                                                                                  "cudaMemsetAsync"]
    assert (b.header.rank, b.header.world_size) == (0, 1)
    assert "absent" in b.header.metadata["kineto.distributedInfo"]


def test_base_time_offsets_timestamps(tmp_path):
    ev = [{"ph": "X", "cat": "cpu_op", "name": "a", "pid": 1, "tid": 1, "ts": 1.5, "dur": 2}]
    p = tmp_path / "b.json"
    p.write_text(json.dumps({"baseTimeNanoseconds": 1_700_000_000_000_000_000, "traceEvents": ev}))
    h = load_kineto_builder(p).table("host_ops")
    assert h["start_ts"].tolist() == [1_700_000_000_000_001_500] and h["duration_ns"].tolist() == [2000]


def test_progress_flag_is_quiet_without_tty(tmp_path, capsys):
    src = real_trace("HolisticTraceAnalysis/triton_example/triton_example.json.gz")
    import_kineto(src, tmp_path / "t.nprof", progress=True)
    assert capsys.readouterr().err == ""


def test_output_path_helpers():
    from neuron_profiler.importers.kineto import default_output_path

    assert default_output_path(Path("/a/x.pt.trace.json.gz")) == Path("/a/x.pt.trace.nprof")
    assert default_output_path(Path("/a/y.json")) == Path("/a/y.nprof")


def test_fast_and_per_event_split_paths_agree():
    from neuron_profiler.importers.kineto import events as ke
    from neuron_profiler.importers.kineto.decode import decode_document
    from neuron_profiler.importers.kineto.read import read_bytes

    src = real_trace("TraceLens/h100/gaunernst_bert-small-uncased__1016001.json.gz")
    events = decode_document(read_bytes(src), str(src))[1]
    fast, slow = ke.split_events(events), ke._split_slow(events)
    assert fast.n_x == slow.n_x > 0
    assert [list(c) for c in fast.x_cols] == [list(c) for c in slow.x_cols]
    assert (len(fast.flows), len(fast.meta), len(fast.instants)) == (len(slow.flows), len(slow.meta),
                                                                     len(slow.instants))


def test_device_events_without_stream_go_on_a_no_stream_track_with_tid_minus_1(tmp_path):
    """HTA takes a device event's stream from args.stream and drops events without one; they get a track of
    kind stream with tid -1 (one per Kineto thread, named for the user), which the hta_compatible selection
    drops, while an explicit stream keeps its own track."""
    from analysis import hta_kernel_selection

    ev = [{"ph": "X", "cat": "mtia_ccp_events", "name": "dma_request", "pid": 17, "tid": 9, "ts": 10 + k, "dur": 1,
           "args": {"direction": "DEVICE_TO_HOST", "size": 1024}} for k in range(3)]
    ev += [{"ph": "X", "cat": "mtia_ccp_events", "name": "pe_exe", "pid": 17, "tid": 3, "ts": 20, "dur": 2,
            "args": {"stream": 108}},
           {"ph": "M", "name": "thread_name", "pid": 17, "tid": 3, "args": {"name": "Stream 108"}}]
    p = tmp_path / "t.json"
    p.write_text(json.dumps({"traceEvents": ev}))
    b = load_kineto_builder(p)
    ins, tracks = b.table("instructions"), b.table("tracks")
    by_track = {str(tracks.loc[t, "name"]): (int(tracks.loc[t, "tid"]), str(tracks.loc[t, "kind"]), n)
                for t, n in ins["track"].value_counts().items()}
    assert by_track == {"dma_request (no stream)": (-1, "stream", 3), "Stream 108": (108, "stream", 1)}
    kept = hta_kernel_selection(ins, b.table("host_ops"), tracks=tracks)
    assert kept["name"].astype(str).tolist() == ["pe_exe"]
