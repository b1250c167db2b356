"""An identical DDP training program on every rank (gloo, CPU): ``torchrun --nproc-per-node 2 dist_train_program.py``
or ``python dist_train_program.py spawn PORT`` (torch.multiprocessing.spawn). Meant to run under
``neuron-profile capture``, which profiles each process from interpreter start-up, before the process group exists."""
from __future__ import annotations

import gc
import os
import sys

import torch
import torch.distributed as dist
import torch.nn as nn

STEPS = 4


def train() -> None:
    dist.init_process_group("gloo")
    torch.manual_seed(0)
    model = nn.parallel.DistributedDataParallel(nn.Sequential(nn.Linear(256, 512), nn.ReLU(), nn.Linear(512, 256)))
    opt = torch.optim.SGD(model.parameters(), lr=0.1)
    x = torch.randn(32, 256)
    for _ in range(STEPS):
        model(x).square().mean().backward()
        opt.step()
        opt.zero_grad()
    # free DDP's reducer (and its gloo work) before the group goes: torch's gloo shutdown can otherwise
    # deadlock on a worker thread's Python object (seen under torchrun, with and without the profiler)
    del model, opt
    gc.collect()
    dist.destroy_process_group()


def _spawned(rank: int, port: int) -> None:
    os.environ.update(MASTER_ADDR="127.0.0.1", MASTER_PORT=str(port), RANK=str(rank), WORLD_SIZE="2")
    train()


if __name__ == "__main__":
    if len(sys.argv) > 1 and sys.argv[1] == "spawn":
        import torch.multiprocessing as mp
        mp.spawn(_spawned, args=(int(sys.argv[2]),), nprocs=2, join=True)
    else:
        train()
