#!/usr/bin/env python3
"""Structure-aware fuzzer of the Kineto importer: mutations of real traces through ``neuron-trace import``.

    python bench/fuzz_kineto.py [--inputs 100000] [--workers 2] [--seed 1] [--timeout 20]
                                [--mem-factor 10] [--mem-fixed-mb 256] [--save DIR] [--json out.json]
    python bench/fuzz_kineto.py --atheris [-- libFuzzer flags, e.g. -runs=100000 -rss_limit_mb=2048]

Inputs: windows of events (1-400) of every trace in ``tests/data/realtraces`` with their top-level keys, then
1-6 structure-aware mutations (drop / duplicate / reorder events; a field set to another type, an integer
beyond 64 bits, a float beyond range, NaN, a huge or negative number, a deeply nested value, a long string;
required keys removed; ``ph`` / ``cat`` swapped; top-level keys such as ``deviceProperties``,
``distributedInfo``, ``baseTimeNanoseconds`` and ``traceEvents`` replaced), serialised as JSON; 10% get a
text-level mutation (truncation, a flipped or inserted byte, nesting brackets) and 5% are gzipped.

Inputs run in workers forked from the parent once it has the importer imported and warmed up; per input an
address-space limit (``resource.setrlimit(RLIMIT_AS)``: the worker's size + 16 x ``--mem-fixed-mb`` + 40x the
input, a safety valve) and a wall-clock limit (``--timeout``: the worker is killed, the input counted as a hang
with a traceback of where it was stuck, and a new worker forked). The worker calls
``neuron_profiler.cli.main(["import", path, "-o", out])`` and reads back what was written. Outcomes:

- ``ok``: exit 0, the output reads back (every table) with no more rows than events;
- ``error``: exit 2 with one ``neuron-trace: error: ...`` line on stderr (the documented bad-input path);
- ``undocumented``: anything else (a traceback, another exit code, a multi-line message, an unreadable
  output); grouped by signature (exception type + the innermost project frame);
- ``hang`` (timeout), ``crash`` (killed by a signal), ``memory`` (MemoryError / address-space limit).

Peak memory per input is the worker's peak RSS (VmHWM, reset before each input with ``/proc/self/clear_refs``)
minus its RSS before the input (the whole worker's peak is reported too: ``max_worker_peak_rss_mb``, inputs
over 256 MB, and inputs slower than 10 s, in the summary and in the progress lines); the target is
``<= --mem-factor`` x the input's JSON size + ``--mem-fixed-mb`` (for gzip inputs the decompressed size:
the importer necessarily holds the text). Exit code 1 when any input is undocumented, hangs, crashes or
exceeds the memory target. ``--save DIR`` keeps every failing input.

``--atheris``: coverage-guided fuzzing with atheris (libFuzzer) in-process, the same mutation engine driven
by libFuzzer's bytes; an undocumented exception stops it with the input saved (libFuzzer's ``crash-*``).
"""
from __future__ import annotations

import argparse
import collections
import gc
import gzip
import io
import json
import os
import random
import resource
import select
import signal
import sys
import tempfile
import time
import traceback
from contextlib import redirect_stderr, redirect_stdout
from pathlib import Path
from typing import Any

from kineto_mutations import FdpRandom, Mutator, load_seeds  # bench/kineto_mutations.py, beside this script

SLOW_S = 10.0  # an input taking longer counts in ``inputs_over_slow_s`` (a hang past ``--timeout``)
ABS_PEAK_MB = 256.0  # a worker whose whole peak RSS passes this during an input counts in ``inputs_over_abs_peak_mb``


def run_one(path: str, out: str) -> dict[str, Any]:
    """Run ``neuron-trace import`` on ``path`` in this process; classify what happened."""
    import warnings

    from neuron_profiler.cli import main

    err = io.StringIO()
    try:
        with warnings.catch_warnings(), redirect_stderr(err), redirect_stdout(io.StringIO()):
            warnings.simplefilter("ignore")
            rc = main(["import", path, "-o", out])
    except MemoryError:
        return {"outcome": "memory"}
    except BaseException as exc:  # noqa: BLE001 - the point is to catch everything
        return {"outcome": "undocumented", "signature": _signature(exc)}
    lines = [ln for ln in err.getvalue().splitlines() if ln.strip()]
    if rc == 2 and len(lines) == 1 and lines[0].startswith("neuron-trace: error: "):
        return {"outcome": "error", "message": lines[0][:300]}
    if rc != 0:
        return {"outcome": "undocumented", "signature": f"exit {rc}: {' | '.join(lines)[:300]}"}
    try:
        from neuron_profiler.trace import TABLES, read_trace

        with read_trace(out) as tf:
            rows = {t: len(tf.table(t)) for t in TABLES}
    except MemoryError:
        return {"outcome": "memory"}
    except BaseException as exc:  # noqa: BLE001
        return {"outcome": "undocumented", "signature": "read back: " + _signature(exc)}
    return {"outcome": "ok", "rows": sum(rows.values())}


