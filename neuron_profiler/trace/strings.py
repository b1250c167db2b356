"""Interning of string columns (writer side) and their conversion to pandas Categoricals (reader side)."""
from __future__ import annotations

from array import array
from collections import defaultdict
from itertools import count, islice
from typing import Any

import numpy as np
import pandas as pd

#: up to this many values, a column of str is interned with one dict pass (same ids as through ``pd.factorize``):
#: pandas' call overhead dominates
_SMALL = 256
#: above ``_SMALL`` values, columns whose sampled strings average more characters than this are interned with the
#: dict pass too: ``pd.factorize`` hashes every value's characters (~17 ns + ~1 ns/char per value), the dict pass
#: costs ~30 ns per value (a str's hash is computed once and cached; the importer's names share one object per
#: distinct name). Measured on the real traces' columns: the dict pass 2.1x faster on bert_h100's host op names
#: (1,998 values of 34 characters), 1.7x slower on nccl_data's 23,158 args of 7 characters.
_LONG = 16
_SAMPLE = 16
#: the ``array`` type code of 4-byte unsigned ints ("I" is 4 bytes on every platform numpy supports; "L" otherwise)
_UINT32 = "I" if array("I").itemsize == 4 else "L"


class CodedStrings:
    """A string column given as ``codes`` (int64, one per row; -1: "") into ``values`` (distinct strings).

    What a producer that already knows its column's distinct strings (an importer's factorized categories) hands
    the builder or the writer instead of one str per row: interning it looks up each distinct string once, not
    every row. The ids are those of the expanded column when ``values`` are listed in order of first use in
    ``codes`` and all used (``pd.factorize`` order), as ``StringTable`` numbers new strings in that order."""

    __slots__ = ("codes", "values")

    def __init__(self, codes: np.ndarray, values: list[Any]) -> None:
        self.codes = codes
        self.values = values

    def __len__(self) -> int:
        return len(self.codes)

    def strings(self) -> np.ndarray:
        """The column as an object array of one python str per row ("" for code -1 and missing values)."""
        lookup = np.empty(len(self.values) + 1, dtype=object)
        lookup[:-1] = [_as_str(v) for v in self.values]
        lookup[-1] = ""
        return lookup[self.codes]


class StringTable:
    """Global string -> id map of one trace file. Id 0 is always ""."""

    def __init__(self) -> None:
        # a missing key gets the next id when looked up (``defaultdict`` calls a C counter, no Python frame), so
        # a column is interned in one C-level pass; ``values`` lists the keys in id order (len(ids) == len(values))
        self.ids: defaultdict[str, int] = defaultdict(count(1).__next__, {"": 0})
        self.values: list[str] = [""]
        self.flushed = 0  # strings [0, flushed) have been written to the file

    def intern(self, s: str) -> int:
        """Id of ``s``, adding it when new."""
        i = self.ids[s]
        if i == len(self.values):
            self.values.append(s)
        return i

    def intern_array(self, values: Any, n: int) -> np.ndarray:
        """Ids (uint32) for a scalar, a sequence of str/None, a pandas Categorical or ``CodedStrings`` of length
        ``n``."""
        if isinstance(values, str) or values is None:
            return np.full(n, self.intern(values or ""), dtype=np.uint32)
        if isinstance(values, pd.Series):
            values = values.array if isinstance(values.dtype, pd.CategoricalDtype) else values.to_numpy(object)
        if type(values) is CodedStrings:
            codes, cats = values.codes, values.values
        elif isinstance(values, pd.Categorical):
            codes = np.asarray(values.codes, dtype=np.int64)
            cats = values.categories
        else:
            if len(values) <= _SMALL or _long_strings(values):
                ids = self._intern_strs(values)
                if ids is not None:
                    return ids
            codes, cats = pd.factorize(np.asarray(values, dtype=object), use_na_sentinel=True)
        return self._lookup(cats)[codes]

    def _lookup(self, cats: Any) -> np.ndarray:
        """Ids (uint32) of distinct values ``cats`` (as ``_as_str`` makes them), then 0 for code -1 (missing)."""
        lookup = self._intern_strs(cats) if set(map(type, cats)) <= {str} else None
        if lookup is None:
            lookup = np.fromiter((self.intern(_as_str(c)) for c in cats), dtype=np.uint32, count=len(cats))
        return np.append(lookup, np.uint32(0))

    def _intern_strs(self, values: Any) -> np.ndarray | None:
        """Ids (uint32) of a sequence of str, new strings numbered in order of first appearance (as ``intern``
        one by one would) in one C-level pass; None (nothing interned) when it holds anything but str (None,
        NaN, numbers: the caller's ``pd.factorize`` path maps those)."""
        ids = self.ids
        if isinstance(values, np.ndarray):
            values = values.tolist()  # a list iterates ~2x faster than an object array
        known = len(ids)
        try:
            # (an ``array`` fills from an iterator at ~8 ns a value, ``np.fromiter`` at ~27: it packs each one
            # through numpy's generic scalar conversion; the array's buffer becomes the result, not copied)
            codes = np.frombuffer(array(_UINT32, map(ids.__getitem__, values)), dtype=np.uint32)
        except BaseException as e:  # unhashable values (TypeError), or interrupted: as if nothing was looked up
            self._forget(known)
            if isinstance(e, TypeError):
                return None
            raise
        if len(ids) > known:
            new = list(islice(reversed(ids.keys()), len(ids) - known))  # keys are kept in insertion order
            new.reverse()
            if not set(map(type, new)) <= {str}:  # (a str subclass too: the factorize path keeps it as given)
                self._forget(known)
                return None
            self.values.extend(new)
        return codes

    def _forget(self, known: int) -> None:
        """Drop the keys added after the first ``known`` ones (the last ones inserted) and number on from there."""
        ids = self.ids
        while len(ids) > known:
            ids.popitem()
        ids.default_factory = count(known).__next__

    def pending(self) -> list[str]:
        """Strings added since the last flush, marking them flushed."""
        out = self.values[self.flushed:]
        self.flushed = len(self.values)
        return out


def _long_strings(values: Any) -> bool:
    """Whether evenly spaced sample values of a long sequence are str averaging more than ``_LONG`` characters."""
    sample = values[:: max(1, len(values) // _SAMPLE)]
    try:
        return sum(map(len, sample)) > _LONG * len(sample)
    except TypeError:  # not all str (None, NaN, numbers)
        return False


def _as_str(v: Any) -> str:
    if v is None or (isinstance(v, float) and np.isnan(v)):
        return ""
    return v if isinstance(v, str) else str(v)


def categorical_from_ids(ids: np.ndarray, strings: np.ndarray) -> pd.Categorical:
    """Categorical over only the strings used by ``ids`` (ids index ``strings``; ``strings`` unique)."""
    if len(ids) == 0:
        return pd.Categorical([], categories=pd.Index([], dtype=object))
    used = np.bincount(ids) > 0  # only as long as the largest id: cheap for early-interned columns
    remap = (np.cumsum(used) - 1).astype(np.int32)
    cats = strings[: len(used)][used]
    return pd.Categorical.from_codes(remap[ids], categories=pd.Index(cats, dtype=object), validate=False)


def categorical_from_values(values: np.ndarray) -> pd.Categorical:
    """Categorical of python strings with object-dtype categories, like the reader's (sorted categories)."""
    codes, uniques = pd.factorize(values, sort=True)
    return pd.Categorical.from_codes(codes.astype(np.int32), categories=pd.Index(np.asarray(uniques, dtype=object),
                                                                                 dtype=object), validate=False)
