"""neuron-trace CLI (info/validate/convert), the Chrome and Parquet exports, and gencode staleness."""
from __future__ import annotations

import gzip
import json
import re
import subprocess
import sys
from pathlib import Path

import pandas as pd
import pytest
from realdata import sample_trace

from neuron_profiler.cli import main
from neuron_profiler.trace import FORMAT_MAJOR, FORMAT_MINOR, TraceBuilder, make_header, read_trace
from schemas import pb

REPO = Path(__file__).resolve().parents[2]


@pytest.fixture()
def small_trace(tmp_path: Path) -> Path:
    hdr = make_header("tests", rank=0, world_size=2, simulated=True,
                      devices=[pb.Device(index=0, kind="trn2", name="Trainium2", simulated=True,
                                         spec=pb.HardwareSpec(num_cores=8, peak_flops_per_s={"bfloat16": 7.86e13}))])
    b = TraceBuilder(hdr)
    th = b.add_track("thread", "python 1")
    te = b.add_track("engine", "Tensor", device=0, nc_idx=0)
    tc = b.add_track("counter", "DMA Throughput", parent=te, device=0, nc_idx=0, unit="bytes/s")
    h = b.add_rows("host_ops", {"track": th, "name": ["aten::mm", "aten::gelu"], "start_ts": [1000, 5000],
                                "duration_ns": [3000, 1000], "category": "cpu_op",
                                "input_shapes": ["[[2,3],[3,4]]", "[[2,4]]"]})
    i = b.add_rows("instructions", {"track": te, "start_ts": [1500, 2500, 5500], "duration_ns": [500, 400, 300],
                                    "engine": "Tensor", "opcode": "MATMUL", "name": "aten::mm",
                                    "framework_op": [h, h, h + 1], "raw_flops": [24, 24, 0]})
    b.add_rows("counters", {"track": tc, "ts": [1000, 2000], "value": [1.5e9, 0.0]})
    b.add_flows("host_ops", [h, h, h + 1], "instructions", [i, i + 1, i + 2], "launch")
    return b.write(tmp_path / "small.nprof")


def test_info_prints_the_simulation_model_and_what_it_could_not_price(capsys: pytest.CaptureFixture) -> None:
    p = sample_trace("gpt_train_step.nprof")
    sim = read_trace(p).header.simulation
    assert main(["info", str(p)]) == 0
    out = capsys.readouterr().out
    assert f"model     {sim.model} for trn2; host timeline projected for the target" in out
    assert f"assumes   {len(sim.assumptions)} model assumptions (--assumptions lists them; docs: docs/simulation.md)" \
        in out
    assert len(sim.assumptions) > 10
    assert "simulated   yes (device events simulated by neuron_profiler.simulated " in out
    assert "program     model=GPT  model_parameters=" in out and "script=regenerate.py" in out
    assert main(["info", "--assumptions", str(p)]) == 0
    listed = [ln for ln in capsys.readouterr().out.splitlines() if ln.startswith("  assume    ")]
    assert sorted(ln.split(" = ", 1)[0].split()[-1] for ln in listed) == sorted(sim.assumptions)
    lines = [ln for ln in out.splitlines() if ln.startswith("  unpriced")]
    if sim.unpriced_ops:  # the regenerated sample prices every op (foreach optimizers, cat, casts): no line then
        assert f"{len(sim.unpriced_ops)} op kinds" in lines[0]
        assert all(o in lines[0] for o in list(sim.unpriced_ops)[:6])
    else:
        assert not lines


def test_info_prints_devices_tables_and_simulated(small_trace: Path, capsys: pytest.CaptureFixture) -> None:
    assert main(["info", str(small_trace)]) == 0
    out = capsys.readouterr().out
    assert "trn2 Trainium2 (simulated)" in out and "78.6 TFLOP/s" in out
    assert "rank        0 of 2" in out and "simulated   yes" in out
    assert "instructions" in out and "5.000 us" in out  # span 1000..6000 ns
    m = re.search(r"^chunks\s+(\d+) \((.+)\)$", out, re.M)
    assert m and int(m.group(1)) == sum(int(p.split()[1]) for p in m.group(2).split(", ")) > 0
    assert {p.split()[0] for p in m.group(2).split(", ")} <= {"lz4", "none"}  # tiny chunks may stay raw


def test_validate_ok_and_problems(small_trace: Path, tmp_path: Path, capsys: pytest.CaptureFixture) -> None:
    assert main(["validate", str(small_trace)]) == 0
    b = TraceBuilder(make_header("tests"))
    b.add_rows("instructions", {"track": [5], "start_ts": [1], "framework_op": [3]})
    b.add_flows("host_ops", [0], "instructions", [9], "launch")
    bad = b.write(tmp_path / "dangling.nprof")
    assert main(["validate", str(bad)]) == 1
    out = capsys.readouterr().out
    assert "instructions.track" in out and "instructions.framework_op" in out and "flows" in out


