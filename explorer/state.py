"""Shareable URL state: page in the path, everything else in the query string.

``/timeline?trace=run%2Frank00000_window000.nprof&rank=0&t0=1000&t1=50000&sel=instructions%3A42&q=mm&color=op``
Times ``t0`` / ``t1`` are ns relative to the trace start. ``rows=3.0.1`` lists the shown timeline row groups
by their position in the default order (collapsed groups left out); ``pick=5`` highlights the instructions
of row 5 of ``analysis.roofline`` (a roofline point); ``roof_color``, ``engines`` and ``bounds`` (repeated
keys) are the roofline page's colouring and filters. Unknown or malformed values fall back to the
defaults (the URL is user input: nothing in it is evaluated; the trace key is checked by the store).
"""
from __future__ import annotations

import math
import re
from dataclasses import asdict, dataclass, field, replace
from urllib.parse import parse_qs, urlencode

PAGES = ("summary", "timeline", "roofline", "hot_ops", "dma", "memory", "collectives", "compare", "query")
PAGE_TITLES = {"summary": "Summary", "timeline": "Timeline", "roofline": "Roofline", "hot_ops": "Hot ops",
               "dma": "DMA", "memory": "Memory", "collectives": "Collectives", "compare": "Compare", "query": "SQL"}
DIFF_KEYS = ("op", "module", "shape")
SEL_TABLES = ("instructions", "dma", "collectives", "host_ops", "hierarchy")  # hierarchy: a module span
COLOR_MODES = ("op", "engine", "module")
ROOF_COLORS = ("bound", "engine")
_MAX_LEN = 1024
_MAX_SQL = 4000
_URL_NAMES = {"notes": "note", "regions": "region"}  # repeated keys named in the singular
_MAX_ITEMS = 256


@dataclass(frozen=True)
class ViewState:
    """What a URL encodes. ``sel`` = (table, row id) of the selected event."""

    page: str = "summary"
    trace: str | None = None
    rank: int | None = None
    t0: int | None = None
    t1: int | None = None
    sel: tuple[str, int] | None = None
    q: str = ""
    color: str = "op"
    other: str | None = None  # second trace of the Compare page
    rows: tuple[int, ...] | None = None  # timeline row groups shown, by default position (None = all)
    pick: int | None = None  # roofline point (row of analysis.roofline) whose instructions are highlighted
    roof_color: str = "bound"
    engines: tuple[str, ...] | None = None  # roofline filters (None = all)
    bounds: tuple[str, ...] | None = None
    notes: tuple[str, ...] | None = None  # timeline notes "T0,T1,TEXT" (explorer.notes)
    regions: tuple[str, ...] | None = None  # Summary regions shown side by side (explorer.regions keys)
    keys: tuple[str, ...] | None = None  # Compare alignment keys (analysis.diff keys)
    sql: str = ""  # the Query page's SQL
    #: what ``decode`` found wrong in the URL and ignored (shown above the page); never encoded
    problems: tuple[str, ...] = field(default=(), compare=False)

    def with_(self, **kw) -> ViewState:
        return replace(self, **kw)

    def href(self, **kw) -> str:
        """``pathname?search`` of this state with ``kw`` replaced."""
        return encode(self.with_(**kw) if kw else self)


#: Integers in URLs (ns times, row ids, ranks, picks) stay within this (int64 arithmetic on them cannot overflow).
INT_LIMIT = 1 << 62
_INT_RE = re.compile(r"[+-]?[0-9]{1,19}")
_FLOAT_RE = re.compile(r"[+-]?([0-9]+\.?[0-9]*|\.[0-9]+)([eE][+-]?[0-9]+)?")


def parse_int(v: str | None, name: str, lo: int = -INT_LIMIT, hi: int = INT_LIMIT) -> int | None:
    """``v`` as an integer in [lo, hi], None when absent or blank; ``ValueError`` saying what is wrong otherwise
    (``inf``, ``1e400``, ``nan``, text, a number out of range). A decimal integer, or a finite number written
    as a float (``1e3``, ``2.5``: its integer part), checked against the range before it is used: ``1e20`` is no
    int64, ``int(float('inf'))`` raises OverflowError."""
    if v is None or not v.strip():
        return None
    text = v.strip()
    if _INT_RE.fullmatch(text):
        i = int(text)
    else:
        try:
            f = float(text) if len(text) <= 32 and _FLOAT_RE.fullmatch(text) else math.nan
        except ValueError:
            f = math.nan
        if not math.isfinite(f):
            raise ValueError(f"{name}={_show(v)} is not a finite number")
        if not lo <= f <= hi:
            raise ValueError(f"{name}={_show(v)} is out of range ({lo:,} to {hi:,})")
        i = int(f)
    if not lo <= i <= hi:
        raise ValueError(f"{name}={_show(v)} is out of range ({lo:,} to {hi:,})")
    return i


