"""Fuzz the trace reader with mutations of valid files; every input runs under a time and a memory limit.

The inputs (seeds and their mutations) are ``bench/reader_mutations.py``'s. Each input goes through the public
API, strict and lenient: ``read_trace``, ``row_counts``, ``time_range``,
``codecs``, ``tables()``, ``iter_table``, ``loss_report(verify=True)``, ``validate_trace``. Documented outcomes:
success or a ``TraceFormatError``. Anything else is a finding, as is an input that takes more than
``--timeout`` seconds (a hang) or whose peak RSS exceeds 10x its size + ``--fixed-mb`` (measured per input in
the worker: VmHWM is reset through /proc/self/clear_refs before each input). Workers are forked processes
whose address space is capped (``resource.setrlimit(RLIMIT_AS)``), so a runaway allocation fails there.

    python bench/fuzz_reader.py --inputs 100000 [--workers 2] [--seed 1] [--timeout 20] [--out bench/out/fuzz]
    python bench/fuzz_reader.py --atheris -- -runs=100000 -rss_limit_mb=2048 -timeout=20   # coverage-guided

Inputs are reproducible: input ``i`` of ``--seed s`` is rebuilt by ``make_input(seeds, s, i)``; findings are
written to ``--out`` with their traceback.
"""
from __future__ import annotations

import argparse
import collections
import multiprocessing as mp
import os
import resource
import sys
import tempfile
import time
import traceback
from multiprocessing.connection import wait
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))
sys.path.insert(0, str(Path(__file__).resolve().parent))  # reader_mutations, beside this script


from reader_mutations import MUTATIONS, make_input, make_seeds  # noqa: E402

from neuron_profiler.trace import TraceFormatError, read_trace  # noqa: E402
from neuron_profiler.trace.validate import validate_trace  # noqa: E402

__all__ = ["MUTATIONS", "make_input", "make_seeds", "exercise", "run_one", "fuzz", "Pool"]


# ---------------------------------------------------------------------------------------------- one input
def exercise(path: str) -> None:
    """Every public entry point of the reader, strict then lenient (``validate_trace`` reads every table leniently
    and asks for the verified loss report); raises what they raise."""
    try:
        with read_trace(path) as tf:
            tf.row_counts, tf.time_range, tf.codecs, tf.loss_report()  # noqa: B018
            tf.tables()
            for _ in tf.iter_table("instructions", batch_rows=300):
                pass
    except TraceFormatError:
        pass
    validate_trace(path)


def _status(key: str) -> int:
    with open("/proc/self/status") as f:
        return next(int(line.split()[1]) * 1024 for line in f if line.startswith(key))


def run_one(data: bytes, path: str) -> tuple[str, str, int]:
    """(outcome, traceback for findings, peak RSS increase in bytes) of one input."""
    with open(path, "wb") as f:
        f.write(data)
    with open("/proc/self/clear_refs", "w") as f:
        f.write("5")  # reset VmHWM to the current RSS
    before = _status("VmRSS")
    try:
        exercise(path)
        outcome, tb = "ok", ""
    except TraceFormatError as e:
        outcome, tb = f"documented {type(e).__name__}", ""
    except BaseException as e:  # noqa: BLE001 - every other exception is a finding
        frame = traceback.extract_tb(e.__traceback__)[-1]
        outcome = f"UNDOCUMENTED {type(e).__name__} at {Path(frame.filename).name}:{frame.lineno}"
        tb = traceback.format_exc()
    return outcome, tb, _status("VmHWM") - before


def _worker(conn, seeds: list[bytes], seed: int, mem_limit: int) -> None:
    soft = _status("VmSize") + mem_limit
    resource.setrlimit(resource.RLIMIT_AS, (soft, soft))
    path = os.path.join(tempfile.mkdtemp(prefix="fuzz_"), "input.nprof")
    while True:
        i = conn.recv()
        if i is None:
            break
        data = make_input(seeds, seed, i)
        outcome, tb, peak = run_one(data, path)
        conn.send((i, outcome, tb, peak, len(data)))


