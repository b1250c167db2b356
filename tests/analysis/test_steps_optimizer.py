"""steps(): a trace without step markers takes its steps from the training loop's optimizer.step() calls."""
from _traces import neuron_builder

import analysis


def _trace(names, starts, durs):
    b, t = neuron_builder()
    b.add_rows("host_ops", {"track": t["thread"], "name": names, "category": ["user_annotation"] * len(names),
                            "start_ts": starts, "duration_ns": durs})
    return analysis.Trace.from_builder(b)


def test_steps_between_optimizer_step_ends_hand_computed():
    # three Adam steps ending at 1100, 2150, 3300; a second optimizer (SGD) called once; a zero_grad
    t = _trace(["Optimizer.step#Adam.step", "Optimizer.zero_grad#Adam.zero_grad", "Optimizer.step#Adam.step",
                "Optimizer.step#SGD.step", "Optimizer.step#Adam.step", "aten::mm"],
               [1000, 1200, 2000, 2200, 3100, 3400], [100, 10, 150, 50, 200, 20])
    st = analysis.steps(t)
    cols = ["step", "start_ts", "end_ts", "duration_ns", "host_end_ts", "device_end_ts", "optimizer_steps"]
    assert st[cols].to_dict("list") == {"step": [1, 2], "start_ts": [1100, 2150], "end_ts": [2150, 3300],
                                        "duration_ns": [1050, 1150], "host_end_ts": [2150, 3300],
                                        "device_end_ts": [-1, -1], "optimizer_steps": [1, 2]}
    s = t.summary_dict()
    assert s["step_count"] == 2 and s["step_time_mean_ns"] == 1100 and s["step_time_max_ns"] == 1150


def test_markers_win_over_optimizer_steps_and_one_call_is_no_step():
    t = _trace(["ProfilerStep#4", "Optimizer.step#Adam.step", "Optimizer.step#Adam.step"],
               [0, 100, 500], [1000, 50, 50])
    assert analysis.steps(t)[["step", "duration_ns"]].values.tolist() == [[4, 1000]]
    assert analysis.steps(_trace(["Optimizer.step#Adam.step", "aten::mm"], [0, 10], [5, 5])).empty
