"""Fault script for capture: kill a multi-window capture at random points (SIGKILL), fill or write-protect its
output directory mid-run, and check what survives.

Two campaigns, each driving a child process that trains a small MLP under ``torch.profiler`` + ``NeuronConfig``
(simulated trn2 runtime) with one window per step (``schedule(active=1, repeat=0)``):

- kills: ``--kills`` children, each SIGKILLed after a random delay once its first window started. Checked:
  every ``*.nprof`` reads completely (``read_trace`` complete, no loss warning, ``validate_trace`` clean); none
  partial under a final name. Left-over ``*.nprof.tmp`` files (a window being written at the kill) are counted;
  no reader lists them as traces.
- disk faults: one child, ``--windows`` windows; three of them meet a fault while they are written, then the
  fault is lifted:
  * full disk, real: ``RLIMIT_FSIZE`` lowered to 4 KiB, so the kernel refuses the write (``EFBIG``) after the
    first 4 KiB of the file (a partial temporary file exists);
  * full disk, injected: ``ENOSPC`` raised by a patched ``TraceWriter._write_record`` after the header went
    out. This is an injection hook of this script (no small tmpfs or loop device without root tricks here);
  * write-protected: the run directory made read-only (``chmod 0555``), or, for root, whom modes do not stop,
    replaced by a file for that window (a real ``OSError`` from the filesystem either way).
  Checked: the training loop ran every step; every other window is written and intact; nothing partial and no
  temporary file is left; each faulted window is one console line and is listed (``unwritten_windows``) in the
  footer of the next window written.

    python bench/fault_capture.py [--kills 40] [--windows 12] [--max-delay 2.0] [--seed 0] [--json out.json]

Exit status 0 when every check holds, 1 otherwise.
"""
from __future__ import annotations

import argparse
import errno
import json
import os
import random
import resource
import select
import signal
import subprocess
import sys
import tempfile
import time
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(REPO))

FAULTS = ("fsize", "enospc", "readonly")


# ---------------------------------------------------------------- child: the profiled training loop
def child(out: Path, run_id: str, steps: int, faults: dict[int, str]) -> int:
    """Train ``steps`` steps, one window each; ``faults`` maps a window index to the fault met while it is
    written. Prints ``ready`` when the first window started and ``steps N`` at the end."""
    os.environ.setdefault("KINETO_LOG_LEVEL", "6")
    import warnings

    import torch
    from torch.profiler import ProfilerActivity, profile, schedule

    from neuron_profiler import NeuronConfig, NeuronProfiler
    from neuron_profiler.trace.writer import TraceWriter

    orig_write = TraceWriter._write_record

    def enospc_write(self, *a, **k):  # the injection hook: the disk fills after the header is written
        if self.__dict__.setdefault("_records", 0) >= 1:
            raise OSError(errno.ENOSPC, "No space left on device")
        self._records += 1
        return orig_write(self, *a, **k)

    cfg = NeuronConfig(profile_output_dir=out, run_id=run_id, runtime="simulated")
    npf = NeuronProfiler(cfg, skip_empty=True)  # the window the profiler's exit closes holds no step
    run_dir = out / run_id
    torch.manual_seed(0)
    model = torch.nn.Sequential(torch.nn.Linear(64, 128), torch.nn.GELU(), torch.nn.Linear(128, 64))
    opt = torch.optim.SGD(model.parameters(), lr=0.01)
    done = 0
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", UserWarning)
        with profile(activities=[ProfilerActivity.CPU, ProfilerActivity.PrivateUse1], experimental_config=cfg,
                     schedule=schedule(wait=0, warmup=0, active=1, repeat=0), on_trace_ready=npf.export_trace,
                     record_shapes=True) as prof:
            print("ready", flush=True)
            for i in range(steps):
                for _ in range(4):
                    opt.zero_grad()
                    model(torch.randn(32, 64)).square().mean().backward()
                    opt.step()
                done += 1
                undo = _inject(faults.get(i), run_dir, TraceWriter, enospc_write, orig_write)
                try:
                    prof.step()  # exports window i
                finally:
                    undo()
    print(f"steps {done}", flush=True)
    return 0


