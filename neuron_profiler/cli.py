"""`neuron-trace`: inspect, validate, convert and import traces.

Errors are one line on stderr with exit code 2 (never a traceback for bad input, an unwritable output or a
full disk). A trace that is missing something (truncated, unreadable chunks, an inconsistent index) is still
shown and converted as far as it reads, with its loss report: `info` prints it, `convert` warns on stderr and
records it in the output, `validate` lists it as a problem."""
from __future__ import annotations

import argparse
import json
import sys
from pathlib import Path

from neuron_profiler.climessages import one_line, too_large
from neuron_profiler.exitcodes import EXIT_BAD_INPUT
from neuron_profiler.hardware import Target
from neuron_profiler.trace import TraceFormatError
from neuron_profiler.trace.files import check_not_input


def _fmt_ns(ns: float) -> str:
    for unit, div in (("s", 1e9), ("ms", 1e6), ("us", 1e3)):
        if abs(ns) >= div:
            return f"{ns / div:.3f} {unit}"
    return f"{ns:.0f} ns"


def cmd_info(args: argparse.Namespace) -> int:
    from neuron_profiler.trace import read_trace, simulated_by

    tf = read_trace(args.trace, strict=False)
    h = tf.header
    loss = tf.loss_report(verify=True)
    print(f"file        {tf.path} ({tf.size:,} bytes)")
    print(f"format      {tf.format_version}{'' if tf.complete else '  (not closed cleanly: no usable footer)'}")
    print(f"loss        {loss or 'none (complete, every chunk checksummed)'}")
    print(f"producer    {h.producer} {h.producer_version}  source={h.source_format or '-'}")
    print(f"rank        {h.rank} of {h.world_size}  host={h.instance_id or '-'} pid={h.process_id or '-'}"
          f"  window={h.window_index}")
    print(f"simulated   {'yes (device events ' + simulated_by(h) + ')' if h.simulated else 'no'}")
    _print_simulation(h, tf)
    if getattr(args, "assumptions", False):
        for k, v in sorted(h.simulation.assumptions.items()):
            print(f"  assume    {k} = {v}")
    what = {k: h.metadata[k] for k in ("model", "model_parameters", "script") if h.metadata.get(k)}
    if what:
        print("program     " + "  ".join(f"{k}={v}" for k, v in what.items()))
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
        if w not in (loss or ""):  # e.g. each unreadable chunk's error
            print(f"detail      {w}")
    return 0


def _names_with_device_work(tf) -> set[str]:
    """Names of the host ops that launched device work in ``tf`` (their ``launch`` flows)."""
    try:
        f = tf.table("flows")
        launch = f[(f["kind"].astype(str) == "launch") & (f["src_table"].astype(str) == "host_ops")]
        if not len(launch):
            return set()
        names = tf.table("host_ops")["name"].astype(str).to_numpy()
        rows = launch["src_row"].to_numpy()
        return {str(n) for n in names[rows[(rows >= 0) & (rows < len(names))]]}
    except (KeyError, ValueError):  # a trace without these tables: nothing launched
        return set()


def _print_simulation(h, tf=None) -> None:
    """The model and assumptions behind a simulated trace's numbers (Header.simulation). An op kind some of
    whose calls were priced (device time) and others not (no shapes recorded) is listed as partly priced, not
    as without device time."""
    sim = h.simulation if h.HasField("simulation") else None
    if sim is None or not sim.model:
        return
    timeline = {"projected": "projected for the target (the measured one kept beside it)",
                "measured": "as measured on the capturing machine"}.get(sim.host_timeline, sim.host_timeline or "?")
    print(f"  model     {sim.model} for {sim.target or '?'}; host timeline {timeline}")
    print(f"  assumes   {len(sim.assumptions)} model assumptions (--assumptions lists them; docs: "
          f"{sim.documentation or '-'})")
    launched = _names_with_device_work(tf) if tf is not None and sim.unpriced_ops else set()
    none = [n for n in sim.unpriced_ops if n not in launched]
    part = [n for n in sim.unpriced_ops if n in launched]
    if none:
        shown = ", ".join(none[:6]) + (" ..." if len(none) > 6 else "")
        print(f"  unpriced  {len(none)} op kinds without a cost model (no device time): {shown}")
    if part:
        shown = ", ".join(part[:6]) + (" ..." if len(part) > 6 else "")
        print(f"  partly    {len(part)} op kinds priced where their shapes were recorded, some calls without "
              f"device time: {shown}")


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
    """Export what the trace holds; a partial trace is exported as far as it reads, with a warning, and the
    output records its loss report (so a copy never passes for complete)."""
    from neuron_profiler.trace import read_trace

    out = Path(args.output)
    check_not_input(out, [args.trace])
    if args.to == "parquet" and Path(args.trace).is_dir():  # a run: one dataset partitioned by rank
        return _convert_run(Path(args.trace), out)
    with read_trace(args.trace, strict=False) as tf:
        try:
            written = _export(tf, out, args)
        except OSError as e:
            if e.filename is not None:
                raise
            raise OSError(e.errno, f"cannot write {out}: {e.strerror or e}") from None
        loss = tf.loss_report()
    for p in written:
        print(p)
    if loss:
        print(f"neuron-trace: warning: {args.trace}: {loss}", file=sys.stderr)
    return 0


