"""Simulated runtime, lowering: FLOPs formulas, op classes, nesting, garbage input."""
import json

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from neuron_profiler.opmodel import classify, lower_signature
from neuron_profiler.runtime.simulated.synthetic import op, simulate

BF = "c10::BFloat16"




def _matmul_flops(b):
    ins = b.table("instructions")
    mm = ins[ins.engine == "TensorMatrix"]
    return mm.groupby("framework_op")["raw_flops"].sum().to_dict()


@pytest.mark.parametrize("name,shapes,expected", [
    ("aten::mm", [[64, 256], [256, 96]], 2 * 64 * 256 * 96),
    ("aten::addmm", [[96], [64, 256], [256, 96], [], []], 2 * 64 * 256 * 96),
    ("aten::bmm", [[12, 64, 32], [12, 32, 80]], 2 * 12 * 64 * 32 * 80),
    ("aten::baddbmm", [[12, 64, 80], [12, 64, 32], [12, 32, 80], [], []], 2 * 12 * 64 * 32 * 80),
    ("aten::matmul", [[4, 1, 64, 32], [3, 32, 16]], 2 * 12 * 64 * 32 * 16),  # broadcast batch 4x3
    ("aten::linear", [[8, 128, 768], [3072, 768], [3072]], 2 * 8 * 128 * 768 * 3072),
    ("aten::mv", [[300, 200], [200]], 2 * 300 * 200),
])
def test_matmul_flops_formula(name, shapes, expected):
    dtypes = [BF] * len(shapes)
    assert lower_signature(name, str(shapes).replace(" ", ""), str(dtypes).replace("'", '"')).flops == expected
    b = simulate([op(name, 1000, 500, shapes, dtypes)])
    assert _matmul_flops(b) == {0: expected}


def test_conv_flops_formula():
    # N=2, Cin=16, 32x32, Cout=64, 3x3, default stride 1 / same padding -> out 32x32
    w = lower_signature("aten::convolution", "[[2,16,32,32],[64,16,3,3],[64]]", '["float","float","float"]')
    assert w.flops == 2 * (2 * 64 * 32 * 32) * 16 * 3 * 3
    # stride 2, padding 1 from Kineto's Concrete Inputs -> out 16x16; groups=4 (weight Cin/groups = 4)
    concrete = ["", "", "", "[2, 2]", "[1, 1]", "[1, 1]", "False", "[0, 0]", "4"]
    w = lower_signature("aten::convolution", "[[2,16,32,32],[64,4,3,3],[64],[],[],[],[],[],[]]",
                        '["float","float","float"]', concrete=concrete)
    assert w.flops == 2 * (2 * 64 * 16 * 16) * 4 * 3 * 3
    b = simulate([op("aten::convolution", 0, 10_000, [[2, 16, 32, 32], [64, 4, 3, 3], [64], [], [], [], [], [], []],
                      ["float"] * 3, args={"Concrete Inputs": concrete})])
    assert _matmul_flops(b) == {0: 2 * (2 * 64 * 16 * 16) * 4 * 3 * 3}


def test_conv_argument_order_per_op():
    # mkldnn_convolution(input, weight, bias, padding, stride, dilation, groups): stride 2 is argument 4
    concrete = ["", "", "", "[0, 0]", "[2, 2]", "[1, 1]", "1"]
    w = lower_signature("aten::mkldnn_convolution", "[[1,3,32,32],[8,3,3,3],[8],[],[],[],[]]",
                        '["float","float","float"]', concrete=concrete)
    assert w.flops == 2 * (8 * 15 * 15) * 3 * 3 * 3


def test_attention_flops_and_flops_column_wins():
    q = [2, 8, 128, 64]
    w = lower_signature("aten::scaled_dot_product_attention", str([q, q, q]).replace(" ", ""),
                        f'["{BF}","{BF}","{BF}"]')
    assert w.flops == 4 * 2 * 8 * 128 * 128 * 64
    b = simulate([op("aten::mm", 0, 100, [[64, 64], [64, 64]], [BF, BF], flops=123_456_789)])
    assert _matmul_flops(b) == {0: 123_456_789}


@pytest.mark.parametrize("name,cls", [
    ("aten::mm", "matmul"), ("aten::linear", "matmul"), ("aten::conv2d", "conv"), ("aten::gelu", "scalar"),
    ("aten::relu_", "scalar"), ("aten::add", "vector"), ("aten::add_", "vector"), ("aten::sum", "reduce"),
    ("aten::native_layer_norm", "norm"), ("aten::_softmax", "softmax"), ("aten::embedding", "gpsimd"),
    ("aten::index_select", "gpsimd"), ("aten::topk", "gpsimd"), ("aten::copy_", "copy"), ("aten::fill_", "fill"),
    ("aten::_foreach_add_", "vector"), ("aten::view", "none"), ("aten::t", "none"), ("aten::empty", "none"),
    ("aten::detach", "none"), ("ProfilerStep#3", "none"), ("MmBackward0", "none"), ("record_param_comms", "none"),
    ("autograd::engine::evaluate_function: MmBackward0", "none"), ("aten::convolution_backward", "conv"),
])
def test_classify(name, cls):
    assert classify(name) == cls


