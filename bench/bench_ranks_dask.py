"""The cross-rank report of a big synthetic run with pandas in one process and with Dask on 1 and 2 workers.

    python bench/bench_ranks_dask.py                     # 64 ranks x 500k events (written once, then cached)
    python bench/bench_ranks_dask.py --ranks 8 --events 50000 --workers 1 2 4
    python bench/bench_ranks_dask.py --run /data/my_synthetic_run   # a run written by neuron_profiler.synthetic_run

Writes the run with ``neuron_profiler.synthetic_run`` (stragglers and slow links injected, so the answer is
known) into the user cache directory unless ``--run`` names one, then runs each configuration in a fresh
process: ``analysis.cross_rank_report`` with ``engine="pandas"``, then ``engine="dask"`` on a LocalCluster of
N single-thread worker processes. Prints wall time (and, for Dask, the cluster start), peak RSS of the
process running the report and of each worker (``resource.getrusage`` in the workers via ``client.run``),
each worker's peak above its baseline and that growth over one rank's trace in memory. A worker's baseline
is its RSS once warm: the analysis, the trace reader and its codecs imported and one reduction of a small
sample trace run as a Dask task (Dask's task machinery, lazy imports and caches: a fixed cost, not the
rank's; the RSS after the imports alone is printed too); its peak is VmHWM from then on (restarted through
``/proc/self/clear_refs``). One rank in memory is every table of the largest rank file decoded
(``DataFrame.memory_usage(deep=True)``; rank 0's is printed beside it). Checks every
configuration found the injected stragglers and slow links and that all frames are identical.
"""
from __future__ import annotations

import argparse
import json
import os
import pickle
import resource
import subprocess
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))


def _rss_peak_mb() -> float:
    """Peak RSS of this process since the last :func:`_reset_peak` (VmHWM), else since it started."""
    try:
        with open("/proc/self/status") as f:
            return next(int(ln.split()[1]) / 1024 for ln in f if ln.startswith("VmHWM:"))
    except (OSError, StopIteration):
        return resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024  # Linux: KiB


def _reset_peak() -> float:
    """Restart the peak RSS from the current RSS (Linux ``/proc/self/clear_refs``); returns the RSS then."""
    with open("/proc/self/clear_refs", "w") as f:
        f.write("5")
    return _rss_now_mb()


#: a small trace of the repository: one reduction of it warms a worker (Dask's task machinery, lazy imports,
#: caches) before its baseline is taken
WARM_TRACE = ROOT / "sample_traces" / "ddp_train_rank0.nprof"


def _warm_task() -> float:
    """In a worker, as a Dask task: the cross-rank reduction of the small sample trace, then the RSS."""
    from analysis import Trace
    from analysis.analyses import cross_rank

    cross_rank.file_parts(str(WARM_TRACE), None, "warm-up", cross_rank.PARTS, 1e6, trace_cls=Trace)
    return _rss_now_mb()


def _rss_now_mb() -> float:
    import psutil

    return psutil.Process().memory_info().rss / 2**20


def _warm() -> float:
    """In a worker: import what the tasks use (the analysis, the trace reader and its codecs), return the RSS
    then (the worker's baseline)."""
    import analysis  # noqa: F401
    import neuron_profiler.trace  # noqa: F401
    from analysis.analyses import cross_rank  # noqa: F401

    return _rss_now_mb()


def cache_dir(ranks: int, events: int) -> Path:
    from platformdirs import user_cache_dir

    return Path(user_cache_dir("neuron-profiler")) / "bench_ranks_dask" / f"r{ranks}_e{events}"


