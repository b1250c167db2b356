"""The hand-made bad files of ``tests/data/bad_traces`` (see its ``make_corpus.py``): one per defect of issue 10's
"Trace files". Each must give a documented ``TraceFormatError`` or the true rows with a loss report, within
bounded memory, and never pass for complete."""
from __future__ import annotations

import gzip
import json
import subprocess
import sys
from pathlib import Path

import numpy as np
import pytest

from neuron_profiler.cli import main
from neuron_profiler.trace import CorruptTraceError, TraceFormatError, read_trace
from neuron_profiler.trace.validate import validate_trace
from schemas import pb

CORPUS = Path(__file__).resolve().parents[1] / "data" / "bad_traces"
REPO = Path(__file__).resolve().parents[2]
TRUE_TS = np.arange(300) * 1000  # every corpus trace holds instructions 0..299 at 1 us steps


def corpus(name: str, tmp_path: Path) -> Path:
    """Path of corpus file ``name`` (gzipped ones are expanded into ``tmp_path``)."""
    p = CORPUS / name
    if p.exists():
        return p
    out = tmp_path / name
    out.write_bytes(gzip.decompress((CORPUS / (name + ".gz")).read_bytes()))
    return out


def assert_true_rows(df, rows: np.ndarray) -> None:
    """``df`` holds exactly instructions ``rows`` of the original trace, under their row ids."""
    np.testing.assert_array_equal(df.index.to_numpy(), rows)
    np.testing.assert_array_equal(df["start_ts"].to_numpy(), TRUE_TS[rows])
    assert (df["name"] == "aten::mm").all() and (df["track"] == 0).all()


def test_valid_base_file_is_complete(tmp_path: Path) -> None:
    tf = read_trace(corpus("valid.nprof", tmp_path))
    assert tf.complete and tf.loss_report(verify=True) is None and validate_trace(tf.path) == []
    assert_true_rows(tf.table("instructions"), np.arange(300))


def test_header_codec_byte_flip_is_a_corrupt_trace_not_zlib_error(tmp_path: Path) -> None:
    """Was: bare zlib.error (the codec byte is outside the 2.1 CRC)."""
    with pytest.raises(CorruptTraceError, match=r"at byte 8: header cannot be decompressed: zlib stream is invalid"):
        read_trace(corpus("header_codec_zlib.nprof", tmp_path))


def test_footer_codec_byte_flip_scans_and_reports(tmp_path: Path) -> None:
    """Was: bare zlib.error at open. Now the footer is unreadable, every chunk is found by scanning."""
    tf = read_trace(corpus("footer_codec_zlib.nprof", tmp_path))
    assert not tf.complete
    assert_true_rows(tf.table("instructions"), np.arange(300))
    report = tf.loss_report()
    assert report.startswith("the footer is unreadable (footer cannot be decompressed: zlib stream is invalid")
    assert validate_trace(tf.path)


def test_first_row_beyond_int64_is_corrupt(tmp_path: Path) -> None:
    """Was: OverflowError."""
    p = corpus("first_row_2e63.nprof", tmp_path)
    with pytest.raises(CorruptTraceError, match=r"declares first row 9223372036854775808"):
        read_trace(p).table("instructions")
    tf = read_trace(p, strict=False)
    assert len(tf.table("instructions")) == 0 and tf.row_counts["instructions"] == 0
    assert tf.loss_report() == ("no footer: the writer did not close the file (it ends after 3 complete chunks); "
                                "1 of 1 instructions chunks unreadable")


def test_footer_listing_a_chunk_twice_is_detected(tmp_path: Path, capsys: pytest.CaptureFixture) -> None:
    """Was: 400 rows with row ids 0-99 twice, and `validate` printed ok."""
    p = corpus("footer_duplicate_entry.nprof", tmp_path)
    tf = read_trace(p)
    assert_true_rows(tf.table("instructions"), np.arange(300))
    assert not tf.complete and "is listed twice" in tf.loss_report()
    assert main(["validate", str(p)]) == 1
    assert "ok" not in capsys.readouterr().out.split()


