"""Every op of a training step priced, and dry runs on meta and fake tensors that stand for the real run
(issue 22): tensor-list ops (``_foreach_*``, fused optimizers, ``cat``) carry their list shapes and dtypes,
host-only checks are not kernels, autocast applies on meta tensors as on fake ones."""
import json
import sys
from pathlib import Path

import pytest
import torch

from neuron_profiler.capture.host_ops import extract_host_ops, kineto_events
from neuron_profiler.opmodel import classify, known_no_work, lower_signature

sys.path.insert(0, str(Path(__file__).resolve().parent))
from dryrun_models import BertConfig, Decoder, Lamb, device_time_ns, profiled_step  # noqa: E402

BF = "c10::BFloat16"


def _ops(fn):
    with torch.profiler.profile(record_shapes=True) as p:
        fn()
    return {o["name"]: o for o in extract_host_ops(kineto_events(p))}


def test_tensor_list_shapes_and_element_dtype_are_recorded():
    a = [torch.ones(3, 4, dtype=torch.bfloat16), torch.ones(5, 4, dtype=torch.bfloat16)]
    ops = _ops(lambda: (torch.cat([a[0], a[0]]), torch._foreach_add_(a, 1.0)))
    fe = ops["aten::_foreach_add_"]
    assert json.loads(fe["input_shapes"])[0] == [[3, 4], [5, 4]]
    assert json.loads(fe["input_dtypes"])[0] == "c10::BFloat16"  # from its per-tensor children
    w = lower_signature("aten::_foreach_add_", fe["input_shapes"], fe["input_dtypes"])
    assert w.cls == "vector" and w.flops == 32 and w.bytes_known  # 12 + 20 elements, one add each
    assert (w.read_bytes, w.write_bytes) == (64, 64)
    cat = ops["aten::cat"]
    assert json.loads(cat["input_shapes"])[0] == [[3, 4], [3, 4]]
    w = lower_signature("aten::cat", cat["input_shapes"], cat["input_dtypes"])
    assert w.cls == "copy" and w.out_elems == 24


def test_fused_adamw_is_priced_from_its_lists():
    shapes = [[[4, 8], [8]]] * 4 + [[], [[], []]]
    dtypes = ["float"] * 4 + ["TensorList(empty)", "float"]
    w = lower_signature("aten::_fused_adamw_", json.dumps(shapes), json.dumps(dtypes))
    n = 40
    assert w.cls == "vector" and w.flops == 12 * n
    # read params, grads, m, v (+ two 0-dim steps); write params, m, v
    assert w.read_bytes == 4 * n * 4 + 2 * 4 and w.write_bytes == 3 * n * 4


def test_host_only_checks_are_not_kernels():
    for name in ("aten::_debug_has_internal_overlap", "aten::_fused_sdp_choice", "aten::_assert_async",
                 "aten::is_contiguous", "aten::_assert_tensor_metadata"):
        assert classify(name) == "none" and known_no_work(name), name
    assert classify("aten::fill_") == "fill"


def test_an_op_on_empty_tensors_is_known_to_do_nothing():
    # a fill_ or copy_ of a zero-element tensor was "unpriced" while its other calls had device time
    for name, shapes, dtypes in (("aten::fill_", [[0], []], ["float", "Scalar"]),
                                 ("aten::copy_", [[0], [0], []], ["float", "float", "Scalar"])):
        w = lower_signature(name, json.dumps(shapes), json.dumps(dtypes))
        assert w.cls == "none" and w.flops_known and w.bytes_known and w.moved_bytes == 0
    assert lower_signature("aten::fill_", "[[4],[]]", '["float","Scalar"]').cls == "fill"


