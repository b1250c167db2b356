"""The inputs of the reader fuzzer (``bench/fuzz_reader.py`` runs them): seeds and their mutations.

Seeds are small valid traces (each codec, several chunks per table, a partial file) plus the bad-file corpus of
``tests/data/bad_traces``. Each input is one seed with 1-3 mutations, some blind (byte and bit flips,
truncations, deleted, duplicated and spliced ranges), some aware of the layout so they get past the checksums to
the decoders: a frame field changed with its check byte recomputed, a chunk payload changed (decompressed,
mutated, recompressed, re-framed with a valid CRC), a chunk's first_row/rows set to boundary values, footer index
entries duplicated/removed/changed, header fields changed, whole frames removed, duplicated or swapped. Since issue
26 also: compressed runs (zeros, a repeated field; up to 32 MiB decompressed) as the payload of every record kind,
lone surrogates and other invalid UTF-8 in every string position (strings table, header and footer fields and map
keys), varints beyond int64 in every varint position.

Inputs are reproducible: input ``i`` of ``--seed s`` is rebuilt by ``make_input(seeds, s, i)``.
"""
from __future__ import annotations

import random
import struct
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))


from neuron_profiler.trace import framing  # noqa: E402
from schemas import pb  # noqa: E402

#: Payloads larger than this decompressed (the corpus's bombs) are not mutated structurally.
_MUTATE_LIMIT = 4 << 20
INTERESTING = [0, 1, 2, 127, 128, 255, 256, 1 << 16, 1 << 20, (1 << 22) - 1, 1 << 22, (1 << 22) + 1, (1 << 31) - 1,
               1 << 31, (1 << 32) - 1, 1 << 32, 1 << 62, (1 << 63) - 1, 1 << 63, (1 << 64) - 1]


# ---------------------------------------------------------------------------------------------- seeds
def make_seeds(folder: Path) -> list[bytes]:
    """Small valid traces written by this package (each codec, several chunks per table), a partial one, the
    bad-file corpus and a bundled sample."""
    from neuron_profiler.synthetic_trace import write_synthetic_trace
    from neuron_profiler.trace.builder import rewrite_trace

    folder.mkdir(parents=True, exist_ok=True)
    base = write_synthetic_trace(folder / "seed.nprof", 1500, chunk_rows=256, steps=2, n_dma=200)
    paths = [base]
    for codec in ("zstd", "zlib", "none"):
        paths.append(rewrite_trace(base, folder / f"seed_{codec}.nprof", compression=codec, chunk_rows=256))
    seeds = [p.read_bytes() for p in paths]
    full = seeds[0]
    seeds.append(full[: int.from_bytes(full[-16:-8], "little")])  # no footer: the scanning path
    for p in sorted((ROOT / "tests" / "data" / "bad_traces").glob("*.nprof")):
        if p.stat().st_size < 100_000:
            seeds.append(p.read_bytes())
    sample = ROOT / "sample_traces" / "cnn_inference.nprof"
    if sample.exists():
        seeds.append(sample.read_bytes())
    return seeds


def frames(data: bytes) -> list[tuple[int, int, int, int, int]]:
    """(offset, payload length, record type, codec, table id) of the well-formed frames from the start."""
    out, pos = [], len(framing.MAGIC)
    while pos + framing.FRAME.size <= len(data):
        length, rtype, codec, table, _, _ = framing.FRAME.unpack_from(data, pos)
        if rtype not in framing.RECORD_TYPES or pos + framing.FRAME.size + length > len(data):
            break
        out.append((pos, length, rtype, codec, table))
        pos += framing.FRAME.size + length
    return out


def reframe(rtype: int, payload: bytes, codec: int, table: int) -> bytes:
    return framing.encode_frame(rtype, payload, codec, table)


# ---------------------------------------------------------------------------------------------- mutations
def _flip(rng: random.Random, data: bytearray, seeds: list[bytes]) -> None:
    if data:
        data[rng.randrange(len(data))] ^= rng.randrange(1, 256)


