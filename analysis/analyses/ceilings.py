"""The ceilings of a group of device rows (an op, a module, ...): the highest compute peak its work could reach
and the most HBM traffic it could make per second, from the hardware table's peaks of the devices, cores,
dtypes and engines its rows ran on. ``hot_ops`` bounds its achieved rates by them; ``invariants`` checks them.
"""
from __future__ import annotations

import numpy as np
import pandas as pd

from ..core.categorical import as_cat, category_names
from ..core.devices import device_peaks
from .work import instruction_work


def group_bounds(trace, w: pd.DataFrame, codes: np.ndarray, k: int, row_kinds: tuple | None = None
                 ) -> tuple[np.ndarray, np.ndarray]:
    """Per group code: the highest compute peak its rows could reach and the most HBM traffic they could make
    per second (ceilings of their main device). The compute peak is that of the rows' own work: the matrix peak
    of their dtype for matmul-family rows, the engine's vector peak otherwise (:meth:`DevicePeaks.compute_peak`),
    the largest over the group's kinds of work, × the distinct cores they ran on. The HBM ceiling is
    :func:`hbm_ceiling`. ``row_kinds``: :func:`row_kinds` when ``w`` is the trace's ``instruction_work``."""
    peak, roof = np.full(k, np.nan), np.full(k, np.nan)
    if not len(w) or k == 0:
        return peak, roof
    by_dev, cores, kinds = _group_kinds(w, codes, k, row_kinds)
    main = by_dev.argmax(axis=1) - 1
    devices = (by_dev[:, 1:] > 0).sum(axis=1) + (by_dev[:, 0] > 0)  # unknown device (-1): one more at most
    for d in np.unique(main):
        p = device_peaks(trace, int(d))
        if p is None:
            continue
        sel = main == d
        roof[sel] = hbm_ceiling(p, cores[sel], devices[sel])
        mine = kinds[sel[kinds["g"].to_numpy()]]
        cache: dict = {}
        best = np.full(k, np.nan)
        for g, mm, dt, eng in mine.itertuples(index=False):
            key = (bool(mm), dt, eng)
            if key not in cache:
                cache[key] = p.compute_peak(bool(mm), dt, eng)
            best[g] = np.fmax(best[g], cache[key])
        peak[sel] = best[sel] * cores[sel]
    return peak, roof


def hbm_ceiling(p, cores: np.ndarray, devices: np.ndarray) -> np.ndarray:
    """The HBM bytes per second work on ``cores`` cores of ``devices`` devices of peaks ``p`` could reach: the
    devices' HBM bandwidth and, on Neuron (DMA bandwidth known), twice the cores' DMA bandwidth (all HBM traffic
    is DMA there, and a transfer within HBM reads and writes each byte). Not the per-core share of HBM
    (``memory_roof``, the roofline's): one busy core may draw more while the others idle (the eager GPT
    sample's ``aten::copy_``: 1.71 GB of HBM reads and writes in 4.37 ms, 390 GB/s against a 362.5 GB/s share).
    Falls back to ``memory_roof`` × cores when the device's HBM bandwidth is unknown; NaN: no bound."""
    cores = np.asarray(cores, dtype=float)
    hbm = p.hbm_device * np.asarray(devices, dtype=float) if np.isfinite(p.hbm_device) else p.memory_roof * cores
    if np.isfinite(p.dma_per_core):
        hbm = np.fmin(hbm, 2.0 * p.dma_per_core * cores)
    return hbm


#: rows per chunk of :func:`_group_kinds`' count
_CHUNK = 1 << 16


