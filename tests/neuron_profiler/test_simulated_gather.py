"""Gathers and embedding lookups priced from their table's real shape: the rows they fetch (indices x row
width), not the whole table; fbgemm's table-batched lookups (one flattened 1-D weights tensor) included."""
from __future__ import annotations

import json

import numpy as np
import pytest
from realdata import real_trace

from neuron_profiler.opmodel import lower_signature
from neuron_profiler.projection import project_trace
from neuron_profiler.runtime.simulated.gathers import gather_geometry
from neuron_profiler.runtime.simulated.kernels import kernel_plan
from neuron_profiler.runtime.simulated.params import CoreParams
from neuron_profiler.runtime.simulated.synthetic import op, simulate

DLRM = "HolisticTraceAnalysis/trace_filter/sampled_rank-0.json.gz"
TBE = "fbgemm::split_embedding_codegen_lookup_rowwise_adagrad_function"
P2 = CoreParams.for_target("trn2")


@pytest.fixture(scope="module")
def dlrm():
    return project_trace(real_trace(DLRM), "trn2")


def _shapes(row) -> list:
    return json.loads(str(row["input_shapes"]))


@pytest.mark.slow
def test_dlrm_embedding_lookups_move_indices_times_row_width(dlrm):
    host, d = dlrm.table("host_ops"), dlrm.table("dma")
    lookups = host[host["name"].astype(str) == TBE]
    assert len(lookups) == 4
    for pos, row in lookups.iterrows():
        shapes = _shapes(row)
        weights, indices, offsets, rowwise_state = shapes[1][0], shapes[11][0], shapes[12][0], shapes[20][0]
        width = weights // rowwise_state          # 7722480160 / 48265501 = 160 elements (exact)
        assert width * rowwise_state == weights and width == 160
        mine = d[d["framework_op"] == pos]
        gathered = mine[mine["queue_type"].astype(str) == "software_dynamic"]["transfer_bytes"].sum()
        assert gathered == pytest.approx(indices * width * 2, rel=1e-6)  # FP16 rows, not the 15.4 GB table
        pooled = mine[mine["dest"].astype(str) == "HBM"]["transfer_bytes"].sum()
        assert pooled == (offsets - 1) * width * 4  # one FP32 row per bag (table x sample)


@pytest.mark.slow
def test_dlrm_projected_step_is_of_the_order_of_its_gpu_step(dlrm):
    """Before: 89.8 s per step (each lookup read its whole table as one row). The GPU measured 0.61 s."""
    host = dlrm.table("host_ops")
    steps = host[host["name"].astype(str).str.startswith("ProfilerStep#")]
    measured = steps["measured_duration_ns"].to_numpy(np.float64)
    projected = steps["duration_ns"].to_numpy(np.float64)
    assert (projected < 3 * measured).all() and (projected > measured / 10).all()


def test_embedding_bag_reads_the_rows_of_its_bags_and_writes_one_row_per_bag():
    shapes, dtypes = [[1_000_000, 128], [40_960], [1025]], ["float", "long int", "long int"]
    w = lower_signature("aten::_embedding_bag", json.dumps(shapes), json.dumps(dtypes))
    g = gather_geometry(w, "_embedding_bag")
    assert (g.lookups, g.row, g.elem, g.out_rows) == (40_960, 128, 4, 1024)
    b = simulate([op("aten::_embedding_bag", 0, 100, shapes, dtypes)])
    d = b.table("dma")
    read = d[d["queue_type"].astype(str) == "software_dynamic"]["transfer_bytes"].sum()
    written = d[d["dest"].astype(str) == "HBM"]["transfer_bytes"].sum()
    assert read == 40_960 * 128 * 4 and written == 1024 * 128 * 4  # not the 512 MB table


def test_a_small_table_is_gathered_in_sbuf_in_long_descriptors():
    # aten::gather(self[50], dim, index[8.8M]) as in the DLRM trace: element gathers from a 200-byte table
    w = lower_signature("aten::gather", json.dumps([[50], [], [8_856_548], []]),
                        json.dumps(["float", "Scalar", "long", "Scalar"]))
    plan = kernel_plan(w, "aten::gather", P2)
    dma = [s for g in plan.groups for s in g.stages if s.engine == "DMA"]
    assert not any(s.queue == "qGpSimdDynamic" for s in dma)  # no indirect DMA
    moved = sum(s.nbytes for s in dma)
    assert moved == pytest.approx(8_856_548 * (8 + 4) + 200, rel=1e-6)  # indices in, values out, the table once
    assert min(p[2] for s in dma for p in s.dma_parts() if p[1] > 1000) >= 2048  # long descriptors


def _hbm_reads(b) -> tuple[int, int]:
    """(HBM bytes the instructions read, bytes the DMA rows move out of HBM)."""
    ins, d = b.table("instructions"), b.table("dma")
    return int(ins["hbm_read_bytes"].sum()), int(d.loc[d["source"].astype(str) == "HBM", "transfer_bytes"].sum())


def test_embedding_backward_scatter_reads_from_hbm_only_what_its_dma_rows_move():
    """Before: the scatter claimed 4 MiB of HBM reads on an SBUF -> HBM row and never loaded its gradient rows
    (GPT sample: 4,194,304 instruction HBM bytes per backward with no DMA row from HBM)."""
    shapes = [[8, 256, 512], [8, 256], [], [], []]
    dtypes = ["float", "long int", "Scalar", "Scalar", "Scalar"]
    b = simulate([op("aten::embedding_dense_backward", 0, 100, shapes, dtypes)])
    rows = 8 * 256 * 512 * 4                      # 2048 gradient rows of 512 FP32
    instr, from_hbm = _hbm_reads(b)
    # indices + gradient rows in, destination rows gathered for the read-modify-write
    assert instr == from_hbm == 2048 * 8 + rows + rows
    d = b.table("dma")
    assert d.loc[d["dest"].astype(str) == "HBM", "transfer_bytes"].sum() == rows  # rows scattered back


def test_fractional_tile_bytes_agree_to_the_byte_between_triggers_and_dma_rows():
    """A weight split over tiles in fractional bytes (GPT's c_attn: 1.5 MiB over 4/8/16-way groups) is rounded
    once per transfer, so its triggers and DMA rows agree exactly (before: 8 bytes apart per call)."""
    shapes, dtypes = [[1536], [2048, 512], [512, 1536], [], []], ["c10::BFloat16"] * 3 + ["Scalar"] * 2
    b = simulate([op("aten::addmm", 0, 100, shapes, dtypes)])
    instr, from_hbm = _hbm_reads(b)
    assert instr == from_hbm > 512 * 1536 * 2
