"""Byte-level file layout: magic, record frames, trailer. Only the reader and writer use this module.

    MAGIC | frame(Header) | frame(Chunk)* | frame(Footer) | trailer
    frame   = <I payload_length> <B record_type> <B codec> <B table_id> <B check> <I crc32(payload)> payload
    trailer = <Q footer_frame_offset> b"NTRACEND"

``check`` (since format 2.2; a reserved 0 before) is the CRC-8 of the frame's first 7 bytes (length, record type,
codec, table id), so every byte that changes how a record is read is checksummed: any one-byte change of them is
caught (a CRC-8 detects every error burst of up to 8 bits), the payload is covered by its CRC-32 as before.
The payload CRC is unchanged, so readers of 2.0/2.1 (which ignore the reserved byte) still read 2.2 files.
"""
from __future__ import annotations

import struct
import zlib
from types import ModuleType

MAGIC = b"\x89NTRACE\n"
END_MAGIC = b"NTRACEND"
FRAME = struct.Struct("<IBBBBI")
TRAILER = struct.Struct("<Q8s")

HEADER, CHUNK, FOOTER = 1, 2, 3
RECORD_TYPES = {HEADER: "header", CHUNK: "chunk", FOOTER: "footer"}

CODEC_NONE, CODEC_ZLIB, CODEC_ZSTD, CODEC_LZ4 = 0, 1, 2, 3
CODECS = {"none": CODEC_NONE, "zlib": CODEC_ZLIB, "zstd": CODEC_ZSTD, "lz4": CODEC_LZ4}
#: The writers' default: LZ4 in its fast mode (``LZ4_LEVEL`` 0). bench/bench_format.py, 1M instructions, one
#: run: write 15.2M events/s (high-compression level 4: 3.1M, level 1: 6.2M; zstd level 1: 12.4M), read into
#: pandas 33.8M/s (level 4: 30.4M; zstd: 23-28M), 13.2 bytes/instruction (level 4: 9.1, zstd 6.1); on the real
#: Kineto traces' imports, chunk compression 6-9x faster than level 4 for files 13-25 % larger. Writing is what
#: an import or the end of a capture waits for; ``neuron-trace convert --to nprof`` (zstd) makes archives.
DEFAULT_COMPRESSION = "lz4"
#: 0: LZ4's fast mode; 1-12: its high-compression levels (the block format, and so the reader, is the same)
LZ4_LEVEL = 0

#: First format version whose frames carry the CRC-8 check byte.
CHECK_SINCE = (2, 2)

#: No single record may be larger than this (a declared length above it is corruption, not a trace).
MAX_RECORD_BYTES = 1 << 30
#: No chunk holds more rows than this (writers split larger batches; readers treat more as corruption).
MAX_CHUNK_ROWS = 1 << 22
#: A decompressed chunk may not exceed this.
MAX_DECOMPRESSED_BYTES = 1 << 31


_HEAD = struct.Struct("<IBBB")  # the frame bytes the check byte covers


def _crc8_table() -> bytes:
    table = bytearray(256)
    for i in range(256):
        c = i
        for _ in range(8):
            c = ((c << 1) ^ 0x07) & 0xFF if c & 0x80 else (c << 1) & 0xFF
        table[i] = c
    return bytes(table)


_CRC8 = _crc8_table()  # CRC-8/SMBUS: polynomial x^8 + x^2 + x + 1, initial value 0


def frame_check(length: int, record_type: int, codec: int, table_id: int) -> int:
    """The check byte of a frame with these fields: the CRC-8 of its first 7 bytes."""
    c = 0
    for b in _HEAD.pack(length, record_type, codec, table_id):
        c = _CRC8[c ^ b]
    return c


def encode_frame(record_type: int, payload: bytes, codec: int = CODEC_NONE, table_id: int = 0) -> bytes:
    """Frame ``payload`` (already compressed when codec != none) with the check byte and the payload's CRC-32."""
    if len(payload) > MAX_RECORD_BYTES:
        raise ValueError(f"record of {len(payload)} bytes exceeds the {MAX_RECORD_BYTES}-byte limit")
    check = frame_check(len(payload), record_type, codec, table_id)
    return FRAME.pack(len(payload), record_type, codec, table_id, check, zlib.crc32(payload)) + payload


