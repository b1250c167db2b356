"""Columnar protobuf encoding: many messages of one shape serialized at once with numpy.

A Perfetto trace holds about two packets per event; building each through the protobuf classes costs ~2.4 us
(400k packets/s at best, measured in ``bench/bench_export.py``), so 10M events would take close to a minute.
Here a batch of messages is described field by field as arrays (a presence mask per optional field) and written
with a few vectorised passes per field. Wire format as the protobuf spec defines it: a field is its key
(``number << 3 | wire type``, a varint) and its value: a varint, 8 little-endian bytes (fixed64, double), or a
varint length and the bytes of a submessage. Fields are written in the order they are added (callers add them
in field-number order, as protobuf serializers do). Tests compare the output with Perfetto's own classes.
"""
from __future__ import annotations

import numpy as np

_VARINT, _I64, _LEN = 0, 1, 2


_THRESHOLDS = np.array([1 << (7 * k) for k in range(1, 10)], dtype=np.uint64)


def varint_size(v: np.ndarray) -> np.ndarray:
    """Bytes of each value as a varint (uint64 view: negative int64 take 10 bytes)."""
    u = v.astype(np.uint64, copy=False)
    n = np.ones(len(u), dtype=np.int64)
    if not len(u):
        return n
    lo, hi = u.min(), u.max()
    for t in _THRESHOLDS:  # one comparison per byte some value needs; none where all need it
        if t > hi:
            break
        if t <= lo:
            n += 1
        else:
            n += u >= t
    return n


def _key(number: int, wire: int) -> np.ndarray:
    v, out = (number << 3) | wire, []
    while v > 0x7F:
        out.append(v & 0x7F | 0x80)
        v >>= 7
    out.append(v)
    return np.array(out, dtype=np.uint8)


def _put_bytes(out: np.ndarray, pos: np.ndarray, b: np.ndarray) -> None:
    for j, byte in enumerate(b.tolist()):
        out[pos + j] = byte


def _put_varint(out: np.ndarray, pos: np.ndarray, v: np.ndarray, size: np.ndarray) -> None:
    if not len(v):
        return
    u = v.astype(np.uint64, copy=False)
    lo, hi = int(size.min()), int(size.max())
    for k in range(hi):
        m = None if k + 1 < lo else size > k  # bytes every value has need no mask
        uk, at = (u, pos) if m is None else (u[m], pos[m])
        byte = ((uk >> np.uint64(7 * k)) & np.uint64(0x7F)).astype(np.uint8)
        if k + 1 < lo:
            byte |= np.uint8(0x80)
        elif k + 1 < hi:
            byte |= ((size[m] > k + 1).astype(np.uint8) << np.uint8(7))
        out[at + k] = byte


def _put_fixed64(out: np.ndarray, pos: np.ndarray, v: np.ndarray) -> None:
    b = np.ascontiguousarray(v).view(np.uint8).reshape(-1, 8)  # little-endian hosts (checked at import)
    for k in range(8):
        out[pos + k] = b[:, k]


assert np.little_endian, "protowire writes fixed64 fields from little-endian memory"