# ---------------------------------------------------------------------------------------------- the pool
class Pool:
    """Forked workers fed input numbers; an input running over ``timeout`` is a hang (its worker is replaced)."""

    def __init__(self, n: int, seeds: list[bytes], seed: int, timeout: float, mem_limit: int) -> None:
        self.args = (seeds, seed, mem_limit)
        self.timeout = timeout
        self.ctx = mp.get_context("fork")
        self.workers: list[list] = [self._spawn() for _ in range(n)]  # [process, conn, input or None, started]

    def _spawn(self) -> list:
        parent, child = self.ctx.Pipe()
        p = self.ctx.Process(target=_worker, args=(child, *self.args), daemon=True)
        p.start()
        child.close()
        return [p, parent, None, 0.0]

    def run(self, inputs, on_result) -> None:
        it = iter(inputs)
        pending = True
        while pending or any(w[2] is not None for w in self.workers):
            for w in self.workers:
                if w[2] is None and pending:
                    i = next(it, None)
                    if i is None:
                        pending = False
                        continue
                    w[1].send(i)
                    w[2], w[3] = i, time.monotonic()
            busy = [w for w in self.workers if w[2] is not None]
            ready = wait([w[1] for w in busy], timeout=0.5)
            now = time.monotonic()
            for k, w in enumerate(self.workers):
                if w[2] is None:
                    continue
                if w[1] in ready:
                    try:
                        on_result(*w[1].recv())
                    except EOFError:  # the worker died (e.g. killed by the kernel)
                        on_result(w[2], f"CRASH exit {w[0].exitcode}", "", 0, 0)
                        self._replace(k)
                        continue
                    w[2] = None
                elif now - w[3] > self.timeout or not w[0].is_alive():
                    on_result(w[2], "HANG" if w[0].is_alive() else f"CRASH exit {w[0].exitcode}", "", 0, 0)
                    self._replace(k)

    def _replace(self, k: int) -> None:
        p = self.workers[k][0]
        p.kill()
        p.join()
        self.workers[k] = self._spawn()

    def close(self) -> None:
        for p, conn, *_ in self.workers:
            try:
                conn.send(None)
            except OSError:
                pass
            p.join(timeout=5)
            if p.is_alive():
                p.kill()


def fuzz(n_inputs: int, *, workers: int = 2, seed: int = 1, timeout: float = 20.0, mem_limit_mb: int = 2048,
         fixed_mb: int = 128, out: Path | None = None, progress: bool = False) -> dict:
    """Run ``n_inputs`` inputs; returns the counts per outcome, findings (undocumented exceptions, hangs, crashes,
    inputs over the memory bound) and memory figures."""
    seeds = make_seeds(Path(tempfile.mkdtemp(prefix="fuzz_seeds_")))
    counts: collections.Counter = collections.Counter()
    findings: dict[str, list[int]] = collections.defaultdict(list)
    peak_max = [0, 0, 0]  # peak bytes, input size, input number of the largest peak
    excess_max = [float("-inf"), 0]  # peak - 10 * size, input number
    t0 = time.monotonic()

    def on_result(i: int, outcome: str, tb: str, peak: int, size: int) -> None:
        counts[outcome.split(" at ")[0] if outcome.startswith("documented") else outcome] += 1
        over = peak > 10 * size + (fixed_mb << 20)
        if outcome.startswith(("UNDOCUMENTED", "HANG", "CRASH")) or over:
            key = outcome if not over else f"MEMORY peak {peak >> 20} MB for {size} bytes"
            findings[key].append(i)
            if out is not None and len(findings[key]) <= 3:
                out.mkdir(parents=True, exist_ok=True)
                (out / f"input_{seed}_{i}.nprof").write_bytes(make_input(seeds, seed, i))
                (out / f"input_{seed}_{i}.txt").write_text(f"{key}\n\n{tb}")
        if peak > peak_max[0]:
            peak_max[:] = [peak, size, i]
        if peak - 10 * size > excess_max[0]:
            excess_max[:] = [peak - 10 * size, i]
        done = sum(counts.values())
        if progress and done % 1000 == 0:
            rate = done / (time.monotonic() - t0)
            print(f"  {done:,} inputs, {rate:.0f}/s, findings {sum(map(len, findings.values()))}",
                  file=sys.stderr, flush=True)

    pool = Pool(workers, seeds, seed, timeout, mem_limit_mb << 20)
    try:
        pool.run(range(n_inputs), on_result)
    finally:
        pool.close()
    _recheck_hangs(findings, counts, seeds, seed, timeout, mem_limit_mb)
    return {"inputs": sum(counts.values()), "seconds": time.monotonic() - t0, "outcomes": dict(counts),
            "findings": dict(findings), "peak_max_bytes": peak_max[0], "peak_max_input_bytes": peak_max[1],
            "peak_max_input": peak_max[2], "max_excess_over_10x_bytes": excess_max[0], "seeds": len(seeds),
            "largest_seed_bytes": max(map(len, seeds))}


