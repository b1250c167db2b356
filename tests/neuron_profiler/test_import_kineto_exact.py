"""Timestamps exact to the nanosecond in every Kineto time base, against an exact oracle: ``decimal`` parsing
of the raw JSON text. The real traces with ``baseTimeNanoseconds`` are checked as they are; the epoch-microsecond
time base (no ``baseTimeNanoseconds``, ~1.7e15 us with 3 decimals, where float64 is off by up to 125 ns) is
checked on real traces rewritten into it exactly (every ``ts`` + base / 1000, in decimal)."""
from __future__ import annotations

import gzip
import json
import re
import warnings
from decimal import ROUND_HALF_EVEN, Decimal

import numpy as np
import pytest
from realdata import REAL_TRACE_PARAMS, real_trace

from neuron_profiler.importers.kineto import load_kineto_builder
from neuron_profiler.importers.kineto.decode import decode_document
from neuron_profiler.importers.kineto.exact import apply_exact, text_to_ns

_TS = re.compile(rb'("ts"\s*:\s*)(-?[0-9][0-9.eE+-]*)')


def _text(rel: str) -> bytes:
    raw = real_trace(rel).read_bytes()
    return gzip.decompress(raw) if raw[:2] == b"\x1f\x8b" else raw


def _ns(v: Decimal) -> int:
    return int((v * 1000).to_integral_value(ROUND_HALF_EVEN))


def _oracle(text: bytes) -> tuple[list[int], list[int], list[int], int]:
    """Exact ns (decimal) of complete events (sorted), flow halves (sorted) and [memory] samples, and the base."""
    doc = json.loads(text, parse_float=Decimal)
    base = doc.get("baseTimeNanoseconds", 0)
    base = base if type(base) is int else 0
    ev = [e for e in doc["traceEvents"] if isinstance(e, dict)]
    xs = sorted(_ns(Decimal(e["ts"])) + base for e in ev if e.get("ph") == "X" and e.get("cat") != "Trace")
    fl = sorted(_ns(Decimal(e["ts"])) + base for e in ev if e.get("ph") in ("s", "f")
                and e.get("cat") in ("ac2g", "fwdbwd", "async", "async_cpu_to_gpu"))
    mem = sorted(_ns(Decimal(e["ts"])) + base for e in ev if e.get("name") == "[memory]")
    return xs, fl, mem, base


def _to_epoch(text: bytes) -> bytes:
    """The same trace in the epoch-microsecond time base: every ts + baseTimeNanoseconds / 1000 written with
    3 decimals (decimal arithmetic, so the rewrite itself is exact), baseTimeNanoseconds removed."""
    base = json.loads(re.search(rb'"baseTimeNanoseconds"\s*:\s*(\d+)', text).group(1))
    off = Decimal(base) / 1000

    def shift(m: re.Match) -> bytes:
        return m.group(1) + format(Decimal(m.group(2).decode()) + off, ".3f").encode()

    out = _TS.sub(shift, text)
    return re.sub(rb'"baseTimeNanoseconds"\s*:\s*\d+', b'"baseTimeNanoseconds_removed": 0', out)


def _imported(path) -> tuple[list[int], list[int], str]:
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        b = load_kineto_builder(path)
    xs = sorted(b.table("host_ops")["start_ts"].tolist() + b.table("instructions")["start_ts"].tolist())
    ctr = b.table("counters")
    tracks = b.table("tracks")
    mem_tracks = tracks.index[(tracks["kind"] == "counter") & (tracks["name"] == "Total Allocated")]
    mem = sorted(ctr.loc[ctr["track"].isin(mem_tracks), "ts"].tolist())
    return xs, mem, b.footer_metadata.get("inexact_timestamps", "")


@pytest.mark.parametrize("rel", REAL_TRACE_PARAMS)
def test_real_traces_are_exact_to_the_ns(rel, tmp_path):
    text = _text(rel)
    xs, _fl, mem, _base = _oracle(text)
    got_xs, got_mem, inexact = _imported(real_trace(rel))
    assert got_xs == xs and inexact == ""
    assert got_mem == mem


