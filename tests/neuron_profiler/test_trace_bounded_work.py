"""Issue 26: the reader's work is bounded by what a file declares, never a Python loop over decompressed bytes.

Was: a strings chunk of LZ4-compressed zeros (or of ``08 00`` runs, a repeated ``first_row``) was walked two bytes
per Python iteration by ``trace.wire`` (a 294 KB file: 21.9 s in ``neuron-trace info``). The oracle is the work
itself: the number of varints the Python walkers decode, counted, must not grow with the decompressed size."""
from __future__ import annotations

from pathlib import Path

import pytest

from neuron_profiler.synthetic_trace import write_synthetic_trace
from neuron_profiler.trace import TraceFormatError, framing, read_trace, wire
from neuron_profiler.trace.columns import TABLE_IDS
from neuron_profiler.trace.validate import validate_trace

_MB = 1 << 20


def _frames(data: bytes) -> list[tuple[int, int, int, int, int]]:
    out, pos = [], len(framing.MAGIC)
    while pos + framing.FRAME.size <= len(data):
        length, rtype, codec, table, _, _ = framing.FRAME.unpack_from(data, pos)
        if rtype not in framing.RECORD_TYPES or pos + framing.FRAME.size + length > len(data):
            break
        out.append((pos, length, rtype, codec, table))
        pos += framing.FRAME.size + length
    return out


def _with_payload(tmp_path: Path, table: str, plain: bytes, codec: int = framing.CODEC_LZ4) -> Path:
    """A small valid trace whose first chunk of ``table`` is replaced by ``plain`` compressed with ``codec``
    (validly framed: the check byte and CRC are right, so the reader gets to decode it)."""
    base = write_synthetic_trace(tmp_path / "base.nprof", 300, chunk_rows=256, steps=1, n_dma=20)
    data = bytearray(base.read_bytes())
    tid = TABLE_IDS[table]
    pos, length, rtype, _, _ = next(f for f in _frames(bytes(data)) if f[2] == framing.CHUNK and f[4] == tid)
    new = framing.encode_frame(rtype, framing.compress(plain, codec), codec, tid)
    data[pos:pos + framing.FRAME.size + length] = new
    out = tmp_path / f"{table}.nprof"
    out.write_bytes(bytes(data))
    return out


@pytest.fixture
def varints(monkeypatch: pytest.MonkeyPatch) -> list[int]:
    """Counts the varints the Python wire walkers decode."""
    calls = [0]
    real = wire._varint

    def counted(buf, pos, end):
        calls[0] += 1
        return real(buf, pos, end)

    monkeypatch.setattr(wire, "_varint", counted)
    return calls


def _read_everything(path: Path) -> None:
    """What ``neuron-trace info`` and ``validate`` do: open leniently, verify every chunk, read every table."""
    with read_trace(path, strict=False) as tf:
        tf.loss_report(verify=True)
        tf.tables()
    validate_trace(path)
    try:
        with read_trace(path) as tf:
            tf.tables()
    except TraceFormatError:
        pass


