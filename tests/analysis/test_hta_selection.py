"""HTA 0.5.0's device-row selection (``hta.hta_kernel_selection``) computed on row positions, without copying
columns: the same frames as the definition written out on DataFrames (the previous implementation, kept here as
the oracle), on every real trace and bundled sample, with every option; and the unions of the temporal
breakdown gathered from those positions equal the unions of the full HTA activity frame."""
from __future__ import annotations

import json

import numpy as np
import pandas as pd
from realdata import REAL_TRACE_FILES, SAMPLE_TRACES, real_trace

import analysis
from analysis.analyses import hta
from analysis.core.categorical import cat_values
from analysis.core.tables import row_positions

OPTIONS = ({}, {"include_last_profiler_step": True}, {"hta_rounding": False}, {"host_ops_with_stream": False},
           {"include_last_profiler_step": True, "hta_rounding": False})


def _oracle(ins: pd.DataFrame, host_ops: pd.DataFrame, *, tracks=None, include_last_profiler_step=False,
            hta_rounding=True, host_ops_with_stream=True, origin_ns=None) -> pd.DataFrame:
    """The selection on DataFrames: drop tid -1 rows, append host ops with a stream, then HTA's merge of device
    rows with the host events before the last ProfilerStep (one copy per matching host event)."""
    if tracks is not None and len(tracks) and len(ins):
        pos = row_positions(tracks.index, ins["track"].to_numpy())
        tid = np.where(pos >= 0, tracks["tid"].to_numpy(np.int64)[np.maximum(pos, 0)], -2)
        if (tid == -1).any():
            ins = ins[tid != -1]
    if host_ops_with_stream:
        extra = hta._host_ops_with_stream(host_ops)
        if len(extra):
            ins = pd.concat([ins, extra])
    names = host_ops["name"].astype(str)
    is_step = names.str.contains("ProfilerStep", regex=False).to_numpy()
    if names[is_step].nunique() < 2 or len(ins) == 0:
        return ins
    h_start, h_dur = host_ops["start_ts"].to_numpy(np.int64), host_ops["duration_ns"].to_numpy(np.int64)
    h_start, h_end = hta.hta_round(h_start, h_dur, origin_ns) if hta_rounding else (h_start, h_start + h_dur)
    limit = h_end[is_step].max() if include_last_profiler_step else h_start[is_step].max()
    kept_host = h_start <= limit if include_last_profiler_step else h_start < limit
    counts = pd.Series(host_ops["correlation_id"].to_numpy(np.int64)[kept_host]).value_counts()
    i_corr = ins["correlation_id"].to_numpy(np.int64)
    gpu_like = (i_corr >= 0) | cat_values(ins["name"], ["Event Sync", "Context Sync"])
    reps = pd.Series(i_corr).map(counts).fillna(0).to_numpy(np.int64)
    reps = np.where(gpu_like & (i_corr < 0), np.minimum(reps, 1), reps)
    i_start = ins["start_ts"].to_numpy(np.int64)
    i_start = hta.hta_round(i_start, np.zeros_like(i_start), origin_ns)[0] if hta_rounding else i_start
    own = (i_start <= limit) if include_last_profiler_step else (i_start < limit)
    reps = np.where(gpu_like, reps, own.astype(np.int64))
    return ins.iloc[np.repeat(np.arange(len(ins)), reps)]


def _paths():
    return [real_trace(r) for r in REAL_TRACE_FILES] + sorted(SAMPLE_TRACES.glob("*.nprof"))


def test_selection_equals_the_dataframe_definition_on_every_real_trace_and_sample():
    seen = set()
    for path in _paths():
        t = analysis.load(path)
        ins, ho, origin = t.analysis_table("instructions"), t.table("host_ops"), hta.hta_origin_ns(t)
        for kw in OPTIONS:
            for tr in (None, t.tracks):
                got = hta.hta_kernel_selection(ins, ho, tracks=tr, origin_ns=origin, **kw)
                want = _oracle(ins, ho, tracks=tr, origin_ns=origin, **kw)
                pd.testing.assert_frame_equal(got, want, check_exact=True, obj=f"{path.name} {kw}")
                if len(got) < len(ins):
                    seen.add("rows dropped")
        seen.add("origin" if origin is not None else "no origin")
    assert {"rows dropped", "origin", "no origin"} <= seen