def _inject(fault: str | None, run_dir: Path, writer: type, enospc_write, orig_write):
    """Start ``fault``; returns the function that lifts it."""
    if fault == "fsize":
        old = resource.getrlimit(resource.RLIMIT_FSIZE)
        resource.setrlimit(resource.RLIMIT_FSIZE, (4096, old[1]))
        return lambda: resource.setrlimit(resource.RLIMIT_FSIZE, old)
    if fault == "enospc":
        writer._write_record = enospc_write
        return lambda: setattr(writer, "_write_record", orig_write)
    if fault == "readonly":
        run_dir.mkdir(parents=True, exist_ok=True)
        if os.geteuid() != 0:
            run_dir.chmod(0o555)
            return lambda: run_dir.chmod(0o755)
        aside = run_dir.with_name(run_dir.name + ".aside")
        run_dir.rename(aside)
        run_dir.write_text("the run directory is a file for this window")

        def undo() -> None:
            run_dir.unlink()
            aside.rename(run_dir)
        return undo
    return lambda: None


# ---------------------------------------------------------------- parent: run, fault, check
def _child_cmd(out: Path, run_id: str, steps: int, faults: dict[int, str]) -> list[str]:
    return [sys.executable, str(Path(__file__).resolve()), "--child", str(out), run_id, str(steps), json.dumps(faults)]


def _env() -> dict[str, str]:
    env = dict(os.environ, KINETO_LOG_LEVEL="6", PYTHONPATH=str(REPO))
    env.pop("NEURON_PROFILE_RUN_ID", None)
    return env


def check_window(path: Path) -> bool:
    """True when ``path`` reads completely with the trace reader and validates clean."""
    from neuron_profiler.trace import TraceFormatError, read_trace
    from neuron_profiler.trace.validate import validate_trace
    try:
        tf = read_trace(path)
        ok = tf.complete and not tf.warnings
        tf.close()
        return ok and validate_trace(path) == []
    except TraceFormatError:
        return False


def kill_campaign(out: Path, kills: int, max_delay: float, rng: random.Random) -> dict[str, int]:
    """SIGKILL ``kills`` capturing children at random points; count what their run directories hold."""
    found = intact = leftovers = 0
    for k in range(kills):
        run_id = f"kill{k:03d}"
        proc = subprocess.Popen(_child_cmd(out, run_id, 10_000, {}), stdout=subprocess.PIPE,
                                stderr=subprocess.DEVNULL, env=_env(), text=True)
        assert proc.stdout is not None
        ready, _, _ = select.select([proc.stdout], [], [], 120)
        if ready:
            proc.stdout.readline()
        time.sleep(rng.uniform(0.0, max_delay))
        proc.send_signal(signal.SIGKILL)
        proc.wait()
        proc.stdout.close()
        run = out / run_id
        files = sorted(run.glob("*.nprof")) if run.is_dir() else []
        found += len(files)
        intact += sum(check_window(f) for f in files)
        leftovers += len(list(run.glob("*.tmp"))) if run.is_dir() else 0
        print(f"\r  kills {k + 1}/{kills}: windows found {found}, intact {intact}", end="", file=sys.stderr,
              flush=True)
    print(file=sys.stderr)
    return {"kills": kills, "windows_found": found, "intact": intact, "partial": found - intact,
            "tmp_leftovers": leftovers}


def disk_campaign(out: Path, windows: int) -> dict[str, object]:
    """One child meeting each fault once (windows 2, 4, 6 of ``windows``); checks the loop and the files."""
    from neuron_profiler.trace import read_trace
    faults = {2 * (i + 1): f for i, f in enumerate(FAULTS)}
    run_id = "disk"
    r = subprocess.run(_child_cmd(out, run_id, windows, faults), capture_output=True, text=True, env=_env(),
                       timeout=600)
    steps = next((int(line.split()[1]) for line in r.stdout.splitlines() if line.startswith("steps ")), 0)
    run = out / run_id
    files = sorted(run.glob("*.nprof"))
    names = {f.name for f in files}
    expected = {f"rank00000_window{i:03d}.nprof" for i in range(windows) if i not in faults}
    lines = [ln for ln in r.stderr.splitlines() if ln.startswith("neuron_profiler: window") and "not written" in ln]
    recorded: list[int] = []
    for w in sorted(faults):
        nxt = run / f"rank00000_window{w + 1:03d}.nprof"
        meta = read_trace(nxt).footer_metadata if nxt.exists() else {}
        recorded += [e["window"] for e in json.loads(meta.get("unwritten_windows", "[]"))]
    return {"exit_status": r.returncode, "steps_run": steps, "steps_asked": windows, "faults": faults,
            "readonly_method": "chmod 0555" if os.geteuid() != 0 else "run directory replaced by a file (root)",
            "windows_written": len(files), "windows_expected": len(expected),
            "intact": sum(check_window(f) for f in files),
            "missing_expected": sorted(expected - names), "unexpected": sorted(names - expected),
            "tmp_leftovers": len(list(run.glob("*.tmp"))), "console_lines": len(lines),
            "recorded_in_next_window": recorded, "console": lines}