def test_removed_chunk_and_index_entry_leave_a_reported_gap(tmp_path: Path, capsys: pytest.CaptureFixture) -> None:
    """Was: 200 rows numbered 0-199 (the last 100 under wrong ids), row_counts 300, `validate` ok."""
    p = corpus("footer_removed_chunk.nprof", tmp_path)
    tf = read_trace(p)
    assert_true_rows(tf.table("instructions"), np.r_[0:100, 200:300])
    report = tf.loss_report()
    assert "instructions rows 100-199 are missing" in report  # the footer check
    assert "instructions rows 100-199 missing (100 rows)" in report  # what the scan found
    assert "instructions: 200 of the 300 rows the footer counts" in report
    assert main(["validate", str(p)]) == 1
    out = capsys.readouterr().out
    assert "instructions rows 100-199 missing" in out and not out.rstrip().endswith("ok")


def _peak(path: Path, mode: str) -> tuple[str, int]:
    """(outcome, peak RSS increase in bytes) of reading every table of ``path`` in a fresh process; the outcome is
    the error, or "read: <loss report>"."""
    code = """
import sys
from neuron_profiler.trace import read_trace, TraceFormatError
def hwm():
    with open('/proc/self/status') as f:
        return next(int(l.split()[1]) * 1024 for l in f if l.startswith('VmHWM'))
base = hwm()
try:
    tf = read_trace(sys.argv[1], strict=sys.argv[2] == 'strict')
    tf.tables()
    out = 'read: ' + str(tf.loss_report())
except TraceFormatError as e:
    out = type(e).__name__ + ': ' + str(e)
print(hwm() - base)
print(out)
"""
    r = subprocess.run([sys.executable, "-c", code, str(path), mode], capture_output=True, text=True, timeout=300,
                       cwd=REPO)
    assert r.returncode == 0, r.stderr[-2000:]
    peak, outcome = r.stdout.split("\n", 1)
    return outcome.strip(), int(peak)


def _headed_bomb(tmp_path: Path, codec: int) -> Path:
    """A valid chunk head (first_row 0, rows 1, an instructions message) followed by 2 GB of zeros: only the
    head's row count can bound the inflation."""
    import zlib

    import zstandard

    from neuron_profiler.trace import framing

    n = (1 << 31) - 64
    head = b"\x08\x00\x10\x01" + bytes([13 << 3 | 2]) + bytes([0x80 | (n & 0x7F)]) + bytes(
        [0x80 | (n >> (7 * k) & 0x7F) for k in range(1, 4)]) + bytes([n >> 28])
    zeros = bytes(1 << 24)
    if codec == framing.CODEC_ZLIB:
        c = zlib.compressobj(9)
        payload = c.compress(head) + b"".join(c.compress(zeros) for _ in range(128)) + c.flush()
    else:
        c = zstandard.ZstdCompressor(level=3, write_content_size=True).compressobj(size=len(head) + (128 << 24))
        payload = c.compress(head) + b"".join(c.compress(zeros) for _ in range(128)) + c.flush()
    hdr = pb.Header(format_major=2, format_minor=2, producer="tests")
    p = tmp_path / f"headed_bomb_{codec}.nprof"
    p.write_bytes(framing.MAGIC + framing.encode_frame(framing.HEADER, hdr.SerializeToString())
                  + framing.encode_frame(framing.CHUNK, payload, codec, 13))
    return p


@pytest.mark.skipif(not Path("/proc/self/status").exists(), reason="peak RSS is read from /proc")
@pytest.mark.parametrize("name,strict_error,lenient", [
    ("default_rows_bomb.nprof", "table 'instructions' would take 2,147,483,648 bytes decoded, beyond the", None),
    ("zstd_bomb.nprof", "zstd frame declares 2147483647 bytes of content", "1 of 1 instructions chunks unreadable"),
    ("zlib_bomb.nprof", "chunk starts with field 0 of wire type 0", "1 of 1 instructions chunks unreadable"),
    pytest.param("headed_zlib", "zlib stream decompresses to more than 65784 bytes",
                 "1 of 1 instructions chunks unreadable", marks=pytest.mark.slow),
    pytest.param("headed_zstd", "at byte 31: chunk cannot be decompressed: zstd frame declares",
                 "1 of 1 instructions chunks unreadable", marks=pytest.mark.slow),
])
def test_bombs_are_refused_before_allocating(tmp_path: Path, name: str, strict_error: str, lenient: str | None) -> None:
    """Was: 2.37 GB and 16.7M default rows without a warning (807 bytes); 2.16 GB peak for a 65 KB zstd chunk,
    4.2 GB for a 2 MB zlib chunk before the error. Now: the error, or (lenient) the chunk skipped and reported,
    within 10x the file + 100 MB."""
    from neuron_profiler.trace import framing

    p = {"headed_zlib": lambda: _headed_bomb(tmp_path, framing.CODEC_ZLIB),
         "headed_zstd": lambda: _headed_bomb(tmp_path, framing.CODEC_ZSTD)}.get(name, lambda: corpus(name, tmp_path))()
    for mode in ("strict", "lenient"):
        outcome, peak = _peak(p, mode)
        if mode == "strict" or lenient is None:
            assert outcome.startswith("CorruptTraceError") and strict_error in outcome, outcome
        else:
            assert outcome.startswith("read: ") and lenient in outcome, outcome
        assert peak < 10 * p.stat().st_size + (100 << 20), (mode, peak)


