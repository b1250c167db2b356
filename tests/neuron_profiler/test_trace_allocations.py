"""Format 2.3's ``allocations`` table: written and read back exactly through the one writer and reader, read by
time window, carried through the Chrome export and its round-trip import; a 2.2 file reads it as empty."""
from __future__ import annotations

import warnings
from pathlib import Path

import numpy as np
import pandas as pd

from neuron_profiler.exporters.chrome import export_chrome
from neuron_profiler.hardware import neuron_device
from neuron_profiler.importers.kineto import load_kineto_builder
from neuron_profiler.trace import FORMAT_VERSION, TraceBuilder, make_header, read_trace
from neuron_profiler.trace.columns import columns_of

REPO = Path(__file__).resolve().parents[2]
T0 = 1_700_000_000_000_000_000
ROWS = {"start_ts": [T0, T0 + 100, T0 + 250], "duration_ns": [300, 50, 1000], "buffer": ["SBUF", "PSUM", "SBUF"],
        "partition": [0, 0, 64], "num_partitions": [128, 128, 64], "start_address": [0, 2048, 4096],
        "end_address": [4096, 4096, 200704], "tensor_name": ["mm.in0, mm.in1 -> mm.out", "mm.out accumulator",
                                                            "mm resident operand"],
        "tensor_kind": ["tiles", "accumulator", "resident"], "spill": [0, 0, 1], "framework_op": [0, 0, -1]}


def _write(path: Path) -> Path:
    h = make_header("tests", simulated=True)
    h.devices.append(neuron_device("trn2", 0, simulated=True))
    b = TraceBuilder(h)
    th = b.add_track("thread", "main", pid=1, tid=1)
    core = b.add_track("core", "nc0", b.add_track("device", "Trainium2 0", device=0), device=0, nc_idx=0)
    b.add_rows("host_ops", {"track": th, "name": ["aten::mm"], "category": "cpu_op", "start_ts": [T0],
                            "duration_ns": [400]})
    b.add_rows("allocations", {"track": core, **ROWS})
    return b.write(path)


def _expected(tf) -> pd.DataFrame:
    core = int(tf.table("tracks").index[tf.table("tracks")["kind"].astype(str) == "core"][0])
    return pd.DataFrame({"track": core, **ROWS})


def _same(got: pd.DataFrame, want: pd.DataFrame) -> None:
    assert list(got.columns) == list(columns_of("allocations"))
    for c in want.columns:
        assert [str(x) if isinstance(x, str) else int(x) for x in got[c].astype(object)] == \
            [str(x) if isinstance(x, str) else int(x) for x in want[c]], c


def test_allocations_round_trip_exactly(tmp_path):
    tf = read_trace(_write(tmp_path / "a.nprof"))
    assert f"{tf.header.format_major}.{tf.header.format_minor}" == FORMAT_VERSION == "2.3"
    assert tf.row_counts["allocations"] == 3
    _same(tf.table("allocations"), _expected(tf))
    # rows overlapping a window (the index gives each row's id)
    w = tf.table("allocations", start_ns=T0 + 320, end_ns=T0 + 400)
    assert list(w.index) == [2]


def test_allocations_survive_the_chrome_round_trip(tmp_path):
    src = _write(tmp_path / "a.nprof")
    out = export_chrome(src, tmp_path / "a.json")
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        b = load_kineto_builder(out)
    back = read_trace(b.write(tmp_path / "back.nprof"))
    got = back.table("allocations")
    assert len(got) == 3
    want = _expected(back)
    want["track"] = got["track"].to_numpy()  # track rows are renumbered by the import; the kind is checked below
    _same(got, want)
    assert (back.table("tracks").loc[got["track"], "kind"].astype(str) == "core").all()


def test_a_2_2_file_reads_an_empty_allocations_table():
    tf = read_trace(REPO / "tests" / "data" / "format_2_2" / "cnn_inference.nprof")
    assert (tf.header.format_major, tf.header.format_minor) == (2, 2)
    a = tf.table("allocations")
    assert len(a) == 0 and list(a.columns) == list(columns_of("allocations"))
    assert np.issubdtype(a["start_ts"].dtype, np.integer)


def test_neuron_explorer_memory_tables_are_imported(tmp_path):
    """``SbufAllocation`` -> allocations, ``SystemProfileHbmUsage`` -> HBM Usage counters (summed over stacks),
    ``SystemProfileMetadata.hbm_capacity_bytes`` -> the device's capacity when the table had none."""
    import sys

    import pytest

    pa = pytest.importorskip("pyarrow")
    import pyarrow.parquet as pq

    sys.path.insert(0, str(Path(__file__).parent))
    import explorer_fixture as fx

    import analysis
    from neuron_profiler.importers.neuron_explorer import load_parquet_profile

    d = fx.write_parquet_profile(tmp_path / "src")
    t0 = fx.T0
    pq.write_table(pa.Table.from_pylist([
        {"start_ts": t0, "end_ts": t0 + 500, "start_address": 0, "end_address": 8192, "partition": 3,
         "op_source_type": "dma", "opcode": "", "operands": "", "queue_name": "qSyncIO0", "block_id": 1,
         "tensor_name": "x", "hlo_name": "dot.1", "pcore_idx": 1},
        {"start_ts": t0 + 100, "end_ts": t0 + 900, "start_address": 8192, "end_address": 12288, "partition": 3,
         "op_source_type": "dma", "opcode": "", "operands": "", "queue_name": "qSyncSpillReload0", "block_id": 2,
         "tensor_name": "", "hlo_name": "dot.2", "pcore_idx": 0}]), d / "SbufAllocation.parquet")
    pq.write_table(pa.Table.from_pylist([
        {"timestamp": t0 + ts, "total_bytes": tot, "weights_bytes": w, "hbm_idx": h, "device_idx": 0}
        for ts, tot, w, h in ((0, 100, 60, 0), (0, 50, 40, 1), (1000, 300, 60, 0), (1000, 50, 40, 1))]),
        d / "SystemProfileHbmUsage.parquet")
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        path = load_parquet_profile(d).write(tmp_path / "ne.nprof")
    tf = read_trace(path)
    a = tf.table("allocations")
    assert list(a["tensor_name"].astype(str)) == ["x", "dot.2"] and list(a["spill"]) == [0, 1]
    assert list(a["duration_ns"]) == [500, 800] and list(a["end_address"]) == [8192, 12288]
    assert list(a["partition"]) == [3, 3] and list(a["num_partitions"]) == [1, 1]
    h = analysis.load(path).hbm_usage()
    tot = h[h["kind"] == "total"]
    assert list(tot["bytes"]) == [150.0, 350.0] and list(h[h["kind"] == "weights"]["bytes"]) == [100.0, 100.0]
