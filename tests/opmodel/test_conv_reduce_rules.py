"""Convolutions without their stride, conv backward, reductions' reduced dims and out= tensors: the op
model derives what the record does not hold from what it does, or says unknown (hand-computed oracles)."""
import json
import math

import pandas as pd

from analysis.analyses.work import op_flops_and_bytes
from neuron_profiler.opmodel import lower_signature

F = "float"
NOARGS = [[], [], [], [], [], []]  # stride, padding, dilation, ... recorded as [] without Concrete Inputs


def _sig(name, shapes, dtypes, concrete=None, out=None):
    return lower_signature(name, json.dumps(shapes), json.dumps(dtypes), 0, concrete, out)


def test_conv_without_stride_is_unknown_never_stride_1():
    w = _sig("aten::cudnn_convolution", [[8, 64, 56, 56], [128, 64, 3, 3], *NOARGS], [F, F] + [""] * 6)
    assert not w.flops_known and "stride and padding not recorded" in w.note


def test_conv_output_shape_given_by_other_records():
    w = _sig("aten::cudnn_convolution", [[8, 64, 56, 56], [128, 64, 3, 3], *NOARGS], [F, F] + [""] * 6,
             out=(8, 128, 28, 28))
    assert w.flops == 2 * (8 * 28 * 28) * (64 * 9) * 128          # stride 2: 28x28, not 56x56


def test_miopen_argument_order_and_zero_stride():
    # miopen_convolution(input, weight, bias, padding, stride, dilation, groups, ...): stride 2 is argument 4
    c = ["", "", "", "[1, 1]", "[2, 2]", "[1, 1]", "1", "False", "False"]
    w = _sig("aten::miopen_convolution", [[10, 256, 14, 14], [512, 256, 3, 3], [], [], [], [], [], [], []],
             ["c10::BFloat16"] * 2 + [""] * 7, c)
    assert w.flops == 2 * (10 * 7 * 7) * (256 * 9) * 512
    bad = ["", "", "", "[1, 1]", "[0, 0]", "[1, 1]", "1", "False", "False"]
    assert not _sig("aten::miopen_convolution", [[1, 3, 8, 8], [4, 3, 3, 3], [], [], [], [], [], [], []],
                    [F, F] + [""] * 7, bad).flops_known


def test_conv_backward_output_mask_and_bytes():
    shapes = [[10, 512, 7, 7], [10, 512, 7, 7], [512, 512, 3, 3], [], [], [], [], [], [], [], []]
    dt = ["c10::BFloat16"] * 3 + [""] * 8
    both = ["", "", "", "[0]", "[1, 1]", "[1, 1]", "[1, 1]", "False", "[0, 0]", "1", "[True, True, False]"]
    fwd = 2 * (10 * 49) * (512 * 9) * 512
    w = _sig("aten::convolution_backward", shapes, dt, both)
    assert w.flops == 2 * fwd
    go = x = 10 * 512 * 49
    wt = 512 * 512 * 9
    assert w.write_bytes == (x + wt) * 2                                # grad input + grad weight
    assert w.read_bytes == (2 * go + x + wt) * 2                       # each GEMM reads grad_output
    first = both[:10] + ["[False, True, False]"]                       # first layer: no grad input
    w1 = _sig("aten::convolution_backward", shapes, dt, first)
    assert w1.flops == fwd and w1.read_bytes == (go + x) * 2 and w1.write_bytes == wt * 2


def test_conv_output_shape_from_backward_and_consumer_in_a_trace():
    def row(name, shapes, track, start, dur=10):
        return dict(name=name, input_shapes=json.dumps(shapes), input_dtypes=json.dumps([F] * len(shapes)),
                    flops=0, args="", track=track, start_ts=start, duration_ns=dur)
    df = op_flops_and_bytes(pd.DataFrame([
        row("aten::cudnn_convolution", [[8, 64, 56, 56], [128, 64, 3, 3], *NOARGS], 1, 0),
        row("aten::cudnn_batch_norm", [[8, 128, 28, 28], [128], [128]], 1, 20),          # its consumer
        row("aten::cudnn_convolution", [[8, 64, 28, 28], [64, 64, 3, 3], *NOARGS], 1, 40),
        row("aten::convolution_backward", [[8, 64, 28, 28], [8, 64, 28, 28], [64, 64, 3, 3], *NOARGS], 2, 99),
        row("aten::cudnn_convolution", [[8, 3, 224, 224], [64, 3, 7, 7], *NOARGS], 3, 0),  # nothing tells
    ]))
    f = df["flops"].tolist()
    assert f[0] == 2 * (8 * 28 * 28) * (64 * 9) * 128
    assert f[2] == 2 * (8 * 28 * 28) * (64 * 9) * 64
    assert math.isnan(f[4]) and "stride and padding" in df["note"][4]


