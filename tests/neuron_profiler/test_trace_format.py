"""Round trip, crash safety, version skew and bad input for the trace format."""
from __future__ import annotations

import struct
import zlib
from pathlib import Path

import numpy as np
import pandas as pd
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from neuron_profiler.trace import (
    FORMAT_MAJOR,
    FORMAT_MINOR,
    TABLES,
    CorruptTraceError,
    NotATraceError,
    TraceBuilder,
    TraceFormatError,
    TraceWriter,
    TruncatedTraceError,
    UnsupportedVersionError,
    framing,
    make_header,
    read_trace,
    write_trace,
)
from schemas import pb

RNG = np.random.default_rng(7)
WORDS = np.array(["", "aten::mm", "Tensor", "qSyncIO0", "ünïcødé ✓", "a,b=c", "x" * 300, "all_reduce"], dtype=object)


def random_table(table: str, n: int, ref_rows: dict[str, int]) -> dict[str, np.ndarray]:
    """Random values for every column of ``table`` (refs point at existing rows or -1)."""
    cols: dict[str, np.ndarray] = {}
    for c in TABLES[table]:
        if c.kind == "string":
            cols[c.name] = RNG.choice(WORDS, n)
        elif c.kind == "delta":
            cols[c.name] = np.sort(RNG.integers(1_700_000_000_000_000_000, 1_700_000_000_100_000_000, n))
        elif c.kind == "ref":
            cols[c.name] = RNG.integers(-1, max(ref_rows.get(c.ref_table, 1), 1), n)
        elif c.kind == "float":
            cols[c.name] = RNG.random(n) * 1e12
        elif c.kind == "uint":
            cols[c.name] = RNG.integers(0, 1 << 40, n)
        else:
            cols[c.name] = RNG.integers(-1, 1 << 20, n)
    return cols


def build_all_tables(n: int = 300) -> tuple[pb.Header, dict[str, dict[str, np.ndarray]]]:
    hdr = make_header("tests", source_format="synthetic", rank=1, world_size=4, simulated=True,
                      devices=[pb.Device(index=0, kind="trn2", name="Trainium2", simulated=True)],
                      capture_config={"modes": ["DEVICE"]}, metadata={"k": "v"})
    rows = {t: n for t in TABLES}
    return hdr, {t: random_table(t, n, rows) for t in TABLES}


def assert_frame_matches(df: pd.DataFrame, cols: dict[str, np.ndarray], rows: np.ndarray | None = None) -> None:
    for name, expected in cols.items():
        exp = expected if rows is None else expected[rows]
        got = df[name]
        if isinstance(got.dtype, pd.CategoricalDtype):
            assert list(got.astype(object)) == list(exp), name
        else:
            np.testing.assert_array_equal(got.to_numpy(), exp, err_msg=name)


@pytest.mark.parametrize("compression", ["lz4", "zstd", "zlib", "none"])
def test_round_trip_every_table(tmp_path: Path, compression: str) -> None:
    hdr, tables = build_all_tables()
    path = tmp_path / "t.nprof"
    with TraceWriter(path, hdr, chunk_rows=64, compression=compression) as w:
        for t, cols in tables.items():
            half = {k: v[:150] for k, v in cols.items()}
            rest = {k: v[150:] for k, v in cols.items()}
            assert w.append(t, half) == 0
            assert w.append(t, rest) == 150
        w.dropped_events["nc0"] = 12
        w.footer_metadata["note"] = "x"
    tf = read_trace(path)
    assert tf.complete and tf.lost_bytes == 0
    assert tf.header.rank == 1 and tf.header.world_size == 4 and tf.header.simulated
    assert tf.header.devices[0].kind == "trn2" and tf.header.metadata["k"] == "v"
    assert tf.dropped_events == {"nc0": 12} and tf.footer_metadata == {"note": "x"}
    assert tf.row_counts == {t: 300 for t in TABLES}
    for t, cols in tables.items():
        df = tf.table(t)
        assert list(df.index) == list(range(300))
        assert list(df.columns) == [c.name for c in TABLES[t]]
        assert_frame_matches(df, cols)
    starts = np.concatenate([c["start_ts"] for c in tables.values() if "start_ts" in c])
    assert tf.time_range[0] == min(starts.min(), tables["counters"]["ts"].min())


