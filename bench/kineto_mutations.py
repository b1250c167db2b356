"""The mutation engine of ``bench/fuzz_kineto.py``: seed windows of the real traces in ``tests/data/realtraces``
and structure-aware mutations of Kineto JSON documents (see that script's docstring for what they are), also
drivable by atheris' bytes (``FdpRandom``)."""
from __future__ import annotations

import copy
import gzip
import json
import os
import random
import re
from pathlib import Path
from typing import Any

REPO = Path(__file__).resolve().parent.parent
REALTRACES = Path(os.environ.get("NEURON_PROFILER_REALTRACES", REPO / "tests" / "data" / "realtraces"))
_WINDOW_POOL = 3000  # events kept per seed trace (random windows are cut from these)


# ------------------------------------------------------------------------------------------- seeds
def load_seeds(rng: random.Random) -> list[tuple[str, dict[str, Any], list[Any]]]:
    """(name, top-level keys without events, a pool of events) per real trace."""
    seeds = []
    for p in sorted(REALTRACES.rglob("*.json*")):
        if not p.is_file():
            continue
        raw = p.read_bytes()
        doc = json.loads(gzip.decompress(raw) if raw[:2] == b"\x1f\x8b" else raw)
        events = doc.pop("traceEvents", [])
        if len(events) > _WINDOW_POOL:
            start = rng.randrange(0, len(events) - _WINDOW_POOL)
            pool = events[:200] + events[start:start + _WINDOW_POOL - 200]  # metadata events come first
        else:
            pool = events
        seeds.append((str(p.relative_to(REALTRACES)), doc, pool))
        del events, raw
    if not seeds:
        raise SystemExit(f"no real traces under {REALTRACES} (set NEURON_PROFILER_REALTRACES)")
    return seeds


# ------------------------------------------------------------------------------------------- mutations
_KEYS = ("ph", "cat", "name", "pid", "tid", "ts", "dur", "args", "id", "bp", "s")
_ARG_KEYS = ("device", "stream", "correlation", "External id", "bytes", "Collective name", "Input Dims",
             "Input type", "Python id", "Python parent id", "Total Allocated", "Total Reserved", "Device Id",
             "Device Type", "In msg nelems", "Out msg nelems", "Group size", "dtype", "flops", "Sequence number",
             "Process Group Ranks", "Seq", "name", "labels", "sort_index")
_TOP_KEYS = ("deviceProperties", "distributedInfo", "baseTimeNanoseconds", "traceEvents", "schemaVersion",
             "displayTimeUnit", "traceName", "neuronProfiler")
_PHASES = ("X", "s", "f", "t", "M", "i", "I", "C", "B", "E", "b", "e", "n", "P", "O", "", None)
_CATS = ("cpu_op", "kernel", "gpu_memcpy", "gpu_memset", "cuda_runtime", "ac2g", "fwdbwd", "python_function",
         "gpu_user_annotation", "cpu_instant_event", "Trace", "mtia_ccp_events", "cuda_sync", "user_annotation",
         "Kernel", "Operator", "Runtime", "async", "privateuse1_runtime", "zzz")


_NEST = re.compile(rb'"\\u0000NEST([aok])(\d+)\\u0000"')
#: lone UTF-16 surrogates (and a valid pair beside one), as ``json.dumps`` escapes them
_SURROGATES = ("\ud800", "\udfff", "a\udc00b", "\ud83d", "\ude00\ud83d", "\ud83d\ude00\udbff")
#: numeric strings beyond int64 (and at its edges)
_BIG_NUMERIC = ("9223372036854775808", "-9223372036854775809", "18446744073709551616", "9" * 25, "-" + "9" * 40,
                "1" + "0" * 400, "9223372036854775807", "-9223372036854775808", " 99999999999999999999 ",
                "+9223372036854775808", "0x7fffffffffffffffff", "1_000_000_000_000_000_000_000")


def _expand(m: re.Match) -> bytes:
    d = int(m.group(2))
    if m.group(1) == b"k":  # one object with d keys (the last keys repeated: duplicates)
        return b"{" + b",".join(b'"k%d":%d' % (i % max(d - 3, 1), i) for i in range(d)) + b"}"
    return (b"[" * d + b"1" + b"]" * d) if m.group(1) == b"a" else (b'{"a":' * d + b"1" + b"}" * d)


