"""Kineto JSON import speed and memory: our importer vs Holistic Trace Analysis (HTA 0.5.0), in one run.

    python3 bench/bench_import.py [--hta-python /opt/hta-venv/bin/python] [--traces df_index_resolver nccl_data]
                                  [--repeats 3] [--json results.json]
    python3 bench/bench_import.py --linear [keys depth events] [--repeats 3]   # linear time, see ``linear``

For each trace, every measurement runs in its own fresh subprocess (same conditions for both tools); the
time is measured inside the subprocess around the call only (module imports excluded on both sides), and the
peak RSS is the subprocess's ``ru_maxrss`` (self, max'd with its children: includes the interpreter and
imported libraries on both sides):

- ours, first import: ``neuron_profiler.importers.kineto.import_kineto(src, out)`` into a fresh temp dir;
- ours, reopen: ``read_trace(out)`` + every table loaded as a DataFrame;
- HTA: ``TraceAnalysis(trace_dir=<dir holding a symlink to src>)`` run by the HTA venv's python;
- context: read + gunzip + one untyped parse of the whole file (orjson), and read + gunzip + the typed parse
  our importer does (``decode.decode_document``, events dropped unread): the floors of a full-parse import.
Each is run ``--repeats`` times (default 3): median time, max peak RSS (2 shared cores: expect noise).

Ratios = HTA load time / ours (wall time, and CPU time: user + system of the process, its threads and
children, less sensitive to the load of a shared box); targets: first import >= 5x faster, reopen >= 100x
faster than HTA.
HTA is a reference tool only: install it in its own venv
(``python3 -m venv /opt/hta-venv && /opt/hta-venv/bin/pip install holistictraceanalysis==0.5.0``).
Only stdlib is imported at module level: the HTA worker runs this same file under the HTA venv.
"""

from __future__ import annotations

import argparse
import json
import os
import resource
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

REPO = Path(__file__).resolve().parent.parent
REALTRACES = Path(os.environ.get("REALTRACES_DIR", REPO / "tests" / "data" / "realtraces"))
#: every trace of tests/data/realtraces (SOURCES.md), by short name
TRACES = {
    "df_index_resolver": "HolisticTraceAnalysis/df_index_resolver/df_index_resolver.json.gz",
    "nccl_data": "HolisticTraceAnalysis/nccl_parser_config/nccl_data.json.gz",
    "mtia_inference": "HolisticTraceAnalysis/mtia_inference_trace/mtia_inference_rank_0.json.gz",
    "sampled_rank-0": "HolisticTraceAnalysis/trace_filter/sampled_rank-0.json.gz",
    "sampled_rank-1": "HolisticTraceAnalysis/trace_filter/sampled_rank-1.json.gz",
    "alexnet": "HolisticTraceAnalysis/critical_path/alexnet/benchmark_result_2869224_1695835535_trace.json.gz",
    "bert_h100": "TraceLens/h100/gaunernst_bert-small-uncased__1016001.json.gz",
    "torch_compile_triton": "TraceLens/torch_compile_triton/trace.json.gz",
    "cpu_only": "HolisticTraceAnalysis/cpu_only/rank-34.Jul_15_10_52_41.1074.pt.trace.json.gz",
    "triton_example": "HolisticTraceAnalysis/triton_example/triton_example.json.gz",
    "after_fix": "kineto/docs_traces/after_fix_trace.json",
    "before_fix": "kineto/docs_traces/before_fix_trace.json",
}
TARGET_IMPORT_X = 5.0
TARGET_REOPEN_X = 100.0
DEFAULT_HTA_PYTHON = "/opt/hta-venv/bin/python"
OURS_REPO = REPO  # --ours-repo: the checkout whose importer is measured


def _peak_rss_mb() -> float:
    """Peak RSS of this process (or its largest child) in MB; Linux ru_maxrss is in KiB."""
    kib = max(resource.getrusage(resource.RUSAGE_SELF).ru_maxrss,
              resource.getrusage(resource.RUSAGE_CHILDREN).ru_maxrss)
    return kib / 1024.0


def _cpu_s() -> float:
    """CPU seconds (user + system) of this process, its threads and its finished children: on a shared box
    less sensitive to the other jobs' load than wall time."""
    a, b = resource.getrusage(resource.RUSAGE_SELF), resource.getrusage(resource.RUSAGE_CHILDREN)
    return a.ru_utime + a.ru_stime + b.ru_utime + b.ru_stime