def chunk_record(raw: bytes, codec: int, level: int | None, table_id: int) -> bytes:
    """The framed record of a serialized chunk: ``raw`` compressed with ``codec`` at ``level`` (see ``compress``),
    or ``raw`` as is (codec none) when compressing does not make it smaller."""
    payload = compress(raw, codec, level)
    if len(payload) >= len(raw):
        payload, codec = raw, CODEC_NONE
    return encode_frame(CHUNK, payload, codec, table_id)


_zstandard: ModuleType | None  # None when the package is missing
try:  # core dependencies; imported eagerly so the first chunk read does not pay for the import
    import zstandard as _zstandard
except ImportError:  # pragma: no cover
    _zstandard = None
try:
    import lz4.block as _lz4
except ImportError:  # pragma: no cover
    _lz4 = None


def _zstd() -> ModuleType:
    if _zstandard is None:  # pragma: no cover
        raise ValueError("this chunk is zstd-compressed and the `zstandard` package is not installed "
                         "(pip install zstandard)")
    return _zstandard


def _lz4_module() -> ModuleType:
    if _lz4 is None:  # pragma: no cover
        raise ValueError("this chunk is lz4-compressed and the `lz4` package is not installed (pip install lz4)")
    return _lz4


def compress(data: bytes, codec: int, level: int | None = None) -> bytes:
    """Compress a serialized chunk with ``codec`` (lz4 fast mode, zstd / zlib level 1 by default: on fixed-width
    columns zstd level 1 is both faster and smaller than level 3)."""
    if codec == CODEC_LZ4:  # a block with its uncompressed size as a little-endian uint32 prefix
        level = LZ4_LEVEL if level is None else level
        if level == 0:
            return _lz4_module().compress(data, mode="default", store_size=True)
        return _lz4_module().compress(data, mode="high_compression", compression=level,
                                      store_size=True)
    if codec == CODEC_ZLIB:
        return zlib.compress(data, 1 if level is None else level)
    if codec == CODEC_ZSTD:
        return _zstd().ZstdCompressor(level=1 if level is None else level, write_content_size=True).compress(data)
    return data


def _zstd_size(zstd: ModuleType, data: bytes, limit: int) -> int:
    """The content size a zstd frame declares, checked against ``limit`` before anything is allocated."""
    size = zstd.frame_content_size(data)
    if not 0 <= size <= limit:
        raise ValueError(f"zstd frame declares {size} bytes of content (limit {limit}; -1: undeclared)")
    return size


def decompress(data: bytes, codec: int, limit: int = MAX_DECOMPRESSED_BYTES) -> bytes:
    """Undo ``compress``. Raises ValueError (only) on an unknown codec, a bad stream, or output above ``limit``
    bytes; the output size is checked before it is allocated (zlib, which declares no size, is decompressed
    with ``limit`` as its maximum output)."""
    limit = min(int(limit), MAX_DECOMPRESSED_BYTES)
    if codec == CODEC_NONE:
        if len(data) > limit:
            raise ValueError(f"record of {len(data)} bytes is above the {limit}-byte limit")
        return bytes(data)
    if codec == CODEC_ZLIB:
        try:
            d = zlib.decompressobj()
            out = d.decompress(data, limit)
            if d.unconsumed_tail:
                raise ValueError(f"zlib stream decompresses to more than {limit} bytes (the limit)")
            if not d.eof:
                raise ValueError("zlib stream is incomplete")
        except zlib.error as e:
            raise ValueError(f"zlib stream is invalid: {e}") from None
        return out
    if codec == CODEC_ZSTD:
        zstd = _zstd()
        try:
            size = _zstd_size(zstd, data, limit)
            out = zstd.ZstdDecompressor().decompress(data, max_output_size=size)
        except zstd.ZstdError as e:
            raise ValueError(f"zstd stream is invalid: {e}") from None
        if len(out) != size:
            raise ValueError(f"zstd frame holds {len(out)} bytes, declared {size}")
        return out
    if codec == CODEC_LZ4:
        lz4 = _lz4_module()
        if len(data) < 4:
            raise ValueError("lz4 block is shorter than its 4-byte size prefix")
        size = int.from_bytes(bytes(data[:4]), "little")
        if size > limit or size > 255 * len(data) + 64:  # LZ4 cannot expand more than ~255x
            raise ValueError(f"lz4 block of {len(data)} bytes declares {size} decompressed bytes, more than "
                             f"LZ4 can produce or the {limit}-byte limit")
        try:
            return lz4.decompress(data)
        except lz4.LZ4BlockError as e:
            raise ValueError(f"lz4 block is invalid: {e}") from None
    raise ValueError(f"unknown codec {codec} (known: {sorted(CODECS.values())})")