def test_dtypes_and_defaults(tmp_path: Path) -> None:
    b = TraceBuilder(make_header("tests"))
    b.add_rows("instructions", {"track": [0, 0], "start_ts": [5, 9], "engine": "Vector"})
    tf = read_trace(b.write(tmp_path / "d.nprof"))
    df = tf.table("instructions")
    assert df["start_ts"].dtype == np.int64 and df["raw_flops"].dtype == np.int64
    assert isinstance(df["engine"].dtype, pd.CategoricalDtype)
    assert list(df["engine"].cat.categories) == ["Vector"]  # only used strings become categories
    assert (df["framework_op"] == -1).all() and (df["correlation_id"] == -1).all() and (df["raw_flops"] == 0).all()
    assert (df["dtype"] == "").all()


def test_builder_table_matches_reader(tmp_path: Path) -> None:
    hdr, tables = build_all_tables(50)
    b = TraceBuilder(hdr)
    for t, cols in tables.items():
        b.add_rows(t, cols)
    tf = read_trace(b.write(tmp_path / "b.nprof", chunk_rows=16))
    for t in tables:
        pd.testing.assert_frame_equal(b.table(t).astype(object), tf.table(t).astype(object), check_index_type=False)


def test_time_window_reads_only_overlapping_rows(tmp_path: Path) -> None:
    n = 10_000
    ts = np.arange(n, dtype=np.int64) * 1000
    dur = np.full(n, 1500)
    b = TraceBuilder(make_header("tests"))
    b.add_rows("instructions", {"track": 0, "start_ts": ts, "duration_ns": dur, "name": "op"})
    b.add_rows("counters", {"track": 0, "ts": ts, "value": ts / 7})
    tf = read_trace(b.write(tmp_path / "w.nprof", chunk_rows=512))
    lo, hi = 2_000_500, 3_000_000
    df = tf.table("instructions", start_ns=lo, end_ns=hi)
    expected = np.nonzero((ts + dur >= lo) & (ts <= hi))[0]
    np.testing.assert_array_equal(df.index.to_numpy(), expected)
    c = tf.table("counters", columns=["value"], start_ns=lo, end_ns=hi)
    np.testing.assert_array_equal(c.index.to_numpy(), np.nonzero((ts >= lo) & (ts <= hi))[0])
    assert list(c.columns) == ["value"]
    with pytest.raises(ValueError, match="no time column"):
        tf.table("flows", start_ns=0, end_ns=1)
    with pytest.raises(ValueError, match="valid columns"):
        tf.table("instructions", columns=["nope"])


def _write_chunked(path: Path, n: int = 2000) -> dict[str, dict[str, np.ndarray]]:
    hdr, tables = build_all_tables(n)
    with TraceWriter(path, hdr, chunk_rows=97) as w:
        for t, cols in tables.items():
            for lo in range(0, n, 250):
                w.append(t, {k: v[lo:lo + 250] for k, v in cols.items()})
    return tables


@pytest.fixture(scope="module")
def chunked_file(tmp_path_factory: pytest.TempPathFactory) -> tuple[bytes, dict]:
    p = tmp_path_factory.mktemp("trunc") / "full.nprof"
    tables = _write_chunked(p)
    return p.read_bytes(), tables