def test_reductions_write_what_their_dims_say():
    def written(shapes, dtypes, concrete=None, name="aten::sum"):
        w = _sig(name, shapes, dtypes, concrete)
        return w.write_bytes if w.bytes_known else None
    # dim=None (new Kineto: '' type, Concrete Inputs ''): a full reduction, one element
    assert written([[110, 100], [], [], []], ["long", "", "Scalar", ""], ["", "", "False", ""]) == 8
    assert written([[1024, 512], [], [], []], [F, "ScalarList", "Scalar", ""], ["", "[0]", "True", ""]) == 512 * 4
    assert written([[8, 16, 32, 32], [], [], [], []], [F, "ScalarList", "Scalar", "", F], ["", "[]", "False", "", ""],
                   "aten::mean") == 4
    assert written([[5, 7]], [F]) == 4                                    # sum(self)
    # old Kineto writes '' for a dim list too: unknown, not a guess
    assert written([[1024, 512], [], [], []], [F, "", "Scalar", ""]) is None
    # the out= tensor gives the output
    assert written([[16, 128, 8, 8], [], [], [], [16, 128, 1, 1]], [F, "ScalarList", "Scalar", "Scalar", F]) \
        == 16 * 128 * 4


def test_matmul_out_tensor_is_not_read():
    w = _sig("aten::mm", [[32768, 2048], [2048, 2048], [32768, 2048]], ["c10::BFloat16"] * 3)
    assert w.read_bytes == (32768 * 2048 + 2048 * 2048) * 2 and w.write_bytes == 32768 * 2048 * 2


def test_out_tensor_is_written_not_read():
    w = _sig("aten::clamp_min", [[1024, 256], [], [1024, 256]], [F, "Scalar", F])
    assert w.read_bytes == 1024 * 256 * 4 and w.write_bytes == 1024 * 256 * 4
    assert w.flops == 1024 * 256


def test_dropout_in_eval_mode_does_no_work():
    shapes, dt = [[8, 256, 512], [], []], [F, "Scalar", "Scalar"]
    assert _sig("aten::dropout", shapes, dt, ["", "0.1", "False"]).cls == "none"
    assert _sig("aten::dropout", shapes, dt, ["", "0.0", "True"]).cls == "none"
    train = _sig("aten::dropout", shapes, dt, ["", "0.1", "True"])
    assert train.cls != "none" and train.read_bytes == 8 * 256 * 512 * 4


def test_backward_ops_without_shapes_priced_from_their_forward():
    def row(name, shapes, dtypes, start, dur, seq=-1, track=1):
        return dict(name=name, input_shapes=json.dumps(shapes) if shapes is not None else "",
                    input_dtypes=json.dumps(dtypes) if dtypes is not None else "", flops=0, track=track,
                    start_ts=start, duration_ns=dur, sequence_number=seq,
                    args=json.dumps({"Concrete Inputs": ["", "", "", "[2, 2]", "[1, 1]", "[1, 1]", "1"]})
                    if name == "aten::conv2d" else "")
    bf = "c10::BFloat16"
    df = op_flops_and_bytes(pd.DataFrame([
        # forward (thread 1): a stride-2 conv and a linear, with shapes and sequence numbers
        row("aten::conv2d", [[8, 64, 56, 56], [128, 64, 3, 3], [], [], [], [], []], [bf, bf] + [""] * 5, 0, 10, 7),
        row("aten::linear", [[32, 512], [1000, 512], [1000]], [bf] * 3, 20, 10, 8),
        row("aten::native_layer_norm", [[32, 512], [], [512], [512], []], [bf, "", bf, bf, ""], 40, 10, 9),
        # backward (thread 2): nodes with the forward's sequence numbers, ops inside recorded without shapes
        row("ConvolutionBackward0", None, None, 100, 50, 7, 2),
        row("aten::convolution_backward", None, None, 110, 30, -1, 2),
        row("AddmmBackward0", None, None, 200, 50, 8, 2),
        row("aten::mm", None, None, 210, 10, -1, 2),
        row("aten::mm", None, None, 225, 10, -1, 2),
        row("NativeLayerNormBackward0", None, None, 300, 50, 9, 2),
        row("aten::native_layer_norm_backward", None, None, 310, 20, -1, 2),
        row("aten::mm", None, None, 400, 10, -1, 2),                       # under no node: stays unknown
    ]))
    fwd_conv = 2 * (8 * 28 * 28) * (64 * 9) * 128
    assert df["flops"][4] == 2 * fwd_conv and "forward" in df["note"][4]
    assert df["flops"][6] == df["flops"][7] == 2 * 32 * 512 * 1000
    assert df["bytes"][6] == (32 * 512 + 512 * 1000 + 32 * 1000) * 2
    assert df["flops"][9] == 13 * 32 * 512
    assert math.isnan(df["flops"][10]) and df["note"][10] == "no input shapes recorded"


