"""What a trace is of and which traces pair up (analysis.identity / default_partner / alignment_keys): on the
bundled samples (eager and compiled GPT, a CNN, a 2-rank DDP run), with the alignment checked against
analysis.diff's own rows, and the relation rules on hand-built headers."""
from __future__ import annotations

import pytest
from realdata import sample_trace

import analysis
from neuron_profiler.trace import TraceBuilder, make_header
from schemas import pb

SAMPLES = ("cnn_inference", "ddp_train_rank0", "ddp_train_rank1", "gpt_train_step", "gpt_train_step_compiled")


@pytest.fixture(scope="module")
def samples() -> dict[str, analysis.Trace]:
    return {n: analysis.load(sample_trace(f"{n}.nprof")) for n in SAMPLES}


def test_identity_of_the_samples_comes_from_their_headers(samples):
    ids = {n: analysis.identity(t) for n, t in samples.items()}
    assert {n: i.model for n, i in ids.items()} == {"cnn_inference": "SmallCNN", "ddp_train_rank0": "GPT",
                                                     "ddp_train_rank1": "GPT", "gpt_train_step": "GPT",
                                                     "gpt_train_step_compiled": "GPT"}
    assert all(i.model_source == "header" and i.script == "regenerate.py" for i in ids.values())
    # eager and compiled run the same model object: the same parameter count; the DDP model is smaller
    assert ids["gpt_train_step"].parameters == ids["gpt_train_step_compiled"].parameters
    assert ids["ddp_train_rank0"].parameters < ids["gpt_train_step"].parameters
    d = ids["ddp_train_rank1"].describe()
    assert d.startswith("GPT (6.96 M parameters)") and d.endswith(" · run ddp_train · rank 1 of 2")
    assert ids["gpt_train_step"].describe().startswith("GPT (14.8 M parameters) · run gpt_train_step")


def test_default_partner_of_each_sample_is_of_the_same_run_or_model(samples):
    traces = list(samples.values())
    names = list(samples)
    got = {}
    for n, t in samples.items():
        i, why = analysis.default_partner(t, traces)
        got[n] = (names[i] if i is not None else None, why)
    assert got["gpt_train_step"][0] == "gpt_train_step_compiled" and "same model" in got["gpt_train_step"][1]
    assert got["gpt_train_step_compiled"][0] == "gpt_train_step"
    assert got["ddp_train_rank0"] == ("ddp_train_rank1", "another rank of run ddp_train")
    assert got["ddp_train_rank1"][0] == "ddp_train_rank0"
    assert got["cnn_inference"][0] is None  # no other CNN: never paired with an unrelated trace


def _both(df) -> int:
    return int(((df["calls_a"] > 0) & (df["calls_b"] > 0)).sum())


def test_alignment_keys_eager_vs_compiled_align_by_op_and_that_aligns_more(samples):
    eager, compiled = samples["gpt_train_step"], samples["gpt_train_step_compiled"]
    keys, why = analysis.alignment_keys(eager, compiled)
    assert keys == ("op",) and "module names differ" in why
    # oracle: analysis.diff itself; by op, most of the device time sits in rows present in both traces,
    # by op + module + shape (compiled graphs have no user module names) most does not
    by_op, by_all = eager.diff(compiled, keys=keys), eager.diff(compiled, keys=("op", "module", "shape"))
    share = lambda df: df["device_time_a_ns"][(df["calls_a"] > 0) & (df["calls_b"] > 0)].sum() / \
        df["device_time_a_ns"].sum()  # noqa: E731
    assert share(by_op) > 0.7 > 0.4 > share(by_all)
    assert _both(by_op) / len(by_op) > _both(by_all) / len(by_all)


def test_alignment_keys_of_two_ranks_keep_every_key(samples):
    r0, r1 = samples["ddp_train_rank0"], samples["ddp_train_rank1"]
    keys, _ = analysis.alignment_keys(r0, r1)
    assert keys == ("op", "module", "shape")
    df = r0.diff(r1, keys=keys)
    assert _both(df) == len(df) > 0  # the same program on both ranks: every row present on both


def _trace(name: str, *, model: str = "", params: str = "", script: str = "", run_id: str = "", kind: str = "trn2",
           rank: int = 0, world: int = 1) -> analysis.Trace:
    meta = {k: v for k, v in (("model", model), ("model_parameters", params), ("script", script)) if v}
    h = make_header("tests", rank=rank, world_size=world, run_id=run_id, metadata=meta,
                    devices=[pb.Device(index=0, kind=kind, name=kind)])
    return analysis.Trace.from_builder(TraceBuilder(h), name=name)


def test_relation_rules_on_headers():
    a = _trace("a", model="GPT", params="100", script="train.py", run_id="r1")
    assert analysis.relation(a, _trace("b", model="GPT", params="100", run_id="r1", rank=1, world=2))[0] == 5
    assert analysis.relation(a, _trace("c", model="GPT", params="100", run_id="r1"))[0] == 4  # another window
    assert analysis.relation(a, _trace("d", model="GPT", params="100", run_id="r2"))[0] == 3
    assert analysis.relation(a, _trace("e", model="GPT", params="7", run_id="r3"))[0] == 2
    assert analysis.relation(a, _trace("f", model="SmallCNN", script="train.py", run_id="r4"))[0] == 0
    assert analysis.relation(a, _trace("g", script="train.py"))[0] == 0  # model known on one side only
    # unknown on both sides: related only on the same device kind and program
    u = _trace("u", kind="cuda", script="x.py")
    assert analysis.relation(u, _trace("v", kind="cuda", script="x.py"))[0] == 1
    assert analysis.relation(u, _trace("w", kind="cuda", script="y.py"))[0] == 0
    assert analysis.relation(u, _trace("z", kind="trn2", script="x.py"))[0] == 0


def test_default_partner_ranks_by_relation_then_program_and_device():
    a = _trace("a", model="GPT", params="100", script="train.py", run_id="r1")
    cands = [a, _trace("cnn", model="CNN", run_id="r9"), _trace("gpt_other", model="GPT", params="100", run_id="r2",
                                                                script="other.py"),
             _trace("gpt_same", model="GPT", params="100", run_id="r3", script="train.py"),
             _trace("gpt_gpu", model="GPT", params="100", run_id="r4", script="train.py", kind="cuda")]
    i, why = analysis.default_partner(a, cands)
    assert cands[i].name == "gpt_same" and "same model" in why
    assert analysis.default_partner(a, [a, cands[1]]) == (None, "no other trace of the same run or model")
    assert analysis.default_partner(a, [a])[0] is None  # never itself


def test_alignment_keys_across_devices_is_op():
    a, b = _trace("a", model="GPT", kind="trn2"), _trace("b", model="GPT", kind="cuda")
    assert analysis.alignment_keys(a, b)[0] == ("op",)


def test_ranks_of_a_run_pair_from_the_headers_alone(monkeypatch):
    """Pairing the ranks of a big run reads no table (the run and rank are in the header)."""
    a = _trace("a", run_id="r1", rank=0, world=64)
    ranks = [a] + [_trace(f"r{i}", run_id="r1", rank=i, world=64) for i in range(1, 64)]

    def no_tables(*_a, **_k):
        raise AssertionError("a table was read")

    for t in ranks:
        monkeypatch.setattr(t, "whole_table", no_tables)
    i, why = analysis.default_partner(a, ranks)
    assert ranks[i].name == "r1" and why == "another rank of run r1"
