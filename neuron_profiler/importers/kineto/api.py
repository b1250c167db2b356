"""Import torch.profiler / Kineto Chrome-trace JSON(.gz) files into ``.nprof`` traces.

Public API: ``import_kineto`` (one file), ``import_directory`` (one file per rank of a run) and
``load_kineto_builder`` (in memory, for on-the-fly conversion by the analysis loader).

What is read (``shared/reference/kineto-trace-format.md``): modern and legacy 2021 categories, CUDA / ROCm /
MTIA / XPU / PrivateUse1 runtime categories, flows ``ac2g`` / ``async_cpu_to_gpu`` / ``async`` / ``fwdbwd``
and correlation by ``args.correlation`` / ``External id`` when flows are missing, ``distributedInfo``
(missing -> rank 0 of 1), ``deviceProperties`` (only devices with events become header devices),
``record_param_comms`` and NCCL kernel collective metadata, python stacks, ``[memory]`` events and ``ph:"C"``
counters, GPU user annotations.

Time: ``ts``/``dur`` are microseconds (with ns decimals) in every Kineto version, ``displayTimeUnit`` only
changes how viewers display them; timestamps become int64 ns, offset by ``baseTimeNanoseconds`` when the
file has it (Kineto writes ``ts`` relative to that base), so ranks of one run share a time axis.

Pipeline (one path): ``read`` gunzips the file (ISA-L) after a check of its size against the memory available;
``decode`` decodes the text with msgspec into typed ``Event`` structs (the top-level keys as Python values),
a text over 4 MB a chunk of about 1 MB of events at a time (``decode.document_chunks``); ``extract`` turns the
events into flat columns a batch (or chunk) at a time (timestamps exact to the ns: ``exact``), releasing each
batch's structs before the next chunk is decoded; ``build`` assembles the tables. A document carrying our own
Chrome export's ``neuronProfiler`` key is rebuilt by ``roundtrip`` instead.

Where events go: see ``build``. GPU user annotations (``gpu_user_annotation``) are host_ops with that
category on the stream's track: they are labels over kernels, not device work, so ``instructions`` holds
kernels / memcpy / memset / syncs only and no analysis counts annotation spans as kernel time.
"""
from __future__ import annotations

import hashlib
import os
import sys
from collections.abc import Callable
from pathlib import Path
from typing import Any

from neuron_profiler.gcpause import gc_paused
from neuron_profiler.importers.kineto import roundtrip
from neuron_profiler.importers.kineto.build import build_from_columns
from neuron_profiler.importers.kineto.decode import decode_document, document_chunks
from neuron_profiler.importers.kineto.extract import EventColumns, extract_chunked, extract_events
from neuron_profiler.importers.kineto.read import TextReader, read_bytes
from neuron_profiler.importers.output import write_atomically
from neuron_profiler.trace import TRACE_SUFFIX, TraceBuilder
from neuron_profiler.trace.errors import NotATraceError, TraceFormatError

__all__ = ["import_kineto", "import_directory", "load_kineto_builder", "default_output_path",
           "is_kineto_file", "dir_writable"]

_SUFFIXES = (".json.gz", ".json")
#: a text above this size is read a chunk of about ``_CHUNK_BYTES`` at a time (``decode.document_chunks``:
#: bounded memory, fewer page faults, each chunk extracted while in the CPU caches); below, whole. 256 KiB
#: each: a chunk's objects are freed and their memory reused by the next, so a first import touches less
#: fresh memory (page faults: bert_h100 1,333 -> 1,023, sampled_rank-0 2,509 -> 1,626, mtia_inference
#: 6,197 -> 4,237, nccl_data 9,128 -> 7,476, at most +2 % instructions; 1 MiB chunks of texts over 4 MiB
#: before, 128 KiB costs more instructions than it saves faults). Texts over ``_LARGE_BYTES`` take chunks of
#: ``_LARGE_CHUNK_BYTES``: nccl_data (9.8 MB) imports 3-5 % faster in 512 KiB chunks than in 256 KiB ones
_WHOLE_BYTES = 256 << 10
_CHUNK_BYTES = 256 << 10
_LARGE_BYTES = 8 << 20
_LARGE_CHUNK_BYTES = 512 << 10


