"""Synchronisation points of the captured program: Tensor.cpu()/tolist()/print mark where the host waits."""
import tempfile

import torch

import neuron_profiler
from neuron_profiler.capture.sync import SYNC_PREFIX, SyncRecorder
from neuron_profiler.trace import read_trace


def test_sync_methods_are_marked_once_and_restored():
    before = {n: torch.Tensor.__dict__.get(n) for n in ("cpu", "tolist", "__repr__")}
    out = tempfile.mkdtemp()
    x = torch.randn(256, 256)
    with neuron_profiler.profile(profile_output_dir=out, run_id="s", runtime="simulated") as p:
        y = x @ x
        y.cpu()
        s = repr(y[:2, :2])      # __repr__ calls tolist/item inside: one marker, not several
        v = y.sum().tolist()
    assert isinstance(s, str) and isinstance(v, float)
    h = read_trace(p.neuron_profiler.paths[0]).table("host_ops")
    marks = h[h["name"].astype(str).str.startswith(SYNC_PREFIX)]["name"].astype(str).tolist()
    # (torch.profiler itself calls torch.neuron.synchronize() when the window ends)
    own = [m for m in marks if m != SYNC_PREFIX + "torch.neuron.synchronize"]
    assert own == [SYNC_PREFIX + "Tensor.cpu", SYNC_PREFIX + "Tensor.__repr__", SYNC_PREFIX + "Tensor.tolist"]
    # the simulated host waits at each: the mm's kernel ends before the .cpu() marker does
    ins = read_trace(p.neuron_profiler.paths[0]).table("instructions")
    mm_row = h.index[h["name"].astype(str) == "aten::mm"][0]
    cpu = h[h["name"].astype(str) == SYNC_PREFIX + "Tensor.cpu"].iloc[0]
    mm = ins[ins["framework_op"] == mm_row]
    assert (mm["start_ts"] + mm["duration_ns"]).max() <= cpu["start_ts"] + cpu["duration_ns"]
    assert {n: torch.Tensor.__dict__.get(n) for n in ("cpu", "tolist", "__repr__")} == before


def test_recorder_outside_a_window_changes_nothing():
    r = SyncRecorder()
    orig = torch.Tensor.cpu
    r.start()
    assert torch.Tensor.cpu is not orig and torch.ones(2).cpu().tolist() == [1.0, 1.0]
    r.stop()
    assert torch.Tensor.cpu is orig
