"""Capture overhead: one training step of a small GPT-style transformer, unprofiled, under the stock
torch.profiler, and under torch.profiler + NeuronConfig (simulated trn2 runtime). Prints ratios from one run.

Target: NeuronConfig adds at most 10% to the stock profiler's step time (the device simulation runs at export,
in ``on_trace_ready``, outside the profiled steps; its cost is printed separately).

Method: the three modes are interleaved over ``--rounds`` rounds (the machine is shared); in each round a mode runs
``--warmup`` unmeasured steps then ``--steps`` timed steps, all inside one profiler active window for the profiled
modes (record_shapes=True, with_modules=True for both). Step time = median over all timed steps of the mode.
``--no-shapes`` builds both profilers with record_shapes=False (torch.profiler's default): NeuronConfig then
still records shapes (the device model needs them), so this prints what that costs against the stock profiler
without them.

    python bench/bench_capture_overhead.py [--steps 8] [--rounds 5] [--no-shapes] [--json out.json]
"""
from __future__ import annotations

import argparse
import json
import os
import statistics
import sys
import tempfile
import time
import warnings
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(REPO))
os.environ.setdefault("KINETO_LOG_LEVEL", "6")

import torch  # noqa: E402
from torch.profiler import ProfilerActivity, profile, schedule  # noqa: E402

from examples.models import GPT, GPTConfig, gpt_batch, gpt_train_step  # noqa: E402
from neuron_profiler import NeuronConfig, NeuronProfiler  # noqa: E402

MODEL = GPTConfig(vocab_size=512, block_size=64, n_layer=2, n_head=4, n_embd=64)


def _timed_steps(step, n: int, prof=None) -> list[float]:
    times = []
    for _ in range(n):
        t0 = time.perf_counter()
        step()
        times.append(time.perf_counter() - t0)
        if prof is not None:
            prof.step()
    return times


def run_mode(mode: str, step, warmup: int, steps: int, out: Path, shapes: bool = True) -> tuple[list[float], float]:
    """(timed step seconds, export seconds) for one round of ``mode`` (none, stock, neuron)."""
    for _ in range(warmup):
        step()
    if mode == "none":
        return _timed_steps(step, steps), 0.0
    export_s = [0.0]
    if mode == "stock":
        acts, cfg = [ProfilerActivity.CPU], None

        def ready(p) -> None:
            t = time.perf_counter()
            p.events()  # the stock profiler's own post-processing, for comparison
            export_s[0] += time.perf_counter() - t
    else:
        acts = [ProfilerActivity.CPU, ProfilerActivity.PrivateUse1]
        cfg = NeuronConfig(profile_output_dir=out, run_id=f"bench_{time.time_ns()}", runtime="simulated")
        npf = NeuronProfiler(cfg)

        def ready(p) -> None:
            t = time.perf_counter()
            npf.export_trace(p)
            export_s[0] += time.perf_counter() - t
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", UserWarning)
        kw = {"experimental_config": cfg} if cfg is not None else {}
        with profile(activities=acts, record_shapes=shapes, with_modules=True, on_trace_ready=ready,
                     schedule=schedule(wait=0, warmup=1, active=steps, repeat=1), **kw) as prof:
            _timed_steps(step, 1, prof)  # the profiler's warm-up step
            times = _timed_steps(step, steps, prof)
    return times, export_s[0]


def main(argv: list[str] | None = None) -> dict:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--steps", type=int, default=8)
    ap.add_argument("--warmup", type=int, default=3)
    ap.add_argument("--rounds", type=int, default=5)
    ap.add_argument("--no-shapes", action="store_true", help="profile with record_shapes=False (both modes)")
    ap.add_argument("--json", type=Path)
    a = ap.parse_args(argv)
    torch.manual_seed(0)
    torch.set_num_threads(1)  # shared 2-core machine: keep intra-op threads from fighting the profiler
    model = GPT(MODEL)
    opt = torch.optim.AdamW(model.parameters(), lr=1e-3)
    x, y = gpt_batch(MODEL, batch=4)

    def step() -> None:
        gpt_train_step(model, opt, x, y)

    times: dict[str, list[float]] = {"none": [], "stock": [], "neuron": []}
    export: dict[str, list[float]] = {"stock": [], "neuron": []}
    with tempfile.TemporaryDirectory() as tmp:
        for r in range(a.rounds):
            order = ["none", "stock", "neuron"] if r % 2 == 0 else ["neuron", "stock", "none"]
            for mode in order:
                t, e = run_mode(mode, step, a.warmup, a.steps, Path(tmp), shapes=not a.no_shapes)
                times[mode] += t
                if mode != "none":
                    export[mode].append(e)
    med = {m: statistics.median(v) for m, v in times.items()}
    res = {"step_ms": {m: round(v * 1e3, 3) for m, v in med.items()},
           "stock_over_unprofiled": round(med["stock"] / med["none"], 3),
           "neuron_over_unprofiled": round(med["neuron"] / med["none"], 3),
           "neuron_over_stock": round(med["neuron"] / med["stock"], 3),
           "export_ms_per_window": {m: round(statistics.median(v) * 1e3, 1) for m, v in export.items()},
           "steps_per_mode": len(times["none"]), "target_neuron_over_stock_max": 1.10,
           "record_shapes": not a.no_shapes}
    res["target_met"] = res["neuron_over_stock"] <= 1.10
    print(f"model: GPT n_layer={MODEL.n_layer} n_embd={MODEL.n_embd} block={MODEL.block_size}, batch 4, AdamW; "
          f"{a.rounds} rounds x {a.steps} timed steps per mode, record_shapes={not a.no_shapes}")
    for m in ("none", "stock", "neuron"):
        print(f"  {m:>7}: median step {res['step_ms'][m]:8.3f} ms")
    print(f"  stock / unprofiled      = {res['stock_over_unprofiled']:.3f}")
    print(f"  neuron / unprofiled     = {res['neuron_over_unprofiled']:.3f}")
    print(f"  neuron / stock          = {res['neuron_over_stock']:.3f}   (target <= 1.10: "
          f"{'met' if res['target_met'] else 'NOT met'})")
    print(f"  export per window (ms): stock events() {res['export_ms_per_window']['stock']}, "
          f"NeuronProfiler.export_trace {res['export_ms_per_window']['neuron']} (outside the timed steps)")
    if a.json:
        a.json.write_text(json.dumps(res, indent=2))
    return res


if __name__ == "__main__":
    main()
