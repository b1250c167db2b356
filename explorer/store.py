"""Open traces for the app: containment checks, a small LRU of open traces, and the timeline index.

The store only serves files listed under the path it was given (``root``): URL parameters name a trace by
its key (path relative to ``root``), the key must be one the listing produced, and its resolved path must
sit inside ``root``. Opening goes through :func:`analysis.load` / :class:`analysis.Trace` (which use the
trace reader: no pickle, no eval).
"""
from __future__ import annotations

import concurrent.futures
import threading
import time
import uuid
from collections import OrderedDict
from dataclasses import dataclass
from pathlib import Path

import analysis
from neuron_profiler.importers import is_trace_source
from neuron_profiler.importers.source import names_trace_content

from .rows import TimelineIndex, build_index

TRACE_SUFFIXES = (".nprof", ".json", ".json.gz")
GROUP_PREFIX = "group:"


class TraceError(Exception):
    """Base of the store's errors (their messages are shown in the page)."""


class TraceAccessError(TraceError, ValueError):
    """A trace key that is not served (outside the root, not a trace, not listed)."""


class FramePending(TraceError):
    """An analysis frame is still being computed (``future``: the computation, in ``store``); the section shows
    that and is pushed when it is ready (``explorer.push``)."""

    def __init__(self, sub, future: concurrent.futures.Future | None = None, store: TraceStore | None = None):
        super().__init__(sub)
        self.future, self.store = future, store


_WORKER = threading.local()
_REQUEST = threading.local()


#: how long the rebuild of a pushed section waits for the rest of its frames (explorer.push)
SECTION_WAIT_S = 300.0
#: after a page asked for a frame, the background precompute stays paused this long (s): the page's sections
#: arrive and the browser draws them without a precompute frame competing for the CPU
FOREGROUND_GRACE_S = 2.5


#: the least a page build waits for a frame once its budget is spent (a frame of a few ms is shown at once)
PENDING_WAIT_S = 0.05


def new_request(section: bool = False) -> None:
    """Start of a page build: the frames it asks for share one budget of ``wait`` seconds (from now), then each
    waits :data:`PENDING_WAIT_S` (so a page with many frames still computing is sent after about ``wait`` s,
    its frames computing on the pool meanwhile, not one after another in the request); once one frame was
    pending, later ones wait :data:`PENDING_WAIT_S`. A pushed section's rebuild (``section``) waits for each of
    its frames (up to :data:`SECTION_WAIT_S`): one of them is ready, the others are computing.
    :func:`end_request` ends it."""
    _REQUEST.pending = False
    _REQUEST.section = section
    _REQUEST.t0 = time.monotonic()


def end_request() -> None:
    """End of a page build (:func:`new_request`): this server thread serves other requests next, with the
    whole ``wait`` again."""
    _REQUEST.pending = False
    _REQUEST.section = False
    _REQUEST.t0 = None


def _in_worker(fn):
    _WORKER.active = True
    try:
        return fn()
    finally:
        _WORKER.active = False


class TraceOpenError(TraceError, RuntimeError):
    """A listed trace that could not be opened (bad or unreadable file); the message is shown in the page."""


@dataclass(frozen=True)
class TraceEntry:
    """One servable trace (``key`` = path relative to the root, POSIX separators) or one multi-rank group
    (``key`` = ``group:<pattern>``, ``members`` = the member keys by rank)."""

    key: str
    label: str
    group: str
    members: tuple[str, ...] = ()

    @property
    def is_group(self) -> bool:
        return bool(self.members)


def _headers(base: Path, keys: list[str]) -> dict[str, analysis.Trace]:
    """The ``.nprof`` files ``keys`` opened lazily (header only); files whose header cannot be read are left
    out (they show their error when opened alone)."""
    out = {}
    for k in keys:
        try:
            t = analysis.Trace.from_file(base / k)
            t.header  # noqa: B018
        except Exception:  # noqa: BLE001 - listed alone; its page shows the error
            continue
        out[k] = t
    return out


def trace_label(key: str, trace=None) -> str:
    """The picker's label of a trace: its key, then what it is of (``analysis.identity`` from the header:
    model, run, rank), e.g. "gpt_train_step.nprof — GPT (25.2 M parameters) · run gpt_train_step"."""
    if trace is None:
        return key
    try:
        what = analysis.identity(trace, read_tables=False).describe()
    except Exception:  # noqa: BLE001 - a header without identity: the key alone
        return key
    return f"{key} — {what}" if what else key


def group_label(run: str, members: list, trace=None) -> str:
    """The picker's label of a multi-rank run: "ddp_train (2 ranks) — GPT (…)" (the model from the first rank's
    header)."""
    label = f"{run} ({len(members)} ranks)"
    try:
        model = analysis.identity(trace, read_tables=False).model if trace is not None else ""
    except Exception:  # noqa: BLE001
        model = ""
    return f"{label} — {model}" if model else label


