"""Export speed, peak memory and size per format (Chrome JSON, Chrome JSON.gz, Perfetto, Parquet, .nprof+zstd)
for synthetic traces of about 1M and 10M events (``neuron_profiler.synthetic_trace``: instructions on 2 cores x
6 engines, DMA transfers, host ops, collectives, counters, flows).

Each export runs in a fresh process (``os.wait4`` gives that process's own peak RSS), so the figures do not mix.
``--code DIR`` (repeatable) runs the exports with that checkout's ``neuron_profiler`` (e.g. the code before a
change: ``git archive <commit> | tar -x -C DIR``); with two, each export runs with both, one after the other, and
the ratio of the last to the first is printed from the same run (the machine is shared: compare ratios, not
times across runs). ``--max-gb`` caps each export's address space (an export that needs more is reported as
failed, not left to swap the shared machine).

    python bench/bench_export.py [--sizes 1000000 10000000] [--formats chrome perfetto parquet nprof]
                                 [--code /tmp/before --code .] [--max-gb 12]
"""
from __future__ import annotations

import argparse
import os
import resource
import subprocess
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

FORMATS = {  # name -> (output name, python that exports sys.argv[1] to sys.argv[2])
    "chrome": ("out.json", "from neuron_profiler.exporters.chrome import export_chrome as f; f(src, out)"),
    "chrome.gz": ("out.json.gz", "from neuron_profiler.exporters.chrome import export_chrome as f; f(src, out)"),
    "perfetto": ("out.pftrace", "from neuron_profiler.exporters.perfetto import export_perfetto as f; f(src, out)"),
    "parquet": ("pq", "from neuron_profiler.exporters.parquet import export_parquet as f; f(src, out)"),
    "nprof": ("out.nprof", "from neuron_profiler.trace.builder import rewrite_trace as f; f(src, out, "
                           "compression='zstd')"),
}


def make_trace(path: Path, events: int) -> int:
    """A synthetic trace of about ``events`` events (instructions are ~91% of them); returns the exact count."""
    from neuron_profiler.synthetic_trace import write_synthetic_trace
    from neuron_profiler.trace import read_trace

    if not path.exists():
        write_synthetic_trace(path, int(events / 1.1), steps=4)
    counts = read_trace(path).row_counts
    return sum(n for t, n in counts.items() if t not in ("tracks", "flows"))


def run_export(fmt: str, src: Path, out_dir: Path, code: Path, max_gb: float) -> tuple[float, int, int, str]:
    """(seconds, peak RSS bytes, output bytes, error) of one export in a fresh process."""
    name, stmt = FORMATS[fmt]
    out = out_dir / f"{fmt}_{name}"
    prog = f"import sys; src, out = sys.argv[1], sys.argv[2]; {stmt}"

    def limit() -> None:
        cap = int(max_gb * (1 << 30))
        resource.setrlimit(resource.RLIMIT_AS, (cap, cap))

    env = {**os.environ, "PYTHONPATH": str(code)}
    t = time.perf_counter()
    p = subprocess.Popen([sys.executable, "-c", prog, str(src), str(out)], cwd=code, env=env, preexec_fn=limit,
                         stdout=subprocess.DEVNULL, stderr=subprocess.PIPE)
    _, status, usage = os.wait4(p.pid, 0)
    secs = time.perf_counter() - t
    err = p.stderr.read().decode(errors="replace").strip().splitlines()
    p.stderr.close()
    size = sum(f.stat().st_size for f in out.rglob("*") if f.is_file()) if out.is_dir() else (
        out.stat().st_size if out.exists() else 0)
    failed = (err[-1] if err else f"exit status {status}") if os.waitstatus_to_exitcode(status) else ""
    return secs, usage.ru_maxrss * 1024, size, failed


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--sizes", type=int, nargs="+", default=[1_000_000, 10_000_000])
    ap.add_argument("--formats", nargs="+", default=list(FORMATS), choices=list(FORMATS))
    ap.add_argument("--code", type=Path, action="append", help="checkout whose neuron_profiler exports (repeatable; "
                                                                "default this one)")
    ap.add_argument("--traces", type=Path, default=Path(tempfile.gettempdir()) / "bench_export_traces",
                    help="where the synthetic traces are kept between runs")
    ap.add_argument("--max-gb", type=float, default=12.0)
    args = ap.parse_args()
    codes = [c.resolve() for c in (args.code or [ROOT])]
    args.traces.mkdir(parents=True, exist_ok=True)
    for k, c in enumerate(codes):
        print(f"code {k}: {c}")
    print(f"{'events':>12} {'format':<14} {'seconds':>8} {'events/s':>12} {'peak RSS MB':>12} {'size MB':>9} "
          f"{'bytes/event':>11}  note")
    for n in args.sizes:
        src = args.traces / f"synthetic_{n}.nprof"
        events = make_trace(src, n)
        print(f"{events:>12,} {'(source)':<14} {'':>8} {'':>12} {'':>12} {src.stat().st_size / 1e6:>9.1f} "
              f"{src.stat().st_size / events:>11.2f}")
        for fmt in args.formats:
            runs = []
            for k, code in enumerate(codes):
                with tempfile.TemporaryDirectory(dir=args.traces) as d:
                    secs, peak, size, err = run_export(fmt, src, Path(d), code, args.max_gb)
                runs.append((secs, peak, size, err))
                label = fmt if len(codes) == 1 else f"{fmt} [{k}]"
                print(f"{events:>12,} {label:<14} {secs:>8.1f} {events / secs:>12,.0f} {peak / 1e6:>12,.0f} "
                      f"{size / 1e6:>9.1f} {size / events:>11.2f}  {('FAILED: ' + err[:120]) if err else ''}",
                      flush=True)
            if len(runs) > 1 and not runs[0][3] and not runs[-1][3]:
                (t0, p0, s0, _), (t1, p1, s1, _) = runs[0], runs[-1]
                print(f"{'':>12} {fmt + ' ratio':<14} speed {t0 / t1:.1f}x, peak RSS {p1 / p0:.2f}x, size "
                      f"{s1 / s0:.2f}x (code {len(runs) - 1} vs code 0, this run)", flush=True)


if __name__ == "__main__":
    main()
