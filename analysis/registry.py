"""The registry of analyses: metadata only, one record per analysis (its documented columns with units and
human labels, its figure builder, the name of its ``Trace`` / ``TraceSet`` method).

An analysis module declares itself with :func:`register`::

    @register("hot_ops", columns=HOT_OPS_SPEC, figure="hot_ops_figure", index=Column("op", "", "Op"))
    def hot_ops(trace, by="op", top=None) -> pd.DataFrame: ...

The public API is written out, not generated: ``analysis/__init__.py`` imports each function by name and
:mod:`analysis.methods` holds the ``Trace`` / ``TraceSet`` methods; ``tests/analysis/test_facade.py`` checks
them against this registry. What the registry feeds: the figure index (``analysis.figures.FIGURES``), the
column labels and units views show, and the list the empty-trace tests run through. ``register`` also makes
calls on a trace memoised per trace (window) and arguments through :meth:`analysis.Trace.memo`, and every
call hands out a copy the caller owns.

Views (the explorer, the terminal report) render columns through :func:`column_label` / :func:`column_unit`
and summary metrics through their ``label`` and ``unit`` columns, never by showing identifiers.
"""
from __future__ import annotations

import functools
import inspect
from collections.abc import Callable, Iterable
from dataclasses import dataclass, field
from typing import Any, TypeVar, cast

__all__ = ["Column", "Analysis", "register", "REGISTRY", "call", "column_label",
           "column_unit", "columns_of"]


@dataclass(frozen=True)
class Column:
    """One documented column: ``name``, ``unit`` ("ns", "bytes", "FLOP", "FLOP/s", "bytes/s", "percent",
    "count", "FLOP/byte", "" for labels and flags), human ``label`` and a one-line ``description``."""

    name: str
    unit: str
    label: str
    description: str = ""


@dataclass(frozen=True)
class Analysis:
    """A registered analysis. ``subject``: "trace" (first argument a Trace; also accepted where noted: tables),
    "traces" (a TraceSet or an iterable of traces), "pair" (two traces). ``returns``: "frame", "frames" (a
    tuple of frames), "dict", "value". ``figure``: name of the builder in :mod:`analysis.figures`."""

    name: str
    func: Callable[..., Any]
    columns: tuple[Column, ...] = ()
    figure: str | None = None
    method: str | None = None
    subject: str = "trace"
    returns: str = "frame"
    memo: bool = True
    index: Column | None = None
    empty_ok: bool = True  # runs on a trace without device rows (the empty-trace tests call it)
    wrapper: Callable[..., Any] = field(default=None, compare=False, repr=False)  # type: ignore[assignment]

    @property
    def column_names(self) -> list[str]:
        return [c.name for c in self.columns]

    @property
    def doc(self) -> str:
        return inspect.getdoc(self.func) or ""


REGISTRY: dict[str, Analysis] = {}
_F = TypeVar("_F", bound=Callable[..., Any])


def is_trace(obj: Any) -> bool:
    """True for an :class:`analysis.Trace` (or anything shaped like one), False for a table."""
    return hasattr(obj, "memo") and hasattr(obj, "header") and hasattr(obj, "table")


def _freeze(v: Any) -> Any:
    if isinstance(v, (list, tuple)):
        return tuple(_freeze(x) for x in v)
    if isinstance(v, dict):
        return tuple(sorted((k, _freeze(x)) for k, x in v.items()))
    try:
        hash(v)
    except TypeError:
        return ("id", id(v))
    return v


def register(name: str | None = None, *, columns: Iterable[Column] = (), figure: str | None = None,
             method: str | None = "", subject: str = "trace", returns: str = "frame", memo: bool = True,
             index: Column | None = None, empty_ok: bool = True) -> Callable[[_F], _F]:
    """Declare an analysis (see the module doc). ``method``: the name of its ``Trace`` / ``TraceSet`` method
    in :mod:`analysis.methods` (``""``, the default: the analysis name; ``None``: no method). Returns the
    memoising wrapper, which replaces the function (with its signature, for type checkers and IDEs)."""

    def deco(func: _F) -> _F:
        n = name or func.__name__
        sig = inspect.signature(func)
        first = next(iter(sig.parameters))

        @functools.wraps(func)
        def wrapper(*args: Any, **kw: Any) -> Any:
            subj = args[0] if args else kw.get(first)
            if memo and subject == "trace" and is_trace(subj):
                bound = sig.bind(*args, **kw)
                bound.apply_defaults()
                key = ("analysis", n) + tuple((k, _freeze(v)) for k, v in bound.arguments.items() if k != first)
                return cast(Any, subj).memo(key, lambda: func(*args, **kw))
            return func(*args, **kw)

        spec = Analysis(n, func, tuple(columns), figure, n if method == "" else method, subject, returns, memo,
                        index, empty_ok, wrapper)
        REGISTRY[n] = spec
        wrapper.analysis = spec  # type: ignore[attr-defined]
        return cast(_F, wrapper)

    return deco


def call(name: str, *args: Any, **kw: Any) -> Any:
    """Run a registered analysis by name."""
    return REGISTRY[name].wrapper(*args, **kw)


def columns_of(name: str) -> tuple[Column, ...]:
    """The documented columns of an analysis (its index first, when it has one)."""
    s = REGISTRY[name]
    return ((s.index,) if s.index is not None else ()) + s.columns


def _find(col: str, analysis: str | None) -> Column | None:
    specs = [REGISTRY[analysis]] if analysis else list(REGISTRY.values())
    for s in specs:
        for c in ((s.index,) if s.index is not None else ()) + s.columns:
            if c.name == col:
                return c
    return None


def column_label(col: str, analysis: str | None = None) -> str:
    """Human label of a column (of ``analysis``, else the first analysis documenting it); the name, with
    underscores as spaces, when undocumented."""
    c = _find(col, analysis)
    return c.label if c is not None else col.replace("_", " ")


def column_unit(col: str, analysis: str | None = None) -> str:
    """Unit of a documented column ('' when unknown)."""
    c = _find(col, analysis)
    return c.unit if c is not None else ""