@pytest.mark.parametrize("rel", [
    "HolisticTraceAnalysis/nccl_parser_config/nccl_data.json.gz",  # 40k events, flows, 3-decimal ts
    "TraceLens/h100/gaunernst_bert-small-uncased__1016001.json.gz",  # memory samples, python stacks
    "HolisticTraceAnalysis/mtia_inference_trace/mtia_inference_rank_0.json.gz",
])
def test_epoch_microsecond_time_base_is_exact_to_the_ns(rel, tmp_path, monkeypatch):
    epoch = _to_epoch(_text(rel))
    xs, _fl, mem, base = _oracle(epoch)
    assert base == 0 and xs[0] > 1.5e18  # really epoch ns: float64 cannot hold these to the ns
    p = tmp_path / "epoch.json"
    p.write_bytes(epoch)
    got_xs, got_mem, inexact = _imported(p)
    off = np.asarray(got_xs) - np.asarray(xs)
    assert int(np.count_nonzero(off)) == 0, f"{np.count_nonzero(off)} of {len(xs)} off by up to {abs(off).max()} ns"
    assert got_mem == mem and inexact == ""
    # the same text through the stdlib parser (the fallback for text msgspec refuses, e.g. NaN) is exact too
    import msgspec

    from neuron_profiler.importers.kineto import decode

    def refuse(raw, where):
        raise msgspec.DecodeError("refused")

    monkeypatch.setattr(decode, "_decode", refuse)
    assert _imported(p)[0] == xs


def test_flow_halves_bind_in_the_epoch_time_base(tmp_path):
    """Launch flows bind by exact (pid, tid, ts): they must survive the epoch time base."""
    rel = "HolisticTraceAnalysis/nccl_parser_config/nccl_data.json.gz"
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        ref = load_kineto_builder(real_trace(rel))
        p = tmp_path / "epoch.json"
        p.write_bytes(_to_epoch(_text(rel)))
        epoch = load_kineto_builder(p)
    a, b = ref.table("flows"), epoch.table("flows")
    assert len(a) == len(b) > 0
    assert a["kind"].astype(str).value_counts().to_dict() == b["kind"].astype(str).value_counts().to_dict()


@pytest.mark.parametrize("text, ns", [
    (b"1695835535123456.789", 1695835535123456789), (b"0.5", 500), (b"12", 12000), (b"-1.25", -1250),
    (b"1.0005", 1000), (b"1.0015", 1002), (b"1.00051", 1001), (b"1.5e3", 1500000), (b"1E-3", 1),
    (b"1695835535123456.7895", 1695835535123456790),
])
def test_text_to_ns_rounds_half_to_even(text, ns):
    assert text_to_ns(text) == ns


def test_a_ts_inside_args_does_not_misalign(tmp_path):
    text = (b'[{"ph": "X", "cat": "cpu_op", "name": "a", "pid": 1, "tid": 1, "args": {"ts": 7},'
            b' "ts": 1695835535123456.789, "dur": 1},'
            b' {"ph": "X", "cat": "cpu_op", "name": "b", "pid": 1, "tid": 1, "ts": 1695835535123457.001, "dur": 1}]')
    parsed = decode_document(text, "t")[1]
    assert apply_exact(parsed, text)
    assert [e.ts for e in parsed] == [1695835535123456789, 1695835535123457001]
    p = tmp_path / "t.json"
    p.write_bytes(b'{"traceEvents": ' + text + b"}")
    assert load_kineto_builder(p).table("host_ops")["start_ts"].tolist() == [1695835535123456789,
                                                                            1695835535123457001]


def test_float64_is_exact_below_the_limit_and_not_above():
    """Why ``LIMIT_US`` is 2**43: below it, float64 parsing + ``us_to_ns`` gives the exact ns of every
    3-decimal text; at 2**43 and above it does not (so those batches are re-read from the text)."""
    from neuron_profiler.importers.kineto.events import us_to_ns
    from neuron_profiler.importers.kineto.exact import LIMIT_US

    rng = np.random.default_rng(7)
    for lo, hi, exact in ((2**40, int(LIMIT_US), True), (int(LIMIT_US), 2**45, False)):
        ip = rng.integers(lo, hi, 200_000)
        fr = rng.integers(0, 1000, 200_000)
        texts = [f"{a}.{b:03d}" for a, b in zip(ip.tolist(), fr.tolist())]
        got = us_to_ns(np.asarray(texts, dtype=float))
        want = ip * 1000 + fr
        assert bool((got == want).all()) is exact


def test_vectorised_texts_with_exponents_and_long_fractions():
    from neuron_profiler.importers.kineto.exact import _texts_to_ns

    texts = [b"1e+30", b"1.5E3", b"1695835535123456.7895", b"-2.5", b"12", b"123456789012345678901"]
    ns = _texts_to_ns(np.asarray(texts, dtype="S"), texts).tolist()
    assert ns[1:5] == [1_500_000, 1695835535123456790, -2500, 12000]
    assert ns[0] >= 8 * 10**18 and ns[5] >= 8 * 10**18  # beyond range: skipped later as out of range
