"""`neuron-trace`: inspect, validate, convert and import traces.

Errors are one line on stderr with exit code 2 (never a traceback for bad input)."""
from __future__ import annotations

import argparse
import sys
from pathlib import Path

from neuron_profiler.trace import TraceFormatError

EXIT_BAD_INPUT = 2


def _fmt_ns(ns: float) -> str:
    for unit, div in (("s", 1e9), ("ms", 1e6), ("us", 1e3)):
        if abs(ns) >= div:
            return f"{ns / div:.3f} {unit}"
    return f"{ns:.0f} ns"


def cmd_info(args: argparse.Namespace) -> int:
    from neuron_profiler.trace import read_trace

    tf = read_trace(args.trace)
    h = tf.header
    print(f"file        {tf.path} ({tf.size:,} bytes)")
    print(f"format      {tf.format_version}{'' if tf.complete else '  (not closed cleanly: footer missing)'}")
    print(f"producer    {h.producer} {h.producer_version}  source={h.source_format or '-'}")
    print(f"rank        {h.rank} of {h.world_size}  host={h.instance_id or '-'} pid={h.process_id or '-'}"
          f"  window={h.window_index}")
    print(f"simulated   {'yes (device events come from the simulated Neuron runtime)' if h.simulated else 'no'}")
    for d in h.devices:
        peaks = ", ".join(f"{k} {v / 1e12:.1f} TFLOP/s" for k, v in sorted(d.spec.peak_flops_per_s.items()))
        print(f"device {d.index:<4} {d.kind} {d.name}{' (simulated)' if d.simulated else ''}"
              f"  cores={d.spec.num_cores or '?'}  {peaks or 'peaks unknown'}")
    tr = tf.time_range
    print(f"time span   {_fmt_ns(tr[1] - tr[0]) if tr else '-'}")
    counts = tf.row_counts
    total = sum(counts.values())
    print(f"tables      {total:,} rows, {tf.size / max(total, 1):.1f} bytes/row")
    for t, n in counts.items():
        print(f"  {t:<13}{n:>12,}")
    codecs = tf.codecs
    print(f"chunks      {sum(codecs.values()):,} ({', '.join(f'{k} {v}' for k, v in sorted(codecs.items()))})")
    for k, v in tf.dropped_events.items():
        print(f"dropped     {k}: {v:,} events (max_events_per_nc)")
    for w in tf.warnings:
        print(f"warning     {w}")
    return 0


def cmd_validate(args: argparse.Namespace) -> int:
    from neuron_profiler.trace.validate import validate_trace

    problems = validate_trace(args.trace)
    if not problems and getattr(args, "analysis", False):  # the analysis invariants (analysis.check)
        from analysis.invariants import check_path

        problems = check_path(args.trace)
    for p in problems:
        print(f"{args.trace}: {p}")
    if not problems:
        print(f"{args.trace}: ok")
    return 1 if problems else 0


def cmd_convert(args: argparse.Namespace) -> int:
    out = Path(args.output)
    if args.to == "chrome":
        from neuron_profiler.exporters.chrome import export_chrome

        print(export_chrome(args.trace, out))
    elif args.to == "perfetto":
        from neuron_profiler.exporters.perfetto import export_perfetto

        print(export_perfetto(args.trace, out))
    elif args.to == "parquet":
        from neuron_profiler.exporters.parquet import export_parquet

        for p in export_parquet(args.trace, out):
            print(p)
    elif args.to == "nprof":
        from neuron_profiler.trace.builder import rewrite_trace

        print(rewrite_trace(args.trace, out, compression=args.compression))
    return 0


def cmd_import(args: argparse.Namespace) -> int:
    from neuron_profiler.importers import kineto

    src = Path(args.source)
    if src.is_dir():
        for p in kineto.import_directory(src, Path(args.output) if args.output else src):
            print(p)
    else:
        print(kineto.import_kineto(src, Path(args.output) if args.output else None))
    return 0


def build_parser() -> argparse.ArgumentParser:
    p = argparse.ArgumentParser(prog="neuron-trace", description=__doc__.splitlines()[0])
    sub = p.add_subparsers(dest="command", required=True)
    s = sub.add_parser("info", help="devices, tables, rows, time span, version, simulated or not")
    s.add_argument("trace")
    s.set_defaults(func=cmd_info)
    s = sub.add_parser("validate", help="decode every chunk and check every reference (exit 1 on problems)")
    s.add_argument("trace")
    s.add_argument("--analysis", action="store_true",
                   help="also check the analysis invariants (shares, peaks, spans: analysis.check)")
    s.set_defaults(func=cmd_validate)
    s = sub.add_parser("convert", help="export to Chrome trace JSON (chrome://tracing), Perfetto protobuf "
                                       "(ui.perfetto.dev), Parquet, or .nprof with another codec")
    s.add_argument("trace")
    s.add_argument("-o", "--output", required=True, help="output file (.json or .json.gz) or directory (parquet)")
    s.add_argument("--to", choices=["chrome", "perfetto", "parquet", "nprof"], default="chrome",
                   help="nprof: rewrite the trace with another --compression")
    s.add_argument("--compression", choices=["lz4", "zstd", "zlib", "none"], default="zstd",
                   help="codec for --to nprof (default zstd: ~1/3 smaller than lz4, ~1.5x slower to read)")
    s.set_defaults(func=cmd_convert)
    s = sub.add_parser("import", help="convert torch.profiler (Kineto) JSON, or a directory of ranks, to .nprof")
    s.add_argument("source")
    s.add_argument("-o", "--output", help="output file (or directory for a directory source)")
    s.set_defaults(func=cmd_import)
    return p


def main(argv: list[str] | None = None) -> int:
    args = build_parser().parse_args(argv)
    try:
        return args.func(args)
    except (TraceFormatError, FileNotFoundError, IsADirectoryError, PermissionError, ValueError) as e:
        print(f"neuron-trace: error: {e}", file=sys.stderr)
        return EXIT_BAD_INPUT
    except BrokenPipeError:
        return 0


if __name__ == "__main__":
    sys.exit(main())