def test_truncated_and_unclosed_files_say_what_is_missing(tmp_path: Path) -> None:
    tf = read_trace(corpus("truncated.nprof", tmp_path))
    assert tf.loss_report() == ("truncated at byte 4,962: no footer; the last 2,132 bytes (an incomplete record) "
                                "were lost")
    assert_true_rows(tf.table("instructions"), np.arange(200))
    tf = read_trace(corpus("no_footer.nprof", tmp_path))
    assert tf.loss_report() == "no footer: the writer did not close the file (it ends after 5 complete chunks)"
    assert_true_rows(tf.table("instructions"), np.arange(300))


@pytest.mark.parametrize("name", ["truncated.nprof", "footer_removed_chunk.nprof", "no_footer.nprof"])
def test_cli_shows_the_loss_report(tmp_path: Path, name: str, capsys: pytest.CaptureFixture) -> None:
    """`info` prints it, `convert` warns on stderr and the output carries it (a copy never reads as complete)."""
    p = corpus(name, tmp_path)
    report = read_trace(p).loss_report()
    assert main(["info", str(p)]) == 0
    assert f"loss        {report}" in capsys.readouterr().out
    out = tmp_path / "copy.nprof"
    assert main(["convert", str(p), "--to", "nprof", "-o", str(out)]) == 0
    assert f"neuron-trace: warning: {p}: {report}" in capsys.readouterr().err
    copy = read_trace(out)
    assert copy.complete and copy.loss_report() == f"copied from a partial trace ({report})"
    js = tmp_path / "copy.json"
    assert main(["convert", str(p), "-o", str(js)]) == 0
    assert json.loads(js.read_text())["neuronProfiler"]["loss"] == report
    pf = pytest.importorskip("perfetto.protos.perfetto.trace.perfetto_trace_pb2")
    assert main(["convert", str(p), "--to", "perfetto", "-o", str(tmp_path / "c.pftrace")]) == 0
    trace = pf.Trace.FromString((tmp_path / "c.pftrace").read_bytes())
    meta = {m.name: m.string_value for pk in trace.packet for m in pk.chrome_events.metadata}
    assert meta["neuron_profiler.loss"] == report
    pq = pytest.importorskip("pyarrow.parquet")
    assert main(["convert", str(p), "--to", "parquet", "-o", str(tmp_path / "pq")]) == 0
    part = tmp_path / "pq" / "instructions" / "rank=0" / "part-00000.parquet"
    assert pq.read_metadata(part).metadata[b"neuron_profiler.loss"].decode() == report


@pytest.mark.parametrize("name", ["header_codec_zlib.nprof", "first_row_2e63.nprof"])
def test_cli_bad_file_is_one_line_exit_2(tmp_path: Path, name: str) -> None:
    r = subprocess.run([sys.executable, "-m", "neuron_profiler.cli", "convert", str(corpus(name, tmp_path)), "-o",
                        str(tmp_path / "o.json")], capture_output=True, text=True, cwd=REPO, timeout=120)
    assert r.returncode in (0, 2) and "Traceback" not in r.stderr
    if r.returncode == 2:
        assert r.stderr.count("\n") == 1 and r.stderr.startswith("neuron-trace: error: ")
    else:  # readable chunks were exported, the loss said so
        assert "unreadable" in r.stderr