@pytest.mark.slow
@pytest.mark.parametrize("kind", ["fake", "meta"])
@pytest.mark.parametrize("opt", ["adamw", "lamb"])
def test_foreach_optimizer_is_priced_as_the_for_loop(tmp_path, kind, opt):
    c = BertConfig(hidden=1024, heads=16, layers=1, seq=32, batch=2)
    make = {"adamw": lambda f: (lambda p: torch.optim.AdamW(p, foreach=f)),
            "lamb": lambda f: (lambda p: Lamb(p, foreach=f))}[opt]
    fe = profiled_step(tmp_path / "fe", c, kind, make(True), optimizer_only=True)
    loop = profiled_step(tmp_path / "loop", c, kind, make(False), optimizer_only=True)
    assert list(fe.header.simulation.unpriced_ops) == []
    assert list(loop.header.simulation.unpriced_ops) == []
    names = set(fe.table("host_ops")["name"].astype(str))
    assert any(n.startswith("aten::_foreach_") for n in names)
    t_fe, t_loop = device_time_ns(fe), device_time_ns(loop)
    # every parameter element is read and written a few times: at least the bytes of p, g, m, v once
    params = 12 * c.hidden * c.hidden  # one layer's weights (embedding and head come on top)
    assert t_fe > params * 4 * 4 / 400e9 * 1e9
    assert abs(t_fe / t_loop - 1) < 0.10, (t_fe, t_loop)


def _matmul_dtypes(tf):
    ins = tf.table("instructions")
    return set(ins[ins["opcode"].astype(str) == "MATMUL"]["dtype"].astype(str))


def _launched(tf):
    h, f = tf.table("host_ops"), tf.table("flows")
    rows = f[f["kind"].astype(str) == "launch"]["src_row"].to_numpy()
    return set(h["name"].astype(str).to_numpy()[rows])


@pytest.fixture(scope="module")
def autocast_runs(tmp_path_factory):
    c = BertConfig(vocab=4096, hidden=1024, heads=16, layers=1, seq=128, batch=16)
    adamw = lambda p: torch.optim.AdamW(p, foreach=True)  # noqa: E731
    out = tmp_path_factory.mktemp("autocast")
    return (profiled_step(out / "fake", c, "fake", adamw, step=True),
            profiled_step(out / "meta", c, "meta", adamw, step=True))


@pytest.mark.slow
def test_autocast_prices_bf16_on_meta_with_the_kernels_of_fake(autocast_runs):
    fake, meta = autocast_runs
    assert (fake.footer_metadata["dry_run"], meta.footer_metadata["dry_run"]) == ("fake", "meta")
    assert _matmul_dtypes(meta) == {"bfloat16"}  # before: every matmul FP32 (autocast ignored on meta)
    for tf in (fake, meta):
        launched = _launched(tf)
        assert "aten::_scaled_dot_product_flash_attention_for_cpu" in launched  # not the math path
        assert "aten::bmm" not in launched
        assert not any("debug_has_internal_overlap" in n or "sdp_choice" in n for n in launched)
        assert list(tf.header.simulation.unpriced_ops) == []
        h = tf.table("host_ops")
        cats = h[h["name"].astype(str) == "aten::cat"]["input_dtypes"].astype(str)
        assert len(cats) and all(json.loads(d)[0] == BF for d in cats)  # the BF16 grads of the qkv split
    # the same step on meta and on fake tensors: before, meta priced every matmul FP32 and fake hid the
    # autocast casts inside aten::linear (~2.3x and ~6 % apart)
    assert abs(device_time_ns(meta) / device_time_ns(fake) - 1) < 0.02


@pytest.mark.slow
def test_autocast_step_time_is_the_same_on_meta_and_fake(autocast_runs):
    import analysis
    fake, meta = autocast_runs
    for tf in autocast_runs:
        assert _matmul_dtypes(tf) == {"bfloat16"}
    steps = [analysis.load(tf.path).steps()["duration_ns"].iloc[0] for tf in (fake, meta)]
    # the device's step, which the host's dispatch paces: before, the host ops that FakeTensorMode and
    # capture's dispatch mode record inside their handlers (re-dispatches, detach / empty_strided / set_ of
    # fake tensors, meta decompositions) cost host time, and the two steps were ~10 % apart (fake slower)
    assert abs(steps[1] / steps[0] - 1) < 0.02, steps
    assert steps[0] >= device_time_ns(fake)  # the step holds the device's work
    # the host's own cost of the program (dispatch + launches) is the same: before, fake ~1.6x meta
    costs = [_host_cost_ns(tf) for tf in autocast_runs]
    assert abs(costs[1] / costs[0] - 1) < 0.01, costs
    names = set(meta.table("host_ops")["name"].astype(str))
    assert {"neuron::dry_run linear", "neuron::dry_run scaled_dot_product_attention"} <= names


