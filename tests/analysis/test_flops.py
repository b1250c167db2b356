"""FLOPs and bytes from input shapes (imported GPU traces) and their attribution to kernels."""
import json
import math

import pandas as pd
import pytest
from _traces import gpu_mm_trace

import analysis
from analysis.analyses.work import module_path_from_stack, op_flops_and_bytes


def _ops(rows):
    return pd.DataFrame([{"name": n, "input_shapes": json.dumps(s), "input_dtypes": json.dumps(d),
                          "flops": f, "args": a} for n, s, d, f, a in rows])


def test_op_flops_from_shapes():
    bf, f32 = "c10::BFloat16", "float"
    df = op_flops_and_bytes(_ops([
        ("aten::mm", [[8, 16], [16, 4]], [bf, bf], 0, ""),
        ("aten::addmm", [[4], [8, 16], [16, 4], [], []], [bf, bf, bf, "Scalar", "Scalar"], 0, ""),
        ("aten::bmm", [[2, 8, 16], [2, 16, 4]], [f32, f32], 0, ""),
        ("aten::linear", [[3, 8, 16], [4, 16], [4]], [bf, bf, bf], 0, ""),
        ("aten::matmul", [[5, 8, 16], [16, 4]], [bf, bf], 0, ""),
        ("aten::conv2d", [[1, 3, 8, 8], [6, 3, 3, 3], [6], [], [], [], []], [f32] * 3 + ["ScalarList"] * 3 + ["Int"], 0,
         json.dumps({"Concrete Inputs": ["", "", "", "[2, 2]", "[1, 1]", "[1, 1]", "1"]})),
        ("aten::scaled_dot_product_attention", [[1, 2, 10, 8], [1, 2, 12, 8], [1, 2, 12, 8]], [bf] * 3, 0, ""),
        ("aten::mm", [[8, 16], [16, 4]], [bf, bf], 999, ""),          # Kineto's flops arg wins
        ("aten::view", [[8, 16], []], [bf, ""], 0, ""),
        ("aten::add", [[8, 16], [8, 16], []], [f32, f32, "Scalar"], 0, ""),
        ("aten::mystery", [], [], 0, ""),
    ]))
    f = df["flops"].tolist()
    assert f[0] == 2 * 8 * 16 * 4
    assert f[1] == 2 * 8 * 16 * 4
    assert f[2] == 2 * 2 * 8 * 16 * 4
    assert f[3] == 2 * 3 * 8 * 16 * 4
    assert f[4] == 2 * 5 * 8 * 16 * 4
    assert f[5] == 2 * (1 * 6 * 4 * 4) * (3 * 3 * 3)          # stride 2, padding 1 -> 4x4 output
    assert f[6] == 2 * 2 * 10 * 12 * (8 + 8)
    assert f[7] == 999
    assert f[8] == 0 and df["bytes"][8] == 0                    # views move nothing
    assert f[9] == 8 * 16
    assert math.isnan(f[10])
    assert df["bytes"][0] == (8 * 16 + 16 * 4 + 8 * 4) * 2
    assert df["bytes"][9] == 3 * 8 * 16 * 4
    assert df["is_matmul"].tolist()[:8] == [True] * 8 and not df["is_matmul"][9]
    assert df["dtype"][0] == "bfloat16" and df["dtype"][2] == "float32"


def test_kernel_attribution_splits_by_duration():
    t = analysis.Trace.from_builder(gpu_mm_trace(m=64, k=32, n=16, kernel_ns=(3000, 1000)))
    w = analysis.instruction_work(t)
    total = 2 * 64 * 32 * 16
    assert w["flops"].tolist()[:2] == pytest.approx([0.75 * total, 0.25 * total])
    assert w["op"].tolist() == ["aten::mm", "aten::mm", "aten::add"]
    assert w["module"].tolist() == ["M.proj", "M.proj", "M.res"]
    assert w["dtype"].tolist() == ["bfloat16", "bfloat16", "float32"]
    assert w["is_matmul"].tolist() == [True, True, False]
    kflops = analysis.instruction_work(analysis.Trace.from_builder(
        gpu_mm_trace(m=64, k=32, n=16, with_flops_arg=True)))["flops"][:2].sum()
    assert kflops == pytest.approx(total)


def test_module_path_from_stack():
    stack = "main.py(1): <module>\nnn.Module: Net_0\nx.py(3): forward\nnn.Module: Linear_1\nlinear.py(9): forward"
    assert module_path_from_stack(stack) == "Net_0.Linear_1"
    assert module_path_from_stack("a.py(1): f") == ""


def test_malformed_signatures_give_nan_not_errors():
    df = op_flops_and_bytes(_ops([
        ("aten::conv2d", [[1, 3], [6]], ["float", "float"], 0, "{not json"),
        ("aten::mm", [[8], [16, 4, 2, 1]], ["float", "float"], 0, ""),
        ("aten::bmm", [["a", "b"], [1]], ["float", "float"], 0, ""),
    ]))
    assert df["flops"].isna().all()
    bad = op_flops_and_bytes(pd.DataFrame({"name": ["aten::mm"], "input_shapes": ["[[1,2],"],
                                           "input_dtypes": ["[]"], "flops": [0], "args": [""]}))
    assert math.isnan(bad["flops"][0]) and math.isnan(bad["bytes"][0])
