"""Files on disk: inputs that are not regular files, interrupted writes, full disks (issue 10, "Trace files")."""
from __future__ import annotations

import json
import os
import resource
import signal
import subprocess
import sys
from pathlib import Path

import numpy as np
import pytest

from neuron_profiler.cli import main
from neuron_profiler.synthetic_trace import write_synthetic_trace
from neuron_profiler.trace import NotATraceError, TraceBuilder, TraceWriter, make_header, read_trace
from neuron_profiler.trace.builder import rewrite_trace

REPO = Path(__file__).resolve().parents[2]


def _cli(*args: str, limit_bytes: int | None = None, timeout: float = 120) -> subprocess.CompletedProcess:
    """``neuron-trace ARGS`` in a fresh process; with ``limit_bytes`` every file it writes is capped there (the
    kernel's RLIMIT_FSIZE: a write beyond fails with EFBIG, as a full disk fails with ENOSPC)."""
    def cap() -> None:
        signal.signal(signal.SIGXFSZ, signal.SIG_IGN)
        resource.setrlimit(resource.RLIMIT_FSIZE, (limit_bytes, limit_bytes))

    return subprocess.run([sys.executable, "-m", "neuron_profiler.cli", *args], capture_output=True, text=True,
                          cwd=REPO, timeout=timeout, preexec_fn=cap if limit_bytes else None)


def _no_temporaries(folder: Path) -> None:
    assert not [p.name for p in folder.iterdir() if p.name.endswith(".tmp")]


@pytest.mark.parametrize("command", ["info", "validate", "convert"])
def test_a_fifo_is_refused_at_once(tmp_path: Path, command: str) -> None:
    """Was: every CLI blocked forever opening a FIFO (nobody writes to it)."""
    fifo = tmp_path / "pipe.nprof"
    os.mkfifo(fifo)
    args = [command, str(fifo)] + (["-o", str(tmp_path / "o.json")] if command == "convert" else [])
    r = _cli(*args, timeout=60)
    assert r.returncode == 2 and "Traceback" not in r.stderr
    assert r.stderr.strip() == f"neuron-trace: error: {fifo}: is a FIFO (named pipe), not a trace file (traces are " \
                               f"read from regular files only)"


def test_devices_are_refused(tmp_path: Path) -> None:
    with pytest.raises(NotATraceError, match="/dev/zero: is a character device, not a trace file"):
        read_trace("/dev/zero")
    r = _cli("convert", "/dev/zero", "-o", str(tmp_path / "z.json"), timeout=60)
    assert r.returncode == 2 and "character device" in r.stderr and not (tmp_path / "z.json").exists()


def test_an_output_that_is_a_device_or_directory_is_refused(tmp_path: Path) -> None:
    src = write_synthetic_trace(tmp_path / "s.nprof", 500)
    r = _cli("convert", str(src), "--to", "nprof", "-o", "/dev/null")
    assert r.returncode == 2 and "is a character device; outputs are regular files" in r.stderr
    r = _cli("convert", str(src), "-o", str(tmp_path))
    assert r.returncode == 2 and "it is a directory" in r.stderr


@pytest.mark.parametrize("to,name", [("nprof", "out.nprof"), ("chrome", "out.json"), ("perfetto", "out.pftrace"),
                                     ("parquet", "pq")])
def test_full_disk_is_one_line_and_leaves_nothing(tmp_path: Path, to: str, name: str) -> None:
    """Was: a traceback from `convert` and `import`. Now one line, exit 2, no partial file under any name."""
    src = write_synthetic_trace(tmp_path / "src.nprof", 60_000)
    out_dir = tmp_path / "out"
    out_dir.mkdir()
    r = _cli("convert", str(src), "--to", to, "-o", str(out_dir / name), limit_bytes=64 << 10)
    assert r.returncode == 2, r.stderr
    assert r.stderr.count("\n") == 1 and "Traceback" not in r.stderr and "File too large" in r.stderr, r.stderr
    if to != "parquet":
        assert not (out_dir / name).exists()
    else:  # every file written is complete: a file that hit the limit was removed
        assert all(p.stat().st_size < 64 << 10 for p in (out_dir / name).rglob("*.parquet"))
    for folder in [out_dir, *(p for p in out_dir.rglob("*") if p.is_dir())]:
        _no_temporaries(folder)


def test_full_disk_during_import_is_one_line(tmp_path: Path) -> None:
    ev = [{"ph": "X", "cat": "cpu_op", "name": f"aten::op{i}", "pid": 1, "tid": 1, "ts": i, "dur": 1}
          for i in range(20_000)]
    src = tmp_path / "k.json"
    src.write_text(json.dumps({"schemaVersion": 1, "traceEvents": ev}))
    r = _cli("import", str(src), "-o", str(tmp_path / "k.nprof"), limit_bytes=4 << 10)  # only writes are capped
    assert r.returncode == 2 and "Traceback" not in r.stderr and r.stderr.count("\n") == 1, r.stderr
    assert not (tmp_path / "k.nprof").exists()
    _no_temporaries(tmp_path)