def _host_cost_ns(tf) -> float:
    """The projected host's cost of the window's ops themselves (``Program.self_ns``), waits excluded."""
    from neuron_profiler.runtime.simulated.params import CoreParams
    from neuron_profiler.runtime.simulated.program import extract_program
    h = tf.table("host_ops").copy()
    h["start_ts"], h["duration_ns"] = h["measured_start_ts"], h["measured_duration_ns"]
    return float(extract_program(h, CoreParams.for_target("trn1").host).self_ns.sum())


def test_a_dispatch_modes_work_costs_the_host_nothing_but_its_launch():
    from neuron_profiler.runtime.simulated.params import CoreParams
    from neuron_profiler.runtime.simulated.program import extract_program
    from neuron_profiler.runtime.simulated.synthetic import host_ops_builder, op
    host = CoreParams.for_target("trn1").host
    x, dt = [[256, 1024], [256, 1024], []], ["float", "float", "Scalar"]
    real = [op("aten::add", 0, 10_000, x, dt)]
    # the same call in a fake-tensor dry run: the recorder's and FakeTensorMode's handler ranges around the
    # re-dispatched op, the fake tensor's bookkeeping inside
    dry = [op("aten::add", 0, 10_000, x, dt), op("PythonDispatchMode", 100, 9_800, x, dt),
           op("aten::add", 200, 9_600, x, dt), op("PythonDispatchMode", 300, 9_400, x, dt),
           op("aten::empty_strided", 400, 500, [[], []], ["ScalarList", "ScalarList"]),
           op("aten::detach", 1_000, 500, [[256, 1024]], ["float"]),
           op("aten::set_", 1_600, 500, [[256, 1024]], ["float"]),
           op("PythonSubclass", 2_200, 3_000, [[256, 1024]], ["float"]),
           op("aten::as_strided", 2_300, 1_000, [[256, 1024]], ["float"])]
    progs = [extract_program(host_ops_builder(r).table("host_ops"), host) for r in (real, dry)]
    one_op = host["eager_op_dispatch_ns"] + host["kernel_launch_ns"]
    for prog in progs:
        assert (prog.kernel >= 0).sum() == 1
        assert prog.self_ns.sum() == one_op  # before: 4 + 4 + 12 + 3 x 4 + 4 us = 36 us for the dry run
    assert progs[1].self_ns[0] == host["eager_op_dispatch_ns"]  # the program's op pays the dispatch


def test_a_tensor_subclass_in_a_real_capture_keeps_its_dispatch_costs():
    """``PythonSubclass`` ranges also come from real programs (DTensor, FSDP2's sharded parameters): the local
    ops a subclass's handler dispatches from Python are the program's work on the device's host too, so outside
    a dispatch mode they keep their dispatch cost (only a dry run's modes cost nothing but launches)."""
    from neuron_profiler.runtime.simulated.params import CoreParams
    from neuron_profiler.runtime.simulated.program import extract_program
    from neuron_profiler.runtime.simulated.synthetic import host_ops_builder, op
    host = CoreParams.for_target("trn1").host
    x, dt = [[256, 1024], [256, 1024], []], ["float", "float", "Scalar"]
    dtensor = [op("aten::add", 0, 10_000, x, dt), op("PythonSubclass", 100, 9_800, x, dt),
               op("aten::add", 200, 9_600, x, dt)]
    prog = extract_program(host_ops_builder(dtensor).table("host_ops"), host)
    assert (prog.kernel >= 0).sum() == 1
    assert prog.self_ns[2] >= host["nested_op_dispatch_ns"] + host["kernel_launch_ns"]
    assert prog.self_ns.sum() > host["eager_op_dispatch_ns"] + host["kernel_launch_ns"]


