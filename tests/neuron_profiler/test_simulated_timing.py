"""Simulated NeuronCore, inside a kernel: engine costs, DMA efficiency, tiling, concurrency, semaphores, PSUM, SBUF."""
import math

import numpy as np
import pytest

from neuron_profiler.hardware import engine_clock_hz, model_param, neuron_spec
from neuron_profiler.opmodel import lower_signature
from neuron_profiler.runtime.simulated import dma, engines
from neuron_profiler.runtime.simulated.kernels import kernel_plan
from neuron_profiler.runtime.simulated.params import CoreParams
from neuron_profiler.runtime.simulated.pipeline import schedule_kernel
from neuron_profiler.runtime.simulated.synthetic import op, random_op_stream, simulate
from neuron_profiler.runtime.simulated.tiles import matmul_blocking, tile_groups

BF = "c10::BFloat16"
P2 = CoreParams.for_target("trn2")


def _template(name, shapes, dtypes, p=P2):
    import json
    w = lower_signature(name, json.dumps(shapes), json.dumps(dtypes))
    return schedule_kernel(kernel_plan(w, name, p), p)


def _busy(t, engine):
    m = (t.engine == engine) & (t.opcode != "SemaphoreWait")
    return int(t.dur[m].sum())


def test_matmul_instruction_cost_is_max_cols_64_cycles_at_the_dtype_rate():
    clock = engine_clock_hz("trn2", "Tensor")
    assert engines.matmul_ns(1, 512, "bfloat16", P2) == pytest.approx(512 / clock * 1e9)
    assert engines.matmul_ns(1, 16, "bfloat16", P2) == pytest.approx(64 / clock * 1e9)  # initiation interval
    assert engines.matmul_ns(10, 512, "float32", P2) == pytest.approx(4 * engines.matmul_ns(10, 512, "bfloat16", P2))
    bf16 = engines.matmul_ns(1, 512, "bfloat16", P2)
    assert engines.matmul_ns(1, 512, "fp8", P2) == pytest.approx(bf16 / 2, rel=1e-3)
    p1 = CoreParams.for_target("trn1")
    assert engines.matmul_ns(1, 512, "fp8", p1) == pytest.approx(engines.matmul_ns(1, 512, "bfloat16", p1))


@pytest.mark.parametrize("target", ["trn1", "trn2", "trn3"])
def test_big_bf16_matmul_is_tensor_bound_near_peak(target):
    p = CoreParams.for_target(target)
    t = _template("aten::mm", [[4096, 4096], [4096, 4096]], [BF, BF], p)
    ideal = 2 * 4096 ** 3 / neuron_spec(target).peak_flops_per_s["bfloat16"] * 1e9
    assert _busy(t, "TensorMatrix") == pytest.approx(ideal, rel=1e-3)
    assert ideal <= t.duration <= 1.08 * ideal
    assert int(t.flops[t.opcode == "MATMUL"].sum()) == pytest.approx(2 * 4096 ** 3, rel=1e-6)


def test_vector_cost_and_bf16_performance_modes():
    clock = engine_clock_hz("trn2", "Vector")
    over = model_param("vector_fixed_overhead_cycles")
    assert engines.vector_ns(1, 1024, 2, "float32", P2) == pytest.approx((2048 + over) / clock * 1e9)
    assert engines.vector_ns(1, 1024, 2, "bfloat16", P2) == pytest.approx((1024 + over) / clock * 1e9)  # 2x
    assert engines.vector_ns(1, 1024, 1, "bfloat16", P2) == pytest.approx((256 + over) / clock * 1e9)   # 4x
    p1 = CoreParams.for_target("trn1")  # no performance modes on NC-v2
    assert engines.vector_ns(1, 1024, 2, "bfloat16", p1) == pytest.approx(
        (2048 + over) / engine_clock_hz("trn1", "Vector") * 1e9)
    t = _template("aten::add", [[4096, 4096], [4096, 4096], []], [BF, BF, "Scalar"])
    modes = {a for a, o in zip(t.args, t.opcode) if o == "TensorTensor"}
    assert all('"performance_mode": "2x"' in a for a in modes)


def test_dma_efficiency_curve_knee_and_hbm_cap():
    eff = lambda s: dma.efficiency(s, P2)  # noqa: E731
    assert eff(512) < 0.3 < 0.5 < eff(2048) < 0.8 < 0.85 <= eff(4096) and eff(65536) > 0.99
    assert all(eff(a) < eff(b) for a, b in zip([256, 1024, 4096, 16384], [1024, 4096, 16384, 65536]))
    # per-core rate: 16 DMA engines, capped by the core's share of chip HBM when all 8 cores run
    assert dma.rate_bytes_per_s(1 << 20, P2) == pytest.approx(P2.dma_bytes_per_s * eff(1 << 20))
    p8 = CoreParams.for_target("trn2", active_cores=8)
    assert p8.hbm_share_bytes_per_s == pytest.approx(2.9e12 / 8)
    assert dma.rate_bytes_per_s(1 << 20, p8) <= 2.9e12 / 8
    assert neuron_spec("trn2").hbm_bandwidth_per_core_bytes_per_s == pytest.approx(362.5e9)


