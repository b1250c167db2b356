"""Dry run of a 7B-parameter decoder training step (one tensor-parallel rank of TP=8) on this machine.

Runs ``examples/llama_dryrun.py`` in a fresh process and reports its wall time and peak RSS against the
targets (under 5 minutes and 4 GB), and the projected step on the target.

    python bench/bench_dryrun.py [--target trn2] [extra llama_dryrun.py arguments]
"""
from __future__ import annotations

import os
import subprocess
import sys
import time
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]


def main(argv: list[str]) -> int:
    script = REPO / "examples" / "llama_dryrun.py"
    runner = (f"import resource, runpy, sys\nsys.argv = [{str(script)!r}] + sys.argv[1:]\n"
              f"runpy.run_path({str(script)!r}, run_name='__main__')\n"
              "print('peak_rss_kib', resource.getrusage(resource.RUSAGE_SELF).ru_maxrss)")
    cmd = [sys.executable, "-c", runner, *argv]
    env = {**os.environ, "KINETO_LOG_LEVEL": "6", "PYTHONWARNINGS": "ignore"}
    t = time.perf_counter()
    res = subprocess.run(cmd, capture_output=True, text=True, env=env, cwd=REPO)
    wall = time.perf_counter() - t
    if res.returncode:
        print(res.stderr[-2000:], file=sys.stderr)
        return res.returncode
    lines = res.stdout.strip().splitlines()
    rss = int(lines[-1].split()[1]) * 1024 / 2 ** 30
    print("\n".join(lines[:-1]))
    print(f"dry run: wall {wall:.1f} s (target < 300 s, {wall / 300:.2f}x of it), peak RSS {rss:.2f} GiB "
          f"(target < 4 GiB, {rss / 4:.2f}x of it)")
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