def _rss_now_mb() -> float:
    with open("/proc/self/statm") as f:
        return int(f.read().split()[1]) * os.sysconf("SC_PAGE_SIZE") / 2**20


# ---------------------------------------------------------------- workers (each runs in its own subprocess)
def _ours(module: str) -> object:
    """``neuron_profiler.importers.kineto.<module>`` (or the pre-2026-12 flat ``kineto_<module>``, so that
    ``--ours-repo`` can measure an older checkout for before/after figures)."""
    import importlib

    try:
        return importlib.import_module(f"neuron_profiler.importers.kineto.{module}")
    except ImportError:
        return importlib.import_module(f"neuron_profiler.importers.kineto_{module}")


def _warm_imports() -> None:
    """Import what the importer loads lazily (hardware table, tqdm), so that only the import is timed (HTA's
    modules are likewise all imported before its timer starts)."""
    import neuron_profiler.hardware  # noqa: F401
    import neuron_profiler.trace  # noqa: F401
    from neuron_profiler.trace.header import package_version

    neuron_profiler.hardware.gpu_spec("NVIDIA A100-SXM4-80GB")  # loads the hardware table
    package_version()  # imports importlib.metadata (9 ms)


def worker_ours_import(src: str, out: str) -> dict:
    from neuron_profiler.importers.kineto import import_kineto

    parser = _parser()
    _warm_imports()
    base = _rss_now_mb()
    c0, t0 = _cpu_s(), time.perf_counter()
    import_kineto(src, out, progress=False)
    dt, dc = time.perf_counter() - t0, _cpu_s() - c0
    return {"time_s": dt, "cpu_s": dc, "peak_rss_mb": _peak_rss_mb(), "rss_after_imports_mb": base,
            "out_bytes": os.path.getsize(out), "parser": parser}


def worker_ours_reopen(out: str) -> dict:
    from neuron_profiler.trace import TABLES, read_trace

    base = _rss_now_mb()
    t0 = time.perf_counter()
    tf = read_trace(out)
    frames = {t: tf.table(t) for t in TABLES}
    dt = time.perf_counter() - t0
    return {"time_s": dt, "peak_rss_mb": _peak_rss_mb(), "rss_after_imports_mb": base,
            "rows": {t: len(df) for t, df in frames.items()}}


def worker_hta(src: str) -> dict:
    import logging
    import warnings

    from hta.trace_analysis import TraceAnalysis

    logging.getLogger("hta").setLevel(logging.ERROR)
    warnings.simplefilter("ignore")
    base = _rss_now_mb()
    with tempfile.TemporaryDirectory(prefix="hta_bench_") as d:
        os.symlink(os.path.abspath(src), os.path.join(d, os.path.basename(src)))
        c0, t0 = _cpu_s(), time.perf_counter()
        ta = TraceAnalysis(trace_dir=d)
        dt, dc = time.perf_counter() - t0, _cpu_s() - c0
        rows = {str(r): len(df) for r, df in ta.t.traces.items()}
    return {"time_s": dt, "cpu_s": dc, "peak_rss_mb": _peak_rss_mb(), "rss_after_imports_mb": base, "rows": rows}


def worker_json_floor(src: str) -> dict:
    """Lower bound of any importer that parses the whole JSON: read + gunzip + one parse, with the parser our
    importer uses (orjson when installed, else the stdlib ``json``)."""
    import gzip

    try:
        import orjson

        loads, parser = orjson.loads, "orjson"
    except ImportError:
        loads, parser = (lambda b: json.loads(b.decode("utf-8"))), "json"
    base = _rss_now_mb()
    t0 = time.perf_counter()
    with open(src, "rb") as f:
        raw = f.read()
    doc = loads(gzip.decompress(raw) if raw[:2] == b"\x1f\x8b" else raw)
    dt = time.perf_counter() - t0
    return {"time_s": dt, "peak_rss_mb": _peak_rss_mb(), "rss_after_imports_mb": base,
            "events": len(doc.get("traceEvents", [])), "parser": parser}


def _parser() -> str:
    """The parser of the measured checkout's importer: msgspec (typed decoding, ``decode``), or for an older
    checkout orjson slices (``split``)."""
    try:
        _ours("decode")
        return "msgspec"
    except ImportError:
        return "json" if _ours("split").orjson is None else "orjson"