def test_an_exception_while_writing_leaves_no_file_that_reads_as_complete(tmp_path: Path) -> None:
    """Was: TraceWriter.__exit__ wrote the footer while the exception propagated: a Ctrl-C during an import left a
    truncated file that read as complete (and was trusted as the import cache)."""
    p = tmp_path / "t.nprof"
    with pytest.raises(KeyboardInterrupt):
        with TraceWriter(p, make_header("tests"), chunk_rows=100) as w:
            w.append("instructions", {"track": 0, "start_ts": np.arange(1000)})
            raise KeyboardInterrupt
    assert not p.exists()
    _no_temporaries(tmp_path)


def test_a_failed_rewrite_keeps_the_previous_file(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    b = TraceBuilder(make_header("tests"))
    b.add_rows("instructions", {"track": 0, "start_ts": np.arange(10)})
    p = b.write(tmp_path / "t.nprof")
    before = p.read_bytes()
    b.add_rows("instructions", {"track": 0, "start_ts": np.arange(10, 20)})
    import neuron_profiler.trace.writer as writer

    def boom(*a, **k):
        raise OSError(28, "No space left on device")

    monkeypatch.setattr(writer, "encode_rows", boom)
    with pytest.raises(OSError, match="No space left"):
        b.write(p)
    assert p.read_bytes() == before and read_trace(p).complete
    _no_temporaries(tmp_path)


def test_killed_writer_leaves_only_a_temporary_name(tmp_path: Path) -> None:
    """SIGKILL mid-write: the final name never appears; the temporary file still reads back its complete chunks
    and says it is partial."""
    code = f"""
import os, signal, numpy as np
from neuron_profiler.trace import TraceWriter, make_header
w = TraceWriter({str(tmp_path / 'k.nprof')!r}, make_header("tests"), chunk_rows=1000)
w.append("instructions", {{"track": 0, "start_ts": np.arange(5000)}})
os.kill(os.getpid(), signal.SIGKILL)
"""
    r = subprocess.run([sys.executable, "-c", code], cwd=REPO, timeout=120)
    assert r.returncode == -signal.SIGKILL
    assert not (tmp_path / "k.nprof").exists()
    (tmp,) = tmp_path.glob("k.nprof.*.tmp")
    tf = read_trace(tmp)
    assert tf.row_counts["instructions"] == 5000 and tf.loss_report().startswith("no footer")


def test_writes_compose_with_a_caller_s_own_temporary_name(tmp_path: Path) -> None:
    """Capture writes ``<name>.tmp`` and renames it; the importers' helper does the same: the writer's own
    temporary file then sits beside that name and is renamed onto it."""
    b = TraceBuilder(make_header("tests"))
    b.add_rows("instructions", {"track": 0, "start_ts": np.arange(10)})
    tmp = tmp_path / "w.nprof.tmp"
    tmp.touch()  # e.g. a mkstemp placeholder
    b.write(tmp)
    os.replace(tmp, tmp_path / "w.nprof")
    assert read_trace(tmp_path / "w.nprof").complete and sorted(p.name for p in tmp_path.iterdir()) == ["w.nprof"]


def test_rewrite_through_a_symlink_replaces_its_target(tmp_path: Path) -> None:
    src = write_synthetic_trace(tmp_path / "s.nprof", 500)
    target = tmp_path / "real.nprof"
    target.write_bytes(b"old")
    link = tmp_path / "link.nprof"
    link.symlink_to(target)
    rewrite_trace(src, link, compression="zstd")
    assert link.is_symlink() and read_trace(target).complete


def test_cli_ctrl_c_is_one_line(tmp_path: Path, monkeypatch: pytest.MonkeyPatch,
                                capsys: pytest.CaptureFixture) -> None:
    src = write_synthetic_trace(tmp_path / "s.nprof", 500)
    import neuron_profiler.exporters.chrome as chrome

    def interrupted(*a, **k):
        raise KeyboardInterrupt

    monkeypatch.setattr(chrome, "_write", interrupted)
    assert main(["convert", str(src), "-o", str(tmp_path / "c.json")]) == 130
    assert "interrupted" in capsys.readouterr().err and not (tmp_path / "c.json").exists()
    _no_temporaries(tmp_path)


def test_import_of_a_fifo_or_device_is_refused(tmp_path: Path) -> None:
    """Was: `neuron-trace import` blocked forever on a FIFO and read /dev/zero until the memory ran out."""
    fifo = tmp_path / "pipe.json"
    os.mkfifo(fifo)
    for src in (fifo, Path("/dev/zero")):
        r = _cli("import", str(src), "-o", str(tmp_path / "o.nprof"), timeout=60)
        assert r.returncode == 2 and r.stderr.count("\n") == 1 and "not a trace file" in r.stderr, r.stderr
