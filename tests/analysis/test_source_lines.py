"""source_lines(): device time per Python source line adds up to the stack totals."""
import pandas as pd
from _traces import neuron_builder

import analysis
from tests.realdata import sample_trace


def _stack_trace():
    """Three ops launching one instruction each: f's mm (1000 ns) and mm (300 ns) at a.py:5, g's relu (500 ns)
    at a.py:9, both called from the module at a.py:1; an op without a stack launching 200 ns."""
    b, t = neuron_builder()
    stacks = ["a.py(1): <module>\na.py(5): f", "a.py(1): <module>\na.py(9): g", "a.py(1): <module>\na.py(5): f", ""]
    h = b.add_rows("host_ops", {"track": t["thread"], "name": ["aten::mm", "aten::relu", "aten::mm", "aten::add"],
                                "category": ["cpu_op"] * 4, "start_ts": [0, 2000, 3000, 5000],
                                "duration_ns": [100, 50, 80, 10], "stack": stacks})
    ins = b.add_rows("instructions", {"track": [t["TensorMatrix"], t["Vector"], t["TensorMatrix"], t["Vector"]],
                                      "start_ts": [200, 2100, 3100, 5100], "duration_ns": [1000, 500, 300, 200],
                                      "engine": ["TensorMatrix", "Vector", "TensorMatrix", "Vector"],
                                      "opcode": ["MATMUL", "ACTIVATE", "MATMUL", "TensorTensor"],
                                      "name": ["mm", "relu", "mm", "add"], "framework_op": [h, h + 1, h + 2, h + 3]})
    b.add_flows("host_ops", [h, h + 1, h + 2, h + 3], "instructions", [ins, ins + 1, ins + 2, ins + 3], kind="launch")
    return analysis.Trace.from_builder(b), h


def test_source_lines_hand_computed():
    t, h = _stack_trace()
    s = analysis.source_lines(t).set_index(["file", "line"])
    assert list(s.index) == [("a.py", 1), ("a.py", 5), ("a.py", 9)]  # by total time
    assert s.loc[("a.py", 5)][["function", "self_ns", "total_ns", "calls"]].tolist() == ["f", 1300.0, 1300.0, 2]
    assert s.loc[("a.py", 9)][["self_ns", "total_ns", "calls"]].tolist() == [500.0, 500.0, 1]
    assert s.loc[("a.py", 1)][["function", "self_ns", "total_ns", "calls"]].tolist() == ["<module>", 0.0, 1800.0, 0]
    assert s["share_percent"].tolist() == [0.0, 100 * 1300 / 1800, 100 * 500 / 1800]
    assert s.loc[("a.py", 5), "example_op"] == h  # the longer of the two mm ops (100 ns > 80 ns)
    assert s.loc[("a.py", 1), "example_op"] == -1  # never the innermost frame
    fig = analysis.figures.source_lines_figure(t)
    assert list(fig.data[0].x) == [0.0005, 0.0013, 0.0018] and fig.data[0].y[-1] == "a.py:1 <module>"


def test_per_line_time_adds_up_to_the_stack_totals_of_a_capture():
    t = analysis.load(sample_trace("gpt_train_step.nprof"))
    s = analysis.source_lines(t)
    by_stack = analysis.hot_ops(t, by="stack")
    stacked = by_stack[[bool(str(k).strip()) for k in by_stack.index]]
    assert len(s) > 20 and s["self_ns"].sum() == stacked["device_time_self_ns"].sum() > 0
    assert s["calls"].sum() == stacked["calls"].sum()
    assert abs(s["share_percent"].sum() - 100) < 1e-9 and (s["total_ns"] >= s["self_ns"]).all()
    # a line's total is the time of every stack holding it, computed here from the stacks' own frames
    assert (s["line"] > 0).all()  # built-in and nn.Module frames are not lines; every stack here has a line
    for _, r in s.head(15).iterrows():
        frame = f"{r['file']}({r['line']}): {r['function']}"
        holding = [k for k in stacked.index if frame in [f.strip() for f in str(k).split("\n")]]
        assert r["total_ns"] == stacked.loc[holding, "device_time_self_ns"].sum()
    outer = s[s["total_ns"] == s["total_ns"].max()]
    assert (outer["total_ns"] == s["self_ns"].sum()).all()  # the outermost frames hold everything
    assert analysis.source_lines(analysis.load(sample_trace("cnn_inference.nprof"))).empty  # no stacks recorded
    assert isinstance(s, pd.DataFrame)