def _walk(v: Any, fs: Any, fn: Any) -> Any:
    """``v`` with every string (keys included) passed through ``fs`` and every number through ``fn``."""
    if isinstance(v, dict):
        return {fs(k): _walk(x, fs, fn) for k, x in v.items()}
    if isinstance(v, list):
        return [_walk(x, fs, fn) for x in v]
    if isinstance(v, str):
        return fs(v)
    if isinstance(v, (int, float)) and not isinstance(v, bool):
        return fn(v)
    return v


class Mutator:
    """Structure-aware mutations of Kineto documents, driven by a ``random.Random`` (or by atheris's
    ``FuzzedDataProvider`` through ``_FdpRandom``)."""

    def __init__(self, rng: Any) -> None:
        self.r = rng

    def value(self) -> Any:
        r = self.r
        k = r.randrange(22)
        if k == 0:
            return None
        if k == 1:
            return r.choice((True, False))
        if k == 2:
            return r.choice((2**64, 2**63, -(2**63) - 1, 10**30, -(10**25), 2**1000, 10**400))
        if k == 3:
            return r.choice((1e308, -1e308, 1.7976931348623157e308, 5e-324, -0.0, 1e-9))
        if k == 4:
            return float("nan") if r.random() < 0.5 else r.choice((float("inf"), float("-inf")))
        if k == 5:
            return r.choice(("", "x", "0", "-1", "1e9", "NaN", "\u2603", "a" * r.randrange(1, 5000)))
        if k == 6:
            return [] if r.random() < 0.5 else [self.value() for _ in range(r.randrange(1, 4))]
        if k == 7:
            return {} if r.random() < 0.5 else {r.choice(_ARG_KEYS): self.value()}
        if k == 8:
            return self.nested(r.choice((r.randrange(2, 3000), r.randrange(250, 260), 100_000)))
        if k == 13:
            return r.choice(_SURROGATES)
        if k == 14:
            return r.choice(_BIG_NUMERIC)
        if k == 15:
            return self.many_keys(r.randrange(2, 1000) if r.random() < 0.8 else r.choice((100_000, 300_000)))
        if k == 9:
            return r.randrange(-10, 10)
        if k == 10:
            return r.randrange(0, 2**62)
        if k == 11:
            return r.uniform(0, 1e16)
        if k == 12:
            return -r.uniform(0, 1e6)
        return r.choice((0, 1, -1, 7, 2**31, 2**32, 4e15, 4.000000001e15, 1695835535123456.789, 0.001))

    def nested(self, depth: int) -> str:
        """A marker that ``document`` replaces by ``depth`` nested arrays / objects in the JSON text (a nested
        Python value would exceed ``json.dumps``'s own recursion limit)."""
        kind = "a" if self.r.random() < 0.5 else "o"
        return f"\x00NEST{kind}{depth}\x00"

    def many_keys(self, n: int) -> str:
        """A marker that ``document`` replaces by one object of ``n`` keys (some repeated)."""
        return f"\x00NESTk{n}\x00"

    def everywhere(self, doc: Any) -> Any:
        """One kind of value put in every string or every numeric position of ``doc`` (each position with
        probability ``p``): lone surrogates appended to strings (keys included), or numbers replaced by
        numeric strings beyond int64."""
        r = self.r
        p = r.choice((0.05, 0.3, 1.0))
        if r.random() < 0.5:
            sur = r.choice(_SURROGATES)
            return _walk(doc, lambda s: s + sur if r.random() < p else s, lambda x: x)
        big = r.choice(_BIG_NUMERIC)
        return _walk(doc, lambda s: s, lambda x: big if r.random() < p else x)

    def mutate_event(self, e: Any) -> Any:
        r = self.r
        if not isinstance(e, dict) or r.random() < 0.05:
            return self.value()
        e = dict(e)
        k = r.randrange(10)
        if k == 9:  # a lone surrogate in an event's key, or in an args key
            key = r.choice(_KEYS) + r.choice(_SURROGATES)
            if isinstance(e.get("args"), dict) and r.random() < 0.5:
                e["args"] = {**e["args"], key: self.value()}
            else:
                e[key] = self.value()
        elif k <= 2:
            e[r.choice(_KEYS)] = self.value()
        elif k == 3 and e:
            e.pop(r.choice(list(e)), None)
        elif k == 4:
            e["ph"] = r.choice(_PHASES)
        elif k == 5:
            e["cat"] = r.choice(_CATS)
        else:
            args = e.get("args") if isinstance(e.get("args"), dict) else {}
            args = dict(args)
            if r.random() < 0.2 and args:
                args.pop(r.choice(list(args)))
            else:
                args[r.choice(_ARG_KEYS)] = self.value()
            e["args"] = args
        return e

    def document(self, seeds: list[tuple[str, dict[str, Any], list[Any]]]) -> tuple[str, bytes]:
        r = self.r
        name, top, pool = seeds[r.randrange(len(seeds))]
        n = r.randrange(1, min(400, max(len(pool), 1)) + 1)
        start = r.randrange(0, max(len(pool) - n, 0) + 1)
        events = copy.deepcopy(pool[start:start + n]) if pool else []
        if r.random() < 0.5 and pool:  # process / thread names usually come first
            events = copy.deepcopy(pool[:r.randrange(1, 20)]) + events
        doc: dict[str, Any] = copy.deepcopy(top)
        for _ in range(r.randrange(1, 7)):
            k = r.randrange(10)
            if k <= 4 and events:
                i = r.randrange(len(events))
                events[i] = self.mutate_event(events[i])
            elif k == 5 and events:
                del events[r.randrange(len(events))]
            elif k == 6 and events:
                events.insert(r.randrange(len(events) + 1), copy.deepcopy(r.choice(events)))
            elif k == 7 and len(events) > 1:
                i, j = r.randrange(len(events)), r.randrange(len(events))
                events[i], events[j] = events[j], events[i]
            elif k == 8:
                doc[r.choice(_TOP_KEYS)] = self.value()
            else:
                dp = doc.get("deviceProperties")
                if isinstance(dp, list) and dp:
                    i = r.randrange(len(dp))
                    dp[i] = self.mutate_event(dp[i]) if r.random() < 0.7 else self.value()
                else:
                    doc["deviceProperties"] = [{"id": self.value(), "name": self.value(),
                                                "totalGlobalMem": self.value()}]
        doc.setdefault("traceEvents", events)
        if isinstance(doc.get("traceEvents"), list) and doc["traceEvents"] is not events and r.random() < 0.5:
            doc["traceEvents"] = events
        if r.random() < 0.1:  # every string / numeric position at once
            doc = self.everywhere(doc)
        body = doc if r.random() > 0.05 else doc.get("traceEvents", events)
        text = _NEST.sub(_expand, json.dumps(body).encode())
        if r.random() < 0.1:
            text = self.text_mutation(text)
        if r.random() < 0.05:
            text = gzip.compress(text, 1)
        return name, text

    def text_mutation(self, t: bytes) -> bytes:
        r = self.r
        k = r.randrange(5)
        if k == 0 or not t:
            return t[: r.randrange(len(t) + 1)]
        i = r.randrange(len(t))
        if k == 1:
            return t[:i] + bytes([r.randrange(256)]) + t[i + 1:]
        if k == 2:
            return t[:i] + r.choice((b"[", b"{", b"]", b"}", b'"', b",", b"\\", b"\x00", b"\xff")) + t[i:]
        if k == 3:
            d = r.randrange(100, 5000)
            return t[:i] + b"[" * d + b"1" + b"]" * d + t[i:]
        return t + t[: r.randrange(len(t) + 1)]


# ------------------------------------------------------------------------------------------- one input
class FdpRandom:
    """The subset of ``random.Random`` the mutator uses, drawing from atheris's FuzzedDataProvider."""

    def __init__(self, fdp: Any) -> None:
        self.fdp = fdp

    def randrange(self, a: int, b: int | None = None) -> int:
        lo, hi = (0, a) if b is None else (a, b)
        return lo if hi - lo <= 1 else self.fdp.ConsumeIntInRange(lo, hi - 1)

    def random(self) -> float:
        return self.fdp.ConsumeProbability()

    def uniform(self, a: float, b: float) -> float:
        return a + (b - a) * self.fdp.ConsumeProbability()

    def choice(self, seq: Any) -> Any:
        return seq[self.randrange(len(seq))]