def _lz4_prefix(data: bytes, n: int) -> bytes:
    """The first ``n`` bytes (fewer when the block is shorter) an LZ4 block (without its size prefix) decodes to,
    decoding only the sequences that produce them: each sequence yields at least one byte, so the work is bounded
    by ``n``, whatever the block expands to. ValueError on a malformed block."""
    out = bytearray()
    pos, end = 0, len(data)

    def length(base: int) -> int:
        nonlocal pos
        if base < 15:
            return base
        seg = data[pos:pos + (1 << 20)]
        run = len(seg) - len(seg.lstrip(b"\xff"))  # the 255-bytes, counted in C
        pos += run
        if pos >= end:
            raise ValueError("lz4 block is invalid: it ends inside a length")
        extra = data[pos]
        pos += 1
        return base + 255 * run + extra

    while len(out) < n:
        if pos >= end:
            break
        token = data[pos]
        pos += 1
        lit = length(token >> 4)
        out += data[pos:pos + min(lit, n)]
        pos += lit
        if pos >= end or len(out) >= n:
            break
        if pos + 2 > end:
            raise ValueError("lz4 block is invalid: it ends inside a match offset")
        offset = data[pos] | data[pos + 1] << 8
        pos += 2
        if offset == 0 or offset > len(out):
            raise ValueError("lz4 block is invalid: a match points before its start")
        match = length(token & 15) + 4
        start = len(out) - offset
        while match > 0 and len(out) < n:  # overlapping copies repeat the last `offset` bytes
            piece = bytes(out[start:start + min(match, offset, n - len(out))])
            out += piece
            start += len(piece)
            match -= len(piece)
    return bytes(out[:n])


def decompress_prefix(data: bytes, codec: int, n: int, limit: int = MAX_DECOMPRESSED_BYTES) -> bytes:
    """At least the first ``n`` decompressed bytes of ``data`` (all of them when shorter) without inflating the rest
    (an LZ4 block: only the sequences that produce them, after the block's declared size is checked against
    ``limit``). ValueError on a bad stream."""
    if codec == CODEC_NONE:
        return bytes(data[:n])
    if codec == CODEC_ZLIB:
        try:
            return zlib.decompressobj().decompress(data, n)
        except zlib.error as e:
            raise ValueError(f"zlib stream is invalid: {e}") from None
    if codec == CODEC_ZSTD:
        zstd = _zstd()
        try:
            _zstd_size(zstd, data, limit)
            with zstd.ZstdDecompressor().stream_reader(data) as r:
                return r.read(n)
        except zstd.ZstdError as e:
            raise ValueError(f"zstd stream is invalid: {e}") from None
    if codec == CODEC_LZ4:
        if len(data) < 4:
            raise ValueError("lz4 block is shorter than its 4-byte size prefix")
        size = int.from_bytes(bytes(data[:4]), "little")
        if size > min(int(limit), MAX_DECOMPRESSED_BYTES) or size > 255 * len(data) + 64:
            raise ValueError(f"lz4 block of {len(data)} bytes declares {size} decompressed bytes, more than "
                             f"LZ4 can produce or the {limit}-byte limit")
        return _lz4_prefix(bytes(data[4:]), min(n, size))
    return decompress(data, codec, limit)