def test_elementwise_on_large_tensors_is_dma_bound_and_small_ones_pay_small_descriptors():
    t = _template("aten::add", [[8192, 8192], [8192, 8192], []], [BF, BF, "Scalar"])
    moved = 3 * 8192 * 8192 * 2
    assert t.duration == pytest.approx(moved / P2.hbm_bytes_per_s * 1e9, rel=0.06)
    assert _busy(t, "Vector") < 0.7 * t.duration
    small = _template("aten::add", [[64, 256], [64, 256], []], [BF, BF, "Scalar"])
    per_byte_small = small.d_dur.sum() / small.d_bytes.sum()
    per_byte_big = t.d_dur.max() / t.d_bytes[np.argmax(t.d_dur)]
    assert per_byte_small > 3 * per_byte_big


def test_engines_run_concurrently_and_dma_overlaps_compute_inside_a_matmul():
    t = _template("aten::mm", [[2048, 2048], [2048, 2048]], [BF, BF])
    busy = (t.opcode != "SemaphoreWait") & (t.opcode != "DmaTrigger")
    edges = np.unique(np.concatenate([t.start, t.start + t.dur, t.d_start, t.d_start + t.d_dur]))
    mids = (edges[:-1] + edges[1:]) / 2
    width = np.diff(edges)
    def active(starts, durs):
        return ((starts[None, :] <= mids[:, None]) & (mids[:, None] < (starts + durs)[None, :])).any(axis=1)
    per_engine = np.stack([active(t.start[busy & (t.engine == e)], t.dur[busy & (t.engine == e)])
                           for e in ("Tensor", "TensorMatrix", "Vector", "Scalar")])
    assert width[per_engine.sum(axis=0) >= 2].sum() > 0.05 * t.duration  # two or more engines at once
    dma_on = active(t.d_start, t.d_dur)
    mm_on = per_engine[1]
    assert width[dma_on & mm_on].sum() > 0  # input DMA of later tiles overlaps the MultiplyMoving of earlier
    # no two instructions of one engine overlap
    for e in set(t.engine):
        m = t.engine == e
        o = np.argsort(t.start[m])
        s, d = t.start[m][o], t.dur[m][o]
        assert (s[1:] >= (s + d)[:-1]).all(), e


def test_semaphore_waits_are_events_linked_to_what_they_waited_for():
    b = simulate([op("aten::mm", 0, 100, [[2048, 2048], [2048, 2048]], [BF, BF])])
    ins, flows = b.table("instructions"), b.table("flows")
    waits = ins[ins.opcode == "SemaphoreWait"]
    assert len(waits) > 0 and (waits.duration_ns >= model_param("semaphore_wait_min_ns")).all()
    dep = flows[flows.kind == "dependency"]
    assert len(dep) > 0 and set(dep.dst_table) == {"instructions"} and set(dep.src_table) <= {"instructions", "dma"}
    assert (ins.loc[dep.dst_row, "opcode"] == "SemaphoreWait").all()
    for row in dep.itertuples():  # the wait ends once what it waited for started producing
        src = b.table(row.src_table).loc[row.src_row]
        assert src.start_ts <= ins.loc[row.dst_row, "start_ts"] + ins.loc[row.dst_row, "duration_ns"]


def test_psum_accumulation_and_evacuation_alternating_vector_and_scalar():
    k = 2048
    t = _template("aten::mm", [[1024, k], [k, 2048]], [BF, BF])
    mm = t.opcode == "MATMUL"
    out_fp32 = 1024 * 2048 * 4
    kt = k // 128
    assert int(t.psum_write[mm].sum()) == pytest.approx(out_fp32 * kt, rel=1e-6)       # every K step writes
    assert int(t.psum_read[mm].sum()) == pytest.approx(out_fp32 * (kt - 1), rel=1e-6)  # accumulating reads
    evac = np.isin(t.opcode, ["TensorCopy", "ACTIVATE"]) & np.isin(t.engine, ["Vector", "Scalar"])
    assert int(t.psum_read[evac].sum()) == pytest.approx(out_fp32, rel=1e-6)
    assert {"Vector", "Scalar"} <= set(t.engine[evac])
    assert len(t.psum_seg) and (t.psum_seg[:, 2] <= P2.psum_bytes).all()


