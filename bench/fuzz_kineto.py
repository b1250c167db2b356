#!/usr/bin/env python3
"""Structure-aware fuzzer of the Kineto importer: mutations of real traces through ``neuron-trace import``.

    python bench/fuzz_kineto.py [--inputs 100000] [--workers 2] [--seed 1] [--timeout 20]
                                [--mem-factor 10] [--mem-fixed-mb 256] [--save DIR] [--json out.json]
    python bench/fuzz_kineto.py --atheris [-- libFuzzer flags, e.g. -runs=100000 -rss_limit_mb=2048]

Inputs: windows of events (1-400) of every trace in ``../shared/realtraces`` with their top-level keys, then
1-6 structure-aware mutations (drop / duplicate / reorder events; a field set to another type, an integer
beyond 64 bits, a float beyond range, NaN, a huge or negative number, a deeply nested value, a long string;
required keys removed; ``ph`` / ``cat`` swapped; top-level keys such as ``deviceProperties``,
``distributedInfo``, ``baseTimeNanoseconds`` and ``traceEvents`` replaced), serialised as JSON; 10% get a
text-level mutation (truncation, a flipped or inserted byte, nesting brackets) and 5% are gzipped.

Each input runs in a forked child (the parent has the importer imported once) with an address-space limit
(``resource.setrlimit(RLIMIT_AS)``: the child's size at fork + ``--mem-fixed-mb`` x 4 + 10x the input) and a
wall-clock limit (``--timeout``, then SIGKILL). The child calls ``neuron_profiler.cli.main(["import", path,
"-o", out])`` and reads back what was written. Outcomes:

- ``ok``: exit 0, the output reads back (every table) with no more rows than events;
- ``error``: exit 2 with one ``neuron-trace: error: ...`` line on stderr (the documented bad-input path);
- ``undocumented``: anything else (a traceback, another exit code, a multi-line message, an unreadable
  output); grouped by signature (exception type + the innermost project frame);
- ``hang`` (timeout), ``crash`` (killed by a signal), ``memory`` (MemoryError / address-space limit).

Peak memory per input is the child's peak RSS (``wait4``) minus the parent's RSS at fork; the target is
``<= --mem-factor`` x the input's JSON size + ``--mem-fixed-mb`` (for gzip inputs the decompressed size:
the importer necessarily holds the text). Exit code 1 when any input is undocumented, hangs, crashes or
exceeds the memory target. ``--save DIR`` keeps every failing input.

``--atheris``: coverage-guided fuzzing with atheris (libFuzzer) in-process, the same mutation engine driven
by libFuzzer's bytes; an undocumented exception stops it with the input saved (libFuzzer's ``crash-*``).
"""
from __future__ import annotations

import argparse
import collections
import copy
import gc
import gzip
import io
import json
import os
import random
import re
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

REPO = Path(__file__).resolve().parent.parent
REALTRACES = Path(os.environ.get("NEURON_PROFILER_REALTRACES", REPO.parent / "shared" / "realtraces"))
_WINDOW_POOL = 3000  # events kept per seed trace (random windows are cut from these)


# ------------------------------------------------------------------------------------------- seeds
def load_seeds(rng: random.Random) -> list[tuple[str, dict[str, Any], list[Any]]]:
    """(name, top-level keys without events, a pool of events) per real trace."""
    seeds = []
    for p in sorted(REALTRACES.rglob("*.json*")):
        if not p.is_file():
            continue
        raw = p.read_bytes()
        doc = json.loads(gzip.decompress(raw) if raw[:2] == b"\x1f\x8b" else raw)
        events = doc.pop("traceEvents", [])
        if len(events) > _WINDOW_POOL:
            start = rng.randrange(0, len(events) - _WINDOW_POOL)
            pool = events[:200] + events[start:start + _WINDOW_POOL - 200]  # metadata events come first
        else:
            pool = events
        seeds.append((str(p.relative_to(REALTRACES)), doc, pool))
        del events, raw
    if not seeds:
        raise SystemExit(f"no real traces under {REALTRACES} (set NEURON_PROFILER_REALTRACES)")
    return seeds