def _bits(rng, data, seeds) -> None:
    for _ in range(rng.randint(1, 8)):
        if data:
            data[rng.randrange(len(data))] ^= 1 << rng.randrange(8)


def _truncate(rng, data, seeds) -> None:
    del data[rng.randrange(len(data) + 1):]


def _delete(rng, data, seeds) -> None:
    a = rng.randrange(len(data) + 1)
    del data[a:a + rng.randint(1, 512)]


def _duplicate(rng, data, seeds) -> None:
    a = rng.randrange(len(data) + 1)
    chunk = data[a:a + rng.randint(1, 2048)]
    b = rng.randrange(len(data) + 1)
    data[b:b] = chunk


def _splice(rng, data, seeds) -> None:
    other = rng.choice(seeds)
    a = rng.randrange(len(other) + 1)
    b = rng.randrange(len(data) + 1)
    data[b:b + rng.randint(0, 256)] = other[a:a + rng.randint(1, 4096)]


def _frame_field(rng, data, seeds) -> None:
    """Change one field of a frame to a boundary or random value and recompute its check byte (and sometimes its
    payload CRC), so the reader's validation behind the checksums is exercised."""
    fr = frames(bytes(data))
    if not fr:
        return
    pos, length, rtype, codec, table = rng.choice(fr)
    field = rng.randrange(4)
    v = rng.choice(INTERESTING + [rng.randrange(1 << 32)])
    vals = [length, rtype, codec, table]
    vals[field] = v & (0xFFFFFFFF if field == 0 else 0xFF)
    check = framing.frame_check(*vals)
    crc = struct.unpack_from("<I", data, pos + 8)[0]
    data[pos:pos + framing.FRAME.size] = framing.FRAME.pack(*vals, check, crc)


def _payload(rng, data, seeds) -> None:
    """Decompress a chunk, footer or header payload, mutate it, recompress (same or another codec) and re-frame
    it with a valid check byte and CRC."""
    fr = frames(bytes(data))
    if not fr:
        return
    pos, length, rtype, codec, table = rng.choice(fr)
    raw = bytes(data[pos + framing.FRAME.size: pos + framing.FRAME.size + length])
    try:
        plain = bytearray(framing.decompress(raw, codec, _MUTATE_LIMIT))
    except ValueError:
        return
    for _ in range(rng.randint(1, 4)):
        rng.choice([_flip, _bits, _truncate, _delete, _duplicate, _varint, _surrogates, _bignum])(rng, plain, seeds)
    new_codec = codec if rng.random() < 0.7 else rng.choice(list(framing.CODECS.values()))
    try:
        payload = framing.compress(bytes(plain), new_codec)
    except Exception:  # noqa: BLE001 - e.g. an LZ4 block of 0 bytes
        return
    data[pos:pos + framing.FRAME.size + length] = reframe(rtype, payload, new_codec, table)


def _varint(rng, plain: bytearray, seeds) -> None:
    """Overwrite the value of a varint field near the start (a chunk's first_row / rows) with a boundary value."""
    if len(plain) < 2:
        return
    key = rng.choice([0x08, 0x10])  # Chunk.first_row, Chunk.rows
    v = rng.choice(INTERESTING)
    enc = bytearray()
    while v > 0x7F:
        enc.append(v & 0x7F | 0x80)
        v >>= 7
    enc.append(v)
    at = plain.find(bytes([key]))
    if at < 0 or at > 16:
        plain[0:0] = bytes([key]) + enc
        return
    end = at + 1
    while end < len(plain) and plain[end] & 0x80:
        end += 1
    plain[at + 1:end + 1] = enc


