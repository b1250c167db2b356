"""Collectives predict adds outside the dry run, against the ring formulas by hand (links shared by the groups
that use them at once)."""
from __future__ import annotations

import pytest

from neuron_profiler.hardware import model_param
from neuron_profiler.predict import comm
from neuron_profiler.predict.config import PredictConfig, layout

EFA = 100e9            # trn1.32xlarge: 800 Gbps
STEP_EFA = model_param("efa_step_latency_ns")
STEP_NL = model_param("cc_step_latency_ns")
RING = model_param("cc_ring_link_fraction")


def _lay(**kw):
    return layout(PredictConfig(model="x", **kw), None, None)


def test_dp_group_across_instances_shares_efa_with_the_other_tp_ranks():
    """C4: TP=32 fills an instance, so each DP group has one member per instance, and all 32 groups of an
    instance reduce at once: each gets EFA / 32. Ring all-reduce over 32 instances: 2 (n-1)/n B / bw."""
    lay = _lay(instances=32, tp=32, global_batch=1024)
    members = comm.dp_members(lay, 0)
    assert members == [32 * d for d in range(32)]
    b = 1e9
    ns, alg = comm.collective_ns(lay, "all_reduce", b, members)
    want = 2 * 31 / 32 * b / (EFA / 32) * 1e9 + 2 * 31 * STEP_EFA
    assert "EFA" in alg and ns == pytest.approx(want, rel=1e-6)


def test_dp_group_inside_one_instance_uses_neuronlink():
    """C1: DP=32 on one instance, 2 members per chip: a NeuronLink ring at the ring's share of the links, the
    chip's two cores sharing it (the topology's own rule); the one group is alone on its links."""
    lay = _lay(instances=1, microbatch=64, global_batch=2048)
    members = comm.dp_members(lay, 0)
    assert members == list(range(32))
    b = 344e6
    ns, alg = comm.collective_ns(lay, "all_reduce", b, members)
    ring = 2 * 31 / 32 * b / (384e9 / 2 * RING) * 1e9 + 2 * 31 * STEP_NL
    assert "NeuronLink" in alg and ns <= ring * 1.000001   # the mesh algorithm is taken when faster


def test_zero1_is_reduce_scatter_plus_all_gather_and_half_an_all_reduce_each():
    lay = _lay(instances=32, tp=32, global_batch=1024)
    z = comm.dp_reduction_ns(lay, 0, 1e9, 1e9, zero1=True)
    a = comm.dp_reduction_ns(lay, 0, 1e9, 1e9, zero1=False)
    assert set(z) == {"dp reduce_scatter", "dp all_gather"} and set(a) == {"dp all_reduce"}
    assert z["dp reduce_scatter"] + z["dp all_gather"] == pytest.approx(a["dp all_reduce"], rel=1e-9)


def test_pipeline_send_between_instances():
    """C5: stage 1 starts dp x tp = 256 ranks (8 instances) later: every core of the instance sends at once
    over EFA, so one send gets EFA / 32."""
    lay = _lay(instances=32, tp=32, pp=4, global_batch=1024)
    b = 1 * 4096 // 32 * 8192 * 2
    assert comm.p2p_ns(lay, 0, b) == pytest.approx(b / (EFA / 32) * 1e9 + STEP_EFA, rel=1e-6)