def _signature(exc: BaseException) -> str:
    tb = traceback.extract_tb(exc.__traceback__)
    ours = [f for f in tb if "neuron_profiler" in f.filename or "analysis" in f.filename]
    where = ours[-1] if ours else (tb[-1] if tb else None)
    loc = f"{Path(where.filename).name}:{where.lineno} {where.name}" if where else "?"
    return f"{type(exc).__name__} at {loc}: {str(exc)[:120]}"


def _status_kb(field: str) -> int:
    with open("/proc/self/status") as f:
        for line in f:
            if line.startswith(field + ":"):
                return int(line.split()[1])
    return 0


def _vm_bytes() -> int:
    with open("/proc/self/statm") as f:
        return int(f.read().split()[0]) * os.sysconf("SC_PAGE_SIZE")


def _reset_peak_rss() -> None:
    """Reset this process's peak RSS (VmHWM) to its current RSS (Linux >= 4.0: ``clear_refs`` 5)."""
    with open("/proc/self/clear_refs", "w") as f:
        f.write("5")


def _worker(rfd: int, wfd: int, timeout: float) -> None:
    """A forked worker: one JSON job per line in, one JSON result per line out, until EOF. Per job: an
    address-space limit (``resource.setrlimit``), the peak RSS reset before and read after (VmHWM), and a
    traceback dump of where it was stuck if it runs past ``timeout`` (the parent then kills it)."""
    import faulthandler

    rf = os.fdopen(rfd, "rb")
    for line in rf:
        job = json.loads(line)
        stack = open(job["path"] + ".stack", "w")
        faulthandler.dump_traceback_later(max(timeout - 1.0, 0.5), file=stack)
        try:
            resource.setrlimit(resource.RLIMIT_AS, (job["as_limit"], resource.RLIM_INFINITY))
            _reset_peak_rss()
            start = _status_kb("VmRSS")
            res = run_one(job["path"], job["out"])
            res["peak_mb"] = max(_status_kb("VmHWM") - start, 0) / 1024
            res["peak_abs_mb"] = _status_kb("VmHWM") / 1024  # the worker's whole peak RSS (imports included)
            resource.setrlimit(resource.RLIMIT_AS, (resource.RLIM_INFINITY, resource.RLIM_INFINITY))
        except BaseException as exc:  # noqa: BLE001
            res = {"outcome": "undocumented", "signature": "harness: " + _signature(exc)}
        faulthandler.cancel_dump_traceback_later()
        stack.close()
        res["i"] = job["i"]
        os.write(wfd, (json.dumps(res) + "\n").encode())
    os._exit(0)


class _Pool:
    """Workers forked from the warmed-up parent; a worker that hangs or dies is replaced."""

    def __init__(self, n: int, timeout: float) -> None:
        self.timeout = timeout
        self.workers: list[dict[str, Any]] = []
        for _ in range(n):
            self.workers.append(self._spawn())

    def _spawn(self) -> dict[str, Any]:
        jr, jw = os.pipe()
        rr, rw = os.pipe()
        pid = os.fork()
        if pid == 0:
            os.close(jw)
            os.close(rr)
            for w in self.workers:  # the other workers' pipes: else a worker never sees its job pipe close
                for fd in (w["jobs"], w["results"]):
                    try:
                        os.close(fd)
                    except OSError:
                        pass
            _worker(jr, rw, self.timeout)
        os.close(jr)
        os.close(rw)
        return {"pid": pid, "jobs": jw, "results": rr, "buf": b"", "job": None, "t0": 0.0}

    def idle(self) -> list[dict[str, Any]]:
        return [w for w in self.workers if w["job"] is None]

    def submit(self, w: dict[str, Any], job: dict[str, Any]) -> None:
        w["job"], w["t0"] = job, time.time()
        os.write(w["jobs"], (json.dumps(job) + "\n").encode())

    def _replace(self, w: dict[str, Any]) -> None:
        for fd in (w["jobs"], w["results"]):
            os.close(fd)
        self.workers[self.workers.index(w)] = self._spawn()

    def poll(self, wait: float) -> list[tuple[dict[str, Any], dict[str, Any]]]:
        """(job, result) of the jobs that finished, hung (``hang``) or killed their worker (``crash``)."""
        busy = [w for w in self.workers if w["job"] is not None]
        ready, _, _ = select.select([w["results"] for w in busy], [], [], wait) if busy else ([], [], [])
        done = []
        for w in busy:
            if w["results"] in ready:
                chunk = os.read(w["results"], 1 << 16)
                if not chunk:  # the worker died (a signal, the OOM killer)
                    _, status = os.waitpid(w["pid"], 0)
                    sig = os.WTERMSIG(status) if os.WIFSIGNALED(status) else 0
                    done.append((w["job"], {"outcome": "crash", "signature": f"worker died (signal {sig})"}))
                    self._replace(w)
                    continue
                w["buf"] += chunk
                if b"\n" in w["buf"]:
                    line, w["buf"] = w["buf"].split(b"\n", 1)
                    done.append((w["job"], json.loads(line)))
                    w["job"] = None
            elif time.time() - w["t0"] > self.timeout:
                os.kill(w["pid"], signal.SIGKILL)
                os.waitpid(w["pid"], 0)
                done.append((w["job"], {"outcome": "hang"}))
                self._replace(w)
        return done

    def close(self) -> None:
        for w in self.workers:
            os.close(w["jobs"])
        for w in self.workers:
            os.waitpid(w["pid"], 0)
            os.close(w["results"])