def _footer(rng, data, seeds) -> None:
    """Rewrite the footer index (entries duplicated, removed, reordered or changed; row counts changed) with a valid
    CRC and trailer."""
    fr = [f for f in frames(bytes(data)) if f[2] == framing.FOOTER]
    if not fr:
        return
    pos, length, _, codec, _ = fr[-1]
    try:
        ft = pb.Footer.FromString(framing.decompress(bytes(data[pos + 12:pos + 12 + length]), codec, _MUTATE_LIMIT))
    except Exception:  # noqa: BLE001
        return
    entries = list(ft.chunks)
    op = rng.randrange(6)
    if op == 0 and entries:
        entries.insert(rng.randrange(len(entries) + 1), rng.choice(entries))
    elif op == 1 and entries:
        entries.pop(rng.randrange(len(entries)))
    elif op == 2:
        rng.shuffle(entries)
    elif op == 3 and entries:
        e = rng.choice(entries)
        name = rng.choice(["table_id", "offset", "length", "first_row", "rows", "min_ts", "max_end_ts"])
        lim = {"table_id": 1 << 32, "rows": 1 << 32, "min_ts": 1 << 63, "max_end_ts": 1 << 63}.get(name, 1 << 64)
        setattr(e, name, rng.choice(INTERESTING) % lim)
    elif op == 4 and ft.table_rows:
        k = rng.choice(list(ft.table_rows))
        ft.table_rows[k] = rng.choice(INTERESTING)
    else:
        ft.min_ts, ft.max_ts = rng.randrange(-(1 << 63), 1 << 63), rng.randrange(-(1 << 63), 1 << 63)
    del ft.chunks[:]
    ft.chunks.extend(entries)
    new = reframe(framing.FOOTER, ft.SerializeToString(), framing.CODEC_NONE, 0)
    data[pos:] = new + framing.TRAILER.pack(pos, framing.END_MAGIC)


def _header(rng, data, seeds) -> None:
    fr = frames(bytes(data))
    if not fr or fr[0][2] != framing.HEADER:
        return
    pos, length, _, codec, _ = fr[0]
    try:
        h = pb.Header.FromString(framing.decompress(bytes(data[pos + 12:pos + 12 + length]), codec, _MUTATE_LIMIT))
    except Exception:  # noqa: BLE001
        return
    name = rng.choice(["format_major", "format_minor", "rank", "world_size", "window_index"])
    h_v = rng.choice([0, 1, 2, 3, 255, (1 << 31) - 1, (1 << 32) - 1])
    try:
        setattr(h, name, h_v if name not in ("rank", "world_size") else h_v % (1 << 31))
    except ValueError:
        return
    data[pos:pos + 12 + length] = reframe(framing.HEADER, h.SerializeToString(), framing.CODEC_NONE, 0)


def _frames_move(rng, data, seeds) -> None:
    """Remove, duplicate or swap whole frames (a chunk lost, written twice, out of order)."""
    fr = [f for f in frames(bytes(data)) if f[2] == framing.CHUNK]
    if len(fr) < 2:
        return
    (a, la, *_), (b, lb, *_) = sorted(rng.sample(fr, 2))
    fa, fb = bytes(data[a:a + 12 + la]), bytes(data[b:b + 12 + lb])
    op = rng.randrange(3)
    if op == 0:
        del data[a:a + 12 + la]
    elif op == 1:
        data[b:b] = fa
    else:
        data[b:b + 12 + lb] = fa
        data[a:a + 12 + la] = fb


#: Decompressed sizes of the compressed runs ``_runs`` writes: up to 32 MiB (within the 10x + 128 MB bound of the
#: small seeds only because the reader never holds more than a chunk's declared bound).
_RUN_SIZES = [1 << 10, 1 << 16, 1 << 20, 8 << 20, 32 << 20]
#: Runs that compress to almost nothing: zeros (field 0), a repeated varint field (first_row / rows), a repeated
#: empty length-delimited field.
_RUN_PATTERNS = [b"\0", b"\x08\x00", b"\x10\x01", b"\x0a\x00", b"\x08\xff\xff\xff\xff\x0f"]


