"""`neuron-analyze`: the analysis of a trace (or a run directory) as a terminal report, for machines
without a browser (e.g. over SSH on a Trainium instance).

    neuron-analyze profiles/my_run/            # load balance across ranks, then each rank
    neuron-analyze rank0.pt.trace.json.gz      # a Kineto trace works too (imported on the fly)
    neuron-analyze profiles/big_run/ --engine dask --workers 4         # the cross-rank part on a LocalCluster
    neuron-analyze profiles/big_run/ --scheduler tcp://head:8786       # ... on a running Dask cluster
"""
from __future__ import annotations

import argparse
import sys
from pathlib import Path

import analysis  # already loaded: this module is part of the package
from neuron_profiler.climessages import one_line, too_large
from neuron_profiler.exitcodes import EXIT_BAD_INPUT
from neuron_profiler.trace import TraceFormatError

from .report import text_report


def build_parser() -> argparse.ArgumentParser:
    p = argparse.ArgumentParser(prog="neuron-analyze", description=__doc__.splitlines()[0])
    p.add_argument("path", help="a .nprof or Kineto .json(.gz) trace, or a directory of traces (one run)")
    p.add_argument("--top", type=int, default=10, help="hot ops and recommendations shown (default 10)")
    p.add_argument("--rank", type=int, help="only this rank of a run directory")
    p.add_argument("--all-metrics", action="store_true", help="every summary metric, not only the key ones")
    p.add_argument("--engine", choices=("pandas", "dask"), default=None,
                   help="where the cross-rank analysis of a run runs: pandas in this process (default) or dask, "
                        "one task per rank's file; with dask only the run report is printed (add --rank N for "
                        "one rank's report)")
    p.add_argument("--scheduler", metavar="ADDRESS",
                   help="a Dask scheduler such as tcp://host:8786 (implies --engine dask; the workers must read "
                        "the trace files at the same paths)")
    p.add_argument("--workers", type=int, metavar="N",
                   help="worker processes of the local Dask cluster (implies --engine dask; default 2)")
    p.add_argument("--no-cache", action="store_true",
                   help="convert a Kineto trace in memory instead of keeping its .nprof in the import cache "
                        "(the user's cache directory; never beside the trace)")
    return p


def main(argv: list[str] | None = None) -> int:
    """Entry point of ``neuron-analyze``; returns the exit status. Python warnings raised while loading and
    analysing (what an importer skipped, a numeric edge case) are printed once each as one line on stderr,
    ``neuron-analyze: warning: ...``, without Python's source location."""
    import warnings

    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        try:
            return _run(build_parser().parse_args(argv))
        finally:
            _print_warnings(caught)


def _print_warnings(caught: list) -> None:
    counts: dict[str, int] = {}
    for w in caught:
        msg = " ".join(str(w.message).split())
        counts[msg] = counts.get(msg, 0) + 1
    for msg, n in counts.items():
        print(f"neuron-analyze: warning: {msg}" + (f" ({n} times)" if n > 1 else ""), file=sys.stderr)


def _run(args: argparse.Namespace) -> int:
    path = Path(args.path)
    engine = args.engine or ("dask" if args.scheduler or args.workers is not None else "pandas")
    try:
        if engine == "pandas" and (args.scheduler or args.workers is not None):
            raise ValueError("--scheduler and --workers need --engine dask")
        if not path.exists():
            raise FileNotFoundError(f"no such file or directory: {path}")
        obj = analysis.load(path, cache=not args.no_cache)
        if args.rank is not None:
            traces = [t for t in getattr(obj, "traces", [obj]) if t.rank == args.rank]
            if not traces:
                raise ValueError(f"{path} holds no trace of rank {args.rank}")
            obj = analysis.TraceSet(traces) if len(traces) > 1 else traces[0]
        for t in getattr(obj, "traces", [obj]):  # a partial file is analysed as far as it reads, and says so
            if t.loss_report():
                print(f"neuron-analyze: warning: {t.path or t.name}: {t.loss_report()}", file=sys.stderr)
        sys.stdout.write(text_report(obj, top=args.top, all_metrics=args.all_metrics, engine=engine,
                                     scheduler=args.scheduler, workers=args.workers, per_trace=engine == "pandas",
                                     progress=sys.stderr.isatty()))
    except ImportError as e:  # engine dask without Dask installed
        print(f"neuron-analyze: error: {e}", file=sys.stderr)
        return EXIT_BAD_INPUT
    except BrokenPipeError:
        return 0
    except (TraceFormatError, OSError, ValueError) as e:  # the reader's and importers' error family, I/O errors
        print(f"neuron-analyze: error: {one_line(e)}", file=sys.stderr)
        return EXIT_BAD_INPUT
    except (MemoryError, RecursionError) as e:  # an input too large for this machine (e.g. a 4 GB JSON file)
        print(f"neuron-analyze: error: {too_large(path, e)}", file=sys.stderr)
        return EXIT_BAD_INPUT
    return 0


if __name__ == "__main__":
    sys.exit(main())