def _convert_run(run: Path, out: Path) -> int:
    from neuron_profiler.exporters.parquet import export_parquet, trace_files
    from neuron_profiler.trace import read_trace

    files = [read_trace(f, strict=False) for f in trace_files(run)]
    try:
        for p in export_parquet(files, out):
            print(p)
        for tf in files:
            loss = tf.loss_report()
            if loss:
                print(f"neuron-trace: warning: {tf.path}: {loss}", file=sys.stderr)
    finally:
        for tf in files:
            tf.close()
    return 0


def _export(tf, out: Path, args: argparse.Namespace) -> list[Path]:
    if args.to == "chrome":
        from neuron_profiler.exporters.chrome import export_chrome

        return [export_chrome(tf, out)]
    if args.to == "perfetto":
        from neuron_profiler.exporters.perfetto import export_perfetto

        return [export_perfetto(tf, out)]
    if args.to == "parquet":
        from neuron_profiler.exporters.parquet import export_parquet

        return export_parquet(tf, out)
    from neuron_profiler.trace.builder import rewrite_trace

    return [rewrite_trace(tf, out, compression=args.compression)]


def cmd_import(args: argparse.Namespace) -> int:
    """``neuron-trace import SRC [-o OUT]``: SRC is detected by content (Kineto JSON, a directory of Kineto
    ranks, a Neuron Explorer Parquet profile directory or JSON export). Without ``-o`` the result goes to the
    import cache (printed; the same entry ``analysis.load`` and the explorer reuse), never beside SRC."""
    import warnings

    from neuron_profiler.importers import import_source
    from neuron_profiler.importers.output import OutputWriteError

    if args.output:
        check_not_input(args.output, [args.source])
    try:
        with warnings.catch_warnings(record=True) as caught:
            warnings.simplefilter("always")
            written = import_source(Path(args.source), Path(args.output) if args.output else None)
        for w in caught:  # what the importer skipped or could not map: one line each, no source location
            print(f"neuron-trace: warning: {' '.join(str(w.message).split())}", file=sys.stderr)
    except (OutputWriteError, TraceFormatError, ValueError) as e:  # one line, whatever the message holds
        print(f"neuron-trace: error: {' '.join(str(e).split())}", file=sys.stderr)
        return EXIT_BAD_INPUT
    except (MemoryError, RecursionError) as e:  # the importer turns most of these into format errors
        print(f"neuron-trace: error: {too_large(args.source, e)}", file=sys.stderr)
        return EXIT_BAD_INPUT
    except OSError as e:
        if isinstance(e, (FileNotFoundError, IsADirectoryError, PermissionError)):
            raise
        print(f"neuron-trace: error: {args.source}: {e.strerror or e}", file=sys.stderr)
        return EXIT_BAD_INPUT
    for p in written:
        print(p)
    return 0


def cmd_project(args: argparse.Namespace) -> int:
    from neuron_profiler.projection import project_trace

    src = Path(args.source)
    out = Path(args.output) if args.output else Path.cwd() / (_stem(src.name) + f".{args.target}.nprof")
    check_not_input(out, [src])
    b = project_trace(src, args.target, num_cores=args.num_cores)
    path = b.write(out)
    sim = b.header.simulation
    kernels = b.table("flows").query("kind == 'launch'")
    print(f"{path}: {b.rows('host_ops'):,} host ops of {src.name} projected onto {args.target} "
          f"({len(kernels):,} device launches, {b.rows('instructions'):,} instructions, {b.rows('dma'):,} DMA)")
    host = json.loads(b.header.metadata.get("projection_host_time", "{}") or "{}")
    if host:
        print(f"host: kept {host.get('kept_host_work_ns', 0) / 1e6:.3f} ms of the source's work between ops (Python), "
              f"dropped {host.get('dropped_host_work_ns', 0) / 1e6:.3f} ms; "
              f"{host.get('replaced_by_dispatch_model_ns', 0) / 1e6:.3f} ms of its op dispatch and runtime calls "
              f"replaced by {args.target}'s dispatch model")
    if sim.unpriced_ops:
        shown = ", ".join(sim.unpriced_ops[:8]) + (f" and {len(sim.unpriced_ops) - 8} more" if len(sim.unpriced_ops) > 8
                                                   else "")
        print(f"could not price (no device work simulated): {shown}")
    return 0