# ------------------------------------------------------------------------------------------- mutations
_KEYS = ("ph", "cat", "name", "pid", "tid", "ts", "dur", "args", "id", "bp", "s")
_ARG_KEYS = ("device", "stream", "correlation", "External id", "bytes", "Collective name", "Input Dims",
             "Input type", "Python id", "Python parent id", "Total Allocated", "Total Reserved", "Device Id",
             "Device Type", "In msg nelems", "Out msg nelems", "Group size", "dtype", "flops", "Sequence number",
             "Process Group Ranks", "Seq", "name", "labels", "sort_index")
_TOP_KEYS = ("deviceProperties", "distributedInfo", "baseTimeNanoseconds", "traceEvents", "schemaVersion",
             "displayTimeUnit", "traceName", "neuronProfiler")
_PHASES = ("X", "s", "f", "t", "M", "i", "I", "C", "B", "E", "b", "e", "n", "P", "O", "", None)
_CATS = ("cpu_op", "kernel", "gpu_memcpy", "gpu_memset", "cuda_runtime", "ac2g", "fwdbwd", "python_function",
         "gpu_user_annotation", "cpu_instant_event", "Trace", "mtia_ccp_events", "cuda_sync", "user_annotation",
         "Kernel", "Operator", "Runtime", "async", "privateuse1_runtime", "zzz")


_NEST = re.compile(rb'"\\u0000NEST([ao])(\d+)\\u0000"')


def _expand(m: re.Match) -> bytes:
    d = int(m.group(2))
    return (b"[" * d + b"1" + b"]" * d) if m.group(1) == b"a" else (b'{"a":' * d + b"1" + b"}" * d)