def _cast_kernels(tf):
    h, f = tf.table("host_ops"), tf.table("flows")
    rows = f[f["kind"].astype(str) == "launch"]["src_row"].to_numpy()
    sub = h.iloc[rows]
    return sub[sub["name"].astype(str) == "aten::copy_"]["input_dtypes"].astype(str).tolist()


@pytest.mark.slow
def test_autocast_weight_casts_are_kernels(autocast_runs):
    c = BertConfig(vocab=4096, hidden=1024, heads=16, layers=1, seq=128, batch=16)
    for tf in autocast_runs:
        to_bf16 = [d for d in _cast_kernels(tf) if d.startswith('["c10::BFloat16","float"')]
        # every Linear's weight and bias (4 per layer + the head) is cast to BF16 once in the forward
        assert len(to_bf16) >= 2 * (4 * c.layers + 1)


@pytest.mark.slow
def test_meta_without_autocast_keeps_fp32(tmp_path):
    c = BertConfig(hidden=128, heads=2, layers=1, seq=32, batch=2)
    tf = profiled_step(tmp_path, c, "meta", lambda p: torch.optim.SGD(p, lr=0.1), autocast=False)
    assert _matmul_dtypes(tf) == {"float32"}



def test_autocast_casts_are_kernels_and_the_matmul_runs_in_bf16():
    # CPU autocast records the op in its input dtypes around the casts and the op in the autocast dtype
    from neuron_profiler.runtime.simulated.synthetic import op, simulate
    x, w = [64, 256], [768, 256]
    rows = [op("aten::linear", 0, 90_000, [x, w, [768]], ["float"] * 3),
            op("aten::to", 100, 20_000, [w, [], [], [], []], ["float"] + ["Scalar"] * 3 + [""]),
            op("aten::_to_copy", 200, 19_000, [w] + [[]] * 6, ["float", "Scalar", "", "", "", "Scalar", ""]),
            op("aten::copy_", 300, 18_000, [w, w, []], [BF, "float", "Scalar"]),
            op("aten::linear", 30_000, 50_000, [x, w, [768]], [BF] * 3),
            op("aten::addmm", 30_100, 49_000, [[768], x, [256, 768], [], []], [BF] * 3 + ["Scalar"] * 2)]
    b = simulate(rows)
    lowered = set(b.table("instructions").framework_op) | set(b.table("dma").framework_op)
    assert lowered == {3, 5}  # the weight cast and the BF16 addmm; the wrapper and its copy are not kernels
    mm = b.table("instructions")
    assert set(mm[mm["opcode"].astype(str) == "MATMUL"]["dtype"].astype(str)) == {"bfloat16"}


def test_info_says_partly_priced_for_an_op_with_device_time(tmp_path, capsys):
    from neuron_profiler.cli import main
    from neuron_profiler.runtime.simulated.synthetic import op, simulate
    rows = [op("aten::fill_", 0, 5_000, [[1024, 1024], []], ["float", "Scalar"]),
            op("aten::fill_", 10_000, 5_000, "", ""),  # recorded without shapes
            op("aten::cat", 20_000, 5_000, "", "")]
    path = simulate(rows).write(tmp_path / "t.nprof")
    assert main(["info", str(path)]) == 0
    out = capsys.readouterr().out.splitlines()
    unpriced = next(ln for ln in out if ln.startswith("  unpriced"))
    partly = next(ln for ln in out if ln.startswith("  partly"))
    assert "aten::cat" in unpriced and "fill_" not in unpriced  # before: "aten::fill_ ... (no device time)"
    assert "1 op kinds" in partly and "aten::fill_" in partly