def verdict(kill: dict[str, int], disk: dict[str, object]) -> list[str]:
    """The checks that failed (empty = every finished window intact, none partial, the loop ran on)."""
    bad = []
    if kill["partial"]:
        bad.append(f"{kill['partial']} partial windows under a final name after SIGKILL")
    if kill["kills"] and not kill["windows_found"]:
        bad.append("no window survived any kill (the children never got to write one?)")
    faults = disk["faults"]
    assert isinstance(faults, dict)
    checks = [(disk["exit_status"] == 0, f"the training child exited {disk['exit_status']}"),
              (disk["steps_run"] == disk["steps_asked"], f"training stopped at step {disk['steps_run']}"),
              (not disk["missing_expected"], f"windows missing: {disk['missing_expected']}"),
              (not disk["unexpected"], f"faulted windows written: {disk['unexpected']}"),
              (disk["intact"] == disk["windows_written"], "a written window is not intact"),
              (disk["tmp_leftovers"] == 0, "temporary files left after a fault"),
              (disk["console_lines"] == len(faults), f"{disk['console_lines']} console lines for {len(faults)} faults"),
              (disk["recorded_in_next_window"] == sorted(faults), "faulted windows not recorded in the next window")]
    bad += [msg for ok, msg in checks if not ok]
    return bad


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--kills", type=int, default=40)
    ap.add_argument("--windows", type=int, default=12, help="windows of the disk-fault run (>= 8)")
    ap.add_argument("--max-delay", type=float, default=2.0, help="longest wait before a kill, seconds")
    ap.add_argument("--seed", type=int, default=0)
    ap.add_argument("--out", type=Path, help="keep the traces here (default: a temporary directory)")
    ap.add_argument("--json", type=Path, help="write the figures as JSON")
    ap.add_argument("--child", nargs=4, help=argparse.SUPPRESS)
    a = ap.parse_args(argv)
    if a.child:
        out, run_id, steps, faults = a.child
        return child(Path(out), run_id, int(steps), {int(k): v for k, v in json.loads(faults).items()})
    if a.windows < 8:
        ap.error("--windows: at least 8 (faults at windows 2, 4 and 6, each followed by a written window)")
    with tempfile.TemporaryDirectory(prefix="fault_capture_") as tmp:
        out = a.out or Path(tmp)
        out.mkdir(parents=True, exist_ok=True)
        t0 = time.time()
        kill = kill_campaign(out, a.kills, a.max_delay, random.Random(a.seed))
        disk = disk_campaign(out, a.windows)
        bad = verdict(kill, disk)
        res = {"kill": kill, "disk": {k: v for k, v in disk.items() if k != "console"}, "failed_checks": bad,
               "seconds": round(time.time() - t0, 1)}
        print(f"SIGKILL: {kill['kills']} kills, windows found {kill['windows_found']}, intact {kill['intact']}, "
              f"partial {kill['partial']} (temporary files left by a kill mid-write: {kill['tmp_leftovers']})")
        print(f"disk faults ({', '.join(f'window {w}: {f}' for w, f in disk['faults'].items())}; read-only by "
              f"{disk['readonly_method']}): training ran {disk['steps_run']}/{disk['steps_asked']} steps, windows "
              f"written {disk['windows_written']}/{disk['steps_asked']}, intact {disk['intact']}, partial "
              f"{disk['windows_written'] - disk['intact']}, temporary files left {disk['tmp_leftovers']}, console "
              f"lines {disk['console_lines']}, recorded in the next window {disk['recorded_in_next_window']}")
        for line in disk["console"]:
            print(f"  console: {line}")
        print("all checks hold" if not bad else "FAILED: " + "; ".join(bad))
        if a.json:
            a.json.write_text(json.dumps(res, indent=2))
    return 0 if not bad else 1


if __name__ == "__main__":
    sys.exit(main())
