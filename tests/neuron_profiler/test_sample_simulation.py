"""The bundled GPT training-step captures show what a NeuronCore would do, set by the model, not this CPU."""
import numpy as np
import pytest
from realdata import sample_trace

from neuron_profiler.runtime.simulated import SimulatedRuntime
from neuron_profiler.trace import TraceBuilder, read_trace

GPT = ["gpt_train_step.nprof", "gpt_train_step_compiled.nprof"]


def _busy(ins):
    return ins[~ins["opcode"].astype(str).isin(["SemaphoreWait", "DmaTrigger"])]


@pytest.mark.parametrize("name", GPT)
def test_engines_run_concurrently_with_waits_psum_and_overlapping_dma(name):
    tf = read_trace(sample_trace(name))
    ins, dma = tf.table("instructions"), tf.table("dma")
    busy = _busy(ins)
    # time with two or more engines busy
    ev = []
    for _, g in busy.groupby(busy["engine"].astype(str)):
        ev.append((g.start_ts.to_numpy(), (g.start_ts + g.duration_ns).to_numpy()))
    edges = np.unique(np.concatenate([np.concatenate(x) for x in ev]))
    mids = (edges[:-1] + edges[1:]) / 2
    active = np.zeros(len(mids))
    for s, e in ev:
        o = np.argsort(s)
        s, e = s[o], np.maximum.accumulate(e[o])
        k = np.searchsorted(s, mids, side="right") - 1
        active += (k >= 0) & (e[np.maximum(k, 0)] > mids)
    assert np.diff(edges)[active >= 2].sum() > 0
    assert (ins["opcode"].astype(str) == "SemaphoreWait").sum() > 0
    mm = ins[ins["opcode"].astype(str) == "MATMUL"]
    assert (mm["psum_write_bytes"] > 0).all() and (mm["psum_read_bytes"] > 0).any()  # PSUM accumulation
    # DMA of an op overlaps that op's compute
    overlap = 0
    for fo, d in dma.groupby("framework_op"):
        c = busy[busy["framework_op"] == fo]
        if len(c) and len(d):
            overlap += (d.start_ts.min() < (c.start_ts + c.duration_ns).max()) and (
                (d.start_ts + d.duration_ns).max() > c.start_ts.min() + 1)
    assert overlap > 0


@pytest.mark.parametrize("name", GPT)
def test_sbuf_psum_and_throttling_counters(name):
    tf = read_trace(sample_trace(name))
    tracks, c = tf.table("tracks"), tf.table("counters")
    by = {str(tracks.loc[t, "name"]): g for t, g in c.groupby("track")}
    for counter in ("State Buffer Usage", "PSUM Usage", "Throttling"):
        assert by[counter]["value"].max() > 0, counter
        assert by[counter]["value"].between(0, 100).all(), counter


@pytest.mark.parametrize("name", GPT)
def test_step_time_comes_from_the_model_not_this_cpu(name):
    """Re-simulating the measured host ops gives the trace's projected timeline exactly, and it is not the
    timeline this machine measured."""
    tf = read_trace(sample_trace(name))
    h = tf.table("host_ops")
    assert tf.header.simulation.host_timeline == "projected"
    steps = h[h["name"].astype(str).str.startswith("ProfilerStep#")]
    assert len(steps) == 2 and not np.array_equal(steps["duration_ns"], steps["measured_duration_ns"])
    b = TraceBuilder(type(tf.header)())
    b.header.world_size = tf.header.world_size
    b.add_rows("tracks", tf.table("tracks"))
    cols = {c: h[c] for c in h.columns if not c.startswith("measured_")}
    cols["start_ts"], cols["duration_ns"] = h["measured_start_ts"], h["measured_duration_ns"]
    b.add_rows("host_ops", cols)
    b.footer_metadata.update(tf.footer_metadata)  # compiled graphs travel in the footer
    SimulatedRuntime("trn2").emit(b, b.table("host_ops"))
    again = b.table("host_ops")
    np.testing.assert_array_equal(again["start_ts"].to_numpy(), h["start_ts"].to_numpy())
    np.testing.assert_array_equal(again["duration_ns"].to_numpy(), h["duration_ns"].to_numpy())