def is_kineto_file(path: str | Path) -> bool:
    """True when ``path`` has a Kineto trace suffix (``.json`` or ``.json.gz``)."""
    return str(path).lower().endswith(_SUFFIXES)


def default_output_path(src: str | Path) -> Path:
    """``<src without .json[.gz]>.nprof`` beside the source: the name an import gets in a directory the user
    names (``import_kineto(src, out_dir)``); nothing is ever written there unasked."""
    src = Path(src)
    name = src.name
    for suf in _SUFFIXES + (".gz",):
        if name.lower().endswith(suf):
            name = name[: -len(suf)]
            break
    return src.with_name(name + TRACE_SUFFIX)


def dir_writable(d: str | Path) -> bool:
    """True when ``d`` may be written: ``os.access`` and, since root passes ``os.access`` everywhere, at
    least one write permission bit (a read-only shared folder stays untouched even for root)."""
    try:
        return os.access(d, os.W_OK) and bool(os.stat(d).st_mode & 0o222)
    except OSError:
        return False


def _stages(progress: bool, label: str) -> tuple[Callable[[str], None], Callable[[], None]]:
    if not (progress and sys.stderr.isatty()):
        return (lambda _s: None), (lambda: None)
    from tqdm import tqdm

    bar = tqdm(total=7, desc=label, unit="step", leave=False, file=sys.stderr)

    def stage(name: str) -> None:
        bar.set_postfix_str(name)
        bar.update(1)

    return stage, bar.close


def load_kineto_builder(src: str | Path, *, run_id: str = "",
                        stage: Callable[[str], None] | None = None) -> TraceBuilder:
    """Parse one Kineto JSON(.gz) file into an in-memory ``TraceBuilder`` (nothing written).

    Raises ``TraceFormatError`` (``NotATraceError``, ``TruncatedTraceError``) for unreadable input and
    ``FileNotFoundError`` when ``src`` does not exist; warns with counts of skipped events."""
    src = Path(src)
    if not src.exists():
        raise FileNotFoundError(f"Kineto trace not found: {src}")
    stage = stage or (lambda _s: None)
    try:
        with gc_paused():
            stage("read")
            doc, ev = _read_events(src, stage)
            if isinstance(ev, roundtrip.Collector):  # our own Chrome export: its tables come back as they were
                b = roundtrip.build(doc[roundtrip.KEY], doc, ev, str(src))
                if run_id:
                    b.header.run_id = run_id
                return b
            return build_from_columns(doc, ev, str(src), run_id=run_id, stage=stage)
    except RecursionError:  # values nested deeper than Python can walk (JSON parsers stop at ~1000 levels)
        raise NotATraceError(f"{src}: JSON nested too deeply to import (more than ~{sys.getrecursionlimit()} "
                             f"levels); expected a Kineto trace, whose values nest a few levels") from None


def _read_events(src: Path, stage: Callable[[str], None]) -> tuple[dict[str, Any], EventColumns | roundtrip.Collector]:
    """Read ``src``, decode it (``decode``) and extract its events. A document carrying our own export's
    ``neuronProfiler`` key gets a ``roundtrip.Collector`` instead of the Kineto columns."""
    if src.is_dir():
        raise TraceFormatError(f"{src}: is a directory (expected one Kineto JSON file; use import_directory)")
    with TextReader(src) as reader:
        stage("parse")
        hint = reader.size_hint  # the text's size (a gzip file's trailer states it: a hint only)
        if hint <= _WHOLE_BYTES:
            raw = reader.read()
        else:  # a large text: its events decoded and extracted a chunk at a time, as the file is read
            chunked = document_chunks(reader, _CHUNK_BYTES if hint <= _LARGE_BYTES else _LARGE_CHUNK_BYTES)
            if chunked is not None:
                ev = extract_chunked(chunked)
                if ev is not None and roundtrip.embedded(chunked.doc) is None:
                    return chunked.doc, ev
                del ev
            del chunked  # anything else (our own export, text not cut so) is read again and decoded whole
            raw = read_bytes(src)
    doc, events, text = decode_document(raw, str(src))
    del raw
    if roundtrip.embedded(doc) is not None:
        col = roundtrip.Collector()
        col.add(events)
        return doc, col
    return doc, extract_events(events, text)


