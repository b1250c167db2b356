"""Writes the hand-made bad trace files of this folder (run from the repository root):

    python tests/data/bad_traces/make_corpus.py

Each file reproduces one defect of issue 10 ("Trace files") as it was found: the tests in
``tests/neuron_profiler/test_trace_bad_files.py`` read them and say what the reader must do instead. The files are
built here byte by byte (own frame encoder, format 2.1 frames whose CRC covers the payload only), independent of
the package's writer, so they stay the exact bytes that broke the reader even as the writer changes.
"""
from __future__ import annotations

import struct
import sys
import zlib
from pathlib import Path

HERE = Path(__file__).resolve().parent
sys.path.insert(0, str(HERE.parents[2]))

from schemas import pb  # noqa: E402

MAGIC, END = b"\x89NTRACE\n", b"NTRACEND"
HEADER, CHUNK, FOOTER = 1, 2, 3
STRINGS, TRACKS, INSTRUCTIONS = 10, 11, 13


def frame(rtype: int, payload: bytes, codec: int = 0, table: int = 0) -> bytes:
    """A 2.1 frame: <I length> <B type> <B codec> <B table> <B 0> <I crc32(payload)> payload."""
    return struct.pack("<IBBBBI", len(payload), rtype, codec, table, 0, zlib.crc32(payload)) + payload


def header() -> bytes:
    return pb.Header(format_major=2, format_minor=1, producer="bad_traces", rank=0, world_size=1).SerializeToString()


def instructions_chunk(first: int, n: int) -> bytes:
    c = pb.Chunk(first_row=first, rows=n)
    c.instructions.track.extend([1] * n)  # REF: row + 1 (track 0)
    ts = [1000 * (first + i) for i in range(n)]
    c.instructions.start_ts.extend([ts[0]] + [b - a for a, b in zip(ts, ts[1:])])  # DELTA
    c.instructions.duration_ns.extend([500] * n)
    c.instructions.name.extend([1] * n)  # "aten::mm"
    return c.SerializeToString()


def base_records() -> list[tuple[int, bytes, int, int, dict]]:
    """(type, payload, codec, table, index entry) of a valid trace: strings, one track, 300 instructions in 3
    chunks of 100."""
    s = pb.Chunk(first_row=0, rows=3)
    s.strings.value.extend(["", "aten::mm", "Tensor"])
    t = pb.Chunk(first_row=0, rows=1)
    t.tracks.kind.append(2)
    t.tracks.name.append(2)
    recs = [(CHUNK, s.SerializeToString(), 0, STRINGS, dict(first_row=0, rows=3)),
            (CHUNK, t.SerializeToString(), 0, TRACKS, dict(first_row=0, rows=1))]
    for k in range(3):
        recs.append((CHUNK, instructions_chunk(100 * k, 100), 0, INSTRUCTIONS,
                     dict(first_row=100 * k, rows=100, min_ts=100_000 * k, max_end_ts=100_000 * k + 99_500)))
    return recs


def assemble(records, *, table_rows=None, footer_entries=None, footer_codec: int = 0, header_codec: int = 0,
             with_footer: bool = True) -> bytes:
    """Magic, header, the records, then (unless ``with_footer`` is False) a footer indexing them and the trailer.
    ``footer_entries(entries)`` may rewrite the index entries before the footer is encoded."""
    out = bytearray(MAGIC + frame(HEADER, header()))
    out[len(MAGIC) + 5] = header_codec  # the codec byte of the header frame (outside its CRC in 2.1)
    entries = []
    for rtype, payload, codec, table, entry in records:
        entries.append(pb.ChunkIndexEntry(table_id=table, offset=len(out), length=12 + len(payload), **entry))
        out += frame(rtype, payload, codec, table)
    if not with_footer:
        return bytes(out)
    ft = pb.Footer(min_ts=0, max_ts=299_500)
    ft.chunks.extend(footer_entries(entries) if footer_entries else entries)
    rows = {"tracks": 1, "instructions": 300} if table_rows is None else table_rows
    for name in ("tracks", "host_ops", "instructions", "dma", "collectives", "counters", "flows"):
        ft.table_rows[name] = rows.get(name, 0)
    off = len(out)
    out += frame(FOOTER, ft.SerializeToString())
    out[off + 5] = footer_codec
    return bytes(out + struct.pack("<Q8s", off, END))