def worker_decode_floor(src: str) -> dict:
    """The parse floor of our importer: read + gunzip + its parse (``decode.decode_document``: typed events;
    an older checkout: orjson slice by slice, ``split``), the events dropped at once (no extraction)."""
    read_bytes = _ours("read").read_bytes
    parser = _parser()
    base = _rss_now_mb()
    t0 = time.perf_counter()
    raw = read_bytes(src)
    if parser == "msgspec":
        n = len(_ours("decode").decode_document(raw, src)[1])
    else:
        split = _ours("split")
        doc, ranges = split.split_document(raw)
        n = sum(len(events) for events in split.iter_slices(raw, ranges))
    dt = time.perf_counter() - t0
    return {"time_s": dt, "peak_rss_mb": _peak_rss_mb(), "rss_after_imports_mb": base, "events": n,
            "parser": parser}


WORKERS = {"ours-import": worker_ours_import, "ours-reopen": worker_ours_reopen, "hta": worker_hta,
           "json-floor": worker_json_floor, "decode-floor": worker_decode_floor}


# ---------------------------------------------------------------- linear time in keys, depth and events
def _synthetic(kind: str, n: int) -> bytes:
    """A Kineto text growing in one dimension: one event with ``n`` args keys (``keys``), 2,000 events whose
    args nest ``n`` deep (``depth``), or ``n`` events: cpu_op / kernel pairs linked by flows (``events``)."""
    head = b'{"traceEvents":['
    if kind == "keys":
        args = b",".join(b'"k%d":%d' % (i, i) for i in range(n))
        return head + b'{"ph":"X","cat":"cpu_op","name":"op","pid":1,"tid":1,"ts":1,"dur":1,"args":{' + args + b"}}]}"
    if kind == "depth":
        ev = (b'{"ph":"X","cat":"cpu_op","name":"op","pid":1,"tid":1,"ts":%d,"dur":1,"args":{"deep":'
              + b"[" * n + b"1" + b"]" * n + b"}}")
        return head + b",".join(ev % i for i in range(2000)) + b"]}"
    ev = (b'{"ph":"X","cat":"cpu_op","name":"aten::mm","pid":1,"tid":1,"ts":%d,"dur":3,"args":{"External id":%d}},'
          b'{"ph":"X","cat":"kernel","name":"gemm","pid":0,"tid":7,"ts":%d,"dur":1,'
          b'"args":{"correlation":%d,"device":0,"stream":7}},'
          b'{"ph":"s","cat":"ac2g","id":%d,"pid":1,"tid":1,"ts":%d},{"ph":"f","cat":"ac2g","id":%d,"pid":0,"tid":7,'
          b'"ts":%d,"bp":"e"}')
    return head + b",".join(ev % (10 * i, i, 10 * i + 5, i, i, 10 * i, i, 10 * i + 5) for i in range(n // 4)) + b"]}"


LINEAR_CASES = {"keys": (37_500, 75_000, 150_000, 300_000), "depth": (100, 200, 400, 800),
                "events": (50_000, 100_000, 200_000, 400_000)}


def linear(kinds: list[str], repeats: int) -> list[dict]:
    """CPU time of ``load_kineto_builder`` on ``_synthetic`` texts doubling in one dimension, in this process
    (best of ``repeats``): each ratio to the previous size is ~2 when the import is linear in it."""
    import gc
    import warnings

    from neuron_profiler.importers.kineto import load_kineto_builder

    rows = []
    with tempfile.TemporaryDirectory(prefix="bench_linear_") as d:
        for kind in kinds:
            prev = None
            for n in LINEAR_CASES[kind]:
                p = Path(d) / f"{kind}_{n}.json"
                p.write_bytes(_synthetic(kind, n))
                best = float("inf")
                for _ in range(repeats):
                    gc.collect()
                    c0 = time.process_time()
                    with warnings.catch_warnings():
                        warnings.simplefilter("ignore")
                        load_kineto_builder(p)
                    best = min(best, time.process_time() - c0)
                ratio = best / prev if prev else None
                rows.append({"case": kind, "n": n, "bytes": p.stat().st_size, "cpu_s": best, "ratio": ratio})
                print(f"{kind:>6} n={n:>7,} ({p.stat().st_size / 1e6:6.2f} MB): {best * 1e3:8.1f} ms CPU"
                      + (f", x{ratio:.2f} for x2 n" if ratio else ""), flush=True)
                prev = best
    return rows


# ---------------------------------------------------------------- driver
def run_worker(python: str, mode: str, *args: str) -> dict:
    """Run one measurement in a fresh interpreter; returns its JSON result or {"error": ...}."""
    env = dict(os.environ, KINETO_LOG_LEVEL="6")
    if mode.startswith("ours") or mode == "decode-floor":  # our package; the HTA venv gets nothing of ours
        env["PYTHONPATH"] = os.pathsep.join(p for p in (str(OURS_REPO), env.get("PYTHONPATH", "")) if p)
        env["BENCH_OURS_REPO"] = str(OURS_REPO)
    cmd = [python, str(Path(__file__).resolve()), "--worker", mode, *args]
    proc = subprocess.run(cmd, capture_output=True, text=True, env=env, cwd=REPO, check=False)
    lines = [ln for ln in proc.stdout.splitlines() if ln.startswith("{")]
    if proc.returncode != 0 or not lines:
        tail = (proc.stderr.strip().splitlines() or ["(no stderr)"])[-1]
        return {"error": f"{mode} exited {proc.returncode}: {tail}"}
    return json.loads(lines[-1])


def _fmt_x(num: float | None, den: float | None) -> tuple[str, float | None]:
    if not num or not den:
        return "n/a", None
    x = num / den
    return f"{x:.1f}x", x


def _median_of(runs: list[dict]) -> dict:
    """Median time and max peak RSS over successful runs (first error when all failed)."""
    ok = [r for r in runs if "error" not in r]
    if not ok:
        return runs[0]
    out = dict(ok[0])
    out.update(time_s=statistics.median(r["time_s"] for r in ok), runs_s=[round(r["time_s"], 4) for r in ok],
               peak_rss_mb=max(r["peak_rss_mb"] for r in ok))
    if all("cpu_s" in r for r in ok):
        out["cpu_s"] = statistics.median(r["cpu_s"] for r in ok)
    return out


def bench_one(name: str, src: Path, hta_python: str | None, repeats: int) -> dict:
    """Interleave the measurements (ours, HTA, ours, HTA...) so load drift on a shared box hits both alike."""
    res: dict = {"trace": name, "src": str(src), "src_bytes": src.stat().st_size}
    runs: dict[str, list[dict]] = {"ours_import": [], "ours_reopen": [], "json_floor": [], "decode_floor": [],
                                   "hta": []}
    with tempfile.TemporaryDirectory(prefix="bench_import_") as d:
        for i in range(repeats):  # every import is a first import: fresh process, fresh output path
            out = str(Path(d) / f"{name}_{i}.nprof")
            runs["ours_import"].append(run_worker(sys.executable, "ours-import", str(src), out))
            if "error" not in runs["ours_import"][-1]:
                runs["ours_reopen"].append(run_worker(sys.executable, "ours-reopen", out))
            runs["json_floor"].append(run_worker(sys.executable, "json-floor", str(src)))
            runs["decode_floor"].append(run_worker(sys.executable, "decode-floor", str(src)))
            if hta_python:
                runs["hta"].append(run_worker(hta_python, "hta", str(src)))
    for key, lst in runs.items():
        res[key] = _median_of(lst) if lst else {"error": "skipped (import failed)" if key == "ours_reopen"
                                                 else "HTA venv python not found (see --hta-python)"}
    return res


def summary_line(r: dict) -> str:
    imp, reo, hta = r.get("ours_import", {}), r.get("ours_reopen", {}), r.get("hta", {})
    t_imp, t_reo, t_hta = imp.get("time_s"), reo.get("time_s"), hta.get("time_s")
    x_imp, vx_imp = _fmt_x(t_hta, t_imp)
    x_reo, vx_reo = _fmt_x(t_hta, t_reo)
    r["import_speedup_x"], r["reopen_speedup_x"] = vx_imp, vx_reo

    def s(t: float | None, nd: int = 2) -> str:
        return "ERR" if t is None else f"{t:.{nd}f} s"

    def mb(m: dict) -> str:
        return "ERR" if "peak_rss_mb" not in m else f"{m['peak_rss_mb']:.0f} MB"

    verdict = []
    if vx_imp is not None:
        verdict.append(f"import target >= {TARGET_IMPORT_X:.0f}x {'MET' if vx_imp >= TARGET_IMPORT_X else 'MISSED'}")
    if vx_reo is not None:
        verdict.append(f"reopen target >= {TARGET_REOPEN_X:.0f}x {'MET' if vx_reo >= TARGET_REOPEN_X else 'MISSED'}")
    x_cpu, vx_cpu = _fmt_x(hta.get("cpu_s"), imp.get("cpu_s"))
    r["import_cpu_speedup_x"] = vx_cpu
    line = (f"{r['trace']}: import {s(t_imp)}, reopen {s(t_reo, 3)}, HTA {s(t_hta)} -> {x_imp} / {x_reo} "
            f"(CPU time: import {s(imp.get('cpu_s'))}, HTA {s(hta.get('cpu_s'))} -> {x_cpu}); "
            f"peak RSS ours {mb(imp)} (reopen {mb(reo)}), HTA {mb(hta)}")
    if verdict:
        line += " [" + "; ".join(verdict) + "]"
    floor = r.get("json_floor", {}).get("time_s")
    sliced = r.get("decode_floor", {}).get("time_s")
    if floor and sliced and t_hta:
        jf = r["json_floor"]
        line += (f"\n  (read+gunzip+{jf.get('parser', '?')}.loads of the whole file: {floor:.2f} s, peak "
                 f"{jf['peak_rss_mb']:.0f} MB; read+gunzip+parse as our importer does: {sliced:.2f} s -> "
                 f"at most {t_hta / sliced:.1f}x for a full-parse import; our importer parsed with "
                 f"{imp.get('parser', '?')})")
    errors = [f"  {k}: {v['error']}" for k, v in (("ours import", imp), ("ours reopen", reo), ("HTA", hta))
              if isinstance(v, dict) and "error" in v]
    return "\n".join([line, *errors])


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--worker", choices=sorted(WORKERS), help=argparse.SUPPRESS)
    ap.add_argument("args", nargs="*", help=argparse.SUPPRESS)
    ap.add_argument("--hta-python", default=DEFAULT_HTA_PYTHON)
    ap.add_argument("--traces", nargs="+", default=list(TRACES), choices=list(TRACES))
    ap.add_argument("--repeats", type=int, default=3, help="runs per measurement (median time, max peak RSS)")
    ap.add_argument("--json", type=Path, help="also write all measurements to this JSON file")
    ap.add_argument("--ours-repo", type=Path, default=REPO,
                    help="measure the importer of another checkout (e.g. an older commit, for before/after)")
    ap.add_argument("--linear", nargs="*", choices=sorted(LINEAR_CASES),
                    help="instead: the linear-time cases (args keys per event, nesting depth, events), each size "
                         "doubling; prints the CPU time ratios (~2 when linear)")
    a = ap.parse_args()
    if a.linear is not None:
        res = linear(a.linear or list(LINEAR_CASES), max(1, a.repeats))
        if a.json:
            a.json.write_text(json.dumps(res, indent=1) + "\n")
        return 0 if all(r["ratio"] is None or r["ratio"] < 3.0 for r in res) else 1
    global OURS_REPO
    OURS_REPO = a.ours_repo.resolve()

    if a.worker:
        repo = os.environ.get("BENCH_OURS_REPO")
        if repo:  # an editable install's import hook would otherwise win over PYTHONPATH
            sys.meta_path[:] = [f for f in sys.meta_path if "editable" not in getattr(f, "__module__", "")
                                and "editable" not in getattr(f, "__name__", "")]
            sys.path.insert(0, repo)
        print(json.dumps(WORKERS[a.worker](*a.args)))
        return 0

    hta_python = a.hta_python if Path(a.hta_python).exists() else None
    results = []
    for name in a.traces:
        src = REALTRACES / TRACES[name]
        if not src.exists():
            print(f"{name}: SKIPPED, {src} not found (set REALTRACES_DIR)")
            continue
        r = bench_one(name, src, hta_python, max(1, a.repeats))
        print(summary_line(r), flush=True)
        results.append(r)
    if a.json:
        a.json.write_text(json.dumps(results, indent=1) + "\n")
    failed = any("error" in r.get(k, {}) for r in results for k in ("ours_import", "ours_reopen", "hta"))
    return 1 if failed or not results else 0


if __name__ == "__main__":
    sys.exit(main())
