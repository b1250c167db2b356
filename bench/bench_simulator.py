"""Speed of the simulated Neuron runtime: host ops -> device events, per target.

    python bench/bench_simulator.py [--ops 10000 100000]
"""
from __future__ import annotations

import argparse
import sys
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))
from neuron_profiler.runtime.simulated import SimulatedRuntime  # noqa: E402
from neuron_profiler.runtime.simulated.synthetic import host_ops_builder, random_op_stream  # noqa: E402


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--ops", type=int, nargs="+", default=[10_000, 100_000])
    ap.add_argument("--targets", nargs="+", default=["trn1", "trn2", "trn3"])
    args = ap.parse_args()
    for n in args.ops:
        rows = random_op_stream(n)
        for target in args.targets:
            b = host_ops_builder(rows)
            host_ops = b.table("host_ops")
            best = float("inf")
            for _ in range(3):
                b = host_ops_builder(rows)
                t = time.perf_counter()
                SimulatedRuntime(target).emit(b, host_ops)
                best = min(best, time.perf_counter() - t)
            events = b.rows("instructions") + b.rows("dma") + b.rows("collectives")
            print(f"{target}: {n:,} host ops -> {events:,} device events in {best:.3f} s "
                  f"({n / best:,.0f} host ops/s, {events / best:,.0f} events/s; best of 3)")


if __name__ == "__main__":
    main()