def test_bad_file_is_one_line_exit_2(tmp_path: Path) -> None:
    p = tmp_path / "x.nprof"
    p.write_bytes(b"garbage bytes")
    r = subprocess.run([sys.executable, "-m", "neuron_profiler.cli", "info", str(p)], capture_output=True, text=True)
    assert r.returncode == 2
    assert r.stderr.count("\n") == 1 and "not a Neuron trace" in r.stderr and "Traceback" not in r.stderr
    r = subprocess.run([sys.executable, "-m", "neuron_profiler.cli", "info", str(tmp_path / "missing.nprof")],
                       capture_output=True, text=True)
    assert r.returncode == 2 and "cannot open" in r.stderr


@pytest.mark.parametrize("name", ["out.json", "out.json.gz"])
def test_chrome_export(small_trace: Path, tmp_path: Path, name: str) -> None:
    out = tmp_path / name
    assert main(["convert", str(small_trace), "-o", str(out)]) == 0
    raw = gzip.open(out, "rt").read() if name.endswith(".gz") else out.read_text()
    doc = json.loads(raw)
    evs = doc["traceEvents"]
    xs = [e for e in evs if e["ph"] == "X"]
    assert len(xs) == 5 and {e["name"] for e in xs} == {"aten::mm", "aten::gelu"}
    mm = next(e for e in xs if e["cat"] == "cpu_op" and e["name"] == "aten::mm")
    assert mm["ts"] == 0.0 and mm["dur"] == 3.0 and doc["baseTimeNanoseconds"] == 1000
    assert sum(e["ph"] == "C" for e in evs) == 2
    assert sum(e["ph"] == "s" for e in evs) == 3 and sum(e["ph"] == "f" for e in evs) == 3
    names = {e["args"]["name"] for e in evs if e["ph"] == "M" and e["name"] == "thread_name"}
    assert {"Tensor", "python 1", "DMA Throughput (bytes/s)"} <= names


def test_parquet_export(small_trace: Path, tmp_path: Path) -> None:
    pq = pytest.importorskip("pyarrow.parquet")
    assert main(["convert", str(small_trace), "--to", "parquet", "-o", str(tmp_path / "pq")]) == 0
    part = tmp_path / "pq" / "instructions" / "rank=0" / "part-00000.parquet"
    df = pd.read_parquet(part)
    ref = read_trace(small_trace).table("instructions")
    assert list(df["row"]) == list(ref.index) and list(df["raw_flops"]) == list(ref["raw_flops"])
    assert list(df["engine"]) == list(ref["engine"])
    meta = pq.read_metadata(part).metadata
    assert json.loads(meta[b"neuron_profiler.header"])["worldSize"] == 2 and meta[b"neuron_profiler.loss"] == b""


def test_generated_protobuf_code_is_fresh(tmp_path: Path) -> None:
    pytest.importorskip("grpc_tools")
    from schemas.regenerate import regenerate

    for p in regenerate(tmp_path):
        committed = REPO / "schemas" / p.name
        assert p.read_bytes() == committed.read_bytes(), (
            f"schemas/{p.name} is stale: run `python -m schemas.regenerate` and commit the result")


def test_core_install_works_without_torch() -> None:
    """Trace I/O, import, analysis and the explorer run with torch unavailable (people open traces on laptops)."""
    code = ("import sys; sys.modules['torch'] = None\n"
            "import neuron_profiler, neuron_profiler.trace, neuron_profiler.cli, schemas\n"
            "import neuron_profiler.exporters.chrome, neuron_profiler.importers.kineto\n"
            "import analysis, analysis.figures, explorer.app, explorer.cli\n"
            "from neuron_profiler.runtime.simulated import SimulatedRuntime\n"
            "t = analysis.load('sample_traces/gpt_train_step.nprof'); t.summary(); t.roofline()\n"
            "explorer.app.create_app\n"
            "print('ok')")
    r = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, cwd=REPO)
    assert r.returncode == 0 and "ok" in r.stdout, r.stderr