def test_selection_repeats_a_device_row_per_matching_host_event_and_drops_stream_minus_one():
    """Two host events share correlation 5 (HTA's merge gives two copies), a row on a tid -1 track is dropped,
    an uncorrelated row is kept by its rounded start (999 ns rounds up to 1 µs, before the last step at 2 µs;
    1001 ns rounds to 2 µs: dropped), a host op with args.stream is appended; the oracle agrees."""
    host = pd.DataFrame({"name": ["ProfilerStep#1", "launch", "launch", "ProfilerStep#2", "triton_k"],
                         "start_ts": [0, 100, 200, 2000, 300], "duration_ns": [2000, 10, 10, 1000, 10],
                         "correlation_id": [-1, 5, 5, -1, 9],
                         "args": ["{}", "{}", "{}", "{}", json.dumps({"stream": 7})]})
    ins = pd.DataFrame({"track": [0, 0, 1, 0, 0], "start_ts": [150, 999, 400, 1001, 3000],
                        "duration_ns": [5, 5, 5, 5, 5], "name": pd.Categorical(["k", "m", "s", "late", "k2"]),
                        "opcode": pd.Categorical(["kernel"] * 5), "engine": pd.Categorical(["Kernel"] * 5),
                        "correlation_id": [5, -1, 5, -1, 5]}, index=pd.RangeIndex(10, 15))
    tracks = pd.DataFrame({"tid": [7, -1]})
    got = hta.hta_kernel_selection(ins, host, tracks=tracks)
    assert got.index.tolist() == [10, 10, 11, 14, 14, -5]  # k twice, m, k2 twice, the host op (-1 - row 4)
    pd.testing.assert_frame_equal(got, _oracle(ins, host, tracks=tracks), check_exact=True)
    for kw in OPTIONS:
        pd.testing.assert_frame_equal(hta.hta_kernel_selection(ins, host, tracks=tracks, **kw),
                                      _oracle(ins, host, tracks=tracks, **kw), check_exact=True)


def test_start_filter_by_threshold_equals_rounding_each_start():
    """_starts_by compares with one threshold instead of rounding every start up to whole µs; oracle: ceil_us of
    each start (and HTA's float64 reading with an origin), around multiples of 1000 and negative times."""
    rng = np.random.default_rng(7)
    base = np.arange(-5000, 5000, dtype=np.int64)
    starts = np.concatenate([base, rng.integers(-10**12, 10**12, 20000), 1_700_000_000_000_000_000 + base])
    for limit in (-3000, -2999, -1, 0, 1, 999, 1000, 1001, 4500, 10**11 + 1, 1_700_000_000_000_000_999):
        for inclusive in (False, True):
            r = hta.ceil_us(starts)
            want = r <= limit if inclusive else r < limit
            assert np.array_equal(hta._starts_by(starts, limit, inclusive, None), want), (limit, inclusive)
            origin = 1_699_999_999_000_000_000
            r = hta.hta_round(starts, np.zeros_like(starts), origin)[0]
            want = r <= limit if inclusive else r < limit
            assert np.array_equal(hta._starts_by(starts, limit, inclusive, origin), want), (limit, inclusive)
            want = starts <= limit if inclusive else starts < limit
            assert np.array_equal(hta._starts_by(starts, limit, inclusive, False), want)


def test_unions_from_positions_equal_the_unions_of_the_activity_frame_on_every_trace():
    """hta_unions without the HTA activity kept (positions, three gathered columns) against the unions of the
    whole quantised activity frame: simulated samples (semaphore waits left out, last-step filter) and the real
    traces with host ops carrying a stream, a tid -1 track and the float64 µs reading."""
    for path in [*sorted(SAMPLE_TRACES.glob("*.nprof")),
                 *(real_trace(r) for r in ("TraceLens/torch_compile_triton/trace.json.gz",
                                           "kineto/docs_traces/after_fix_trace.json",
                                           "HolisticTraceAnalysis/trace_filter/sampled_rank-0.json.gz",
                                           "HolisticTraceAnalysis/mtia_inference_trace/mtia_inference_rank_0.json.gz"))]:
        got = hta.hta_unions(analysis.load(path))
        act = hta._hta_activity(analysis.load(path))
        assert got["rows"] == len(act) > 0, path
        for k in (None, *hta.KERNEL_TYPES):
            s, e = hta.union_of_kind(act, k)
            assert np.array_equal(got[k][0], s) and np.array_equal(got[k][1], e), (path, k)
