"""``neuron-profile capture [options] -- python train.py [args]``: profile a program without changing its code.

Options mirror ``NeuronConfig``; unset ones fall back to the Neuron runtime's environment variables
(``NEURON_RT_INSPECT_OUTPUT_DIR``, ``NEURON_RT_INSPECT_EVENT_FILTER_NC``,
``NEURON_RT_INSPECT_SYS_TRACE_MAX_EVENTS_PER_NC``, ``NEURON_RT_INSPECT_DEVICE_PROFILE`` /
``_SYSTEM_PROFILE`` / ``_CPU_UTIL`` / ``_HOST_MEMORY``). ``NEURON_RT_INSPECT_ENABLE=0`` runs the command
unprofiled. Exit status = the command's.
"""
from __future__ import annotations

import argparse
import json
import os
import subprocess
import sys
import time
from collections.abc import Sequence
from pathlib import Path

from neuron_profiler.launch.runner import ENV_OPTIONS

BOOTSTRAP_DIR = Path(__file__).resolve().parent / "bootstrap"
PACKAGE_ROOT = Path(__file__).resolve().parents[2]


def _env_flag(env: dict[str, str], key: str) -> bool | None:
    v = env.get(key)
    if v is None or v == "":
        return None
    return v.strip().lower() not in ("0", "false", "no", "off")


def modes_from_env(env: dict[str, str]) -> list[str] | None:
    """Modes implied by NEURON_RT_INSPECT_{DEVICE_PROFILE,SYSTEM_PROFILE,CPU_UTIL,HOST_MEMORY}; None if none set."""
    keys = {"DEVICE": "NEURON_RT_INSPECT_DEVICE_PROFILE", "RUNTIME": "NEURON_RT_INSPECT_SYSTEM_PROFILE",
            "CPU_UTIL": "NEURON_RT_INSPECT_CPU_UTIL", "HOST_MEMORY": "NEURON_RT_INSPECT_HOST_MEMORY"}
    flags = {m: _env_flag(env, k) for m, k in keys.items()}
    if all(v is None for v in flags.values()):
        return None
    defaults = {"DEVICE": True, "RUNTIME": True, "CPU_UTIL": False, "HOST_MEMORY": False}
    return [m for m in keys if (flags[m] if flags[m] is not None else defaults[m])]


def build_parser() -> argparse.ArgumentParser:
    p = argparse.ArgumentParser(prog="neuron-profile", description="Capture Neuron profiles of PyTorch programs.")
    sub = p.add_subparsers(dest="command", required=True)
    c = sub.add_parser("capture", help="profile a command: neuron-profile capture [options] -- python train.py",
                       description="Profile every Python process of COMMAND; traces go to "
                                   "<output-dir>/<run-id>/rankRRRRR_windowWWW.nprof")
    add_capture_options(c)
    c.add_argument("cmd", nargs=argparse.REMAINDER, help="the command, after --")
    from neuron_profiler.predict.cli import add_parser
    add_parser(sub)
    return p


def add_capture_options(c: argparse.ArgumentParser) -> None:
    """The NeuronConfig options shared by ``neuron-profile capture`` and ``python -m neuron_profiler run``."""
    c.add_argument("-o", "--output-dir", help="profile_output_dir (default: $NEURON_RT_INSPECT_OUTPUT_DIR or ./output)")
    c.add_argument("--modes", help="comma-separated ProfileMode names, e.g. DEVICE,RUNTIME,CPU_UTIL,HOST_MEMORY")
    c.add_argument("--target", default="trn2", help="simulated target: trn1, inf2, trn2, trn3 (default trn2)")
    c.add_argument("--runtime", default="auto", help="auto, simulated or hardware")
    c.add_argument("--max-events-per-nc", type=int, help="default: $NEURON_RT_INSPECT_SYS_TRACE_MAX_EVENTS_PER_NC")
    c.add_argument("--capture-enabled-for-nc", help="cores, e.g. 0,1,2-5 (default: $NEURON_RT_INSPECT_EVENT_FILTER_NC)")
    c.add_argument("--num-cores", type=int, help="NeuronCores per simulated device")
    c.add_argument("--run-id", help="run id grouping the traces (default: a timestamp)")
    c.add_argument("--wait", type=int, default=0, help="schedule: optimizer steps to skip")
    c.add_argument("--warmup", type=int, default=0, help="schedule: warm-up steps")
    c.add_argument("--active", type=int, default=0,
                   help="schedule: steps per window (0 = the whole run is one window); a step = optimizer.step()")
    c.add_argument("--repeat", type=int, default=1, help="schedule: windows (0 = until the program ends)")
    c.add_argument("--with-stack", action="store_true", help="record Python stacks")
    c.add_argument("--no-modules", action="store_true", help="do not record the nn.Module hierarchy")
    c.add_argument("--no-shapes", action="store_true",
                   help="do not record input shapes (DEVICE mode records them anyway: the device model needs them)")


