"""``neuron-explorer [TRACE_OR_DIR] [--host 127.0.0.1] [--port 8050] [--debug]``: serve the explorer.

Without a path it serves the bundled sample folder (``sample_traces/``: a GPT training step eager and compiled,
a CNN, a 2-rank DDP run), opening the eager GPT first, so Compare and Collectives have something to show."""
from __future__ import annotations

import argparse
import errno
import sys
import tempfile
from pathlib import Path

from sample_traces import DEFAULT_SAMPLE as SAMPLE  # shipped as package data
from sample_traces import SAMPLE_DIR


def parse_args(argv: list[str] | None = None) -> argparse.Namespace:
    p = argparse.ArgumentParser(prog="neuron-explorer",
                                description="Open a Neuron (or imported GPU) trace in a local web app.")
    p.add_argument("path", nargs="?", help="a .nprof / Kineto .json(.gz) trace, or a directory of traces "
                                           f"(default: the bundled sample folder, opening {SAMPLE.name} first)")
    p.add_argument("--host", default="127.0.0.1", help="interface to bind (default 127.0.0.1: this machine only)")
    p.add_argument("--port", type=int, default=8050, help="port (default 8050)")
    p.add_argument("--debug", action="store_true",
                   help="Dash debug mode on Flask's development server (reloader, dev tools); off by default")
    p.add_argument("--threads", type=int, default=8, help="worker threads of the WSGI server (default 8)")
    p.add_argument("--cache", type=int, default=4, help="open traces kept in memory (default 4)")
    p.add_argument("--allow-host", action="append", default=[], metavar="NAME[:PORT]",
                   help="also answer requests naming this host (e.g. behind a proxy); repeatable; '*' turns the "
                        "Host check off. By default only 127.0.0.1, localhost and [::1] on --port are answered "
                        "(other Host headers get 403: a web page cannot reach the explorer by DNS rebinding)")
    return p.parse_args(argv)


def resolve_path(arg: str | None) -> Path:
    """The path to serve: the argument, else the bundled sample folder (a synthetic demo trace when the samples
    are missing)."""
    if arg:
        p = Path(arg).expanduser()
        if not p.exists():
            raise SystemExit(f"neuron-explorer: no such file or directory: {p}")
        return p
    if SAMPLE.is_file():
        return SAMPLE_DIR
    from neuron_profiler.synthetic_trace import write_synthetic_trace

    out = Path(tempfile.mkdtemp(prefix="neuron-explorer-")) / "synthetic_demo.nprof"
    print(f"bundled sample {SAMPLE} is missing; showing a synthetic demo trace {out}", file=sys.stderr)
    return write_synthetic_trace(out, 50_000)


def main(argv: list[str] | None = None) -> int:
    args = parse_args(argv)
    path = resolve_path(args.path)
    try:
        from .app import create_app, start_precompute
        from .pages.common import Ctx
        from .store import TraceError, TraceStore
    except ImportError as exc:  # a dependency of the web app is missing: one line, what to install
        print(f"neuron-explorer: error: the explorer needs {exc.name or exc} (pip install 'neuron-profiler' "
              f"installs it with its dependencies; {exc})", file=sys.stderr)
        return 2

    store = TraceStore(path, cache_size=args.cache, progress=True)
    singles = [e.key for e in store.entries() if not e.is_group]
    if path == SAMPLE_DIR and SAMPLE.name in singles:  # the samples: the eager GPT step first
        singles.remove(SAMPLE.name)
        singles.insert(0, SAMPLE.name)
    if not singles:
        print(f"neuron-explorer: no traces (.nprof, .json, .json.gz) under {path}", file=sys.stderr)
    pre = Ctx(store=store, precompute=True)
    for key in singles[:5]:
        try:  # open and index the first good trace now so its progress shows here, not as a slow first page
            store.open(key)
            start_precompute(pre, key)  # its pages' analyses, in the background from now (during the index)
            n = store.timeline(key).n_events()
        except TraceError as exc:
            print(f"neuron-explorer: {exc} (the page will show this error)", file=sys.stderr)
            continue
        store.preferred = store.preferred or key
        if n:  # prefer a trace with events over an empty one
            store.preferred = key
            break
    app = create_app(store=store)
    from .hostcheck import protect

    protect(app.server, args.host, args.port, args.allow_host)  # every route, under either server
    print(f"neuron-explorer serving {path} ({len(store.entries())} traces) at http://{args.host}:{args.port}/",
          flush=True)
    try:
        if args.debug:
            app.run(host=args.host, port=args.port, debug=True)
        else:
            serve(app, args.host, args.port, threads=args.threads)
    except OSError as exc:  # the port is taken, the address is not this machine's, no permission for port < 1024
        why = "the port is in use (another neuron-explorer?): pick another --port" if exc.errno == errno.EADDRINUSE \
            else (exc.strerror or str(exc))
        print(f"neuron-explorer: error: cannot serve on {args.host}:{args.port}: {why}", file=sys.stderr)
        return 2
    return 0


def serve(app, host: str, port: int, threads: int = 8) -> None:
    """Serve with waitress (a production WSGI server: no development-server warning, a bounded thread pool,
    request-size and channel limits). The Host check is ``explorer.hostcheck.protect`` (``main`` applies it)."""
    import logging

    import waitress

    logging.basicConfig(level=logging.WARNING, format="%(asctime)s %(name)s %(levelname)s: %(message)s")
    waitress.serve(app.server, host=host, port=port, threads=max(1, threads), ident="neuron-explorer",
                   max_request_body_size=16 * 2**20, connection_limit=200, channel_timeout=120)


if __name__ == "__main__":
    raise SystemExit(main())