def run_groups(base: Path, keys: list[str], opened: dict | None = None) -> list[tuple[str, list[str]]]:
    """The multi-rank runs among the ``.nprof`` files ``keys`` of one folder, as ``(run id, member keys by
    rank)``: grouped by the analysis API (``analysis.TraceSet`` and its run grouping), never by file name.
    Files whose header cannot be read are left out (they show their error when opened alone). ``opened``:
    the files already opened by :func:`_headers`."""
    opened = opened if opened is not None else _headers(base, keys)
    traces, key_of = [], {}
    for k in keys:
        t = opened.get(k)
        if t is None:
            continue
        traces.append(t)
        key_of[id(t)] = k
    if len(traces) < 2:
        return []
    ts = analysis.TraceSet(traces)
    out = []
    for run in ts.runs:
        sub = ts.by_run(run)
        if len(sub.ranks) > 1:
            first = {}
            for t in sub.traces:  # one member per rank: its first window
                first.setdefault(t.rank, key_of[id(t)])
            out.append((run or "run", [first[r] for r in sorted(first)]))
    return out


def _is_trace_file(p: Path) -> bool:
    # what a path holds is decided by the importers (by content: Kineto / Explorer JSON, .nprof, Explorer
    # Parquet profile directories), the one place that also opens it (analysis.load -> importers.open_source)
    # a JSON object of another shape (a synthetic run's truth.json) is not listed: opened, it only errors
    return is_trace_source(p) and names_trace_content(p)


def _stem(name: str) -> str:
    for suf in (".json.gz", ".nprof", ".json"):
        if name.endswith(suf):
            return name[: -len(suf)]
    return name