def options_from_args(a: argparse.Namespace, env: dict[str, str]) -> dict[str, object]:
    """Validated capture options (JSON-serialisable). Raises ``ValueError`` on bad values, and when the device
    runtime asked for (or found by "auto") cannot deliver device events, before anything runs."""
    from neuron_profiler.hardware import Target
    from neuron_profiler.modes import (
        RUNTIMES,
        ProfileMode,
        check_choice,
        check_output_dir,
        check_run_id,
        parse_nc_ranges,
    )
    from neuron_profiler.runtime.base import RuntimeUnavailableError
    from neuron_profiler.runtime.factory import resolve_runtime
    modes = [ProfileMode.parse(m).name for m in a.modes.split(",") if m.strip()] if a.modes else modes_from_env(env)
    target = Target.parse(a.target)
    check_choice("runtime", a.runtime, RUNTIMES)
    max_ev = a.max_events_per_nc
    if max_ev is None and env.get("NEURON_RT_INSPECT_SYS_TRACE_MAX_EVENTS_PER_NC"):
        raw = env["NEURON_RT_INSPECT_SYS_TRACE_MAX_EVENTS_PER_NC"]
        if not raw.strip().isdigit() or int(raw) <= 0:
            raise ValueError("NEURON_RT_INSPECT_SYS_TRACE_MAX_EVENTS_PER_NC: expected a positive integer, "
                             f"found {raw!r}")
        max_ev = int(raw)
    if max_ev is not None and max_ev <= 0:
        raise ValueError(f"--max-events-per-nc: expected a positive integer, found {max_ev}")
    cores = a.capture_enabled_for_nc
    if cores is None:
        cores = env.get("NEURON_RT_INSPECT_EVENT_FILTER_NC")
    parse_nc_ranges(cores)
    for name in ("wait", "warmup", "active", "repeat"):
        if getattr(a, name) < 0:
            raise ValueError(f"--{name}: expected >= 0, found {getattr(a, name)}")
    if modes is None or "DEVICE" in modes:
        try:
            resolve_runtime(a.runtime)
        except RuntimeUnavailableError as exc:
            raise ValueError(str(exc)) from None
    out = a.output_dir or env.get("NEURON_RT_INSPECT_OUTPUT_DIR") or "./output"
    out = str(check_output_dir(out).resolve())
    run_id = check_run_id(a.run_id or time.strftime("run_%Y%m%dT%H%M%SZ", time.gmtime()), "--run-id")
    return {"modes": modes, "profile_output_dir": out, "max_events_per_nc": max_ev, "capture_enabled_for_nc": cores,
            "target": target.value, "runtime": a.runtime, "run_id": run_id, "num_cores": a.num_cores,
            "wait": a.wait, "warmup": a.warmup, "active": a.active, "repeat": a.repeat,
            "record_shapes": not a.no_shapes, "with_stack": a.with_stack, "with_modules": not a.no_modules}


def run_command(cmd: Sequence[str], options: dict[str, object] | None, env: dict[str, str] | None = None) -> int:
    """Run ``cmd`` with the bootstrap on PYTHONPATH (``options`` None = unprofiled); returns its exit status."""
    env = dict(os.environ if env is None else env)
    if options is not None:
        paths = [str(BOOTSTRAP_DIR), str(PACKAGE_ROOT)] + [p for p in env.get("PYTHONPATH", "").split(os.pathsep) if p]
        env["PYTHONPATH"] = os.pathsep.join(paths)
        env[ENV_OPTIONS] = json.dumps(options)
        env.setdefault("NEURON_PROFILE_RUN_ID", str(options["run_id"]))
        env.setdefault("KINETO_LOG_LEVEL", "6")
    cmd = list(cmd)
    if cmd and cmd[0] in ("python", "python3"):
        cmd[0] = sys.executable
    try:
        return subprocess.call(cmd, env=env)
    except FileNotFoundError:
        print(f"neuron-profile: command not found: {cmd[0]}", file=sys.stderr)
        return 127


def main(argv: Sequence[str] | None = None) -> int:
    """Entry point of ``neuron-profile``; returns the exit status."""
    parser = build_parser()
    args = parser.parse_args(argv)
    if args.command == "predict":
        from neuron_profiler.predict.cli import run
        return run(args)
    cmd = list(args.cmd)
    if cmd and cmd[0] == "--":
        cmd = cmd[1:]
    if not cmd:
        parser.error("capture: give the command after --, e.g. neuron-profile capture -- python train.py")
    env = dict(os.environ)
    if _env_flag(env, "NEURON_RT_INSPECT_ENABLE") is False:
        print("neuron-profile: NEURON_RT_INSPECT_ENABLE=0, running unprofiled", file=sys.stderr)
        return run_command(cmd, None, env)
    try:
        options = options_from_args(args, env)
    except ValueError as exc:
        parser.error(str(exc))
    print(f"neuron-profile: traces -> {options['profile_output_dir']}/{options['run_id']}/", file=sys.stderr)
    return run_command(cmd, options, env)


if __name__ == "__main__":  # pragma: no cover
    sys.exit(main())