def test_every_corpus_file_gives_documented_errors_only(tmp_path: Path) -> None:
    """Strict and lenient, every public entry point: TraceFormatError or a result, nothing else."""
    names = sorted(p.name.removesuffix(".gz") for p in CORPUS.glob("*.nprof*"))
    assert len(names) == 11
    for name in names:
        if "bomb" in name:
            continue  # memory measured in its own process above
        p = corpus(name, tmp_path)
        for strict in (True, False):
            try:
                tf = read_trace(p, strict=strict)
                tf.row_counts, tf.time_range, tf.codecs, tf.loss_report(verify=True)
                tf.tables()
            except TraceFormatError:
                pass
        try:
            validate_trace(p)
        except TraceFormatError:
            pass


def test_every_byte_of_a_2_2_frame_is_checked(tmp_path: Path) -> None:
    """Format 2.2: the frame's check byte is the CRC-8 of its length, record type, codec and table id, so any
    one-byte change of the 8 bytes before the payload CRC is found, in the header, a chunk and the footer."""
    from neuron_profiler.synthetic_trace import write_synthetic_trace
    from neuron_profiler.trace import framing

    src = write_synthetic_trace(tmp_path / "s.nprof", 2000, chunk_rows=512)
    data = src.read_bytes()
    footer_at = int.from_bytes(data[-16:-8], "little")
    tf = read_trace(src)
    chunk_at = tf.chunk_index("instructions")[1].offset
    p = tmp_path / "flipped.nprof"
    for frame_at, what in ((len(framing.MAGIC), "header"), (chunk_at, "chunk"), (footer_at, "footer")):
        for byte in range(8):
            for xor in (0x01, 0x80, 0xFF, 0x03):
                bad = bytearray(data)
                bad[frame_at + byte] ^= xor
                p.write_bytes(bytes(bad))
                if what == "header":
                    with pytest.raises(TraceFormatError):
                        read_trace(p)
                    continue
                lenient = read_trace(p, strict=False)
                lenient.tables()
                assert lenient.loss_report(), (what, byte, xor)
                if what == "chunk":
                    with pytest.raises(TraceFormatError):
                        read_trace(p).tables()


def _truncated_synthetic(tmp_path: Path) -> tuple[Path, str]:
    from neuron_profiler.synthetic_trace import write_synthetic_trace

    full = write_synthetic_trace(tmp_path / "full.nprof", 20_000, chunk_rows=2048)
    data = full.read_bytes()
    cut = tmp_path / "cut.nprof"
    cut.write_bytes(data[: len(data) * 2 // 3])
    return cut, read_trace(cut).loss_report()


def test_neuron_analyze_prints_the_loss_report(tmp_path: Path, capsys: pytest.CaptureFixture) -> None:
    """Was: a truncated trace was analysed as if complete, without a word."""
    from analysis.cli import main as analyze

    cut, report = _truncated_synthetic(tmp_path)
    assert report.startswith("truncated at byte")
    assert analyze([str(cut)]) == 0
    captured = capsys.readouterr()
    assert f"neuron-analyze: warning: {cut}: {report}" in captured.err and captured.out


def test_explorer_summary_shows_the_loss_report(tmp_path: Path) -> None:
    """Was: the explorer showed a Summary of a partial file like any other."""
    import plotly

    from explorer.app import build_page
    from explorer.pages.common import Ctx
    from explorer.state import ViewState
    from explorer.store import TraceStore

    cut, report = _truncated_synthetic(tmp_path)
    (tmp_path / "full.nprof").unlink()
    ctx = Ctx(TraceStore(tmp_path))
    page = json.dumps(build_page(ctx, ViewState(page="summary", trace="cut.nprof")), cls=plotly.utils.PlotlyJSONEncoder)
    assert '"loss-banner"' in page and f"Incomplete trace file: {report}" in page
    complete = tmp_path / "complete"
    complete.mkdir()
    from neuron_profiler.synthetic_trace import write_synthetic_trace

    write_synthetic_trace(complete / "ok.nprof", 2000)
    page = json.dumps(build_page(Ctx(TraceStore(complete)), ViewState(page="summary", trace="ok.nprof")),
                      cls=plotly.utils.PlotlyJSONEncoder)
    assert '"loss-banner"' not in page and '"summary-page"' in page