def _group_kinds(w: pd.DataFrame, codes: np.ndarray, k: int, row_kinds: tuple | None = None
                 ) -> tuple[np.ndarray, np.ndarray, pd.DataFrame]:
    """Per group code: its rows per device (k × devices + 1, column 0 the unknown device -1), its distinct cores,
    and its kinds of work (``g`` group, ``mm`` is_matmul, ``dt`` dtype, ``eng`` engine; a missing dtype or engine
    is NaN, as the strings of the column were), from one count per (group, row kind) (``row_kinds``: the
    :func:`_kinds_of_rows` of ``w``, computed when None)."""
    kind, table = _kinds_of_rows(w) if row_kinds is None else row_kinds
    a_n = len(table)
    if k * a_n <= max(len(codes), 1 << 16):  # a count per (group, kind): linear, chunk by chunk (no n-long key)
        cnt = np.zeros(max(k, int(codes.max()) + 1 if len(codes) else 0) * a_n, np.int64)
        for i in range(0, len(codes), _CHUNK):
            key = np.asarray(codes[i:i + _CHUNK], dtype=np.int64) * a_n
            key += kind[i:i + _CHUNK]
            np.add.at(cnt, key, 1)
        pairs = np.flatnonzero(cnt)
        n_rows = cnt[pairs]
    else:
        key = np.asarray(codes, dtype=np.int64) * a_n
        key += kind
        pairs, n_rows = np.unique(key, return_counts=True)
        del key
    g, a = pairs // a_n, pairs % a_n
    dev, core = table["dev"].to_numpy()[a], table["core"].to_numpy()[a]
    by_dev = np.zeros((k, int(table["dev"].max()) + 1), np.int64)
    np.add.at(by_dev, (g, dev), n_rows)
    seen = np.zeros((k, int(table["core"].max()) + 1), bool)
    seen[g, core] = True
    kinds = pd.DataFrame({"g": g, "mm": table["mm"].to_numpy()[a], "dt": table["dt"].to_numpy()[a],
                          "eng": table["eng"].to_numpy()[a]})
    return by_dev, seen.sum(axis=1), kinds


def row_kinds(trace) -> tuple[np.ndarray, pd.DataFrame]:
    """:func:`_kinds_of_rows` of the trace's ``instruction_work``, memoised (shared by every grouping)."""
    return trace.memo("work_row_kinds", lambda: _kinds_of_rows(instruction_work(trace)))


def _kinds_of_rows(w: pd.DataFrame) -> tuple[np.ndarray, pd.DataFrame]:
    """(kind code of each row of ``w``, the kinds: ``dev`` device + 1, ``core`` nc_idx + 1, ``mm`` is_matmul,
    ``dt`` dtype, ``eng`` engine): one int key per row from the columns and category codes (no per-row strings),
    the names looked up once per distinct key."""
    dt, eng = as_cat(w["dtype"]), as_cat(w["engine"])
    n_dt, n_eng = len(dt.cat.categories) + 1, len(eng.cat.categories) + 1
    core = w["nc_idx"].to_numpy() + 1
    nc = int(core.max()) + 1 if len(w) else 1
    key = w["device"].to_numpy() + 1  # ((((device + 1) * nc + core + 1) * 2 + mm) * n_dt + dtype + 1) * n_eng + ...
    for base, digit in ((nc, core), (2, w["is_matmul"].to_numpy()), (n_dt, dt.cat.codes.to_numpy() + 1),
                        (n_eng, eng.cat.codes.to_numpy() + 1)):
        key *= base
        key += digit
    top = int(key.max()) if len(key) else 0
    if top < max(4 * len(key), 1 << 16):  # the distinct keys by a count over their range, then a lookup
        u = np.flatnonzero(np.bincount(key, minlength=top + 1))
        lut = np.zeros(top + 1, np.int32)
        lut[u] = np.arange(len(u), dtype=np.int32)
        kind = lut[key]
    else:
        u, kind = np.unique(key, return_inverse=True)
    del key
    e_i, u = u % n_eng - 1, u // n_eng
    d_i, u = u % n_dt - 1, u // n_dt
    names = lambda c: np.append(category_names(c), np.nan)  # noqa: E731 (code -1, missing: the last)
    return kind, pd.DataFrame({"dev": u // 2 // nc, "core": u // 2 % nc, "mm": (u % 2).astype(bool),
                               "dt": names(dt)[d_i], "eng": names(eng)[e_i]})
