"""``python -m neuron_profiler run [options] train.py [args]``: the same as
``neuron-profile capture [options] -- python train.py [args]``."""
from __future__ import annotations

import argparse
import sys
from collections.abc import Sequence


def main(argv: Sequence[str] | None = None) -> int:
    """Parse ``run [options] script [args]`` and profile the script; returns its exit status."""
    from neuron_profiler.launch import cli

    p = argparse.ArgumentParser(prog="python -m neuron_profiler")
    sub = p.add_subparsers(dest="command", required=True)
    r = sub.add_parser("run", help="profile a Python script: python -m neuron_profiler run train.py [args]")
    cli.add_capture_options(r)
    r.add_argument("script", help="the Python script (or -m module)")
    r.add_argument("args", nargs=argparse.REMAINDER, help="the script's arguments")
    a = p.parse_args(argv)
    import os
    env = dict(os.environ)
    if cli._env_flag(env, "NEURON_RT_INSPECT_ENABLE") is False:
        return cli.run_command([sys.executable, a.script, *a.args], None, env)
    try:
        options = cli.options_from_args(a, env)
    except ValueError as exc:
        p.error(str(exc))
    return cli.run_command([sys.executable, a.script, *a.args], options, env)


if __name__ == "__main__":
    sys.exit(main())