def import_kineto(src: str | os.PathLike[str], out: str | os.PathLike[str] | None = None, *, progress: bool = True,
                  run_id: str = "") -> Path:
    """Convert one Kineto JSON(.gz) trace to ``.nprof``; returns the written path.

    ``out`` is a file, or a directory that receives ``default_output_path(src).name``. Without ``out`` the
    trace goes to the import cache (``neuron_profiler.importers.cache``: the entry ``analysis.load`` and the
    explorer reuse), never beside the source. The file is written to a temporary name and renamed when
    complete (``OutputWriteError`` when it cannot be written, e.g. a full disk). A tqdm progress bar is shown
    when ``progress`` and stderr is a terminal."""
    src = Path(src)
    if out is not None:
        out = Path(out)
        if out.is_dir():
            out = out / default_output_path(src).name
    stage, close = _stages(progress, src.name)
    try:
        b = load_kineto_builder(src, run_id=run_id, stage=stage)
        stage("write")
        with gc_paused():
            if out is None:  # imported here: an import to a named file does not need the cache (1.4 ms)
                from neuron_profiler.importers import cache as import_cache

                return import_cache.store(b, src)
            return write_atomically(out, b)
    finally:
        close()


def _rank_of(b: TraceBuilder) -> int:
    return int(b.header.rank)


def import_directory(src_dir: str | Path, out_dir: str | Path | None = None, *,
                     progress: bool = True) -> list[Path]:
    """Convert every Kineto trace (``*.json``, ``*.json.gz``) in ``src_dir`` (one file per rank) to
    ``out_dir/rank<NNNNN>_<stem>.nprof``; all files get the same ``run_id`` and keep their rank/world_size.

    ``out_dir`` defaults to a folder of the import cache (never ``src_dir``). Raises ``TraceFormatError``
    when the directory holds no trace or two files claim the same rank. Each file is written to a temporary
    name and renamed when complete."""
    from neuron_profiler.importers import cache as import_cache

    src_dir = Path(src_dir)
    if not src_dir.is_dir():
        raise NotADirectoryError(f"not a directory: {src_dir}")
    files = sorted(p for p in src_dir.iterdir() if p.is_file() and is_kineto_file(p))
    if not files:
        raise TraceFormatError(f"{src_dir}: no Kineto trace files (*.json, *.json.gz) found")
    out_dir = Path(out_dir) if out_dir is not None else import_cache.cache_path(src_dir).with_suffix("")
    out_dir.mkdir(parents=True, exist_ok=True)
    if not dir_writable(out_dir):
        raise PermissionError(f"output directory {out_dir} is not writable; pass another out_dir")
    run_id = "kineto-" + hashlib.sha1(str(src_dir.resolve()).encode()).hexdigest()[:12]
    written: list[Path] = []
    seen: dict[int, Path] = {}
    for f in files:
        stage, close = _stages(progress, f.name)
        try:
            b = load_kineto_builder(f, run_id=run_id, stage=stage)
            r = _rank_of(b)
            if r in seen and len(files) > 1:
                raise TraceFormatError(f"{f}: rank {r} already imported from {seen[r]} (one file per rank "
                                       f"expected in {src_dir})")
            seen[r] = f
            stage("write")
            stem = default_output_path(f).stem
            written.append(write_atomically(out_dir / f"rank{r:05d}_{stem}{TRACE_SUFFIX}", b))
        finally:
            close()
    return written


def _main(argv: list[str] | None = None) -> int:  # pragma: no cover - thin CLI for manual use
    import argparse

    ap = argparse.ArgumentParser(description="Import a Kineto JSON trace (file or directory) to .nprof")
    ap.add_argument("src")
    ap.add_argument("-o", "--out", default=None)
    a = ap.parse_args(argv)
    res: Any = import_directory(a.src, a.out) if Path(a.src).is_dir() else import_kineto(a.src, a.out)
    print(res)
    return 0


if __name__ == "__main__":  # pragma: no cover
    raise SystemExit(_main())
