"""Units of Explorer fields that are not ns or bytes (bandwidths, throughputs): the profile's own
``SchemaFields.field_unit`` when present (the schema is self-describing), else inferred from the data."""
from __future__ import annotations

import re

import numpy as np
import pandas as pd

_RATE = re.compile(r"^\s*(?P<prefix>[kKMGT]i?)?(?P<base>B|bytes?|b|bits?)\s*(?:/|per\s*)\s*"
                   r"(?P<t>s|sec|second|ns|us|ms)\s*$")
_PREFIX = {None: 1.0, "k": 1e3, "K": 1e3, "M": 1e6, "G": 1e9, "T": 1e12,
           "Ki": 2.0**10, "Mi": 2.0**20, "Gi": 2.0**30, "Ti": 2.0**40, "ki": 2.0**10}
_TIME = {"s": 1.0, "sec": 1.0, "second": 1.0, "ms": 1e3, "us": 1e6, "ns": 1e9}
#: candidate units when none is stated: scale to bytes/s
_CANDIDATES = {"bytes/s": 1.0, "KB/s": 1e3, "MB/s": 1e6, "GB/s": 1e9, "GiB/s": 2.0**30, "bytes/ns": 1e9,
               "bytes/us": 1e6}


class SchemaUnits:
    """(table, field) -> unit string from a ``SchemaFields`` table (empty when the profile has none)."""

    def __init__(self, schema_fields: pd.DataFrame | None) -> None:
        self._u: dict[tuple[str, str], str] = {}
        if schema_fields is not None and {"table_name", "field_name", "field_unit"} <= set(schema_fields.columns):
            for t, f, u in zip(schema_fields["table_name"], schema_fields["field_name"], schema_fields["field_unit"]):
                if isinstance(u, str) and u.strip():
                    self._u[(str(t), str(f))] = u.strip()

    def unit(self, table: str, field: str) -> str | None:
        return self._u.get((table, field))


def rate_scale(unit: str) -> float | None:
    """Multiplier from ``unit`` (e.g. "GB/s", "bytes/s", "MiB/s", "Gbit/s") to bytes/s, or None."""
    m = _RATE.match(unit or "")
    if not m:
        return None
    scale = _PREFIX.get(m.group("prefix"), None)
    if scale is None:
        return None
    if m.group("base").startswith("b") and m.group("base") != "bytes" and m.group("base") != "byte":
        scale /= 8.0  # bits
    return scale * _TIME[m.group("t")]


def bandwidth(units: SchemaUnits, df: pd.DataFrame, table: str, field: str,
              ours: np.ndarray) -> tuple[np.ndarray, str]:
    """Explorer's ``field`` in bytes/s, and a note for the header ("" when the unit was stated).

    With ``SchemaFields.field_unit``: converted. Without: the unit among bytes/s, KB/s, MB/s, GB/s, GiB/s,
    bytes/ns, bytes/us whose conversion is closest (median ratio, log scale) to ``ours`` (the same bandwidth
    recomputed from sizes and durations) is assumed, when it is within a factor of 2; otherwise (or when the
    field is absent) ``ours`` is used."""
    if field not in df.columns:
        return ours, ""
    raw = pd.to_numeric(df[field], errors="coerce").to_numpy(np.float64)
    stated = units.unit(table, field)
    if stated:
        scale = rate_scale(stated)
        if scale is not None:
            return np.where(np.isfinite(raw), raw * scale, ours), ""
        return ours, f"{table}.{field}: unit {stated!r} not understood; recomputed from sizes and durations"
    ok = np.isfinite(raw) & (raw > 0) & (ours > 0)
    if not ok.any():
        return ours, f"{table}.{field}: no unit stated (no SchemaFields table); recomputed from sizes and durations"
    ratio = float(np.median(np.log10(ours[ok] / raw[ok])))
    name, scale = min(_CANDIDATES.items(), key=lambda kv: abs(np.log10(kv[1]) - ratio))
    if abs(np.log10(scale) - ratio) > np.log10(2):
        return ours, (f"{table}.{field}: no unit stated and no unit matches the sizes and durations; "
                      f"recomputed from them")
    return np.where(np.isfinite(raw), raw * scale, ours), \
        f"{table}.{field}: no unit stated (no SchemaFields table); {name} inferred from sizes and durations"