def test_compiled_step_launches_fewer_programs_and_moves_less_than_eager():
    eager, comp = (read_trace(sample_trace(n)) for n in GPT)
    launches = [int((t.table("flows")["kind"].astype(str) == "launch").sum()) for t in (eager, comp)]
    moved = [int(t.table("dma")["transfer_bytes"].sum()) for t in (eager, comp)]
    def step_ns(t):
        h = t.table("host_ops")
        return int(h[h["name"].astype(str).str.startswith("ProfilerStep#")]["duration_ns"].mean())
    step = [step_ns(t) for t in (eager, comp)]
    assert launches[1] < launches[0] and moved[1] < moved[0] and step[1] < step[0]


@pytest.mark.parametrize("name", ["gpt_train_step.nprof"])  # the sample with CPU / memory sampling on
def test_host_samples_lie_on_the_projected_host_timeline(name):
    """CPU / memory samples are taken on the capturing CPU's clock during the window; in a trace whose host
    timeline is projected they are mapped onto it, so the trace spans its window (not the CPU's seconds)."""
    tf = read_trace(sample_trace(name))
    ho, ctr, tracks = tf.table("host_ops"), tf.table("counters"), tf.table("tracks")
    assert tf.header.simulation.host_timeline == "projected"
    host_tracks = tracks.index[(tracks["kind"] == "counter") & (tracks["device"] < 0)]
    host = ctr[ctr["track"].isin(host_tracks)]
    assert len(host) > 0
    lo, hi = ho["start_ts"].min(), (ho["start_ts"] + ho["duration_ns"]).max()
    assert host["ts"].between(lo, hi).all()
    assert tf.time_range[1] - tf.time_range[0] <= 2 * (hi - lo)  # was 7.0 s for a 43 ms window
    # samples keep their order (the mapping is monotone)
    for _, g in host.groupby("track"):
        assert np.all(np.diff(g["ts"].to_numpy()) >= 0)


def test_ranks_of_a_captured_run_share_rank_0s_origin():
    """Each rank's projected timeline starts at rank 0's window start (shared through the c10d store), not at
    its own measured start (rank 1 reached the window 124 ms later on this CPU, which made it a 'straggler'
    keeping rank 0 waiting 132 ms at every collective); the same program gives the same arrival times."""
    import analysis

    r0, r1 = (read_trace(sample_trace(f"ddp_train_rank{r}.nprof")) for r in (0, 1))
    origin = r0.footer_metadata["window_start_ns"]
    assert r0.footer_metadata["run_window_start_ns"] == r1.footer_metadata["run_window_start_ns"] == origin
    assert r1.footer_metadata["window_start_ns"] != origin  # its own start differs
    assert r0.time_range[0] == r1.time_range[0]
    assert "rank 0's window start" in r1.header.simulation.assumptions["cross_rank_origin"]
    m = analysis.collectives_across_ranks([analysis.load(sample_trace(f"ddp_train_rank{r}.nprof")) for r in (0, 1)])
    assert len(m) == 2 * len(r0.table("collectives")) and (m["ranks_seen"] == 2).all()
    assert m["arrival_delay_ns"].abs().max() < 1_000  # the same program on both ranks: the same arrivals


def test_run_clock_without_a_process_group_keeps_the_rank_s_own_origin():
    from neuron_profiler.capture import run_clock
    from neuron_profiler.capture.comms import Problems

    problems = Problems()
    run_clock.publish_start("r", 0, 123, problems)  # no default group: nothing to publish to, nothing raised
    assert run_clock.shared_start("r", 0, problems) is None