@settings(max_examples=60, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(frac=st.floats(min_value=0.0, max_value=1.0))
def test_truncation_at_any_offset_keeps_complete_chunks(tmp_path: Path, chunked_file: tuple[bytes, dict],
                                                        frac: float) -> None:
    data, tables = chunked_file
    cut = int(frac * len(data))
    p = tmp_path / f"cut{cut}.nprof"
    p.write_bytes(data[:cut])
    if cut < len(framing.MAGIC):
        with pytest.raises((NotATraceError, TruncatedTraceError)):
            read_trace(p)
        return
    try:
        tf = read_trace(p)
    except TruncatedTraceError as e:
        assert "header" in str(e) or "truncated" in str(e)
        return
    recovered = 0
    for t, cols in tables.items():
        df = tf.table(t)
        k = len(df)
        assert list(df.index) == list(range(k)), "a truncated file must yield a prefix of each table"
        assert_frame_matches(df, cols, np.arange(k))
        recovered += k
    if cut < len(data):
        assert not tf.complete or cut >= len(data) - framing.TRAILER.size
    assert tf.lost_bytes <= cut
    if cut == len(data):
        assert recovered == sum(len(next(iter(c.values()))) for c in tables.values())


@pytest.mark.slow
@settings(max_examples=80, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(frac=st.floats(min_value=0.0, max_value=1.0), xor=st.integers(min_value=1, max_value=255))
def test_a_corrupt_byte_anywhere_gives_an_error_or_the_true_rows(tmp_path: Path, chunked_file: tuple[bytes, dict],
                                                                 frac: float, xor: int) -> None:
    """Never silent garbage: strict reads raise TraceFormatError or return exactly the written rows; lenient
    reads skip what is corrupt and every row they return is the one written under that row id."""
    data, tables = chunked_file
    pos = min(int(frac * len(data)), len(data) - 1)
    bad = bytearray(data)
    bad[pos] ^= xor
    p = tmp_path / f"flip{pos}_{xor}.nprof"
    p.write_bytes(bytes(bad))
    for strict in (True, False):
        try:
            tf = read_trace(p, strict=strict)
            frames = {t: tf.table(t) for t in tables}
        except TraceFormatError:
            continue
        for t, cols in tables.items():
            df = frames[t]
            if strict:
                assert len(df) == len(next(iter(cols.values()))), (t, pos)
            assert_frame_matches(df, cols, df.index.to_numpy())


def test_truncated_file_reports_lost_bytes(tmp_path: Path, chunked_file: tuple[bytes, dict]) -> None:
    data, _ = chunked_file
    p = tmp_path / "half.nprof"
    p.write_bytes(data[: len(data) // 2 + 5])
    tf = read_trace(p)
    assert not tf.complete and tf.lost_bytes > 0
    assert any("truncated" in w for w in tf.warnings)
    assert sum(tf.row_counts.values()) > 0


def test_unclosed_writer_leaves_flushed_chunks_readable(tmp_path: Path) -> None:
    """While a writer is open (or after its process was killed) the rows are in its temporary file, readable
    and reported as partial; the final name appears only when the file is complete."""
    p = tmp_path / "open.nprof"
    w = TraceWriter(p, make_header("tests"), chunk_rows=100)
    w.append("instructions", {"track": 0, "start_ts": np.arange(1000), "name": "op"})
    assert not p.exists() and w.partial_path.parent == tmp_path and not w.partial_path.name.endswith(".nprof")
    tf = read_trace(w.partial_path)  # writer still open: the 10 full chunks are on disk
    assert tf.row_counts["instructions"] == 1000 and not tf.complete
    assert (tf.table("instructions")["name"] == "op").all()
    assert tf.loss_report().startswith("no footer")
    assert w.close() == p and read_trace(p).complete and not w.partial_path.exists()
    assert read_trace(p).loss_report() is None


def _header_bytes(major: int, minor: int) -> bytes:
    h = pb.Header(format_major=major, format_minor=minor, producer="future")
    return framing.MAGIC + framing.encode_frame(framing.HEADER, h.SerializeToString())


def test_newer_major_is_refused_with_both_versions(tmp_path: Path) -> None:
    p = tmp_path / "v9.nprof"
    p.write_bytes(_header_bytes(9, 3))
    with pytest.raises(UnsupportedVersionError, match=rf"9\.3.*supports {FORMAT_MAJOR}\.x"):
        read_trace(p)


def test_older_and_newer_minor_are_accepted(tmp_path: Path) -> None:
    for minor in (0, 7):
        p = tmp_path / f"v{FORMAT_MAJOR}_{minor}.nprof"
        p.write_bytes(_header_bytes(FORMAT_MAJOR, minor))
        tf = read_trace(p)
        assert tf.format_version == f"{FORMAT_MAJOR}.{minor}" and tf.row_counts["instructions"] == 0


def test_pre_release_major_is_refused_with_advice(tmp_path: Path) -> None:
    """1.x stored varint columns; reading them as fixed-width would be garbage, so the reader refuses."""
    p = tmp_path / "v1.nprof"
    p.write_bytes(_header_bytes(FORMAT_MAJOR - 1, 0))
    with pytest.raises(UnsupportedVersionError, match=rf"{FORMAT_MAJOR - 1}\.0, a pre-release.*re-import"):
        read_trace(p)


def test_writer_stamps_its_own_version_over_the_callers(tmp_path: Path) -> None:
    h = make_header("tests")
    h.format_major, h.format_minor = 1, 0  # e.g. a header copied from an older file
    p = write_trace(tmp_path / "v.nprof", h, {"instructions": {"track": 0, "start_ts": np.arange(3)}})
    assert read_trace(p).format_version == f"{FORMAT_MAJOR}.{FORMAT_MINOR}"


@pytest.mark.parametrize("content,exc,msg", [
    (b"", NotATraceError, "magic"),
    (b'{"traceEvents": []}', NotATraceError, "neuron-trace import"),
    (b"\x1f\x8b\x08\x00garbage", NotATraceError, "gzip"),
    (b"\x89NTR", TruncatedTraceError, "shorter"),
    (framing.MAGIC, TruncatedTraceError, "header"),
    (framing.MAGIC + b"\x00" * 5, TruncatedTraceError, "header"),
    (framing.MAGIC + struct.pack("<IBBBBI", 0xFFFFFFF0, 1, 0, 0, 0, 0), CorruptTraceError, "limit"),
    (framing.MAGIC + struct.pack("<IBBBBI", 50, 1, 0, 0, 0, 0) + b"x" * 10, TruncatedTraceError, "truncated"),
    (framing.MAGIC + framing.encode_frame(2, b"xx"), CorruptTraceError, "expected the header"),
    (framing.MAGIC + framing.encode_frame(1, b"\xff\xff\xff"), CorruptTraceError, "header cannot be decoded"),
])
def test_bad_input_gives_clear_error(tmp_path: Path, content: bytes, exc: type, msg: str) -> None:
    p = tmp_path / "bad.nprof"
    p.write_bytes(content)
    with pytest.raises(exc, match=msg) as info:
        read_trace(p)
    assert str(p) in str(info.value)
    assert isinstance(info.value, TraceFormatError)


def test_directory_and_missing_file(tmp_path: Path) -> None:
    with pytest.raises(TraceFormatError, match="directory"):
        read_trace(tmp_path)
    with pytest.raises(TraceFormatError, match="cannot open"):
        read_trace(tmp_path / "nope.nprof")


def _chunk_offsets(data: bytes) -> list[tuple[int, int]]:
    pos, out = len(framing.MAGIC), []
    while pos + framing.FRAME.size <= len(data):
        length, rtype, *_ = framing.FRAME.unpack_from(data, pos)
        if rtype == framing.CHUNK:
            out.append((pos, length))
        if rtype == framing.FOOTER:
            break
        pos += framing.FRAME.size + length
    return out


def test_corrupt_chunk_raises_or_is_skipped(tmp_path: Path, chunked_file: tuple[bytes, dict]) -> None:
    data, tables = chunked_file
    pos, length = _chunk_offsets(data)[-3]
    bad = bytearray(data)
    bad[pos + framing.FRAME.size + length // 2] ^= 0xFF
    p = tmp_path / "corrupt.nprof"
    p.write_bytes(bytes(bad))
    tf = read_trace(p)
    with pytest.raises(CorruptTraceError, match="checksum"):
        for t in TABLES:
            tf.table(t)
    lenient = read_trace(p, strict=False)
    total = sum(len(lenient.table(t)) for t in TABLES)
    assert lenient.skipped_chunks == 1 and 0 < total < sum(len(next(iter(c.values()))) for c in tables.values())


def _craft(tmp_path: Path, chunk: pb.Chunk, table_id: int, strings: list[str] | None = None) -> Path:
    out = _header_bytes(FORMAT_MAJOR, 0)
    if strings is not None:
        s = pb.Chunk(first_row=0, rows=len(strings))
        s.strings.value.extend(strings)
        out += framing.encode_frame(framing.CHUNK, s.SerializeToString(), 0, 10)
    out += framing.encode_frame(framing.CHUNK, chunk.SerializeToString(), 0, table_id)
    p = tmp_path / "crafted.nprof"
    p.write_bytes(out)
    return p


def test_absurd_row_count_is_refused_without_allocating(tmp_path: Path) -> None:
    c = pb.Chunk(first_row=0, rows=(1 << 32) - 1)
    c.instructions.SetInParent()
    with pytest.raises(CorruptTraceError, match=r"declares 4294967295 rows \(at most"):
        read_trace(_craft(tmp_path, c, 13)).table("instructions")
    c = pb.Chunk(first_row=0, rows=(1 << 21))
    c.instructions.SetInParent()
    with pytest.raises(CorruptTraceError, match="would take 268,435,456 bytes decoded, beyond the"):
        read_trace(_craft(tmp_path, c, 13)).table("instructions")  # 2M default rows from a 100-byte file
    with pytest.raises(CorruptTraceError, match="stores no column"):  # the same chunk when the budget allows it
        read_trace(_craft(tmp_path, c, 13), max_decoded_bytes=1 << 30).table("instructions")


def test_footer_declaring_huge_chunks_is_not_trusted(tmp_path: Path) -> None:
    """A footer index is only a hint: one that declares absurd row counts is ignored (the file is scanned),
    so nothing is allocated from it."""
    p = write_trace(tmp_path / "t.nprof", make_header("tests"),
                    {"instructions": {"track": 0, "start_ts": np.arange(10)}})
    data = bytearray(p.read_bytes())
    off = struct.unpack_from("<Q", data, len(data) - framing.TRAILER.size)[0]
    length, rtype, codec, tid, _, _ = framing.FRAME.unpack_from(data, off)
    ft = pb.Footer.FromString(bytes(data[off + framing.FRAME.size: off + framing.FRAME.size + length]))
    for e in ft.chunks:
        e.rows = (1 << 32) - 1
    bad = bytes(data[:off]) + framing.encode_frame(framing.FOOTER, ft.SerializeToString())
    p.write_bytes(bad + framing.TRAILER.pack(off, framing.END_MAGIC))
    tf = read_trace(p)
    assert any("declares a chunk of" in w for w in tf.warnings) and not tf.complete
    assert tf.table("instructions")["start_ts"].tolist() == list(range(10))


def test_column_length_mismatch_and_bad_string_id(tmp_path: Path) -> None:
    c = pb.Chunk(first_row=0, rows=3)
    c.instructions.start_ts.extend([1, 2])
    with pytest.raises(CorruptTraceError, match="2 values for 3 rows"):
        read_trace(_craft(tmp_path, c, 13)).table("instructions")
    c = pb.Chunk(first_row=0, rows=1)
    c.instructions.name.append(99)
    with pytest.raises(CorruptTraceError, match="string id 99"):
        read_trace(_craft(tmp_path, c, 13, ["", "a"])).table("instructions")
    c = pb.Chunk(first_row=0, rows=2)
    c.instructions.name.extend([1, 2])
    with pytest.raises(CorruptTraceError, match="duplicate"):
        read_trace(_craft(tmp_path, c, 13, ["", "a", "a"])).table("instructions")


def test_table_mismatch_between_frame_and_payload(tmp_path: Path) -> None:
    c = pb.Chunk(first_row=0, rows=1)
    c.dma.start_ts.append(1)
    with pytest.raises(CorruptTraceError, match="payload holds 'dma'"):
        read_trace(_craft(tmp_path, c, 13)).table("instructions")


def test_zlib_bomb_and_bad_stream(tmp_path: Path) -> None:
    out = _header_bytes(FORMAT_MAJOR, 0) + framing.encode_frame(framing.CHUNK, b"not zlib at all", framing.CODEC_ZLIB,
                                                                13)
    p = tmp_path / "z.nprof"
    p.write_bytes(out)
    with pytest.raises(CorruptTraceError, match="decompress"):
        read_trace(p).table("instructions")
    out = _header_bytes(FORMAT_MAJOR, 0) + framing.encode_frame(framing.CHUNK, zlib.compress(b"x" * 100)[:-6],
                                                     framing.CODEC_ZLIB, 13)
    p.write_bytes(out)
    with pytest.raises(CorruptTraceError):
        read_trace(p).table("instructions")


def test_writer_rejects_bad_columns(tmp_path: Path) -> None:
    w = TraceWriter(tmp_path / "x.nprof", make_header("tests"))
    with pytest.raises(ValueError, match="valid columns"):
        w.append("instructions", {"bogus": [1]})
    with pytest.raises(ValueError, match="unknown table"):
        w.append("nope", {"x": [1]})
    with pytest.raises(ValueError, match="rows, expected"):
        w.append("instructions", {"start_ts": [1, 2], "duration_ns": [1]})
    with pytest.raises(ValueError, match=">= 0"):
        w.append("instructions", {"duration_ns": [-5]})
    with pytest.raises(ValueError, match="NaN"):
        w.append("instructions", {"start_ts": [np.nan]})
    w.close()
    with pytest.raises(ValueError, match="closed"):
        w.append("instructions", {"start_ts": [1]})


def test_make_header_validates_rank() -> None:
    with pytest.raises(ValueError, match="rank"):
        make_header("x", rank=2, world_size=2)


def test_zstd_bomb_and_garbage(tmp_path: Path) -> None:
    import zstandard

    p = tmp_path / "zs.nprof"
    p.write_bytes(_header_bytes(FORMAT_MAJOR, 0) + framing.encode_frame(framing.CHUNK, b"\x28\xb5\x2f\xfdgarbage",
                                                             framing.CODEC_ZSTD, 13))
    with pytest.raises(CorruptTraceError, match="zstd"):
        read_trace(p).table("instructions")
    # a frame that declares 4 GiB of content is refused before any allocation
    big = zstandard.ZstdCompressor(write_content_size=False).compress(b"x" * 10)
    p.write_bytes(_header_bytes(FORMAT_MAJOR, 0) + framing.encode_frame(framing.CHUNK, big, framing.CODEC_ZSTD, 13))
    with pytest.raises(CorruptTraceError, match="declares"):
        read_trace(p).table("instructions")
    with pytest.raises(ValueError, match="valid: none, zlib, zstd, lz4"):
        TraceWriter(tmp_path / "c.nprof", make_header("tests"), compression="lz77")


@pytest.mark.parametrize("payload,msg", [
    (b"\x01", "shorter than its 4-byte size prefix"),
    ((100).to_bytes(4, "little") + b"\xff" * 20, "lz4 block is invalid"),
    ((1 << 30).to_bytes(4, "little") + b"\x00" * 20, "declares 1073741824 decompressed bytes"),
])
def test_lz4_bomb_and_garbage(tmp_path: Path, payload: bytes, msg: str) -> None:
    p = tmp_path / "lz.nprof"
    p.write_bytes(_header_bytes(FORMAT_MAJOR, 0) + framing.encode_frame(framing.CHUNK, payload, framing.CODEC_LZ4, 13))
    with pytest.raises(CorruptTraceError, match=msg):
        read_trace(p).table("instructions")


def test_default_codec_is_lz4(tmp_path: Path) -> None:
    p = write_trace(tmp_path / "d.nprof", make_header("tests"),
                    {"instructions": {"track": 0, "start_ts": np.arange(5000), "name": "op"}})
    tf = read_trace(p)
    codecs = {tf._frame_at(c.offset)[2] for c in tf._chunks if c.table_id == 13}  # tiny chunks stay raw
    assert codecs == {framing.CODEC_LZ4}


def test_value_beyond_a_32_bit_column_is_refused_by_name(tmp_path: Path) -> None:
    with TraceWriter(tmp_path / "big.nprof", make_header("tests")) as w:
        w.append("instructions", {"track": np.array([0, 1 << 32]), "start_ts": np.arange(2)})
        with pytest.raises(ValueError, match="'track' holds 4294967297.*32-bit"):
            w.flush()


def test_multi_chunk_write_and_read_from_an_atexit_hook(tmp_path: Path) -> None:
    """Thread pools refuse work at interpreter shutdown; the whole-program capture exports there."""
    import subprocess
    import sys

    out = tmp_path / "exit.nprof"
    code = f"""
import atexit, numpy as np
from neuron_profiler.trace import TraceWriter, make_header, read_trace
def export():
    with TraceWriter({str(out)!r}, make_header("tests"), chunk_rows=100) as w:
        w.append("instructions", {{"track": 0, "start_ts": np.arange(1000), "name": "op"}})
    print(len(read_trace({str(out)!r}).table("instructions")))
atexit.register(export)
"""
    r = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=120,
                       cwd=Path(__file__).resolve().parents[2])
    assert r.returncode == 0, r.stderr
    assert r.stdout.strip() == "1000"
    assert len(read_trace(out).table("instructions")) == 1000
