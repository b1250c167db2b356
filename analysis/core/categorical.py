"""Categorical string columns: work on the (few) categories and the integer codes, never on millions of
Python strings. The reader stores every string column as a Categorical; these helpers keep it that way."""
from __future__ import annotations

from collections.abc import Callable, Iterable

import numpy as np
import pandas as pd

__all__ = ["as_cat", "empty_cat", "column", "categorical", "category_names", "per_category", "cat_values",
           "cat_where", "cat_map", "cat_pick", "concat_categoricals", "code_dtype"]


def as_cat(s: pd.Series) -> pd.Series:
    """``s`` as a Categorical Series (unchanged when it already is one)."""
    return s if isinstance(s.dtype, pd.CategoricalDtype) else s.astype("category")


def empty_cat(n: int, index: pd.Index | None = None) -> pd.Series:
    """n rows of '' as a Categorical Series (no n-long Python list)."""
    return pd.Series(pd.Categorical.from_codes(np.zeros(n, dtype=np.int8), [""]), index=index)


def column(df: pd.DataFrame, name: str, default: object = "") -> pd.Series:
    """``df[name]``, or a Series of ``default`` (same index) when the column is absent."""
    return df[name] if name in df.columns else pd.Series(default, index=df.index)


def categorical(df: pd.DataFrame, col: str) -> pd.Categorical:
    """Column ``col`` as a Categorical ("" for every row when absent); object columns are factorised once."""
    if col not in df.columns:
        return pd.Categorical.from_codes(np.zeros(len(df), dtype=np.int8), [""])
    s = df[col]
    return s.array if isinstance(s.dtype, pd.CategoricalDtype) else pd.Categorical(s.astype(object))


def category_names(cat: pd.Categorical | pd.Series) -> np.ndarray:
    """The categories as an object array of str."""
    c = cat.cat.categories if isinstance(cat, pd.Series) else cat.categories
    return np.asarray(c.astype(str), dtype=object)


def per_category(cat: pd.Categorical, per_cat: np.ndarray, missing: object) -> np.ndarray:
    """Row values looked up by category code (``per_cat[i]`` for category i, ``missing`` for NaN)."""
    vals = np.asarray(per_cat)
    return np.append(vals, np.asarray([missing], dtype=vals.dtype if len(vals) else None))[np.asarray(cat.codes)]


def cat_values(s: pd.Series, values: Iterable[str]) -> np.ndarray:
    """Boolean mask: rows of a string column whose value is in ``values``."""
    s = as_cat(s)
    hit = np.append(np.isin(category_names(s), list(values)), False)
    return hit[s.cat.codes.to_numpy()]


def cat_where(s: pd.Series, pred: Callable[[str], bool]) -> np.ndarray:
    """Boolean mask: rows whose string value satisfies ``pred(str) -> bool`` (evaluated per category)."""
    s = as_cat(s)
    hit = np.append(np.array([bool(pred(c)) for c in category_names(s)], dtype=bool), False)
    return hit[s.cat.codes.to_numpy()]


def cat_map(s: pd.Series, fn: Callable[[str], str]) -> pd.Series:
    """Categorical ``fn(value)`` per row, computed once per category (missing -> fn(''))."""
    s = as_cat(s)
    mapped = [fn(c) for c in category_names(s)] + [fn("")]
    codes, uniq = pd.factorize(pd.Index(mapped, dtype=object))
    lut = codes.astype(code_dtype(len(uniq)))  # the codes dtype of the result: no n-long int64 codes
    return pd.Series(pd.Categorical.from_codes(lut[s.cat.codes.to_numpy()], uniq.astype(str)), index=s.index)


def code_dtype(n_categories: int) -> type:
    """The codes dtype pandas gives a Categorical of ``n_categories`` (its ``coerce_indexer_dtype``): codes
    built in it are taken as they are, not converted."""
    for dt in (np.int8, np.int16, np.int32):
        if n_categories < np.iinfo(dt).max:
            return dt
    return np.int64


def cat_pick(primary: pd.Series, pos: np.ndarray | None, fallback: pd.Series,
             use_primary: np.ndarray | None) -> pd.Categorical:
    """Categorical: ``primary.iloc[pos]`` where ``use_primary`` (and non-empty), else ``fallback`` (row-aligned).
    ``pos`` None: primary is row-aligned too; ``use_primary`` None: everywhere. The codes of the result are
    written once in the codes dtype pandas keeps, ``primary``'s looked up per primary row, then gathered."""
    p, f = as_cat(primary), as_cat(fallback)
    pc, fc = p.cat.categories.astype(str), f.cat.categories.astype(str)
    cats = pd.Index(pc).append(pd.Index(fc)).unique()
    dt = code_dtype(len(cats))
    empty_code = cats.get_indexer([""])[0]
    pmap: np.ndarray = np.append(cats.get_indexer(pc), -1).astype(dt)
    pmap[pmap == empty_code] = -1  # an empty primary value falls back too
    fmap: np.ndarray = np.append(cats.get_indexer(fc), -1).astype(dt)
    pcodes = p.cat.codes.to_numpy()
    codes = fmap[f.cat.codes.to_numpy()]
    if len(pcodes):
        if pos is None:
            take = pmap[pcodes]
        else:
            lut = pmap[pcodes]  # the result code of each primary row
            if use_primary is None or not len(pos) or (int(pos.min()) >= -1 and int(pos.max()) < len(pcodes)):
                take = lut[pos]  # -1 (absent) indexes the last row: masked out by use_primary below
            else:
                take = lut[np.where(use_primary, pos, 0)]
        ok = take >= 0
        if use_primary is not None:
            ok &= use_primary
        np.copyto(codes, take, where=ok)
    return pd.Categorical.from_codes(codes, cats, validate=False)


def concat_categoricals(parts: list[pd.Categorical]) -> pd.Categorical:
    """Concatenate Categoricals on their codes (categories unioned as plain strings)."""
    if len(parts) == 1:
        return parts[0]
    cats = pd.Index(np.concatenate([category_names(p) for p in parts]), dtype=object).unique()
    codes = [np.append(cats.get_indexer(category_names(p)), -1)[np.asarray(p.codes)] for p in parts]
    return pd.Categorical.from_codes(np.concatenate(codes), cats, validate=False)