class Mutator:
    """Structure-aware mutations of Kineto documents, driven by a ``random.Random`` (or by atheris's
    ``FuzzedDataProvider`` through ``_FdpRandom``)."""

    def __init__(self, rng: Any) -> None:
        self.r = rng

    def value(self) -> Any:
        r = self.r
        k = r.randrange(22)
        if k == 0:
            return None
        if k == 1:
            return r.choice((True, False))
        if k == 2:
            return r.choice((2**64, 2**63, -(2**63) - 1, 10**30, -(10**25), 2**1000, 10**400))
        if k == 3:
            return r.choice((1e308, -1e308, 1.7976931348623157e308, 5e-324, -0.0, 1e-9))
        if k == 4:
            return float("nan") if r.random() < 0.5 else r.choice((float("inf"), float("-inf")))
        if k == 5:
            return r.choice(("", "x", "0", "-1", "1e9", "NaN", "\u2603", "a" * r.randrange(1, 5000)))
        if k == 6:
            return [] if r.random() < 0.5 else [self.value() for _ in range(r.randrange(1, 4))]
        if k == 7:
            return {} if r.random() < 0.5 else {r.choice(_ARG_KEYS): self.value()}
        if k == 8:
            return self.nested(r.randrange(2, 3000))
        if k == 9:
            return r.randrange(-10, 10)
        if k == 10:
            return r.randrange(0, 2**62)
        if k == 11:
            return r.uniform(0, 1e16)
        if k == 12:
            return -r.uniform(0, 1e6)
        return r.choice((0, 1, -1, 7, 2**31, 2**32, 4e15, 4.000000001e15, 1695835535123456.789, 0.001))

    def nested(self, depth: int) -> str:
        """A marker that ``document`` replaces by ``depth`` nested arrays / objects in the JSON text (a nested
        Python value would exceed ``json.dumps``'s own recursion limit)."""
        kind = "a" if self.r.random() < 0.5 else "o"
        return f"\x00NEST{kind}{depth}\x00"

    def mutate_event(self, e: Any) -> Any:
        r = self.r
        if not isinstance(e, dict) or r.random() < 0.05:
            return self.value()
        e = dict(e)
        k = r.randrange(9)
        if k <= 2:
            e[r.choice(_KEYS)] = self.value()
        elif k == 3 and e:
            e.pop(r.choice(list(e)), None)
        elif k == 4:
            e["ph"] = r.choice(_PHASES)
        elif k == 5:
            e["cat"] = r.choice(_CATS)
        else:
            args = e.get("args") if isinstance(e.get("args"), dict) else {}
            args = dict(args)
            if r.random() < 0.2 and args:
                args.pop(r.choice(list(args)))
            else:
                args[r.choice(_ARG_KEYS)] = self.value()
            e["args"] = args
        return e

    def document(self, seeds: list[tuple[str, dict[str, Any], list[Any]]]) -> tuple[str, bytes]:
        r = self.r
        name, top, pool = seeds[r.randrange(len(seeds))]
        n = r.randrange(1, min(400, max(len(pool), 1)) + 1)
        start = r.randrange(0, max(len(pool) - n, 0) + 1)
        events = copy.deepcopy(pool[start:start + n]) if pool else []
        if r.random() < 0.5 and pool:  # process / thread names usually come first
            events = copy.deepcopy(pool[:r.randrange(1, 20)]) + events
        doc: dict[str, Any] = copy.deepcopy(top)
        for _ in range(r.randrange(1, 7)):
            k = r.randrange(10)
            if k <= 4 and events:
                i = r.randrange(len(events))
                events[i] = self.mutate_event(events[i])
            elif k == 5 and events:
                del events[r.randrange(len(events))]
            elif k == 6 and events:
                events.insert(r.randrange(len(events) + 1), copy.deepcopy(r.choice(events)))
            elif k == 7 and len(events) > 1:
                i, j = r.randrange(len(events)), r.randrange(len(events))
                events[i], events[j] = events[j], events[i]
            elif k == 8:
                doc[r.choice(_TOP_KEYS)] = self.value()
            else:
                dp = doc.get("deviceProperties")
                if isinstance(dp, list) and dp:
                    i = r.randrange(len(dp))
                    dp[i] = self.mutate_event(dp[i]) if r.random() < 0.7 else self.value()
                else:
                    doc["deviceProperties"] = [{"id": self.value(), "name": self.value(),
                                                "totalGlobalMem": self.value()}]
        doc.setdefault("traceEvents", events)
        if isinstance(doc.get("traceEvents"), list) and doc["traceEvents"] is not events and r.random() < 0.5:
            doc["traceEvents"] = events
        text = _NEST.sub(_expand, json.dumps(doc if r.random() > 0.05 else events).encode())
        if r.random() < 0.1:
            text = self.text_mutation(text)
        if r.random() < 0.05:
            text = gzip.compress(text, 1)
        return name, text

    def text_mutation(self, t: bytes) -> bytes:
        r = self.r
        k = r.randrange(5)
        if k == 0 or not t:
            return t[: r.randrange(len(t) + 1)]
        i = r.randrange(len(t))
        if k == 1:
            return t[:i] + bytes([r.randrange(256)]) + t[i + 1:]
        if k == 2:
            return t[:i] + r.choice((b"[", b"{", b"]", b"}", b'"', b",", b"\\", b"\x00", b"\xff")) + t[i:]
        if k == 3:
            d = r.randrange(100, 5000)
            return t[:i] + b"[" * d + b"1" + b"]" * d + t[i:]
        return t + t[: r.randrange(len(t) + 1)]


# ------------------------------------------------------------------------------------------- one input
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


def _rss_mb() -> float:
    with open("/proc/self/statm") as f:
        return int(f.read().split()[1]) * os.sysconf("SC_PAGE_SIZE") / 2**20


def _vm_bytes() -> int:
    with open("/proc/self/statm") as f:
        return int(f.read().split()[0]) * os.sysconf("SC_PAGE_SIZE")


def _child(path: str, out: str, wfd: int, as_limit: int, timeout: float) -> None:
    import faulthandler

    start = _rss_mb()  # the kernel starts a forked child's peak RSS at its RSS at fork
    stack = open(path + ".stack", "w")  # where a hang was stuck (kept with the input by --save)
    faulthandler.dump_traceback_later(max(timeout - 1.0, 0.5), file=stack)
    try:
        resource.setrlimit(resource.RLIMIT_AS, (as_limit, as_limit))
        res = run_one(path, out)
    except BaseException as exc:  # noqa: BLE001
        res = {"outcome": "undocumented", "signature": "harness: " + _signature(exc)}
    res["peak_mb"] = max(resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024 - start, 0.0)
    os.write(wfd, json.dumps(res).encode())
    os.close(wfd)
    os._exit(0)


