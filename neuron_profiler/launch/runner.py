"""No-code-change capture: profile a whole Python process from the environment.

``neuron-profile capture -- python train.py`` puts ``launch/bootstrap`` (a ``sitecustomize``) on PYTHONPATH and
the options as JSON in ``NEURON_PROFILE_CAPTURE``. At interpreter start-up ``start_from_env()`` builds a
``NeuronConfig``, enters a stock ``torch.profiler.profile`` and, at exit, stops it so the last window is exported.

Windows: without ``active`` the whole run is one window; with ``active`` (and ``wait``/``warmup``/``repeat``) a
schedule is used and every ``optimizer.step()`` counts as a profiler step (a global optimizer post-hook).
Every Python process started by the command (e.g. ``torch.multiprocessing.spawn`` workers) profiles itself.
"""
from __future__ import annotations

import atexit
import functools
import json
import os
import sys
import warnings
from typing import Any

ENV_OPTIONS = "NEURON_PROFILE_CAPTURE"
_active: dict[str, Any] | None = None

CONFIG_KEYS = ("modes", "profile_output_dir", "max_events_per_nc", "capture_enabled_for_nc", "target", "runtime",
               "run_id", "num_cores", "cpu_sample_interval_s")


def start(options: dict[str, Any]) -> Any:
    """Start profiling this process with ``options`` (NeuronConfig keys plus wait/warmup/active/repeat,
    record_shapes, with_stack, with_modules); returns the entered ``torch.profiler.profile``."""
    global _active
    if _active is not None:
        return _active["prof"]
    import torch
    from torch.profiler import ProfilerActivity, schedule

    from neuron_profiler.config import NeuronConfig
    from neuron_profiler.profiler import NeuronProfiler

    cfg = NeuronConfig(**{k: options[k] for k in CONFIG_KEYS if options.get(k) is not None})
    npf = NeuronProfiler(cfg, skip_empty=True)
    sched = None
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", UserWarning)  # "won't be using warmup" etc.: the user chose the schedule
        if options.get("active"):
            sched = schedule(wait=int(options.get("wait") or 0), warmup=int(options.get("warmup") or 0),
                             active=int(options["active"]), repeat=int(options.get("repeat") or 0))
        prof = torch.profiler.profile(activities=[ProfilerActivity.CPU, ProfilerActivity.PrivateUse1], schedule=sched,
                                      on_trace_ready=npf.export_trace, experimental_config=cfg,
                                      record_shapes=bool(options.get("record_shapes", True)),
                                      with_stack=bool(options.get("with_stack", False)),
                                      with_modules=bool(options.get("with_modules", True)))
        prof.__enter__()
    handle = None
    if sched is not None:
        from torch.optim.optimizer import register_optimizer_step_post_hook
        handle = register_optimizer_step_post_hook(lambda *a, **k: prof.step())
    _active = {"prof": prof, "npf": npf, "handle": handle}
    atexit.register(stop)
    # multiprocessing children (torch.multiprocessing.spawn workers) leave through os._exit and skip atexit;
    # their finalizers with an exit priority still run
    import multiprocessing.util
    multiprocessing.util.Finalize(None, stop, exitpriority=100)
    _stop_before_destroy()
    return prof


def _stop_before_destroy() -> None:
    """End profiling when the default process group is destroyed: the window is exported while rank and world
    size are still known, and no profiler is active during gloo/DDP teardown (a Kineto session alive while a
    DDP module and its gloo group are torn down was seen to deadlock, with the stock profiler too)."""
    try:
        import torch.distributed as dist
        import torch.distributed.distributed_c10d as c10d
    except ImportError:
        return
    orig = c10d.destroy_process_group

    @functools.wraps(orig)
    def destroy_process_group(group: Any = None) -> Any:
        if group is None:
            stop()
        return orig(group)
    dist.destroy_process_group = c10d.destroy_process_group = destroy_process_group


def stop() -> None:
    """Stop profiling (exports the window in progress). Safe to call twice."""
    global _active
    if _active is None:
        return
    act, _active = _active, None
    if act["handle"] is not None:
        act["handle"].remove()
    try:
        act["prof"].__exit__(None, None, None)
    except Exception as exc:  # the program's own exit status matters more
        print(f"neuron-profile: exporting the last window failed: {exc!r}", file=sys.stderr)
    for p in act["npf"].paths:
        print(f"neuron-profile: wrote {p}", file=sys.stderr)


def start_from_env() -> None:
    """Called by the bootstrap ``sitecustomize``: start when ``NEURON_PROFILE_CAPTURE`` holds options."""
    raw = os.environ.get(ENV_OPTIONS)
    if not raw:
        return
    try:
        options = json.loads(raw)
    except json.JSONDecodeError:
        print(f"neuron-profile: ignoring malformed {ENV_OPTIONS}", file=sys.stderr)
        return
    try:
        start(options)
    except (ImportError, ValueError, TypeError, RuntimeError) as exc:  # bad options, runtime unavailable
        print(f"neuron-profile: not profiling this process ({exc})", file=sys.stderr)