class TraceStore:
    """Traces under ``root`` (a trace file or a directory), opened on demand and kept in an LRU of
    ``cache_size`` entries (each entry holds the trace and its timeline indexes)."""

    def __init__(self, root: str | Path, cache_size: int = 4, progress: bool = False):
        self.root = Path(root).resolve(strict=True)
        self._single = self.root.is_file() or _is_trace_file(self.root)  # one file or one Explorer profile
        self.base = self.root.parent if self._single else self.root
        self.cache_size = max(1, int(cache_size))
        self.progress = progress
        self._lock = threading.RLock()
        self._open: OrderedDict[str, dict] = OrderedDict()
        self._entries: list[TraceEntry] | None = None
        self.preferred: str | None = None
        self._executor = None
        self._foreground = 0  # frames a page is waiting for, computing in the pool (the warm-up yields to them)
        self._page_seen = -1e9  # time.monotonic() of the last frame a page asked for (computed or not)
        self._watches: OrderedDict[str, tuple] = OrderedDict()  # token -> (futures, rebuild): explorer.push

    # ------------------------------------------------------------------ listing and containment
    def entries(self, refresh: bool = False) -> list[TraceEntry]:
        """Servable traces: single files first, then one group per set of rank files in one folder."""
        with self._lock:
            if self._entries is not None and not refresh:
                return self._entries
            if self._single:
                files = [self.root]
            else:
                # symlinks that leave the root are not served
                files = sorted(p for p in self.root.rglob("*")
                               if _is_trace_file(p) and p.resolve().is_relative_to(self.base))
                stems = {(p.parent, _stem(p.name)) for p in files if not p.name.endswith(".nprof")}
                # a Kineto file is listed once: analysis.load caches its conversion as <stem>.nprof beside it
                files = [p for p in files if not p.name.endswith(".nprof") or (p.parent, _stem(p.name)) not in stems]
            out: list[TraceEntry] = []
            by_folder: dict[str, list[str]] = {}
            keys_of = [(p, self._key(p)) for p in files]
            opened = _headers(self.base, [k for p, k in keys_of if p.name.endswith(".nprof")])
            for p, key in keys_of:
                folder = str(Path(key).parent) if "/" in key else "."
                out.append(TraceEntry(key, trace_label(key, opened.get(key)), folder))
                if p.name.endswith(".nprof"):
                    by_folder.setdefault(folder, []).append(key)
            for folder, keys in sorted(by_folder.items()):
                for run, members in run_groups(self.base, keys, opened):
                    gkey = GROUP_PREFIX + (run if folder == "." else f"{folder}/{run}")
                    label = group_label(gkey[len(GROUP_PREFIX):], members, opened.get(members[0]))
                    out.append(TraceEntry(gkey, label, folder, tuple(members)))
            self._entries = out
            return out

    def _key(self, p: Path) -> str:
        return p.resolve().relative_to(self.base).as_posix()

    def default_key(self) -> str | None:
        """The trace to open first: ``preferred`` if set, else the root file / the first listed trace."""
        if self.preferred is not None:
            return self.preferred
        es = self.entries()
        first = None
        for e in [e for e in es if not e.is_group][:6]:  # a bare URL shows the first trace that opens and has
            try:                                          # events (an empty one only when nothing else opens)
                t = self.open(e.key)
                n = sum(len(t.table(tab, ["start_ts"])) for tab in ("host_ops", "instructions"))
            except TraceError:
                continue
            first = first or e.key
            if n:
                self.preferred = e.key
                return e.key
        self.preferred = first
        return first or (es[0].key if es else None)

    def entry(self, key: str) -> TraceEntry:
        """The listed entry for ``key``; raises :class:`TraceAccessError` for anything else."""
        if not isinstance(key, str) or not key or len(key) > 1024 or "\x00" in key:
            raise TraceAccessError("no trace selected")
        for e in self.entries():
            if e.key == key:
                return e
        raise TraceAccessError(f"trace {key!r} is not served here (choose one of the listed traces)")

    def resolve(self, key: str) -> Path:
        """The file of a single-trace key, resolved and checked to sit inside the root."""
        e = self.entry(key)
        if e.is_group:
            raise TraceAccessError(f"{key!r} is a group of ranks, not one file")
        p = (self.base / e.key).resolve()
        if not p.is_relative_to(self.base) or (self._single and p != self.root):
            raise TraceAccessError(f"trace {key!r} is outside the served path")
        return p

    # ------------------------------------------------------------------ opening
    def _slot(self, key: str) -> dict:
        with self._lock:
            if key in self._open:
                self._open.move_to_end(key)
                return self._open[key]
        slot = self._load(key)
        with self._lock:
            self._open[key] = slot
            self._open.move_to_end(key)
            while len(self._open) > self.cache_size:
                self._open.popitem(last=False)
        return slot

    def _load(self, key: str) -> dict:
        e = self.entry(key)
        try:
            if e.is_group:
                traces = [self._open_file(self.resolve(k)) for k in e.members]
                obj = analysis.TraceSet(traces, path=self.base / e.group)
            else:
                obj = self._open_file(self.resolve(key))
        except TraceAccessError:
            raise
        except Exception as exc:  # any reader/importer failure becomes a message, not a crash
            raise TraceOpenError(f"could not open {key}: {type(exc).__name__}: {exc}") from exc
        return {"trace": obj, "index": {}, "lock": threading.Lock(), "memo": {}, "memo_locks": {}}

    def _open_file(self, path: Path):
        """Open one trace file (the one place the explorer opens a file: the importers' content detection
        and import cache plug in here)."""
        t = analysis.load(path)
        t.header  # noqa: B018  (fail now on a bad header rather than inside a callback)
        return t

    def open(self, key: str):
        """The ``analysis.Trace`` (file) or ``analysis.TraceSet`` (group) for ``key``.

        Raises :class:`TraceAccessError` (not served) or :class:`TraceOpenError` (bad file)."""
        return self._slot(key)["trace"]

    def trace(self, key: str, rank: int | None = None):
        """One ``analysis.Trace``: the file, or the member of a group with ``rank`` (default: first)."""
        obj = self.open(key)
        members = getattr(obj, "traces", None)
        if members is None:
            return obj
        if rank is not None:
            for t in members:
                if t.rank == rank:
                    return t
        return members[0]

    def claim_precompute(self, key: str) -> bool:
        """True the first time it is asked for an open trace (its background precompute is started then), False
        afterwards; opens the trace."""
        slot = self._slot(key)
        with self._lock:
            first = not slot.get("precompute")
            slot["precompute"] = True
        return first

    def timeline(self, key: str, rank: int | None = None) -> TimelineIndex:
        """The timeline index of one trace (built once per LRU slot)."""
        slot = self._slot(key)
        tr = self.trace(key, rank)
        with slot["lock"]:
            idx = slot["index"].get(tr.rank)
            if idx is None:
                try:
                    idx = build_index(tr, progress=self.progress)
                except Exception as exc:
                    raise TraceOpenError(f"could not index {key}: {type(exc).__name__}: {exc}") from exc
                slot["index"][tr.rank] = idx
            return idx

    def memo(self, key: str, sub, fn, wait: float | None = None):
        """``fn()`` computed once per open trace ``key`` and ``sub`` key, shared by every page and viewer:
        concurrent requests for the same value wait for the first (a failure is not cached).

        With ``wait`` (seconds) the computation runs on the store's small worker pool and a caller that is not
        served within ``wait`` gets :class:`FramePending` (the page shows "still computing" and asks again)
        instead of holding a server thread for the whole analysis."""
        slot = self._slot(key)
        memo = slot["memo"]
        if wait is not None:  # a page (the warm-up and scripts wait without limit)
            self._page_seen = time.monotonic()
        if sub in memo:
            return analysis.handout(memo[sub])
        if getattr(_WORKER, "active", False):  # nested frames compute inline (a worker never waits on the pool)
            return analysis.handout(self._compute(slot, sub, fn))
        with self._lock:
            fut = slot["memo_locks"].get(("future", sub))
            if fut is not None and fut.done() and fut.exception() is not None:
                fut = None  # a failure is not cached: ask again
            if fut is None and wait is not None:
                self._foreground += 1
                fut = self._pool().submit(_in_worker, lambda: self._compute(slot, sub, fn))
                fut.add_done_callback(self._foreground_done)
                slot["memo_locks"][("future", sub)] = fut
        if fut is None:  # inline (the warm-up, scripts)
            return analysis.handout(self._compute(slot, sub, fn))
        if wait is not None and getattr(_REQUEST, "section", False):
            wait = SECTION_WAIT_S
        elif wait is not None and getattr(_REQUEST, "pending", False):  # this request already waited once
            wait = min(wait, PENDING_WAIT_S)
        elif wait is not None and getattr(_REQUEST, "t0", None) is not None:  # a page build: its budget left
            wait = min(wait, max(PENDING_WAIT_S, wait - (time.monotonic() - _REQUEST.t0)))
        try:
            return analysis.handout(fut.result(timeout=wait))
        except concurrent.futures.TimeoutError:
            _REQUEST.pending = True
            raise FramePending(sub, fut, self) from None

    def _foreground_done(self, _fut) -> None:
        with self._lock:
            self._foreground -= 1

    def foreground_busy(self) -> bool:
        """Whether a page is waiting for a frame, or asked for one less than :data:`FOREGROUND_GRACE_S` ago (the
        browser is drawing what it was sent: on a machine of few cores the precompute would slow that down).
        The background precompute pauses between frames then."""
        with self._lock:
            return self._foreground > 0 or time.monotonic() - self._page_seen < FOREGROUND_GRACE_S

    # ------------------------------------------------------------------ push: sections wait on their frames
    def watch(self, futures: list[concurrent.futures.Future], rebuild) -> str:
        """A token for a section waiting on ``futures`` (its frames still computing) and ``rebuild()`` (builds
        it again): the page's long-poll (:meth:`wait_watch`, ``/api/frames/wait``) answers the token once one of
        them is computed, and the section is rebuilt (:meth:`watched`). The last 1024 tokens are kept."""
        token = uuid.uuid4().hex
        with self._lock:
            self._watches[token] = (list(futures), rebuild)
            while len(self._watches) > 1024:  # pages that never came back
                self._watches.popitem(last=False)
        return token

    def watched(self, token: str):
        """The rebuild function of a token (None when unknown or expired)."""
        with self._lock:
            w = self._watches.get(token)
        return None if w is None else w[1]

    def wait_watch(self, tokens: list[str], timeout: float) -> list[str]:
        """Block until the frames of some of ``tokens`` are computed (or failed), or ``timeout`` s pass; the
        tokens that are ready (an unknown token is ready: its rebuild says it expired). Frames finishing within
        0.2 s of the first are answered together (fewer rebuilds)."""
        with self._lock:
            watches = {t: self._watches.get(t) for t in tokens}
        ready = [t for t, w in watches.items() if w is None or all(f.done() for f in w[0])]
        if ready:
            return ready
        futs = {f for w in watches.values() for f in w[0]}
        done, _ = concurrent.futures.wait(futs, timeout=max(0.0, timeout),
                                          return_when=concurrent.futures.FIRST_COMPLETED)
        if done:
            concurrent.futures.wait(futs, timeout=0.2)
        return [t for t, w in watches.items() if all(f.done() for f in w[0])]

    def _compute(self, slot: dict, sub, fn):
        """``fn()`` into the slot's memo under the value's own lock: the inline path (warm-up) and the worker
        pool (page requests) share it, so a frame is computed once even when both ask at the same time."""
        with self._lock:
            lock = slot["memo_locks"].setdefault(sub, threading.Lock())
        with lock:
            if sub not in slot["memo"]:
                slot["memo"][sub] = fn()
            return slot["memo"][sub]

    def _pool(self) -> concurrent.futures.ThreadPoolExecutor:
        if self._executor is None:
            self._executor = concurrent.futures.ThreadPoolExecutor(max_workers=2, thread_name_prefix="frames")
        return self._executor

    def cached_keys(self) -> list[str]:
        with self._lock:
            return list(self._open)
