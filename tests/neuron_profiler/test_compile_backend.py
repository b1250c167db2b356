"""torch.compile(model, backend="neuron"): graphs recorded, one device launch per graph call, fused kernels."""
import tempfile

import numpy as np
import pytest
import torch

import neuron_profiler
from neuron_profiler.compile import registry
from neuron_profiler.trace import read_trace

pytestmark = pytest.mark.slow  # AOT autograd tracing takes a few seconds


class MLP(torch.nn.Module):
    def __init__(self) -> None:
        super().__init__()
        self.up = torch.nn.Linear(256, 1024)
        self.down = torch.nn.Linear(1024, 256)
        self.norm = torch.nn.LayerNorm(256)

    def forward(self, x):
        h = torch.nn.functional.gelu(self.up(self.norm(x)))
        return (self.down(h) * 0.5 + x).relu()


def _capture(compiled: bool, autocast: bool = True, **config):
    torch.manual_seed(0)
    model = MLP()
    x = torch.randn(512, 256)
    step = torch.compile(model, backend="neuron") if compiled else model
    out = tempfile.mkdtemp()
    with neuron_profiler.profile(profile_output_dir=out, run_id="c", runtime="simulated", **config,
                                 schedule=torch.profiler.schedule(wait=0, warmup=1, active=1)) as p:
        for _ in range(2):
            with torch.autocast("cpu", dtype=torch.bfloat16, enabled=autocast):
                step(x).sum().backward()
            p.step()
    return read_trace(p.neuron_profiler.paths[0])


@pytest.fixture(scope="module")
def traces():
    return _capture(False), _capture(True)


def test_backend_is_registered_through_the_entry_point():
    from torch._dynamo.backends.registry import list_backends
    assert "neuron" in list_backends(exclude_tags=())


def test_compiled_graph_is_one_launch_with_its_ops_as_parts(traces):
    eager, comp = traces
    h = comp.table("host_ops")
    calls = h[h["name"].astype(str).str.startswith(registry.GRAPH_PREFIX)]
    assert len(calls) == 2  # forward and backward graph
    progs = registry.parse_programs(comp.footer_metadata[registry.GRAPHS_KEY])
    assert {n.split(" ", 1)[1] for n in calls["name"].astype(str)} == set(progs)
    # the host pays one graph launch per call, not one launch per op
    from neuron_profiler.hardware import host_model_params
    assert (calls["duration_ns"] == host_model_params()["graph_launch_ns"][0]).all()
    ins = comp.table("instructions")
    inner = ins[ins["framework_op"].isin(h.index[h["name"].astype(str) == "aten::addmm"])]
    assert len(inner) > 0 and set(inner["name"].astype(str)) == {"aten::addmm"}  # events name their graph node


def test_compiled_profile_moves_less_and_launches_fewer_programs(traces):
    eager, comp = traces

    def device(tf):
        ins, d = tf.table("instructions"), tf.table("dma")
        busy = ins[~ins["opcode"].astype(str).isin(["SemaphoreWait", "DmaTrigger"])]
        span = max((d.start_ts + d.duration_ns).max(), (ins.start_ts + ins.duration_ns).max()) - min(
            d.start_ts.min(), ins.start_ts.min())
        return d["transfer_bytes"].sum(), ins["framework_op"].nunique(), busy, span
    e_bytes, e_ops, e_busy, e_span = device(eager)
    c_bytes, c_ops, c_busy, c_span = device(comp)
    assert c_bytes < 0.8 * e_bytes                      # intermediates stay in SBUF
    eager_launch = len(eager.table("flows").query("kind == 'launch'"))
    comp_launch = len(comp.table("flows").query("kind == 'launch'"))
    assert comp_launch <= eager_launch / 2              # one launch per graph (+ the eager grad accumulation)
    assert c_span < e_span                              # back-to-back fused work on the core
    occ = lambda busy, span: busy.groupby("engine").duration_ns.sum().sum() / span  # noqa: E731
    assert occ(c_busy, c_span) > occ(e_busy, e_span)    # higher engine occupancy
    assert c_ops > 1 and e_ops > 1 and np.isfinite(c_span)


def test_compiled_instructions_carry_their_graph_nodes_dtype(traces):
    """A compiled graph has no single dtype: each instruction carries the dtype of the graph node it came from
    (they were all empty), the same as the eager run's instructions of that op (oracle: the eager trace)."""
    eager, comp = traces
    ins, h = comp.table("instructions"), comp.table("host_ops")
    dt = ins["dtype"].astype(str)
    assert (dt != "").all(), ins.loc[dt == "", ["engine", "opcode", "name"]].value_counts().head()
    e_ins, e_h = eager.table("instructions"), eager.table("host_ops")
    want = e_ins.assign(op=e_h["name"].astype(str).reindex(e_ins["framework_op"]).to_numpy()) \
        .groupby("op")["dtype"].agg(lambda s: set(s.astype(str)))
    got = ins.assign(op=h["name"].astype(str).reindex(ins["framework_op"]).to_numpy()) \
        .groupby("op")["dtype"].agg(lambda s: set(s.astype(str)))
    both = [op for op in ("aten::addmm", "aten::mm", "aten::gelu", "aten::native_layer_norm", "aten::add")
            if op in want.index and op in got.index]
    assert len(both) >= 3, both
    for op in both:
        assert got[op] <= want[op], (op, got[op], want[op])
    assert "bfloat16" in set(dt[ins["name"].astype(str) == "aten::addmm"])  # under autocast


def _mfu_flops_ratio(t) -> float:
    """Integral of the Estimated Instant MFU counter (percent x s) per raw matmul FLOP of the trace."""
    tracks, c, ins = t.table("tracks"), t.table("counters"), t.table("instructions")
    tid = tracks.index[(tracks.kind == "counter") & (tracks.name.astype(str) == "Estimated Instant MFU")]
    g = c[c.track.isin(tid)].sort_values("ts")
    area = (g.value.to_numpy()[:-1] * np.diff(g.ts.to_numpy()) * 1e-9).sum()
    return area / ins.loc[ins.opcode.astype(str) == "MATMUL", "raw_flops"].sum()


def test_compiled_fp32_matmuls_count_at_their_dtypes_rate_in_instant_mfu():
    """Instant MFU weighs each matmul's FLOPs by its dtype's multiplier (FP32 x4 on trn1). A compiled graph has no
    dtype of its own, so its FP32 matmuls counted x1; oracle: the eager FP32 run, same FLOPs, same weight."""
    eager, comp = _capture(False, autocast=False), _capture(True, autocast=False)
    assert set(comp.table("instructions").query("opcode == 'MATMUL'")["dtype"].astype(str)) == {"float32"}
    assert _mfu_flops_ratio(comp) == pytest.approx(_mfu_flops_ratio(eager), rel=1e-3)


def test_auto_cast_fp32_matmuls_count_at_the_bf16_rate_in_instant_mfu():
    """Under --auto-cast matmult an FP32 matmul multiplies at the BF16 rate, so Instant MFU weighs it x1, not
    FP32's x4; oracle: the BF16 (autocast) run of the same model, the same area per matmul FLOP."""
    auto = _capture(False, autocast=False, auto_cast="matmult")
    assert set(auto.table("instructions").query("opcode == 'MATMUL'")["dtype"].astype(str)) == {"float32"}
    assert _mfu_flops_ratio(auto) == pytest.approx(_mfu_flops_ratio(_capture(False)), rel=1e-3)