def _runs(rng, data, seeds) -> None:
    """Replace the payload of one record of any kind (the header, a chunk of any table, strings included, the footer)
    by a compressed run (zeros or a repeated field, up to 32 MiB decompressed), validly framed: the decoders see
    it. Found the reader hang of issue 26 (a strings chunk of zeros walked 2 bytes per Python iteration)."""
    fr = frames(bytes(data))
    if not fr:
        return
    pos, length, rtype, codec, table = rng.choice(fr)
    pattern = rng.choice(_RUN_PATTERNS)
    size = rng.choice(_RUN_SIZES)
    plain = pattern * (size // len(pattern))
    if rng.random() < 0.5:  # a valid head, then the run: past the row-range checks
        plain = bytes([0x08, 0x00, 0x10, rng.choice([1, 100, 127])]) + plain
    new_codec = rng.choice([framing.CODEC_LZ4, framing.CODEC_LZ4, framing.CODEC_ZSTD, framing.CODEC_ZLIB])
    data[pos:pos + framing.FRAME.size + length] = reframe(rtype, framing.compress(plain, new_codec), new_codec, table)


#: Encodings of lone surrogates and other invalid UTF-8, each the same length as what it replaces where possible.
_BAD_UTF8 = [b"\xed\xa0\x80", b"\xed\xbf\xbf", b"\xed\xb2\x80", b"\xc0\xaf", b"\xff", b"\xf4\x90\x80\x80"]


def _surrogates(rng, plain: bytearray, seeds) -> None:
    """Overwrite printable bytes of a decompressed payload (a string of the strings table, a header or footer string
    field or map key) in place with a lone surrogate's bytes (or other invalid UTF-8): lengths stay valid, so
    the protobuf parser meets the bad string."""
    starts = [i for i in range(len(plain) - 4) if 0x20 <= plain[i] < 0x7F and 0x20 <= plain[i + 1] < 0x7F]
    if not starts:
        return
    for _ in range(rng.randint(1, 3)):
        i = rng.choice(starts)
        bad = rng.choice(_BAD_UTF8)
        plain[i:i + len(bad)] = bad


#: Varints of values no int64 holds, and an overlong one (11 bytes).
_BIG_VARINTS = [bytes([0xFF] * 9 + [0x01]), bytes([0x80] * 9 + [0x01]), bytes([0xFF] * 10 + [0x01]),
                bytes([0xFF] * 8 + [0x7F])]


def _bignum(rng, plain: bytearray, seeds) -> None:
    """Replace the value of a varint field (a key byte with wire type 0, anywhere in the payload: chunk head, header
    ranks / versions / times, footer counts and index) by a number beyond int64 (2^63, 2^64 - 1, overlong)."""
    keys = [i for i in range(len(plain) - 1) if plain[i] & 7 == 0 and 0 < plain[i] >> 3 < 16]
    if not keys:
        return
    i = rng.choice(keys)
    end = i + 1
    while end < len(plain) and plain[end] & 0x80:
        end += 1
    plain[i + 1:end + 1] = rng.choice(_BIG_VARINTS)


MUTATIONS = [(_flip, 3), (_bits, 2), (_truncate, 2), (_delete, 1), (_duplicate, 1), (_splice, 1), (_frame_field, 3),
             (_payload, 4), (_footer, 3), (_header, 1), (_frames_move, 2), (_runs, 2)]
_FUNCS = [f for f, w in MUTATIONS for _ in range(w)]


def make_input(seeds: list[bytes], seed: int, i: int) -> bytes:
    """Input ``i`` of a run with ``seed``: a seed with 1-3 mutations (deterministic)."""
    rng = random.Random(seed * 1_000_003 + i)
    data = bytearray(rng.choice(seeds))
    for _ in range(rng.choice([1, 1, 2, 3])):
        rng.choice(_FUNCS)(rng, data, seeds)
    return bytes(data)
