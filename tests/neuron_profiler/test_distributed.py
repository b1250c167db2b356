"""Two gloo ranks (torch.multiprocessing.spawn, CPU) each write a trace; their collectives match."""
from __future__ import annotations

import os
import socket
import warnings

import pytest

torch = pytest.importorskip("torch")
import torch.distributed as dist  # noqa: E402
import torch.multiprocessing as mp  # noqa: E402

from neuron_profiler.trace import read_trace  # noqa: E402


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def _worker(rank: int, world: int, port: int, out: str) -> None:
    os.environ.update(MASTER_ADDR="127.0.0.1", MASTER_PORT=str(port), KINETO_LOG_LEVEL="6")
    from torch.profiler import ProfilerActivity, profile, schedule

    from neuron_profiler import NeuronConfig, NeuronProfiler
    dist.init_process_group("gloo", rank=rank, world_size=world)
    try:
        torch.manual_seed(0)
        model = torch.nn.parallel.DistributedDataParallel(
            torch.nn.Sequential(torch.nn.Linear(16, 32), torch.nn.ReLU(), torch.nn.Linear(32, 4)))
        opt = torch.optim.SGD(model.parameters(), lr=0.1)
        pair = dist.new_group([0, 1])
        cfg = NeuronConfig(profile_output_dir=out, run_id="ddp", runtime="simulated")
        with warnings.catch_warnings():
            warnings.simplefilter("ignore", UserWarning)
            with profile(activities=[ProfilerActivity.CPU, ProfilerActivity.PrivateUse1], experimental_config=cfg,
                         record_shapes=True, schedule=schedule(wait=1, warmup=0, active=2, repeat=1),
                         on_trace_ready=NeuronProfiler(cfg).export_trace) as prof:
                for _step in range(3):
                    opt.zero_grad()
                    loss = model(torch.randn(8, 16) + rank).square().mean()
                    loss.backward()  # DDP's reducer all-reduces gradients from C++
                    opt.step()
                    stat = loss.detach().reshape(1)
                    dist.all_reduce(stat)  # explicit, default group
                    gathered = torch.empty(2)
                    dist.all_gather_into_tensor(gathered, stat, group=pair)  # explicit, another group
                    prof.step()
    finally:
        dist.destroy_process_group()


@pytest.mark.slow
def test_two_rank_gloo_collectives_match(tmp_path):
    mp.spawn(_worker, args=(2, _free_port(), str(tmp_path)), nprocs=2, join=True)
    files = sorted((tmp_path / "ddp").glob("*.nprof"))
    assert [f.name for f in files] == ["rank00000_window000.nprof", "rank00001_window000.nprof"]
    traces = [read_trace(f) for f in files]
    for r, tf in enumerate(traces):
        assert tf.header.rank == r and tf.header.world_size == 2 and tf.header.run_id == "ddp"
    colls = [tf.table("collectives") for tf in traces]
    keys = [sorted(zip(c["process_group"].astype(str), c["sequence_number"], c["operation"].astype(str)))
            for c in colls]
    assert keys[0] == keys[1]
    groups = {g for g, _, _ in keys[0]}
    assert len(groups) == 2  # default group (DDP + all_reduce) and the new group (all_gather)
    ops = {o for _, _, o in keys[0]}
    assert any("all_reduce" in o or "allreduce" in o for o in ops)
    # default group: consecutive sequence numbers; per step one DDP bucket all-reduce + the explicit all_reduce
    default = sorted(k for k in keys[0] if k[0] == "0")
    seqs = [s for _, s, _ in default]
    assert seqs == list(range(seqs[0], seqs[0] + len(seqs)))
    assert sum("all_reduce" in o or "allreduce" in o for _, _, o in default) == 4
    pair = [k for k in keys[0] if k[0] != "0"]
    assert len(pair) == 2 and all("gather" in o for _, _, o in pair)
    # the host op rows of the collectives carry Kineto's record_param_comms keys
    import json
    ops0 = traces[0].table("host_ops")
    args = [json.loads(a) for a in ops0["args"].astype(str) if a]
    comms = [a for a in args if "Collective name" in a]
    assert len(comms) == len(keys[0])
    for a in comms:
        assert a["Group size"] == 2 and json.loads(a["Process Group Ranks"]) == [0, 1]
        assert a["In msg nelems"] > 0 and a["Out msg nelems"] >= a["In msg nelems"]
        if a["Collective name"] in ("allreduce", "_allgather_base"):
            assert a["dtype"] == "float"
    ddp = [a for a in comms if a["In msg nelems"] == 16 * 32 + 32 + 32 * 4 + 4]
    assert len(ddp) == 2  # the gradient bucket: all parameters