def injected(ranks: int) -> tuple[dict[int, float], dict[int, float]]:
    """Stragglers and slow links of a run of ``ranks`` (tensor-parallel groups of 4)."""
    if ranks < 8:
        raise SystemExit("--ranks must be at least 8 (two tensor-parallel groups of 4)")
    strag = {ranks // 4 + 1: 1.5} if ranks < 32 else {17: 1.5, ranks - 3: 1.3}
    slow = {ranks * 2 // 3 // 4 * 4 + 2: 3.0}
    return strag, slow


def ensure_run(args) -> Path:
    if args.run:
        run = Path(args.run)
        if not (run / "truth.json").exists():
            raise SystemExit(f"{run} has no truth.json: write it with python -m neuron_profiler.synthetic_run")
        return run
    out = cache_dir(args.ranks, args.events)
    run = out / "synthetic_run"
    if (run / "truth.json").exists():
        print(f"reusing {run}")
        return run
    from neuron_profiler.synthetic_run import write_synthetic_run

    strag, slow = injected(args.ranks)
    t = time.perf_counter()
    write_synthetic_run(out, args.ranks, args.events, stragglers=strag, slow_links=slow, progress=True)
    print(f"wrote {run} in {time.perf_counter() - t:.1f} s")
    return run


def child(config: str, run: str, result: str) -> None:
    """One configuration in this (fresh) process; frames and figures pickled to ``result``."""
    base = _warm()
    import analysis
    from analysis.analyses.ranks import cross_rank_report

    out: dict = {"config": config, "baseline_mb": base}
    if config == "one_rank":
        from neuron_profiler.trace import read_trace

        truth = json.loads((Path(run) / "truth.json").read_text())
        for key, path in (("first", truth["paths"][0]), ("largest", max(truth["paths"], key=os.path.getsize))):
            with read_trace(path) as tf:
                tables = tf.tables()
            out[key] = {"rank": int(tf.header.rank), "bytes": int(sum(df.memory_usage(deep=True).sum()
                                                                      for df in tables.values())),
                        "events": int(sum(len(df) for df in tables.values()))}
            del tables
    elif config == "pandas":
        t = time.perf_counter()
        out["frames"] = cross_rank_report(analysis.load(run))
        out["wall_s"] = time.perf_counter() - t
    else:
        import distributed

        from analysis.distributed import local_cluster

        n = int(config.split("_")[1])
        t0 = time.perf_counter()
        with local_cluster(n) as cluster, distributed.Client(cluster) as c:  # the LocalCluster of engine="dask"
            imported = c.run(_warm)
            for w in imported:  # one warm-up reduction per worker, through the task machinery
                c.submit(_warm_task, workers=[w], pure=False).result()
            worker_base = c.run(_reset_peak)
            t1 = time.perf_counter()
            out["frames"] = cross_rank_report(analysis.load(run), engine="dask", scheduler=c)
            out["wall_s"] = time.perf_counter() - t1
            out["start_s"] = t1 - t0
            peaks = c.run(_rss_peak_mb)
            out["workers"] = [(peaks[w], worker_base[w], imported[w]) for w in sorted(peaks)]
    out["peak_mb"] = _rss_peak_mb()
    Path(result).write_bytes(pickle.dumps(out))


def run_child(config: str, run: Path) -> dict:
    with tempfile.TemporaryDirectory() as d:
        res = Path(d) / "result.pkl"
        subprocess.run([sys.executable, __file__, "--child", config, "--run", str(run), "--result", str(res)],
                       check=True, env={**os.environ, "PYTHONPATH": str(ROOT)})
        return pickle.loads(res.read_bytes())  # our own child's output


def found(frames: dict, truth: dict) -> tuple[list[int], list[str]]:
    s, sl = frames["stragglers"], frames["slow_links"]
    return sorted(int(r) for r in s.loc[s["straggler"], "rank"]), sorted(sl.loc[sl["slow_link"], "process_group"])


def main() -> int:
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--ranks", type=int, default=64)
    p.add_argument("--events", type=int, default=500_000, help="device events per rank (about)")
    p.add_argument("--workers", type=int, nargs="+", default=[1, 2], help="Dask worker counts to run")
    p.add_argument("--run", help="an existing synthetic run folder (with truth.json) instead of the cached one")
    p.add_argument("--skip-pandas", action="store_true", help="only the Dask configurations")
    p.add_argument("--child", help=argparse.SUPPRESS)
    p.add_argument("--result", help=argparse.SUPPRESS)
    a = p.parse_args()
    if a.child:
        child(a.child, a.run, a.result)
        return 0
    import pandas as pd

    run = ensure_run(a)
    truth = json.loads((run / "truth.json").read_text())
    one = run_child("one_rank", run)
    big, first = one["largest"], one["first"]
    rank_mb = big["bytes"] / 2**20  # a worker's peak is that of the biggest rank it reduced
    first_mb = first["bytes"] / 2**20
    print(f"\n{truth['ranks']} ranks; one rank in memory (all its tables decoded, deep memory_usage): the "
          f"largest file (rank {big['rank']}) {big['events']:,} rows = {rank_mb:.1f} MiB (rank {first['rank']}: "
          f"{first['events']:,} rows = {first['bytes'] / 2**20:.1f} MiB); injected stragglers "
          f"{truth['stragglers']}, slow groups {truth['slow_groups']}")
    configs = ([] if a.skip_pandas else ["pandas"]) + [f"dask_{n}" for n in a.workers]
    results = {}
    for cfg in configs:
        results[cfg] = r = run_child(cfg, run)
        line = (f"{cfg:<8} wall {r['wall_s']:7.1f} s" + (f" (+{r['start_s']:.1f} s cluster start)" if 'start_s' in r
                                                         else "")
                + f"   report process peak RSS {r['peak_mb']:7.0f} MiB (baseline {r['baseline_mb']:.0f})")
        print(line)
        for i, (peak, base, imported) in enumerate(r.get("workers", [])):
            print(f"           worker {i}: peak RSS {peak:6.0f} MiB, baseline {base:4.0f} MiB (imports only "
                  f"{imported:.0f}), growth {peak - base:6.0f} MiB = {(peak - base) / rank_mb:4.2f}x one rank "
                  f"({(peak - base) / first_mb:4.2f}x rank {first['rank']}; above the imports-only baseline "
                  f"{(peak - imported) / rank_mb:4.2f}x); peak {peak / rank_mb:4.2f}x")
        if cfg == "pandas":
            print(f"           growth {r['peak_mb'] - r['baseline_mb']:.0f} MiB = "
                  f"{(r['peak_mb'] - r['baseline_mb']) / rank_mb:.1f}x one rank")
    ok = True
    want = (sorted(int(k) for k in truth["stragglers"]), sorted(truth["slow_groups"]))
    for cfg, r in results.items():
        got = found(r["frames"], truth)
        ok &= got == want
        print(f"{cfg:<8} stragglers found {got[0]} slow links {got[1]}: "
              f"{'every injected one' if got == want else f'EXPECTED {want}'}")
    ref = next(iter(results.values()))["frames"]
    for cfg, r in list(results.items())[1:]:
        for name in ref:
            pd.testing.assert_frame_equal(ref[name], r["frames"][name], obj=f"{cfg} {name}")
    if len(results) > 1:
        print(f"identical frames across {', '.join(results)}: {', '.join(ref)}")
    if "pandas" in results:
        for cfg, r in results.items():
            if cfg != "pandas":
                print(f"{cfg}: {results['pandas']['wall_s'] / r['wall_s']:.2f}x the pandas speed")
    return 0 if ok else 1


if __name__ == "__main__":
    sys.exit(main())