def test_matmul_blocking_keeps_the_slab_that_fits_and_reloads_the_rest():
    budget = P2.sbuf_bytes * P2.sbuf_usable_fraction * 0.5
    b = matmul_blocking(1, 4096, 4096, 4096, 2, 2, budget)
    assert b.slab_bytes <= budget and b.passes == math.ceil(4096 / b.block_n)
    assert b.reload_bytes == b.a_bytes * (b.passes - 1)
    small = matmul_blocking(1, 512, 512, 512, 2, 2, budget)
    assert small.passes == 1 and small.reload_bytes == 0
    t = _template("aten::mm", [[4096, 4096], [4096, 4096]], [BF, BF])
    assert "qSyncSpillReload0" in set(t.d_queue)
    assert int(t.d_bytes[t.d_queue == "qSyncSpillReload0"].sum()) == pytest.approx(b.reload_bytes, rel=1e-6)


def test_tile_groups_cover_every_tile_with_single_tiles_at_both_ends():
    for n in (1, 5, 12, 13, 100, 8192, 10 ** 6):
        g = tile_groups(n, 12)
        assert sum(g) == n and len(g) <= 12 and min(g) >= 1
        if n > 12:
            assert g[0] == g[-1] == 1


def test_attention_uses_tensor_engine_transposes_and_both_matmuls():
    t = _template("aten::_scaled_dot_product_flash_attention_for_cpu",
                  [[4, 8, 512, 64], [4, 8, 512, 64], [4, 8, 512, 64]], [BF] * 3)
    assert (t.opcode == "TRANSPOSE").any() and t.transpose[t.opcode == "TRANSPOSE"].all()
    assert {"MATMUL", "TRANSPOSE", "ACTIVATE", "TensorReduce"} <= set(t.opcode)
    assert int(t.flops[t.opcode == "MATMUL"].sum()) == pytest.approx(4 * 32 * 512 * 512 * 64, rel=1e-6)


def test_sbuf_occupancy_counter_within_capacity_and_reported():
    b = simulate(random_op_stream(200, gap_ns=0))
    tracks, c = b.table("tracks"), b.table("counters")
    by = {str(tracks.name[t]): g for t, g in c.groupby("track")}
    for name in ("State Buffer Usage", "PSUM Usage"):
        v = by[name].value
        assert v.max() > 0 and v.between(0, 100).all(), name


def test_no_overlap_within_a_track_on_a_mixed_stream():
    b = simulate(random_op_stream(300, gap_ns=0))
    t = b.table("instructions").sort_values(["track", "start_ts"])
    same = t.track.to_numpy()[1:] == t.track.to_numpy()[:-1]
    end = (t.start_ts + t.duration_ns).to_numpy()
    assert (t.start_ts.to_numpy()[1:][same] >= end[:-1][same]).all()
    assert (t.duration_ns > 0).all() and (b.table("dma").duration_ns > 0).all()


def test_kernels_run_in_order_on_the_core_and_never_before_their_launch():
    b = simulate(random_op_stream(100, gap_ns=0))
    ins, d, host = b.table("instructions"), b.table("dma"), b.table("host_ops")
    span = {}
    for t in (ins, d):
        g = t.assign(end=t.start_ts + t.duration_ns).groupby("framework_op")
        for fo, s, e in zip(g.start_ts.min().index, g.start_ts.min(), g.end.max()):
            a, z = span.get(fo, (s, e))
            span[fo] = (min(a, s), max(z, e))
    ops = sorted(span)
    for a, c in zip(ops, ops[1:]):
        assert span[a][1] <= span[c][0]  # eager: one program at a time on the core
    for fo, (s, _) in span.items():
        assert s >= host.start_ts[fo] + host.duration_ns[fo]  # after its (projected) launch


def test_pooling_stores_its_smaller_output_in_long_descriptors():
    """A 2x2 max-pool of [16, 32, 64, 64] fp32 (8 MiB in; 2 MiB of values + 4 MiB of int64 indices out) streams
    like any elementwise op: its store descriptors carry a quarter of each input tile, not one element (which
    made the kernel ~190x slower than the same op priced without its window)."""
    p = CoreParams.for_target("trn2")
    sh = "[[16,32,64,64],[],[],[],[],[]]"
    dt = '["float","ScalarList","ScalarList","ScalarList","ScalarList","Scalar"]'
    with_window = lower_signature("aten::max_pool2d_with_indices", sh, dt, 0, ["", "[2, 2]", "[2, 2]", "[0, 0]",
                                                                               "[1, 1]", "false"])
    without = lower_signature("aten::max_pool2d_with_indices", sh, dt, 0)
    assert with_window.write_bytes == 16 * 32 * 32 * 32 * (4 + 8) and with_window.bytes_known
    plan = kernel_plan(with_window, "aten::max_pool2d_with_indices", p)
    stores = [s for g in plan.groups for s in g.stages if s.opcode == "store"]
    assert stores and min(d for s in stores for _q, _b, d, _v in s.dma_parts()) >= 512
    t_with = schedule_kernel(plan, p).duration
    t_without = schedule_kernel(kernel_plan(without, "aten::max_pool2d_with_indices", p), p).duration
    assert t_with <= t_without  # it moves 14 MiB instead of 16 MiB