@pytest.mark.slow
def test_compiled_fake_dry_run_is_priced_as_fused_graphs(tmp_path, autocast_runs):
    fake_eager = autocast_runs[0]
    c = BertConfig(vocab=4096, hidden=1024, heads=16, layers=1, seq=128, batch=16)
    tf = profiled_step(tmp_path, c, "fake", lambda p: torch.optim.AdamW(p, foreach=True), compiled=True)
    names = tf.table("host_ops")["name"].astype(str)
    assert names.str.startswith("neuron::graph ").sum() == 2  # forward and backward, one launch each
    assert list(tf.header.simulation.unpriced_ops) == []
    ins = tf.table("instructions")

    def mm_ns(t):
        i = t.table("instructions")
        return int(i[i["opcode"].astype(str) == "MATMUL"]["duration_ns"].sum())
    # the same matmuls at the BF16 rate (the ops Dynamo and AOT autograd ran while compiling are not kernels:
    # before, they doubled the step); the elementwise and norm chains fused: the step is shorter than eager
    assert abs(mm_ns(tf) / mm_ns(fake_eager) - 1) < 0.01
    assert len(ins) < len(fake_eager.table("instructions"))
    assert device_time_ns(tf) < 0.9 * device_time_ns(fake_eager)


@pytest.mark.slow
def test_compiled_meta_dry_run_says_it_is_not_supported(tmp_path):
    from neuron_profiler.capture.dryrun import COMPILED_META
    c = BertConfig(hidden=128, heads=2, layers=1, seq=32, batch=2)
    tf = profiled_step(tmp_path, c, "meta", lambda p: torch.optim.SGD(p, lr=0.1), compiled=True)
    assert COMPILED_META in tf.footer_metadata.get("capture_problems", "")


def test_a_cpu_kernels_contiguous_copy_is_part_of_it():
    # CPU native_layer_norm_backward makes its input contiguous first (clone -> copy_): the op is the kernel,
    # not its copy (before, a real capture priced the layer-norm backward as that copy)
    from neuron_profiler.runtime.simulated.synthetic import op, simulate
    x, w = [8, 256], [256]
    rows = [op("aten::native_layer_norm_backward", 0, 50_000, [x, x, [], [8, 1], [8, 1], w, w, []],
               ["float", "float", "ScalarList", "float", "float", "float", "float", "ScalarList"]),
            op("aten::clone", 100, 5_000, [x, []], ["float", "Scalar"]),
            op("aten::copy_", 200, 4_000, [x, x, []], ["float", "float", "Scalar"]),
            op("aten::zero_", 60_000, 2_000, [x], ["float"]),  # a fill by itself stays a kernel
            op("aten::fill_", 60_100, 1_000, [x, []], ["float", "Scalar"])]
    b = simulate(rows)
    assert set(b.table("instructions").framework_op) | set(b.table("dma").framework_op) == {0, 4}


@pytest.mark.slow
def test_pure_bf16_decoder_on_meta_and_fake_is_the_same_step(tmp_path):
    # RMSNorm is a composite that a real run runs op by op; on meta tensors one of its ops (mean) decomposes
    # to prims, which made the whole norm one kernel there (before: meta ~6 % cheaper than fake)
    c = BertConfig(vocab=4096, hidden=1024, heads=8, layers=1, seq=1024, batch=1)
    runs = [profiled_step(tmp_path / k, c, k, lambda p: torch.optim.AdamW(p, foreach=True), autocast=False,
                          model_cls=Decoder, dtype=torch.bfloat16) for k in ("fake", "meta")]
    for tf in runs:
        assert _matmul_dtypes(tf) == {"bfloat16"} and list(tf.header.simulation.unpriced_ops) == []
        assert {"aten::pow", "aten::rsqrt"} <= _launched(tf)  # the norm's ops, as a CPU run records them
    assert abs(device_time_ns(runs[1]) / device_time_ns(runs[0]) - 1) < 0.02