@pytest.mark.parametrize("table", ["strings", "instructions", "dma", "counters", "tracks"])
@pytest.mark.parametrize("pattern", [b"\0", b"\x08\x00", b"\x10\x01"])
def test_compressed_runs_cost_no_python_loop(tmp_path: Path, varints: list[int], table: str,
                                             pattern: bytes) -> None:
    """8 MB of zeros or of a repeated varint field, LZ4-compressed to ~32 KB, in a chunk of each kind: the Python
    walkers decode a handful of varints per chunk (was: one per 1-2 decompressed bytes, ~4-8 million)."""
    path = _with_payload(tmp_path, table, pattern * (8 * _MB // len(pattern)))
    assert path.stat().st_size < 200_000
    _read_everything(path)
    assert varints[0] < 5_000


@pytest.mark.parametrize("codec", [framing.CODEC_ZSTD, framing.CODEC_ZLIB])
def test_other_codecs_too(tmp_path: Path, varints: list[int], codec: int) -> None:
    _read_everything(_with_payload(tmp_path, "strings", b"\x08\x00" * (2 * _MB), codec))
    assert varints[0] < 5_000


def test_the_walkers_still_read_what_writers_write(tmp_path: Path) -> None:
    """The bound does not change what a valid file reads as (chunk_head / leading_head / scan_chunk agree with the
    protobuf parser on a chunk of every table)."""
    from schemas import pb

    base = write_synthetic_trace(tmp_path / "base.nprof", 300, chunk_rows=256, steps=1, n_dma=20)
    data = base.read_bytes()
    seen = 0
    for pos, length, rtype, codec, _ in _frames(data):
        if rtype != framing.CHUNK:
            continue
        raw = framing.decompress(data[pos + framing.FRAME.size:pos + framing.FRAME.size + length], codec)
        msg = pb.Chunk.FromString(raw)
        assert wire.chunk_head(raw) == (msg.first_row, msg.rows)
        assert wire.leading_head(raw[:32]) == (msg.first_row, msg.rows)
        seen += 1
    assert seen >= 8


def test_a_footer_of_a_million_empty_entries_is_not_parsed(tmp_path: Path) -> None:
    """A footer replaced by a compressed run of empty index entries (``0a 00`` x 16M, 32 MB: found by the fuzzer)
    was parsed into 16M messages (1.2 GB, 8 s). Now a footer decompressing to more than 16x the bytes before it +
    2 MiB is unreadable: the file is scanned and reads completely."""
    import subprocess
    import sys

    base = write_synthetic_trace(tmp_path / "base.nprof", 300, chunk_rows=256, steps=1, n_dma=20)
    data = bytearray(base.read_bytes())
    pos, length, rtype, _, _ = next(f for f in _frames(bytes(data)) if f[2] == framing.FOOTER)
    data[pos:] = framing.encode_frame(rtype, framing.compress(b"\x0a\x00" * (16 * _MB), framing.CODEC_LZ4),
                                      framing.CODEC_LZ4) + framing.TRAILER.pack(pos, framing.END_MAGIC)
    bad = tmp_path / "footer_run.nprof"
    bad.write_bytes(bytes(data))
    code = ("import resource, sys; from neuron_profiler.trace import read_trace\n"
            "before = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss\n"
            "tf = read_trace(sys.argv[1], strict=False); n = len(tf.table('instructions'))\n"
            "print(n, (resource.getrusage(resource.RUSAGE_SELF).ru_maxrss - before) >> 10, tf.loss_report())")
    out = subprocess.run([sys.executable, "-c", code, str(bad)], capture_output=True, text=True, check=True,
                         cwd=Path(__file__).resolve().parents[2]).stdout.split(" ", 2)
    rows, grew_mb, report = int(out[0]), int(out[1]), out[2]
    assert rows == 300 and grew_mb < 100, out
    assert report.startswith("the footer is unreadable (footer cannot be decompressed: lz4 block"), report


_TRUNCATE_UNDER_A_READER = """
import os, sys
from neuron_profiler.trace import TraceFormatError, read_trace
path = sys.argv[1]
tf = read_trace(path)                      # header and index read; tables lazy
size = os.path.getsize(path)
with open(path, "r+b") as f:               # another process rewrites the file in place
    f.truncate(size // 3)
try:
    tf.table("instructions")
    print("read")
except TraceFormatError as e:
    print(type(e).__name__, e)
"""


def test_a_file_truncated_under_a_reader_is_an_error_not_sigbus(tmp_path: Path) -> None:
    """Was: the reader mapped the file; truncating it in place while tables were still lazy killed the reader with
    SIGBUS (exit 135) on the next table read. Now reads are positional: a documented ``TruncatedTraceError``."""
    import subprocess
    import sys

    path = write_synthetic_trace(tmp_path / "t.nprof", 20_000, chunk_rows=1024, steps=1, n_dma=20)
    r = subprocess.run([sys.executable, "-c", _TRUNCATE_UNDER_A_READER, str(path)], capture_output=True, text=True,
                       cwd=Path(__file__).resolve().parents[2], timeout=120)
    assert r.returncode == 0, (r.returncode, r.stderr[-2000:])
    assert r.stdout.startswith("TruncatedTraceError") and "the file changed while it was read" in r.stdout, r.stdout


@pytest.mark.parametrize("table", ["strings", "instructions"])
def test_a_repeated_top_level_field_is_corruption_found_in_the_first_bytes(tmp_path: Path, table: str) -> None:
    """``08 00`` x 16M (32 MB): no writer repeats a chunk's first_row; was handed to the protobuf parser (0.4 s of C
    per read, seconds per file under load: the fuzzer's last "hangs"), now a CorruptTraceError naming the field."""
    from neuron_profiler.trace import CorruptTraceError

    path = _with_payload(tmp_path, table, b"\x08\x00" * (16 * _MB))
    with pytest.raises(CorruptTraceError, match="(holds|repeats) field 1"):
        with read_trace(path) as tf:
            tf.tables()


def test_a_strings_chunk_of_zeros_is_refused_before_it_inflates(tmp_path: Path) -> None:
    """The strings chunk's first bytes are decoded alone (an LZ4 block: only the sequences that produce them), so
    a 300 KB file holding a 75 MB run of zeros is refused without allocating it (was: 255 MB peak RSS for
    ``neuron-trace info``, 625 MB for a 1 MB file)."""
    import subprocess
    import sys

    path = _with_payload(tmp_path, "strings", b"\0" * (75 * _MB))
    code = ("import resource, sys; from neuron_profiler.trace import read_trace\n"
            "before = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss\n"
            "tf = read_trace(sys.argv[1], strict=False); tf.loss_report(verify=True); tf.tables()\n"
            "print((resource.getrusage(resource.RUSAGE_SELF).ru_maxrss - before) >> 10, tf.loss_report())")
    out = subprocess.run([sys.executable, "-c", code, str(path)], capture_output=True, text=True, check=True,
                         cwd=Path(__file__).resolve().parents[2]).stdout.split(" ", 1)
    assert int(out[0]) < 40, out  # MB
    assert "1 of 2 strings chunks unreadable" in out[1]


def test_lz4_prefix_matches_the_full_decode() -> None:
    """Oracle: python-lz4's whole-block decode, on random, repetitive and mixed data, for every prefix length."""
    import random

    rng = random.Random(5)
    blobs = [b"\0" * 100_000, b"\x08\x00" * 5000, rng.randbytes(3000), b"abc" * 700 + rng.randbytes(50) + b"z" * 999,
             bytes(range(256)) * 30, b"x"]
    for blob in blobs:
        block = framing.compress(blob, framing.CODEC_LZ4)
        for n in (0, 1, 2, 4, 15, 16, 19, 32, 300, 4096, len(blob), len(blob) + 7):
            assert framing.decompress_prefix(block, framing.CODEC_LZ4, n) == blob[:n], (len(blob), n)
    with pytest.raises(ValueError):
        framing.decompress_prefix(b"\xff\xff\xff\x7f" + b"\x1f\x00\x05\x00", framing.CODEC_LZ4, 32)