def test_nested_ops_lowered_once():
    # aten::linear -> (aten::t, aten::addmm -> aten::copy_? no: just addmm); python_function and annotations around
    shapes_x, shapes_w = [32, 256], [512, 256]
    rows = [
        op("ProfilerStep#1", 0, 100_000, category="user_annotation"),
        op("nn.Module: Linear_0", 100, 50_000, category="python_function"),
        op("aten::linear", 200, 40_000, [shapes_x, shapes_w, [512]], [BF] * 3),
        op("aten::t", 300, 1_000, [shapes_w], [BF]),
        op("aten::addmm", 2_000, 30_000, [[512], shapes_x, [256, 512], [], []], [BF] * 3 + ["Scalar"] * 2),
        op("aten::relu", 60_000, 5_000, [[32, 512]], [BF]),
    ]
    b = simulate(rows)
    ins = b.table("instructions")
    assert set(ins.framework_op) == {4, 5}  # addmm and relu only
    assert _matmul_flops(b) == {4: 2 * 32 * 256 * 512}
    assert set(b.table("dma").framework_op) == {4, 5}


def test_cpu_addmm_with_inner_copy_is_one_matmul():
    # CPU addmm copies the bias into its output (aten::copy_ child): the matmul is lowered, the copy is
    # part of it; a copy_ outside any matmul is still lowered
    x, w = [64, 128], [128, 256]
    rows = [op("aten::linear", 0, 50_000, [x, [256, 128], [256]], ["float"] * 3),
            op("aten::addmm", 100, 40_000, [[256], x, w, [], []], ["float"] * 3 + ["Scalar"] * 2),
            op("aten::expand", 200, 500, [[256], []], ["float", "ScalarList"]),
            op("aten::copy_", 1000, 2000, [[64, 256], [1, 256], []], ["float", "float", "Scalar"]),
            op("aten::copy_", 60_000, 2000, [[64, 256], [64, 256], []], ["float", "float", "Scalar"])]
    b = simulate(rows)
    assert set(b.table("instructions").framework_op) == {1, 4}
    assert _matmul_flops(b) == {1: 2 * 64 * 128 * 256}


def test_parent_with_only_noncompute_children_is_lowered():
    # aten::matmul whose recorded children are views only: the matmul itself is the leaf compute op
    rows = [op("aten::matmul", 0, 10_000, [[64, 64], [64, 64]], [BF, BF]),
            op("aten::view", 100, 100, [[64, 64], []], [BF, "ScalarList"])]
    assert _matmul_flops(simulate(rows)) == {0: 2 * 64 ** 3}


def test_nesting_is_per_track():
    rows = [op("aten::mm", 0, 10_000, [[64, 64], [64, 64]], [BF, BF], track="a"),
            op("aten::mm", 100, 1_000, [[32, 64], [64, 64]], [BF, BF], track="b")]
    assert _matmul_flops(simulate(rows)) == {0: 2 * 64 ** 3, 1: 2 * 32 * 64 * 64}


@pytest.mark.parametrize("shapes,dtypes", [
    ("", ""), ("garbage", "[\"float\"]"), ("[[1,2],", "[\"float\"]"), ("{\"a\": 1}", "[]"),
    ("[[-4, 2]]", "[\"float\"]"),
    ("[[\"x\", 2]]", "[\"float\"]"), ("[[]]", "[\"Scalar\"]"), ("[[64,64],[64]]", "not json"), ("[null]", "[null]"),
    ("[[64, 64], [32, 16]]", "[\"float\", \"float\"]"),  # mismatched mm shapes still give finite work
    ("[[1099511627775, 1099511627775], [1099511627775, 1099511627775]]", "[\"float\", \"float\"]"),  # absurd
])
def test_garbage_shapes_do_not_crash(shapes, dtypes):
    rows = [op("aten::mm", 0, 1000, shapes, dtypes), op("aten::add", 2000, 1000, shapes, dtypes),
            op("aten::convolution", 4000, 1000, shapes, dtypes),
            op("aten::relu", 6000, 1000, [[8, 8]], ["float"])]
    b = simulate(rows)
    ins = b.table("instructions")
    assert 3 in set(ins.framework_op)  # the valid op still runs
    assert (ins.duration_ns > 0).all()
    assert np.isfinite(b.table("counters").value).all()


def test_empty_host_ops():
    b = simulate([])
    assert b.rows("instructions") == 0 and b.header.simulated and len(b.header.devices) == 1


_json_shape = st.recursive(st.integers(-3, 300) | st.none() | st.text(max_size=3),
                           lambda c: st.lists(c, max_size=4), max_leaves=12)


@settings(max_examples=60, deadline=None)
@given(name=st.sampled_from(["aten::mm", "aten::bmm", "aten::linear", "aten::convolution", "aten::add", "aten::gelu",
                             "aten::_softmax", "aten::embedding", "aten::scaled_dot_product_attention", "aten::sum",
                             "aten::native_layer_norm", "aten::_foreach_add_", "aten::cat"]),
       shapes=st.one_of(st.text(max_size=20), _json_shape.map(json.dumps)),
       dtypes=st.one_of(st.text(max_size=10), st.lists(st.sampled_from(["float", "c10::BFloat16", "Scalar", "", "x"]),
                                                        max_size=4).map(json.dumps)))
def test_lowering_never_crashes(name, shapes, dtypes):
    w = lower_signature(name, shapes, dtypes)
    assert w.flops >= 0 and w.out_bytes >= 0
    b = simulate([op(name, 0, 1000, shapes, dtypes), op("aten::relu", 5000, 100, [[4]], ["float"])])
    ins = b.table("instructions")
    assert (ins.duration_ns > 0).all() and (ins.raw_flops >= 0).all()