def _show(v: str) -> str:
    return repr(v if len(v) <= 40 else v[:40] + "...")


def _int(v: str | None) -> int | None:
    """``parse_int`` with anything invalid as None."""
    try:
        return parse_int(v, "value")
    except ValueError:
        return None


def _str(v: str | None) -> str | None:
    if v is None or not v or len(v) > _MAX_LEN or "\x00" in v:
        return None
    return v


def encode(state: ViewState) -> str:
    """``/page?query`` (defaults omitted)."""
    d = asdict(state)
    page = d.pop("page")
    d.pop("problems")
    q: dict[str, str | list[str]] = {}
    default = asdict(ViewState())
    for k, v in d.items():
        if v is None or v == default[k]:
            continue
        if k == "sel":
            v = f"{v[0]}:{int(v[1])}"
        elif k == "rows":
            v = ".".join(str(int(i)) for i in v)
        q[_URL_NAMES.get(k, k)] = [str(x) for x in v] if isinstance(v, (tuple, list)) else str(v)
    search = urlencode(q, doseq=True)
    return f"/{page}" + (f"?{search}" if search else "")


def decode(pathname: str | None, search: str | None) -> ViewState:
    """Inverse of :func:`encode`; anything invalid becomes its default."""
    page = (pathname or "/").strip("/").split("/")[-1] or "summary"
    if page not in PAGES:
        page = "summary"
    raw = parse_qs((search or "").lstrip("?")[: 16 * _MAX_LEN], keep_blank_values=False)
    get = lambda k: raw.get(k, [None])[0]  # noqa: E731
    problems: list[str] = []

    def num(key: str, lo: int = -INT_LIMIT, hi: int = INT_LIMIT, v: str | None = None) -> int | None:
        try:
            return parse_int(get(key) if v is None else v, key, lo, hi)
        except ValueError as exc:
            problems.append(str(exc))
            return None

    sel = None
    s = get("sel")
    if s:
        tab, _, row = s.partition(":")
        r = num("sel", 0, INT_LIMIT, row) if tab in SEL_TABLES else None
        if tab not in SEL_TABLES:
            problems.append(f"sel={_show(s)} is not TABLE:ROW with TABLE one of {', '.join(SEL_TABLES)}")
        elif r is not None:
            sel = (tab, r)
    t0, t1 = num("t0"), num("t1")
    if t0 is not None and t1 is not None and t1 <= t0:
        problems.append(f"t1={t1} is not after t0={t0}: the whole trace is shown")
        t0 = t1 = None
    color = get("color") if get("color") in COLOR_MODES else "op"
    q = (get("q") or "")[:200]
    rows = None
    r = _str(get("rows"))
    if r:
        ints = [_int(x) for x in r.split(".")[:_MAX_ITEMS]]
        rows = tuple(dict.fromkeys(i for i in ints if i is not None and i >= 0)) or None
    pick = num("pick", 0, INT_LIMIT)
    return ViewState(page=page, trace=_str(get("trace")), rank=num("rank", 0, (1 << 31) - 1), t0=t0, t1=t1,
                     sel=sel, q=q, color=color, other=_str(get("other")), rows=rows, pick=pick,
                     roof_color=get("roof_color") if get("roof_color") in ROOF_COLORS else "bound",
                     engines=_strs(raw.get("engines")), bounds=_strs(raw.get("bounds")),
                     notes=_strs(raw.get("note")), regions=_strs((raw.get("region") or [])[:3]),
                     keys=tuple(k for k in _strs(raw.get("keys")) or () if k in DIFF_KEYS) or None,
                     sql=(get("sql") or "")[:_MAX_SQL], problems=tuple(problems))


def _strs(vals: list[str] | None) -> tuple[str, ...] | None:
    """Repeated query values (filters); None when absent."""
    if not vals:
        return None
    return tuple(dict.fromkeys(v for v in vals[:_MAX_ITEMS] if _str(v))) or None


def timeline_state(st: dict, **kw) -> ViewState:
    """The timeline page's ``ViewState`` from its meta store (``st``), with ``sel`` / ``q`` replaced when given."""
    sel = kw.pop("sel", st.get("sel"))
    return ViewState(page="timeline", trace=st.get("trace"), rank=st.get("rank"), q=kw.pop("q", st.get("q") or ""),
                     color=st.get("color") or "op", pick=st.get("pick"), sel=tuple(sel) if sel else None,
                     t0=st.get("t0"), t1=st.get("t1"))