def removed_chunk() -> bytes:
    """The middle instructions chunk cut out of the file together with its index entry; later offsets fixed,
    the footer's CRC recomputed, its row count (300) kept."""
    recs = base_records()
    del recs[3]
    return assemble(recs)


def duplicate_entry() -> bytes:
    """The footer lists the first instructions chunk twice (a valid CRC over an inconsistent index)."""
    return assemble(base_records(), footer_entries=lambda e: e[:3] + [e[2]] + e[3:])


def first_row_2e63() -> bytes:
    """No footer; one instructions chunk declaring first_row = 2^63."""
    recs = base_records()[:2]
    c = pb.Chunk.FromString(instructions_chunk(0, 100))
    c.first_row = 1 << 63
    recs.append((CHUNK, c.SerializeToString(), 0, INSTRUCTIONS, {}))
    return assemble(recs, with_footer=False)


def default_rows_bomb() -> bytes:
    """~740 bytes: 16 instructions chunks of 2^20 rows that store no column (every row default-valued)."""
    recs = []
    for k in range(16):
        c = pb.Chunk(first_row=k << 20, rows=1 << 20)
        c.instructions.SetInParent()
        recs.append((CHUNK, c.SerializeToString(), 0, INSTRUCTIONS, dict(first_row=k << 20, rows=1 << 20)))
    return assemble(recs, table_rows={"instructions": 16 << 20})


def _zeros(n: int, compressor) -> bytes:
    block = bytes(1 << 24)
    out = []
    while n > 0:
        out.append(compressor.compress(block[:min(n, len(block))]))
        n -= len(block)
    out.append(compressor.flush())
    return b"".join(out)


def zstd_bomb() -> bytes:
    """One instructions chunk whose ~65 KB zstd frame declares (and holds) 2^31 - 1 bytes of zeros."""
    import zstandard

    n = (1 << 31) - 1
    payload = _zeros(n, zstandard.ZstdCompressor(level=19, write_content_size=True).compressobj(size=n))
    return assemble(base_records()[:2] + [(CHUNK, payload, 2, INSTRUCTIONS, {})], with_footer=False)


def zlib_bomb() -> bytes:
    """One instructions chunk whose ~2 MB zlib stream inflates to 2^31 + 2^24 bytes of zeros."""
    payload = _zeros((1 << 31) + (1 << 24), zlib.compressobj(9))
    return assemble(base_records()[:2] + [(CHUNK, payload, 1, INSTRUCTIONS, {})], with_footer=False)


def truncated() -> bytes:
    """A valid file cut in the middle of its last instructions chunk."""
    data = assemble(base_records(), with_footer=False)
    return data[: len(data) - 300]


CORPUS = {
    "header_codec_zlib.nprof": lambda: assemble(base_records(), header_codec=1),
    "footer_codec_zlib.nprof": lambda: assemble(base_records(), footer_codec=1),
    "first_row_2e63.nprof": first_row_2e63,
    "footer_duplicate_entry.nprof": duplicate_entry,
    "footer_removed_chunk.nprof": removed_chunk,
    "default_rows_bomb.nprof": default_rows_bomb,
    "zstd_bomb.nprof": zstd_bomb,
    "zlib_bomb.nprof": zlib_bomb,
    "truncated.nprof": truncated,
    "no_footer.nprof": lambda: assemble(base_records(), with_footer=False),
    "valid.nprof": lambda: assemble(base_records()),
}

#: Files stored gzip-compressed (their bytes are mostly one repeated pattern); tests gunzip them.
GZIPPED = {"zlib_bomb.nprof"}

if __name__ == "__main__":
    import gzip

    for name, make in CORPUS.items():
        data = make()
        if name in GZIPPED:
            (HERE / (name + ".gz")).write_bytes(gzip.compress(data, 9, mtime=0))
        else:
            (HERE / name).write_bytes(data)
        print(f"{name:32s} {len(data):>10,} bytes")