def test_perfetto_export_nests_and_links(tmp_path: Path) -> None:
    pf = pytest.importorskip("perfetto.protos.perfetto.trace.perfetto_trace_pb2")
    b = TraceBuilder(make_header("tests"))
    th = b.add_track("thread", "python 1")
    q = b.add_track("dma_queue", "qSyncIO0")
    c = b.add_track("counter", "DMA Throughput", unit="bytes/s")
    b.add_rows("host_ops", {"track": th, "name": ["outer", "inner"], "start_ts": [0, 10], "duration_ns": [100, 20]})
    # three transfers on one queue, two of them overlapping without nesting -> two lanes
    b.add_rows("dma", {"track": q, "start_ts": [5, 8, 50], "duration_ns": [10, 10, 5], "variable": ["a", "b", "c"]})
    b.add_rows("counters", {"track": c, "ts": [0, 10], "value": [1.0, 2.5]})
    b.add_flows("host_ops", [0], "dma", [1], "launch")
    out = tmp_path / "t.pftrace"
    assert main(["convert", str(b.write(tmp_path / "t.nprof")), "--to", "perfetto", "-o", str(out)]) == 0
    trace = pf.Trace()
    trace.ParseFromString(out.read_bytes())
    names = {p.track_descriptor.uuid: p.track_descriptor.name for p in trace.packet if p.HasField("track_descriptor")}
    assert {"python 1", "qSyncIO0", "DMA Throughput", "qSyncIO0 [1]"} <= set(names.values())
    stacks: dict[int, list[int]] = {}
    begins = 0
    for p in trace.packet:
        if not p.HasField("track_event"):
            continue
        ev = p.track_event
        if ev.type == ev.TYPE_SLICE_BEGIN:
            begins += 1
            stacks.setdefault(ev.track_uuid, []).append(p.timestamp)
        elif ev.type == ev.TYPE_SLICE_END:
            assert stacks[ev.track_uuid], "slice end without begin"
            stacks[ev.track_uuid].pop()
    assert begins == 5 and all(not s for s in stacks.values())
    counters = [p.track_event.double_counter_value for p in trace.packet if p.track_event.type == 4]
    assert counters == [1.0, 2.5]
    assert sum(len(p.track_event.flow_ids) for p in trace.packet) == 1
    assert sum(len(p.track_event.terminating_flow_ids) for p in trace.packet) == 1


def test_chrome_export_of_an_imported_gpu_trace_keeps_kernel_args(tmp_path: Path) -> None:
    """Kineto -> .nprof -> Chrome: a kernel keeps its grid/block args and its correlation / External id."""
    from neuron_profiler.importers.kineto import import_kineto

    ev = [{"ph": "X", "cat": "cpu_op", "name": "aten::add", "pid": 1, "tid": 2, "ts": 100, "dur": 50,
           "args": {"External id": 7}},
          {"ph": "X", "cat": "cuda_runtime", "name": "cudaLaunchKernel", "pid": 1, "tid": 2, "ts": 110, "dur": 5,
           "args": {"correlation": 11, "External id": 7}},
          {"ph": "X", "cat": "kernel", "name": "add_kernel", "pid": 0, "tid": 7, "ts": 120, "dur": 3,
           "args": {"correlation": 11, "External id": 7, "device": 0, "stream": 7, "grid": [24, 1, 1],
                    "block": [128, 1, 1], "registers per thread": 16}}]
    src = tmp_path / "gpu.json"
    src.write_text(json.dumps({"schemaVersion": 1, "traceEvents": ev}))
    nprof = import_kineto(src, tmp_path / "gpu.nprof", progress=False)
    assert read_trace(nprof).table("instructions")["external_id"].tolist() == [7]
    out = tmp_path / "gpu_chrome.json"
    assert main(["convert", str(nprof), "-o", str(out)]) == 0
    k = next(e for e in json.loads(out.read_text())["traceEvents"] if e.get("name") == "add_kernel")
    assert k["args"]["grid"] == [24, 1, 1] and k["args"]["block"] == [128, 1, 1]
    assert k["args"]["registers per thread"] == 16
    assert (k["args"]["correlation_id"], k["args"]["external_id"]) == (11, 7)


def test_convert_to_nprof_recompresses_losslessly(tmp_path: Path, capsys: pytest.CaptureFixture) -> None:
    src = sample_trace("gpt_train_step.nprof")
    out = tmp_path / "gpt_zstd.nprof"
    assert main(["convert", str(src), "--to", "nprof", "--compression", "zstd", "-o", str(out)]) == 0
    a, b = read_trace(src), read_trace(out)
    ha, hb = type(a.header)(), type(b.header)()
    ha.CopyFrom(a.header)
    hb.CopyFrom(b.header)
    assert (hb.format_major, hb.format_minor) == (FORMAT_MAJOR, FORMAT_MINOR)  # the writer stamps its own version
    ha.format_minor = hb.format_minor = 0
    assert hb == ha and b.dropped_events == a.dropped_events and b.footer_metadata == a.footer_metadata
    for t in a.row_counts:
        pd.testing.assert_frame_equal(b.table(t), a.table(t), check_categorical=False)
    assert {b._frame_at(c.offset)[2] for c in b._chunks if c.table_id == 13} == {2}  # zstd chunks
    assert out.stat().st_size < src.stat().st_size
    assert main(["convert", str(out), "--to", "nprof", "-o", str(out)]) == 2
    assert "must differ" in capsys.readouterr().err