# ------------------------------------------------------------------------------------------- driver
def fuzz(n: int, workers: int, seed: int, timeout: float, mem_factor: float, mem_fixed_mb: float,
         save: Path | None, progress: bool = True) -> dict[str, Any]:
    rng = random.Random(seed)
    seeds = load_seeds(rng)
    mut = Mutator(rng)
    import neuron_profiler.cli  # noqa: F401  (imported once; workers are forked from here)
    import neuron_profiler.importers  # noqa: F401
    from neuron_profiler.hardware import gpu_spec
    from neuron_profiler.trace.header import package_version

    gpu_spec("NVIDIA A100-SXM4-80GB")
    package_version()
    tmp = Path(tempfile.mkdtemp(prefix="fuzz_kineto_"))
    os.environ.setdefault("NEURON_PROFILER_CACHE_DIR", str(tmp / "cache"))
    for k in range(3):  # warm up here, once: workers are forked from this process, lazy imports done
        _name, text = Mutator(random.Random(k)).document(seeds)
        (tmp / "warm.json").write_bytes(text)
        run_one(str(tmp / "warm.json"), str(tmp / "warm.nprof"))
    gc.collect()
    gc.freeze()  # workers do not copy the parent's heap pages just to scan them
    pool = _Pool(workers, timeout)
    counts: collections.Counter = collections.Counter()
    sigs: dict[str, dict[str, Any]] = {}
    errors: collections.Counter = collections.Counter()
    peaks: list[tuple[float, int]] = []
    over: list[dict[str, Any]] = []
    abs_peak, n_abs_over, n_slow = 0.0, 0, 0
    jobs: dict[int, dict[str, Any]] = {}
    done = started = 0
    t_start = time.time()
    max_time = 0.0
    while done < n:
        for w in pool.idle():
            if started >= n:
                break
            name, text = mut.document(seeds)
            path = tmp / f"in{started}.json"
            path.write_bytes(text)
            size = len(gzip.decompress(text)) if text[:2] == b"\x1f\x8b" and _gz_ok(text) else len(text)
            # a safety valve against runaway allocations; the memory target is checked on the peak RSS
            # (allocators such as pyarrow's reserve address space far beyond what they touch)
            limit = _vm_bytes() + int(16 * mem_fixed_mb * 2**20 + 4 * mem_factor * size)
            job = {"i": started, "path": str(path), "out": str(tmp / f"out{started}.nprof"), "as_limit": limit}
            jobs[started] = {"size": size, "seed": name, "path": path, "t0": time.time()}
            pool.submit(w, job)
            started += 1
        for job, res in pool.poll(0.05):
            info = jobs.pop(job["i"])
            took = time.time() - info["t0"]
            max_time = max(max_time, took)
            n_slow += took > SLOW_S
            out = res["outcome"]
            counts[out] += 1
            if out == "error":
                errors[res["message"].replace(str(info["path"]), "<input>")[len("neuron-trace: error: "):][:90]] += 1
            bad = out in ("undocumented", "hang", "crash", "memory")
            if "peak_abs_mb" in res:
                abs_peak = max(abs_peak, res["peak_abs_mb"])
                n_abs_over += res["peak_abs_mb"] > ABS_PEAK_MB
            if "peak_mb" in res:
                peaks.append((res["peak_mb"], info["size"]))
                if res["peak_mb"] > mem_factor * info["size"] / 2**20 + mem_fixed_mb:
                    over.append({"input": job["i"], "peak_mb": round(res["peak_mb"], 1), "size": info["size"]})
                    bad = True
            if out in ("undocumented", "crash"):
                s_ = sigs.setdefault(res.get("signature", out), {"count": 0, "example": None, "seed": info["seed"]})
                s_["count"] += 1
            stack = Path(str(info["path"]) + ".stack")
            if bad and save is not None:
                save.mkdir(parents=True, exist_ok=True)
                keep = save / f"{out}_{job['i']}.json"
                info["path"].replace(keep)
                if out == "hang" and stack.exists():
                    stack.replace(save / f"{out}_{job['i']}.stack.txt")
                if out in ("undocumented", "crash") and sigs[res.get("signature", out)]["example"] is None:
                    sigs[res.get("signature", out)]["example"] = str(keep)
            else:
                info["path"].unlink(missing_ok=True)
            stack.unlink(missing_ok=True)
            for f in list(tmp.glob(f"out{job['i']}.nprof*")) + list(tmp.glob(f".out{job['i']}.nprof.*")):
                f.unlink(missing_ok=True)
            done += 1
            if progress and done % 1000 == 0:
                el = time.time() - t_start
                print(f"  {done:,}/{n:,} inputs, {el:.0f} s, {dict(counts)}; slowest input {max_time:.1f} s "
                      f"({n_slow} over {SLOW_S:g} s); peak RSS: max {abs_peak:.0f} MB whole worker ({n_abs_over} "
                      f"inputs over {ABS_PEAK_MB:g} MB), max {max((p for p, _ in peaks), default=0):.0f} MB above "
                      f"the worker's RSS before the input ({len(over)} over the target)", file=sys.stderr, flush=True)
    pool.close()
    worst = max(peaks, key=lambda ps: ps[0] - mem_factor * ps[1] / 2**20) if peaks else (0.0, 0)
    return {"inputs": n, "seed": seed, "seconds": round(time.time() - t_start, 1), "outcomes": dict(counts),
            "undocumented_signatures": sigs, "documented_errors": dict(errors.most_common(30)),
            "memory": {"target": f"<= {mem_factor:g} x input size + {mem_fixed_mb:g} MB",
                       "max_peak_mb": round(max((p for p, _ in peaks), default=0.0), 1),
                       "worst_input": {"peak_mb": round(worst[0], 1), "size_bytes": worst[1]},
                       "largest_input_bytes": max((sz for _, sz in peaks), default=0),
                       "over_target": over[:20], "n_over_target": len(over),
                       "median_peak_mb": round(sorted(p for p, _ in peaks)[len(peaks) // 2], 1) if peaks else 0},
            "max_input_seconds": round(max_time, 2), "timeout_s": timeout,
            "inputs_over_slow_s": n_slow, "slow_s": SLOW_S, "max_worker_peak_rss_mb": round(abs_peak, 1),
            "inputs_over_abs_peak_mb": n_abs_over, "abs_peak_mb": ABS_PEAK_MB}


def _gz_ok(text: bytes) -> bool:
    try:
        gzip.decompress(text)
        return True
    except (OSError, EOFError, ValueError):
        return False


def run_atheris(argv: list[str]) -> None:  # pragma: no cover - manual, long-running
    import atheris

    seeds = load_seeds(random.Random(0))
    tmp = Path(tempfile.mkdtemp(prefix="fuzz_kineto_atheris_"))
    os.environ.setdefault("NEURON_PROFILER_CACHE_DIR", str(tmp / "cache"))

    def one(data: bytes) -> None:
        _name, text = Mutator(FdpRandom(atheris.FuzzedDataProvider(data))).document(seeds)
        path = tmp / "in.json"
        path.write_bytes(text)
        res = run_one(str(path), str(tmp / "out.nprof"))
        if res["outcome"] == "undocumented":
            raise RuntimeError(res["signature"])

    atheris.Setup([sys.argv[0], *argv], one)
    atheris.Fuzz()


def main() -> int:
    if "--atheris" in sys.argv:
        i = sys.argv.index("--atheris")
        rest = [a for a in sys.argv[i + 1:] if a != "--"]
        run_atheris(rest)
        return 0
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--inputs", type=int, default=100_000)
    ap.add_argument("--workers", type=int, default=2)
    ap.add_argument("--seed", type=int, default=1)
    ap.add_argument("--timeout", type=float, default=20.0, help="seconds per input before it counts as a hang")
    ap.add_argument("--mem-factor", type=float, default=10.0)
    ap.add_argument("--mem-fixed-mb", type=float, default=256.0)
    ap.add_argument("--save", type=Path, help="keep failing inputs in this folder")
    ap.add_argument("--json", type=Path, help="write the summary as JSON")
    ap.add_argument("--quiet", action="store_true")
    a = ap.parse_args()
    res = fuzz(a.inputs, a.workers, a.seed, a.timeout, a.mem_factor, a.mem_fixed_mb, a.save, not a.quiet)
    print(json.dumps(res, indent=1))
    if a.json:
        a.json.write_text(json.dumps(res, indent=1) + "\n")
    o = res["outcomes"]
    failed = sum(o.get(k, 0) for k in ("undocumented", "hang", "crash", "memory")) + res["memory"]["n_over_target"]
    return 1 if failed else 0


if __name__ == "__main__":
    sys.exit(main())
