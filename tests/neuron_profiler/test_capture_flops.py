"""Host-op FLOPs from recorded shapes, checked against torch's own FlopCounterMode."""
from __future__ import annotations

import warnings

import pytest

torch = pytest.importorskip("torch")
from torch.profiler import ProfilerActivity, profile  # noqa: E402
from torch.utils.flop_counter import FlopCounterMode  # noqa: E402

from neuron_profiler import NeuronConfig, NeuronProfiler, ProfileMode  # noqa: E402
from neuron_profiler.capture.flops import op_flops  # noqa: E402
from neuron_profiler.trace import read_trace  # noqa: E402


def test_matmul_formulas():
    assert op_flops("aten::mm", [[8, 16], [16, 32]]) == 2 * 8 * 16 * 32
    assert op_flops("aten::bmm", [[4, 8, 16], [4, 16, 2]]) == 2 * 4 * 8 * 16 * 2
    assert op_flops("aten::mm", [[8, 16], [15, 32]]) == 0  # inner dimensions disagree
    assert op_flops("aten::addmm", [[32], [8, 16], [16, 32], [], []]) == 2 * 8 * 16 * 32
    assert op_flops("aten::linear", [[8, 16], [32, 16], [32]]) == 0  # parent of addmm: not counted twice
    conv = [[1, 3, 8, 8], [4, 3, 3, 3], [4], [], [], [], [], [], []]
    concrete = [None, None, None, [1, 1], [1, 1], [1, 1], False, [0, 0], 1]
    assert op_flops("aten::convolution", conv, concrete) == 2 * 4 * 64 * 3 * 9
    concrete_s2 = [None, None, None, [2, 2], [0, 0], [1, 1], False, [0, 0], 1]  # stride 2, no padding: 3x3 out
    assert op_flops("aten::convolution", conv, concrete_s2) == 2 * 4 * 9 * 3 * 9


@pytest.mark.parametrize("stride,padding,groups,with_flops", [(1, 1, 1, False), (2, 0, 1, True), (1, 1, 2, False)])
def test_capture_flops_match_torch_flop_counter(tmp_path, stride, padding, groups, with_flops):
    torch.manual_seed(0)
    model = torch.nn.Sequential(torch.nn.Conv2d(4, 8, 3, stride=stride, padding=padding, groups=groups),
                                torch.nn.ReLU(), torch.nn.Flatten(), torch.nn.LazyLinear(5))
    x = torch.randn(2, 4, 12, 12)
    with torch.no_grad():
        model(x)  # materialise the lazy layer
        with FlopCounterMode(display=False) as fc:
            model(x)
    expected = fc.get_total_flops()
    cfg = NeuronConfig(modes=[ProfileMode.RUNTIME], profile_output_dir=tmp_path, run_id="flops")
    npf = NeuronProfiler(cfg)
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", UserWarning)
        with torch.no_grad(), profile(activities=[ProfilerActivity.CPU, ProfilerActivity.PrivateUse1],
                                      experimental_config=cfg, record_shapes=True, with_flops=with_flops,
                                      on_trace_ready=npf.export_trace):
            model(x)
    ops = read_trace(npf.paths[0]).table("host_ops")
    assert (ops["name"] == "aten::convolution").sum() == 1
    assert int(ops["flops"].sum()) == expected  # counted once, also when Kineto's with_flops fills aten::conv2d