def _recheck_hangs(findings: dict, counts: collections.Counter, seeds: list[bytes], seed: int, timeout: float,
                   mem_limit_mb: int) -> None:
    """Run each input that timed out again, alone in a fresh worker with the same timeout: on a machine shared with
    other jobs (the fuzzer runs at low priority) an input of 0.05 s can miss a 10 s timeout. One that finishes
    this time is counted as "slow once, finished alone", not as a hang; one that times out again stays a hang."""
    hung = findings.pop("HANG", [])
    again: list[int] = []

    def on_result(i: int, outcome: str, tb: str, peak: int, size: int) -> None:
        if outcome == "HANG":
            again.append(i)

    if hung:
        pool = Pool(1, seeds, seed, timeout, mem_limit_mb << 20)
        try:
            pool.run(hung, on_result)
        finally:
            pool.close()
    if again:
        findings["HANG"] = again
    if len(hung) > len(again):
        counts["HANG"] -= len(hung) - len(again)
        counts["slow once (load), finished alone"] += len(hung) - len(again)
        if not counts["HANG"]:
            del counts["HANG"]


def _atheris(argv: list[str]) -> None:
    """Coverage-guided fuzzing with atheris (libFuzzer flags in ``argv``, e.g. -runs=N -rss_limit_mb=2048
    -timeout=20); the seeds are the starting corpus. Undocumented exceptions stop it with the input saved."""
    import atheris

    corpus = Path(tempfile.mkdtemp(prefix="atheris_corpus_"))
    for k, s in enumerate(make_seeds(corpus / "made")):
        (corpus / f"seed{k}.nprof").write_bytes(s)
    atheris.instrument_all()  # the reader's modules are imported already: instrument their bytecode now
    path = os.path.join(tempfile.mkdtemp(prefix="atheris_"), "input.nprof")

    def one(data: bytes) -> None:
        with open(path, "wb") as f:
            f.write(data)
        try:
            exercise(path)
        except TraceFormatError:
            pass

    atheris.Setup([sys.argv[0], *argv, "-max_len=200000", str(corpus)], one)
    atheris.Fuzz()


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--inputs", type=int, default=10_000)
    ap.add_argument("--workers", type=int, default=2)
    ap.add_argument("--seed", type=int, default=1)
    ap.add_argument("--timeout", type=float, default=20.0, help="seconds per input before it counts as a hang")
    ap.add_argument("--mem-limit-mb", type=int, default=2048, help="address space each worker may add")
    ap.add_argument("--fixed-mb", type=int, default=128, help="memory bound: 10x the input size + this")
    ap.add_argument("--out", type=Path, default=ROOT / "bench" / "out" / "fuzz")
    ap.add_argument("--atheris", action="store_true", help="coverage-guided with atheris (args after -- go to it)")
    args, rest = ap.parse_known_args()
    if args.atheris:
        _atheris([a for a in rest if a != "--"])
        return
    r = fuzz(args.inputs, workers=args.workers, seed=args.seed, timeout=args.timeout, mem_limit_mb=args.mem_limit_mb,
             fixed_mb=args.fixed_mb, out=args.out, progress=True)
    print(f"{r['inputs']:,} inputs in {r['seconds']:.0f} s ({r['inputs'] / r['seconds']:.0f}/s), {r['seeds']} seeds "
          f"(largest {r['largest_seed_bytes']:,} bytes)")
    for k, v in sorted(r["outcomes"].items(), key=lambda kv: -kv[1]):
        print(f"  {v:>8,}  {k}")
    print(f"peak RSS increase: max {r['peak_max_bytes'] / 2**20:.1f} MB (input of {r['peak_max_input_bytes']:,} bytes, "
          f"#{r['peak_max_input']}); max(peak - 10 x size) = {r['max_excess_over_10x_bytes'] / 2**20:.1f} MB "
          f"(bound: {args.fixed_mb} MB)")
    print(f"findings: {sum(map(len, r['findings'].values()))}")
    for k, ids in r["findings"].items():
        print(f"  {len(ids):>6}  {k}  (e.g. input {ids[0]}; saved in {args.out})")
    sys.exit(1 if r["findings"] else 0)


if __name__ == "__main__":
    main()
