"""Regenerate the bundled sample traces with the real capture path (stock torch.profiler + NeuronConfig,
simulated trn2 runtime) from the plain-PyTorch models in ``examples/models.py``.

    python sample_traces/regenerate.py            # all
    python sample_traces/regenerate.py gpt cnn    # some

Writes ``gpt_train_step.nprof`` (two eager training steps of a 4-layer GPT-style model under BF16 autocast,
with Python stacks and host counters), ``gpt_train_step_compiled.nprof`` (the same steps with
``torch.compile(model, backend="neuron")``), ``cnn_inference.nprof`` (CNN inference) and
``ddp_train_rank0.nprof`` / ``ddp_train_rank1.nprof`` (2-rank gloo data-parallel training step).
"""
from __future__ import annotations

import os
import shutil
import socket
import sys
import tempfile
import warnings
from pathlib import Path

HERE = Path(__file__).resolve().parent
REPO = HERE.parent
sys.path.insert(0, str(REPO))
os.environ.setdefault("KINETO_LOG_LEVEL", "6")

import torch  # noqa: E402
from torch.profiler import ProfilerActivity, profile, schedule  # noqa: E402

from examples.models import GPT, GPTConfig, SmallCNN, gpt_batch, gpt_train_step  # noqa: E402
from neuron_profiler import NeuronConfig, NeuronProfiler, ProfileMode  # noqa: E402

TARGET = "trn2"
GPT_CFG = GPTConfig(vocab_size=4096, block_size=256, n_layer=4, n_head=8, n_embd=512)
ACTIVITIES = [ProfilerActivity.CPU, ProfilerActivity.PrivateUse1]


def _profiled(cfg: NeuronConfig, steps: int, body, active: int = 1, **kw) -> Path:
    npf = NeuronProfiler(cfg)
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", UserWarning)
        with profile(activities=ACTIVITIES, experimental_config=cfg, record_shapes=True, with_modules=True,
                     schedule=schedule(wait=1, warmup=1, active=active, repeat=1), on_trace_ready=npf.export_trace,
                     **kw) as prof:
            for _ in range(steps):
                body()
                prof.step()
    assert len(npf.paths) == 1, npf.paths
    return npf.paths[0]


def _gpt_step(model, opt, x, y) -> None:
    with torch.autocast("cpu", dtype=torch.bfloat16):  # what a Trainium training step would run in
        gpt_train_step(model, opt, x, y)


def _gpt(out: Path, compiled: bool) -> Path:
    torch.manual_seed(0)
    model = GPT(GPT_CFG)
    opt = torch.optim.AdamW(model.parameters(), lr=1e-3)
    x, y = gpt_batch(GPT_CFG, batch=8)
    run_id = "gpt_train_step_compiled" if compiled else "gpt_train_step"
    modes = [ProfileMode.DEVICE, ProfileMode.RUNTIME] + ([] if compiled else [ProfileMode.CPU_UTIL, ProfileMode.HOST_MEMORY])
    cfg = NeuronConfig(modes=modes, profile_output_dir=out, run_id=run_id, target=TARGET, runtime="simulated",
                       cpu_sample_interval_s=0.01)
    step_model = torch.compile(model, backend="neuron") if compiled else model
    return _profiled(cfg, 4, lambda: _gpt_step(step_model, opt, x, y), active=2, with_stack=not compiled)


def gpt(out: Path) -> list[Path]:
    return [_copy(_gpt(out, compiled=False), "gpt_train_step.nprof")]


def gpt_compiled(out: Path) -> list[Path]:
    return [_copy(_gpt(out, compiled=True), "gpt_train_step_compiled.nprof")]


def cnn(out: Path) -> list[Path]:
    torch.manual_seed(0)
    model = SmallCNN(width=32).eval()
    x = torch.randn(16, 3, 64, 64)
    cfg = NeuronConfig(profile_output_dir=out, run_id="cnn_inference", target=TARGET, runtime="simulated")

    def infer() -> None:
        with torch.no_grad():
            model(x)
    return [_copy(_profiled(cfg, 3, infer), "cnn_inference.nprof")]


def _ddp_worker(rank: int, world: int, port: int, out: str) -> None:
    import torch.distributed as dist
    os.environ.update(MASTER_ADDR="127.0.0.1", MASTER_PORT=str(port))
    dist.init_process_group("gloo", rank=rank, world_size=world)
    try:
        torch.manual_seed(0)
        # big enough that the step is device work and gradient all-reduces, not launch overhead
        cfg_m = GPTConfig(vocab_size=1024, block_size=256, n_layer=2, n_head=8, n_embd=512)
        model = torch.nn.parallel.DistributedDataParallel(GPT(cfg_m), bucket_cap_mb=1)
        opt = torch.optim.SGD(model.parameters(), lr=0.1)
        x, y = gpt_batch(cfg_m, batch=8, seed=rank)

        def step() -> None:
            opt.zero_grad(set_to_none=True)
            with torch.autocast("cpu", dtype=torch.bfloat16):
                _, loss = model(x, y)
            loss.backward()
            opt.step()
        cfg = NeuronConfig(profile_output_dir=out, run_id="ddp_train", target=TARGET, runtime="simulated")
        _profiled(cfg, 3, step)
    finally:
        dist.destroy_process_group()


def ddp(out: Path) -> list[Path]:
    import torch.multiprocessing as mp
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        port = s.getsockname()[1]
    mp.spawn(_ddp_worker, args=(2, port, str(out)), nprocs=2, join=True)
    files = sorted((out / "ddp_train").glob("*.nprof"))
    return [_copy(f, f"ddp_train_rank{i}.nprof") for i, f in enumerate(files)]


def _copy(src: Path, name: str) -> Path:
    dst = HERE / name
    shutil.copyfile(src, dst)
    return dst


SAMPLES = {"gpt": gpt, "gpt_compiled": gpt_compiled, "cnn": cnn, "ddp": ddp}


def main(argv: list[str]) -> None:
    names = argv or list(SAMPLES)
    unknown = [n for n in names if n not in SAMPLES]
    if unknown:
        raise SystemExit(f"unknown sample(s) {unknown}; valid: {', '.join(SAMPLES)}")
    with tempfile.TemporaryDirectory() as tmp:
        for n in names:
            for p in SAMPLES[n](Path(tmp) / n):
                print(f"{p.relative_to(REPO)}: {p.stat().st_size:,} bytes")


if __name__ == "__main__":
    main(sys.argv[1:])
