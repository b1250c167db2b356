"""Host counters for ``ProfileMode.CPU_UTIL`` and ``ProfileMode.HOST_MEMORY``, sampled by a background thread
from ``/proc`` (no psutil).

Series: "CPU Utilization" (percent of all host CPUs busy since the previous sample, /proc/stat jiffies),
"Process CPU Utilization" (this process's CPU time over wall time, percent of all host CPUs), "Host Memory Used"
(bytes, MemTotal - MemAvailable), "Process RSS" (bytes, VmRSS of this process).
"""
from __future__ import annotations

import os
import resource
import threading
import time


def read_cpu_times() -> tuple[int, int] | None:
    """(busy_jiffies, total_jiffies) summed over all CPUs from /proc/stat, or None when unavailable."""
    try:
        with open("/proc/stat") as f:
            parts = f.readline().split()
    except OSError:
        return None
    if not parts or parts[0] != "cpu":
        return None
    vals = [int(x) for x in parts[1:]]
    idle = vals[3] + (vals[4] if len(vals) > 4 else 0)  # idle + iowait
    total = sum(vals[:8])
    return total - idle, total


def read_host_memory_used() -> tuple[float, float] | None:
    """(used_bytes, used_percent) of host memory from /proc/meminfo, or None."""
    info: dict[str, int] = {}
    try:
        with open("/proc/meminfo") as f:
            for line in f:
                k, _, rest = line.partition(":")
                info[k] = int(rest.split()[0]) * 1024
    except (OSError, ValueError, IndexError):
        return None
    if "MemTotal" not in info or "MemAvailable" not in info:
        return None
    used = info["MemTotal"] - info["MemAvailable"]
    return float(used), 100.0 * used / info["MemTotal"]


def read_process_rss() -> float:
    """Resident set size of this process in bytes (VmRSS; falls back to peak ru_maxrss)."""
    try:
        with open(f"/proc/{os.getpid()}/status") as f:
            for line in f:
                if line.startswith("VmRSS:"):
                    return float(int(line.split()[1]) * 1024)
    except OSError:
        pass
    return float(resource.getrusage(resource.RUSAGE_SELF).ru_maxrss * 1024)


class HostSampler:
    """Background sampler; ``samples`` maps series name -> list of (ts_ns, value)."""

    UNITS = {"CPU Utilization": "percent", "Process CPU Utilization": "percent", "Host Memory Used": "bytes",
             "Process RSS": "bytes"}

    def __init__(self, interval_s: float, cpu: bool, memory: bool) -> None:
        self.interval_s = interval_s
        self.cpu, self.memory = cpu, memory
        self.samples: dict[str, list[tuple[int, float]]] = {}
        self._stop = threading.Event()
        self._thread: threading.Thread | None = None
        self._prev: tuple[int, int] | None = None
        self._prev_proc: tuple[int, int] | None = None
        self._ncpu = os.cpu_count() or 1

    def _sample(self) -> None:
        now = time.time_ns()
        if self.cpu:
            cur = read_cpu_times()
            if cur is not None and self._prev is not None and cur[1] > self._prev[1]:
                pct = 100.0 * (cur[0] - self._prev[0]) / (cur[1] - self._prev[1])
                self.samples.setdefault("CPU Utilization", []).append((now, pct))
            self._prev = cur
            proc = (time.process_time_ns(), time.perf_counter_ns())
            if self._prev_proc is not None and proc[1] > self._prev_proc[1]:
                pct = 100.0 * (proc[0] - self._prev_proc[0]) / (proc[1] - self._prev_proc[1]) / self._ncpu
                self.samples.setdefault("Process CPU Utilization", []).append((now, min(max(pct, 0.0), 100.0)))
            self._prev_proc = proc
        if self.memory:
            mem = read_host_memory_used()
            if mem is not None:
                self.samples.setdefault("Host Memory Used", []).append((now, mem[0]))
            self.samples.setdefault("Process RSS", []).append((now, read_process_rss()))

    def _run(self) -> None:
        while not self._stop.wait(self.interval_s):
            self._sample()

    def start(self) -> None:
        """Take a first sample and start the thread."""
        self.samples = {}
        self._prev = None
        self._prev_proc = None
        self._stop.clear()
        self._sample()
        self._thread = threading.Thread(target=self._run, name="neuron-profiler-host-sampler", daemon=True)
        self._thread.start()

    def stop(self) -> dict[str, list[tuple[int, float]]]:
        """Stop the thread, take a last sample; returns the samples."""
        self._stop.set()
        if self._thread is not None:
            self._thread.join(timeout=max(1.0, 4 * self.interval_s))
            self._thread = None
        self._sample()
        return self.samples
