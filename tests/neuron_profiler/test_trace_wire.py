"""The reader's zero-copy wire view of chunks, and its fallback to the protobuf parser for any other valid
encoding of the same data (files from other writers must read the same)."""
from __future__ import annotations

import struct
from pathlib import Path

import numpy as np
import pytest

from neuron_profiler.trace import FORMAT_MAJOR, TraceWriter, framing, make_header, read_trace
from neuron_profiler.trace.columns import columns_of
from neuron_profiler.trace.reader import TraceFile
from neuron_profiler.trace.wire import scan_chunk
from schemas import pb

INSTR = 13  # Chunk.instructions
FIELDS = frozenset(c.number for c in columns_of("instructions").values())


def _varint(v: int) -> bytes:
    out = bytearray()
    while v > 0x7F:
        out.append(v & 0x7F | 0x80)
        v >>= 7
    return bytes(out + bytes([v]))


def _file(tmp_path: Path, chunk_bytes: bytes) -> Path:
    h = pb.Header(format_major=FORMAT_MAJOR, format_minor=0, producer="tests")
    p = tmp_path / "w.nprof"
    p.write_bytes(framing.MAGIC + framing.encode_frame(framing.HEADER, h.SerializeToString())
                  + framing.encode_frame(framing.CHUNK, chunk_bytes, framing.CODEC_NONE, INSTR))
    return p


def _chunk(body: bytes, rows: int) -> bytes:
    return b"\x08\x00\x10" + _varint(rows) + bytes([INSTR << 3 | 2]) + _varint(len(body)) + body


def test_files_of_this_writer_take_the_wire_view(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    p = tmp_path / "own.nprof"
    with TraceWriter(p, make_header("tests"), chunk_rows=100) as w:
        w.append("instructions", {"track": np.arange(250) % 3, "start_ts": np.arange(250) * 10, "name": "op",
                                  "raw_flops": np.arange(250) << 40})
    tf = read_trace(p)  # (the strings chunk is parsed by protobuf at open)
    monkeypatch.setattr(TraceFile, "_parse_chunk", lambda *a: pytest.fail("the protobuf parser was used"))
    df = tf.table("instructions")
    assert df["start_ts"].tolist() == list(range(0, 2500, 10)) and df["raw_flops"].iloc[-1] == 249 << 40
    assert df["track"].tolist() == [i % 3 for i in range(250)] and (df["name"] == "op").all()


def test_unpacked_and_split_columns_fall_back_to_the_parser(tmp_path: Path) -> None:
    ts = [5, 7, -3]
    # start_ts (field 2, sfixed64) unpacked: one tagged 8-byte value per element
    unpacked = b"".join(bytes([2 << 3 | 1]) + struct.pack("<q", v) for v in ts)
    # duration_ns (field 3, fixed64) as two packed segments, which parsers concatenate
    seg = [struct.pack("<2Q", 10, 20), struct.pack("<Q", 30)]
    split = b"".join(bytes([3 << 3 | 2]) + _varint(len(s)) + s for s in seg)
    raw = _chunk(unpacked + split, 3)
    assert scan_chunk(raw, FIELDS) is None  # not the layout the view handles...
    df = read_trace(_file(tmp_path, raw)).table("instructions")
    assert df["start_ts"].tolist() == [5, 12, 9]  # ...yet it reads: deltas 5, +7, -3
    assert df["duration_ns"].tolist() == [10, 20, 30]


def test_unknown_field_falls_back_and_is_ignored(tmp_path: Path) -> None:
    body = bytes([2 << 3 | 2]) + _varint(8) + struct.pack("<q", 42) + _varint(99 << 3 | 0) + _varint(7)
    raw = _chunk(body, 1)
    assert scan_chunk(raw, FIELDS) is None
    assert read_trace(_file(tmp_path, raw)).table("instructions")["start_ts"].tolist() == [42]


@pytest.mark.parametrize("raw", [b"\x08", b"\x08\x00\x10\x01\x6a\x05\x12\x08", b"\xff" * 11, b""])
def test_malformed_bytes_never_pass_the_view(raw: bytes) -> None:
    assert scan_chunk(raw, FIELDS) is None


def test_partial_element_is_corruption_not_garbage(tmp_path: Path) -> None:
    body = bytes([2 << 3 | 2]) + _varint(12) + b"\x01" * 12  # 1.5 sfixed64 values
    view = scan_chunk(_chunk(body, 1), FIELDS)
    assert view is not None and view.array(2, np.int64) is None
    from neuron_profiler.trace import CorruptTraceError

    with pytest.raises(CorruptTraceError):
        read_trace(_file(tmp_path, _chunk(body, 1))).table("instructions")
