"""Dry-run profiling under FakeTensorMode with a fake process group (examples/llama_dryrun.py, small)."""
import sys
from pathlib import Path

import pytest

from neuron_profiler.trace import read_trace

pytestmark = pytest.mark.slow
sys.path.insert(0, str(Path(__file__).resolve().parents[2]))


@pytest.fixture(scope="module")
def trace(tmp_path_factory):
    from examples.llama_dryrun import LlamaConfig, dry_run_step
    c = LlamaConfig(vocab=4096, hidden=512, layers=2, heads=8, ffn=1408, seq=256, batch=2, tp=8)
    return c, read_trace(dry_run_step(c, str(tmp_path_factory.mktemp("dry")), "trn2"))


def test_dry_run_records_the_real_dtypes_and_shapes(trace):
    c, tf = trace
    h, ins = tf.table("host_ops"), tf.table("instructions")
    mm = ins[ins["opcode"].astype(str) == "MATMUL"]
    names = h["name"].astype(str)
    assert set(mm["dtype"].astype(str)) == {"bfloat16"}  # no FP32 matmuls from meta decompositions
    lowered = set(names.to_numpy()[ins["framework_op"].unique()])
    assert not any(n.startswith("prims::") for n in lowered)
    # the per-rank QKV projection: [batch*seq, hidden] @ [hidden, 3*hidden/tp]
    tokens, qkv = c.batch * c.seq, 3 * c.hidden // c.tp
    flops = 2 * tokens * c.hidden * qkv
    assert (mm.groupby("framework_op")["raw_flops"].sum() == flops).any()


def test_dry_run_collectives_have_the_tensor_parallel_sizes(trace):
    c, tf = trace
    coll = tf.table("collectives")
    assert len(coll) == 4 * c.layers  # attention + MLP, forward and backward
    assert set(coll["operation"].astype(str)) == {"all_reduce"} and set(coll["group_size"]) == {c.tp}
    assert set(coll["input_size"]) == {c.batch * c.seq * c.hidden * 2}
    assert tf.header.world_size == c.tp
