"""Time the analyses on synthetic Neuron device traces of 1M, 5M and 10M events, and their scaling.

Targets (issue "Analysis core"), on this machine at 5M events: ``summary``, ``hot_ops`` and ``roofline`` each
within 2 s, ``recommendations`` within 3 s; wall time close to linear from 1M to 10M events (the 10M / 1M
ratio near 10). Each trace is written through ``neuron_profiler.synthetic_trace`` (streaming, bounded memory)
into a temporary directory: ~90% instructions on 2 NeuronCores x 6 engines, ~10% DMA transfers, 20k host ops
(aten ops with module paths and shapes, 10 ProfilerSteps), 2,000 collectives. Each analysis is timed cold
(``Trace.clear_memo()``: derived results dropped, tables already loaded), best of ``--repeats``; the table load
is printed separately. Ratios come from one run of this script; compare them, not times across runs.

    python bench/bench_analysis.py [--events 1000000 5000000 10000000] [--repeats 3] [--keep DIR]
"""
from __future__ import annotations

import argparse
import gc
import sys
import tempfile
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))
import analysis  # noqa: E402
from neuron_profiler.synthetic_trace import write_synthetic_trace  # noqa: E402

TARGETS_S = {"summary": 2.0, "hot_ops(by='op')": 2.0, "roofline": 2.0, "recommendations": 3.0}
TARGET_EVENTS = 5_000_000
TABLES = ("tracks", "host_ops", "instructions", "dma", "collectives", "counters", "flows")


def write_trace(path: Path, n_events: int, seed: int = 0) -> Path:
    """~90% instructions and ~10% DMA transfers, 10 ProfilerSteps of 2,000 host ops, 200 all_reduces per step,
    10% fp32 instructions and 5% transposing matmuls (so the recommendations have something to find)."""
    n_dma = n_events // 10
    return write_synthetic_trace(path, n_events - n_dma, steps=10, seed=seed, host_ops_per_step=2000,
                                 dma_queues=4, n_dma=n_dma, collectives_per_step=200, fp32_fraction=0.1,
                                 transpose_fraction=0.05)


def _time(fn, repeats: int) -> float:
    best = float("inf")
    for _ in range(repeats):
        gc.collect()
        t = time.perf_counter()
        fn()
        best = min(best, time.perf_counter() - t)
    return best


def _analyses(tr) -> list[tuple[str, object]]:
    def cold(fn):
        def run():
            tr.clear_memo()
            fn()
        return run

    return [("instruction_work (shared, in each below)", cold(lambda: analysis.instruction_work(tr))),
            ("device_activity (shared, in each below)", cold(lambda: analysis.device_activity(tr))),
            ("summary", cold(lambda: analysis.summary(tr))),
            ("hot_ops(by='op')", cold(lambda: analysis.hot_ops(tr, by="op"))),
            ("hot_ops(by='module')", cold(lambda: analysis.hot_ops(tr, by="module"))),
            ("roofline", cold(lambda: analysis.roofline(tr))),
            ("recommendations", cold(lambda: analysis.recommendations(tr))),
            ("dma_throughput", cold(lambda: analysis.dma_throughput(tr))),
            ("summary, window of 1 step", cold(lambda: analysis.summary(tr.select_steps(3)))),
            ("temporal_breakdown(hta_compatible=True)",
             cold(lambda: analysis.temporal_breakdown(tr, hta_compatible=True)))]


def measure(n_events: int, repeats: int, tmp: Path) -> dict[str, float]:
    path = tmp / f"bench_analysis_{n_events}.nprof"
    t = time.perf_counter()
    write_trace(path, n_events)
    print(f"wrote {n_events:,} device events to {path} ({path.stat().st_size / 1e6:.0f} MB) "
          f"in {time.perf_counter() - t:.1f} s")
    tr = analysis.load(path)
    t = time.perf_counter()
    for name in TABLES:
        tr.analysis_table(name)
    print(f"  load the columns the analyses read (Trace.analysis_table): {time.perf_counter() - t:.2f} s "
          f"({len(tr.analysis_table('instructions')):,} instructions, {len(tr.table('dma', ['start_ts'])):,} DMA)")
    out = {name: _time(fn, repeats) for name, fn in _analyses(tr)}
    del tr
    gc.collect()
    return out


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--events", type=int, nargs="+", default=[1_000_000, 5_000_000, 10_000_000])
    ap.add_argument("--repeats", type=int, default=3)
    ap.add_argument("--keep", type=Path, help="write the traces into this folder and keep them")
    args = ap.parse_args(argv)
    sizes = sorted(args.events)
    with tempfile.TemporaryDirectory() as tmpdir:
        tmp = args.keep or Path(tmpdir)
        tmp.mkdir(parents=True, exist_ok=True)
        res = {n: measure(n, args.repeats, tmp) for n in sizes}
    names = list(res[sizes[0]])
    title = 'analysis (cold, best of ' + str(args.repeats) + ', s)'
    head = f"{title:44s}" + "".join(f"{n / 1e6:>8.0f}M" for n in sizes)
    scale = len(sizes) > 1
    print(head + (f"  {sizes[-1] // sizes[0]}x events" if scale else "") + "  target")
    ok = True
    for name in names:
        row = f"{name:44s}" + "".join(f"{res[n][name]:9.2f}" for n in sizes)
        if scale:
            row += f"  {res[sizes[-1]][name] / max(res[sizes[0]][name], 1e-9):6.1f}x    "
        if name in TARGETS_S and TARGET_EVENTS in res:
            hit = res[TARGET_EVENTS][name] <= TARGETS_S[name]
            ok &= hit
            row += f"  <= {TARGETS_S[name]:.0f} s at 5M: {'ok' if hit else 'MISSED'}"
        print(row)
    return 0 if ok else 1


if __name__ == "__main__":
    raise SystemExit(main())