def _stem(name: str) -> str:
    for suf in (".pt.trace.json.gz", ".pt.trace.json", ".json.gz", ".json", ".nprof"):
        if name.endswith(suf):
            return name[: -len(suf)]
    return name


def build_parser() -> argparse.ArgumentParser:
    p = argparse.ArgumentParser(prog="neuron-trace", description=__doc__.splitlines()[0])
    sub = p.add_subparsers(dest="command", required=True)
    s = sub.add_parser("info", help="devices, tables, rows, time span, version, simulated or not")
    s.add_argument("trace")
    s.add_argument("--assumptions", action="store_true",
                   help="list every assumption of the performance model of a simulated trace, with its source")
    s.set_defaults(func=cmd_info)
    s = sub.add_parser("validate", help="decode every chunk and check every reference (exit 1 on problems)")
    s.add_argument("trace")
    s.add_argument("--analysis", action="store_true",
                   help="also check the analysis invariants (shares, peaks, spans: analysis.check)")
    s.set_defaults(func=cmd_validate)
    s = sub.add_parser("convert", help="export to Chrome trace JSON (chrome://tracing), Perfetto protobuf "
                                       "(ui.perfetto.dev), Parquet, or .nprof with another codec")
    s.add_argument("trace", help="a .nprof trace (for --to parquet also a directory of them: one run, all ranks)")
    s.add_argument("-o", "--output", required=True, help="output file (.json or .json.gz) or directory (parquet)")
    s.add_argument("--to", choices=["chrome", "perfetto", "parquet", "nprof"], default="chrome",
                   help="nprof: rewrite the trace with another --compression")
    s.add_argument("--compression", choices=["lz4", "zstd", "zlib", "none"], default="zstd",
                   help="codec for --to nprof (default zstd: ~1/3 smaller than lz4, ~1.5x slower to read)")
    s.set_defaults(func=cmd_convert)
    s = sub.add_parser("import", help="convert torch.profiler (Kineto) JSON, a directory of ranks, or a Neuron "
                                      "Explorer profile (Parquet directory or JSON export) to .nprof")
    s.add_argument("source")
    s.add_argument("-o", "--output", help="output file (or directory for a directory source); default: the "
                                          "import cache (printed), never beside the source")
    s.set_defaults(func=cmd_import)
    s = sub.add_parser("project", help="re-simulate a trace (e.g. a torch.profiler trace from a GPU, recorded with "
                                       "record_shapes=True) on a Trainium target")
    s.add_argument("source", help="Kineto JSON(.gz) or .nprof")
    s.add_argument("--target", default=Target.TRN2.value, choices=[t.value for t in Target])
    s.add_argument("--num-cores", type=int, default=None, help="NeuronCores per chip (default: the target's)")
    s.add_argument("-o", "--output", help="output .nprof (default: <stem>.<target>.nprof in the current directory)")
    s.set_defaults(func=cmd_project)
    return p


def _special_input(path: str) -> None:
    """A FIFO, device or socket given as input is refused at once (opening a FIFO blocks forever, /dev/zero never
    ends); missing paths, files and directories are left to the subcommand."""
    from neuron_profiler.trace.files import check_input_file

    p = Path(path)
    if p.exists() and not p.is_dir():
        check_input_file(p)


def main(argv: list[str] | None = None) -> int:
    args = build_parser().parse_args(argv)
    try:
        _special_input(getattr(args, "trace", None) or getattr(args, "source", None) or ".")
        return args.func(args)
    except BrokenPipeError:
        return 0
    except (TraceFormatError, OSError, ValueError) as e:  # OSError: unreadable input, full disk, read-only output
        print(f"neuron-trace: error: {one_line(e)}", file=sys.stderr)
        return EXIT_BAD_INPUT
    except ImportError as e:  # an optional extra is missing (pyarrow for parquet, perfetto): the message says which
        print(f"neuron-trace: error: {' '.join(str(e).split())}", file=sys.stderr)
        return EXIT_BAD_INPUT
    except (MemoryError, RecursionError) as e:  # an input too large (or too deeply nested) for this machine
        print(f"neuron-trace: error: {too_large(getattr(args, 'trace', None) or getattr(args, 'source', '?'), e)}",
              file=sys.stderr)
        return EXIT_BAD_INPUT
    except KeyboardInterrupt:
        print("neuron-trace: interrupted (no partial output was left)", file=sys.stderr)
        return 130


if __name__ == "__main__":
    sys.exit(main())