class Batch:
    """``n`` messages of one type, described field by field (in field-number order)."""

    def __init__(self, n: int) -> None:
        self.n = int(n)
        self._fields: list[tuple] = []
        self._sizes: np.ndarray | None = None

    def _mask(self, present: np.ndarray | None) -> np.ndarray:
        return np.ones(self.n, dtype=bool) if present is None else np.asarray(present, dtype=bool)

    def varint(self, number: int, values, present: np.ndarray | None = None) -> Batch:
        """A varint field (int32/int64/uint32/uint64/enum/bool); ``values`` an array or a scalar."""
        if np.ndim(values) == 0:
            v = np.full(self.n, np.asarray(values, dtype=np.int64).astype(np.uint64), dtype=np.uint64)
        else:
            v = np.asarray(values).astype(np.int64, copy=False).astype(np.uint64)
        self._fields.append(("varint", _key(number, _VARINT), (v, varint_size(v)), self._mask(present)))
        return self

    def double(self, number: int, values, present: np.ndarray | None = None) -> Batch:
        v = np.broadcast_to(np.asarray(values, dtype=np.float64), (self.n,)).astype("<f8")
        self._fields.append(("i64", _key(number, _I64), v, self._mask(present)))
        return self

    def repeated_fixed64(self, number: int, counts: np.ndarray, values: np.ndarray) -> Batch:
        """A repeated (unpacked) fixed64 field: message i holds ``counts[i]`` of the ``values``, in order."""
        counts = np.asarray(counts, dtype=np.int64)
        self._fields.append(("rep64", _key(number, _I64), (counts, np.asarray(values).astype("<u8")), counts > 0))
        return self

    def message(self, number: int, child: Batch, present: np.ndarray | None = None) -> Batch:
        """A submessage field; ``child`` describes the ``n`` submessages (those not present are skipped)."""
        assert child.n == self.n
        self._fields.append(("msg", _key(number, _LEN), child, self._mask(present)))
        return self

    def sizes(self) -> np.ndarray:
        """Serialized bytes of each message."""
        if self._sizes is None:
            total = np.zeros(self.n, dtype=np.int64)
            for kind, key, data, mask in self._fields:
                total += np.where(mask, self._field_size(kind, key, data), 0)
            self._sizes = total
        return self._sizes

    @staticmethod
    def _field_size(kind: str, key: np.ndarray, data) -> np.ndarray | int:
        if kind == "varint":
            return len(key) + data[1]
        if kind == "i64":
            return len(key) + 8
        if kind == "rep64":
            return data[0] * (len(key) + 8)
        inner = data.sizes()
        return len(key) + varint_size(inner) + inner

    def write(self, out: np.ndarray, pos: np.ndarray) -> None:
        """Write message i at ``out[pos[i]:]`` (``out`` a uint8 array large enough)."""
        cur = pos.astype(np.int64, copy=True)
        for kind, key, data, mask in self._fields:
            idx = np.nonzero(mask)[0]
            if not len(idx):
                continue
            if kind == "rep64":
                counts, values = data
                msg = np.repeat(np.arange(self.n), counts)
                starts = np.cumsum(counts) - counts
                local = np.arange(len(values)) - starts[msg]
                at = cur[msg] + local * (len(key) + 8)
                _put_bytes(out, at, key)
                _put_fixed64(out, at + len(key), values)
                cur += counts * (len(key) + 8)
                continue
            at = cur[idx]
            _put_bytes(out, at, key)
            at = at + len(key)
            if kind == "varint":
                size = data[1][idx]
                _put_varint(out, at, data[0][idx], size)
                cur[idx] = at + size
            elif kind == "i64":
                _put_fixed64(out, at, data[idx])
                cur[idx] = at + 8
            else:
                inner = data.sizes()[idx]
                size = varint_size(inner)
                _put_varint(out, at, inner, size)
                child_pos = np.zeros(self.n, dtype=np.int64)
                child_pos[idx] = at + size
                data.write_rows(out, child_pos, idx)
                cur[idx] = at + size + inner

    def write_rows(self, out: np.ndarray, pos: np.ndarray, rows: np.ndarray) -> None:
        """``write`` for messages ``rows`` only (``pos`` indexed by message)."""
        if len(rows) == self.n:
            self.write(out, pos)
            return
        sub = self.take(rows)
        sub.write(out, pos[rows])

    def take(self, rows: np.ndarray) -> Batch:
        """The messages ``rows`` as a batch of their own."""
        b = Batch(len(rows))
        for kind, key, data, mask in self._fields:
            if kind == "rep64":
                counts, values = data
                starts = np.cumsum(counts) - counts
                sel = np.concatenate([np.arange(starts[r], starts[r] + counts[r]) for r in rows]) if len(rows) \
                    else np.zeros(0, dtype=np.int64)
                b._fields.append((kind, key, (counts[rows], values[sel.astype(np.int64)]), mask[rows]))
            elif kind == "msg":
                b._fields.append((kind, key, data.take(rows), mask[rows]))
            elif kind == "varint":
                b._fields.append((kind, key, (data[0][rows], data[1][rows]), mask[rows]))
            else:
                b._fields.append((kind, key, data[rows], mask[rows]))
        return b

    def as_repeated(self, number: int) -> bytes:
        """The messages serialized as repeated field ``number`` of an enclosing message (e.g. ``Trace.packet``):
        key, length and bytes of each, concatenated."""
        outer = Batch(self.n).message(number, self)
        sizes = outer.sizes()
        out = np.zeros(int(sizes.sum()), dtype=np.uint8)
        outer.write(out, np.cumsum(sizes) - sizes)
        return out.tobytes()