def test_reduction_dims_from_the_consumer_in_old_kineto():
    # old Kineto: sum(x, dim, keepdim, dtype) with the dim list written as '' - a bias gradient, then a view
    def row(name, shapes, dtypes, start):
        return dict(name=name, input_shapes=json.dumps(shapes), input_dtypes=json.dumps(dtypes), flops=0, args="",
                    track=1, start_ts=start, duration_ns=10)
    df = op_flops_and_bytes(pd.DataFrame([
        row("aten::sum", [[1024, 512], [], [], []], [F, "", "Scalar", ""], 0),
        row("aten::view", [[1, 512], []], [F, ""], 20),
        row("aten::sum", [[1024, 512], [], [], []], [F, "", "Scalar", ""], 40),
        row("aten::mm", [[7, 3], [3, 5]], [F, F], 60),                    # 35 elements: not a reduction of x
    ]))
    assert df["bytes"][0] == (1024 * 512 + 512) * 4 and "consumes" in df["note"][0]
    assert math.isnan(df["bytes"][2]) and "reduced dims are not recorded" in df["note"][2]
    assert df["flops"][0] == df["flops"][2] == 1024 * 512


def test_inductor_kernels_priced_from_their_buffers_and_the_ops_their_name_lists():
    from neuron_profiler.opmodel.inductor import fused_ops

    assert fused_ops("triton_red_fused__unsafe_view_add_mean_mul_pow_rsqrt_1") == \
        ("_unsafe_view", "add", "mean", "mul", "pow", "rsqrt")
    # HTA's triton_example: out = a + cos(b) + sin(c)-like kernel over 10x10 float buffers, xnumel 100
    w = _sig("triton_poi_fused_add_cos_sin_0", [[10, 10], [10, 10], [10, 10], []], [F, F, F, "Scalar"],
             ["", "", "", "100"])
    assert w.flops_known and w.flops == (1 + 1 + 1) * 100 and w.moved_bytes == 3 * 100 * 4
    assert "estimate" in w.note and w.dtype == "float32"
    # a reduction: xnumel x r0numel iterations
    bf = "c10::BFloat16"
    r = _sig("triton_red_fused_add_mean_mul_pow_rsqrt_0", [[8, 4096, 2048], [2048], [8, 4096, 2048], [], []],
             [bf, bf, bf, "Scalar", "Scalar"], ["", "", "", "32768", "2048"])
    assert r.flops == (1 + 1 + 1 + 1 + 1) * 32768 * 2048 and r.dtype == "bfloat16"
    assert not _sig("triton_poi_fused_mystery_op_0", [[4]], [F], ["", "4"]).flops_known


def test_conv_flops_without_concrete_inputs_equal_those_with_them_on_the_cnn_sample():
    """The bundled CNN capture keeps each convolution's stride; with it removed, the output shapes other
    records give (consumers, nested calls) must give the same FLOPs, not a stride-1 guess."""
    import numpy as np
    from realdata import sample_trace

    import analysis
    from neuron_profiler.opmodel import classify

    ho = analysis.load(sample_trace("cnn_inference.nprof"), cache=False).whole_table("host_ops").copy()
    conv = np.array([classify(n) == "conv" for n in ho["name"].astype(str)])
    full = op_flops_and_bytes(ho)["flops"].to_numpy()[conv]
    ho["args"] = np.where(conv, "", ho["args"].astype(str))
    stripped = op_flops_and_bytes(ho)["flops"].to_numpy()[conv]
    assert conv.sum() >= 10 and np.isfinite(full).all()
    assert (stripped == full).all()