# ------------------------------------------------------------------------------------------- driver
def fuzz(n: int, workers: int, seed: int, timeout: float, mem_factor: float, mem_fixed_mb: float,
         save: Path | None, progress: bool = True) -> dict[str, Any]:
    rng = random.Random(seed)
    seeds = load_seeds(rng)
    mut = Mutator(rng)
    import neuron_profiler.cli  # noqa: F401  (imported once; children are forked from here)
    import neuron_profiler.importers  # noqa: F401
    from neuron_profiler.hardware import gpu_spec
    from neuron_profiler.trace.header import package_version

    gpu_spec("NVIDIA A100-SXM4-80GB")
    package_version()
    gc.collect()
    gc.freeze()  # children do not copy the parent's heap pages just to scan them
    tmp = Path(tempfile.mkdtemp(prefix="fuzz_kineto_"))
    os.environ.setdefault("NEURON_PROFILER_CACHE_DIR", str(tmp / "cache"))
    counts: collections.Counter = collections.Counter()
    sigs: dict[str, dict[str, Any]] = {}
    errors: collections.Counter = collections.Counter()
    peaks: list[tuple[float, int]] = []
    over: list[dict[str, Any]] = []
    running: dict[int, dict[str, Any]] = {}
    done = started = 0
    t_start = time.time()
    max_time = 0.0
    while done < n:
        while started < n and len(running) < workers:
            name, text = mut.document(seeds)
            path = tmp / f"in{started}.json"
            path.write_bytes(text)
            size = len(gzip.decompress(text)) if text[:2] == b"\x1f\x8b" and _gz_ok(text) else len(text)
            rfd, wfd = os.pipe()
            base_rss = _rss_mb()
            # a safety valve against runaway allocations; the memory target is checked on the peak RSS
            # (allocators such as pyarrow's reserve address space far beyond what they touch)
            limit = _vm_bytes() + int(16 * mem_fixed_mb * 2**20 + 4 * mem_factor * size)
            pid = os.fork()
            if pid == 0:
                os.close(rfd)
                _child(str(path), str(tmp / f"out{started}.nprof"), wfd, limit, timeout)
            os.close(wfd)
            running[pid] = {"i": started, "path": path, "rfd": rfd, "t0": time.time(), "size": size,
                            "base": base_rss, "seed": name, "buf": b""}
            started += 1
        _drain(running)
        finished = []
        for pid, job in running.items():
            wpid, status, ru = os.wait4(pid, os.WNOHANG)
            if wpid == 0:
                if time.time() - job["t0"] > timeout:
                    os.kill(pid, signal.SIGKILL)
                    os.wait4(pid, 0)
                    job["res"] = {"outcome": "hang"}
                    finished.append(pid)
                continue
            job["buf"] += _read_all(job["rfd"])
            try:
                job["res"] = json.loads(job["buf"] or b"{}") or {"outcome": "crash",
                                                                 "signature": f"status {status}"}
            except ValueError:
                job["res"] = {"outcome": "crash", "signature": f"status {status}"}
            if os.WIFSIGNALED(status):
                job["res"] = {"outcome": "crash", "signature": f"signal {os.WTERMSIG(status)}"}
            if "peak_mb" in job["res"]:
                job["peak"] = job["res"]["peak_mb"]
            finished.append(pid)
        for pid in finished:
            job = running.pop(pid)
            os.close(job["rfd"])
            res = job["res"]
            max_time = max(max_time, time.time() - job["t0"])
            out = res["outcome"]
            counts[out] += 1
            if out == "error":
                errors[res["message"].replace(str(job["path"]), "<input>")[len("neuron-trace: error: "):][:90]] += 1
            bad = out in ("undocumented", "hang", "crash", "memory")
            if "peak" in job:
                peaks.append((job["peak"], job["size"]))
                if job["peak"] > mem_factor * job["size"] / 2**20 + mem_fixed_mb:
                    over.append({"input": job["i"], "peak_mb": round(job["peak"], 1), "size": job["size"]})
                    bad = True
            if out in ("undocumented", "crash"):
                s = sigs.setdefault(res.get("signature", out), {"count": 0, "example": None, "seed": job["seed"]})
                s["count"] += 1
            if bad and save is not None:
                save.mkdir(parents=True, exist_ok=True)
                keep = save / f"{out}_{job['i']}.json"
                job["path"].replace(keep)
                stack = Path(str(job["path"]) + ".stack")
                if out == "hang" and stack.exists():
                    stack.replace(save / f"{out}_{job['i']}.stack.txt")
                if out in ("undocumented", "crash") and sigs[res.get("signature", out)]["example"] is None:
                    sigs[res.get("signature", out)]["example"] = str(keep)
            else:
                job["path"].unlink(missing_ok=True)
            Path(str(job["path"]) + ".stack").unlink(missing_ok=True)
            for f in tmp.glob(f"out{job['i']}.nprof*"):
                f.unlink(missing_ok=True)
            for f in tmp.glob(f".out{job['i']}.nprof.*"):
                f.unlink(missing_ok=True)
            done += 1
            if progress and done % 1000 == 0:
                el = time.time() - t_start
                print(f"  {done:,}/{n:,} inputs, {el:.0f} s, {dict(counts)}", file=sys.stderr, flush=True)
        if running and not finished:
            time.sleep(0.002)
    ratios = sorted(((p - 0) / max(s / 2**20, 1e-9), p, s) for p, s in peaks)
    worst = max(peaks, key=lambda ps: ps[0] - mem_factor * ps[1] / 2**20) if peaks else (0.0, 0)
    return {"inputs": n, "seed": seed, "seconds": round(time.time() - t_start, 1), "outcomes": dict(counts),
            "undocumented_signatures": sigs, "documented_errors": dict(errors.most_common(30)),
            "memory": {"target": f"<= {mem_factor:g} x input size + {mem_fixed_mb:g} MB",
                       "max_peak_mb": round(max((p for p, _ in peaks), default=0.0), 1),
                       "worst_input": {"peak_mb": round(worst[0], 1), "size_bytes": worst[1]},
                       "over_target": over[:20], "n_over_target": len(over),
                       "median_peak_mb": round(sorted(p for p, _ in peaks)[len(peaks) // 2], 1) if peaks else 0},
            "max_input_seconds": round(max_time, 2), "timeout_s": timeout,
            "largest_ratio": round(ratios[-1][0], 1) if ratios else 0}


def _gz_ok(text: bytes) -> bool:
    try:
        gzip.decompress(text)
        return True
    except (OSError, EOFError, ValueError):
        return False


def _read_all(fd: int) -> bytes:
    chunks = []
    while True:
        r, _, _ = select.select([fd], [], [], 0)
        if not r:
            break
        b = os.read(fd, 1 << 16)
        if not b:
            break
        chunks.append(b)
    return b"".join(chunks)


def _drain(running: dict[int, dict[str, Any]]) -> None:
    """Read what children wrote so far (a full pipe would block a child)."""
    for job in running.values():
        job["buf"] += _read_all(job["rfd"])


# ------------------------------------------------------------------------------------------- atheris
class _FdpRandom:
    """The subset of ``random.Random`` the mutator uses, drawing from atheris's FuzzedDataProvider."""

    def __init__(self, fdp: Any) -> None:
        self.fdp = fdp

    def randrange(self, a: int, b: int | None = None) -> int:
        lo, hi = (0, a) if b is None else (a, b)
        return lo if hi - lo <= 1 else self.fdp.ConsumeIntInRange(lo, hi - 1)

    def random(self) -> float:
        return self.fdp.ConsumeProbability()

    def uniform(self, a: float, b: float) -> float:
        return a + (b - a) * self.fdp.ConsumeProbability()

    def choice(self, seq: Any) -> Any:
        return seq[self.randrange(len(seq))]


def run_atheris(argv: list[str]) -> None:  # pragma: no cover - manual, long-running
    import atheris

    seeds = load_seeds(random.Random(0))
    tmp = Path(tempfile.mkdtemp(prefix="fuzz_kineto_atheris_"))
    os.environ.setdefault("NEURON_PROFILER_CACHE_DIR", str(tmp / "cache"))

    def one(data: bytes) -> None:
        _name, text = Mutator(_FdpRandom(atheris.FuzzedDataProvider(data))).document(seeds)
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
