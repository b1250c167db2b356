"""A 2-rank gloo program using the common torch.distributed, autograd and device APIs before, inside and after a
profiler window with a NeuronConfig. Each rank writes what every call returned to ``OUT/calls_rank<r>.json``.

    python dist_program.py spawn OUT PORT                                   # torch.multiprocessing.spawn
    torchrun --standalone --nproc-per-node 2 dist_program.py torchrun OUT    # profiles itself
    neuron-profile capture -- torchrun ... dist_program.py runner OUT       # profiled by the runner
"""
from __future__ import annotations

import gc
import json
import os
import sys
import warnings
from collections.abc import Callable
from typing import Any

import torch
import torch.distributed as dist

WORLD = 2


def _try(fn: Callable[[], Any]) -> Any:
    try:
        return fn()
    except Exception as exc:  # noqa: BLE001 - the test compares results; an error is a result
        return f"ERROR {exc!r}"


def _ddp_grads(rank: int) -> list[float]:
    torch.manual_seed(0)
    model = torch.nn.parallel.DistributedDataParallel(torch.nn.Linear(3, 1, bias=False))
    model(torch.full((2, 3), float(rank + 1))).sum().backward()
    return model.module.weight.grad.flatten().tolist()


def _autograd(rank: int) -> list[float]:
    w = torch.ones(3, requires_grad=True)
    (w * (rank + 1)).sum().backward()
    return w.grad.tolist()


def calls(rank: int) -> dict[str, Any]:
    """Every API call and what it returned (or the error it raised)."""
    out: dict[str, Any] = {}

    def barrier() -> str:
        dist.barrier()
        return "ok"

    def all_reduce() -> list[float]:
        t = torch.full((4,), float(rank + 1))
        dist.all_reduce(t)
        return t.tolist()

    def broadcast() -> list[float]:
        t = torch.full((3,), float(rank))
        dist.broadcast(t, src=1)
        return t.tolist()

    def all_gather_list() -> list[list[float]]:
        parts = [torch.empty(2) for _ in range(WORLD)]
        dist.all_gather(parts, torch.full((2,), float(rank)))
        return [p.tolist() for p in parts]

    def all_gather_tensor() -> list[float]:
        t = torch.empty(2 * WORLD)
        with warnings.catch_warnings():
            warnings.simplefilter("ignore", FutureWarning)  # deprecated in favour of all_gather_single in 2.13
            dist.all_gather_into_tensor(t, torch.full((2,), float(rank)))
        return t.tolist()

    def all_gather_object() -> list[Any]:
        objs: list[Any] = [None] * WORLD
        dist.all_gather_object(objs, {"rank": rank})
        return objs

    def neuron_sync() -> str:
        torch.neuron.synchronize()
        return "ok"

    for name, fn in [("barrier", barrier), ("all_reduce", all_reduce), ("broadcast", broadcast),
                     ("all_gather_list", all_gather_list), ("all_gather_tensor", all_gather_tensor),
                     ("all_gather_object", all_gather_object), ("autograd", lambda: _autograd(rank)),
                     ("ddp_grads", lambda: _ddp_grads(rank)),
                     ("accelerator_is_available", torch.accelerator.is_available),
                     ("accelerator_device_count", torch.accelerator.device_count),
                     ("current_accelerator_checked", lambda: repr(torch.accelerator.current_accelerator(True))),
                     ("get_device_module", lambda: torch.get_device_module().__name__),
                     ("get_device_module_neuron", lambda: torch.get_device_module("neuron").__name__),
                     ("neuron_synchronize", neuron_sync), ("barrier_end", barrier)]:
        out[name] = _try(fn)
    return out


def expected(rank: int) -> dict[str, Any]:
    """What ``calls`` returns on a CPU-only 2-rank machine."""
    return {"barrier": "ok", "all_reduce": [3.0] * 4, "broadcast": [1.0] * 3,
            "all_gather_list": [[0.0, 0.0], [1.0, 1.0]], "all_gather_tensor": [0.0, 0.0, 1.0, 1.0],
            "all_gather_object": [{"rank": 0}, {"rank": 1}], "autograd": [float(rank + 1)] * 3,
            "ddp_grads": [3.0, 3.0, 3.0],  # mean over ranks of 2 * (rank + 1)
            "accelerator_is_available": False, "accelerator_device_count": 0, "current_accelerator_checked": "None",
            "get_device_module": "torch.cpu", "get_device_module_neuron": "torch.neuron",
            "neuron_synchronize": "ok", "barrier_end": "ok"}


def run(rank: int, out: str, own_profiler: bool) -> None:
    """Phases before / inside / after a window (the runner's whole program is one window: "inside" only)."""
    from torch.profiler import ProfilerActivity, profile

    if own_profiler:
        from neuron_profiler import NeuronConfig, NeuronProfiler
        cfg = NeuronConfig(profile_output_dir=out, run_id="calls", runtime="simulated")
        npf = NeuronProfiler(cfg)
    dist.init_process_group("gloo", rank=rank, world_size=WORLD)
    results: dict[str, Any] = {}
    if own_profiler:
        results["before"] = calls(rank)
        with warnings.catch_warnings():
            warnings.simplefilter("ignore", UserWarning)
            with profile(activities=[ProfilerActivity.CPU, ProfilerActivity.PrivateUse1], experimental_config=cfg,
                         on_trace_ready=npf.export_trace):
                results["inside"] = calls(rank)
        results["after"] = calls(rank)
    else:
        results["inside"] = calls(rank)
    results["expected"] = expected(rank)
    with open(os.path.join(out, f"calls_rank{rank}.json"), "w") as f:
        json.dump(results, f)
    # The DDP modules made above are reference cycles. Left to the collector at interpreter exit, their gloo
    # work items (which keep the autograd engine's thread-local context object) die on a gloo thread while
    # Python finalises, and that thread aborts the process ("terminate called without an active
    # exception"; seen with the stock torch.profiler and no neuron_profiler too). Collect them while the
    # process group lives.
    gc.collect()
    dist.destroy_process_group()


def _spawned(rank: int, out: str, port: int) -> None:
    os.environ.update(MASTER_ADDR="127.0.0.1", MASTER_PORT=str(port))
    run(rank, out, own_profiler=True)


if __name__ == "__main__":
    mode, out_dir = sys.argv[1], sys.argv[2]
    if mode == "spawn":
        import torch.multiprocessing as mp
        mp.spawn(_spawned, args=(out_dir, int(sys.argv[3])), nprocs=WORLD, join=True)
    else:
        run(int(os.environ["RANK"]), out_dir, own_profiler=(mode == "torchrun"))
