"""Explorer features beyond the page builders: area-selection aggregates (against a brute-force oracle), the
SQL page's DuckDB connection (read-only, no file access, time limit, engine errors, DuckDB vs pandas), notes
(stored in the data dir, never beside the trace; URL round trip; bad files ignored), projected vs measured
host track groups, human labels, stack labels, regions, Compare defaults, bare URLs, no tracebacks."""
from __future__ import annotations

import json

import numpy as np
import pandas as pd
import pytest

from explorer import notes as notes_mod
from explorer.app import build_page, create_app
from explorer.labels import column_unit, humanize, stack_labels
from explorer.pages import compare
from explorer.pages.common import Ctx, guarded, short_error
from explorer.selection import area_stats
from explorer.state import PAGES, ViewState, decode, encode
from explorer.store import TraceStore

GROUP = "group:run/synthetic"


@pytest.fixture(scope="module")
def ctx(served_dir):
    return Ctx(TraceStore(served_dir))


@pytest.fixture
def data_dir(tmp_path, monkeypatch):
    d = tmp_path / "userdata"
    monkeypatch.setenv("NEURON_EXPLORER_DATA_DIR", str(d))
    return d


def _dump(component) -> str:
    import plotly

    return json.dumps(component, cls=plotly.utils.PlotlyJSONEncoder)


# ------------------------------------------------------------------ area selection
def test_area_stats_match_a_brute_force_count(ctx):
    idx = ctx.store.timeline("single.nprof")
    span = idx.end - idx.origin
    t0, t1 = span // 3, span // 3 + span // 20
    rows = [i for i, info in enumerate(idx.infos) if info.table in ("instructions", "dma")][:6]
    tracks, names, _ = area_stats(idx, t0, t1, rows)
    a, b = idx.origin + t0, idx.origin + t1
    total_events, total_busy, waited, by_name = 0, 0, 0, {}
    for i in rows:  # oracle: straight from the trace tables, no index
        info = idx.infos[i]
        df = idx.trace.table(info.table)
        df = df[df["track"] == info.track]
        s = df["start_ts"].to_numpy()
        e = s + df["duration_ns"].to_numpy()
        m = (s < b) & (e > a)
        clip = np.minimum(e[m], b) - np.maximum(s[m], a)
        total_events += int(m.sum())
        # busy: an engine waiting on a semaphore is idle, not busy (the analyses' definition)
        wait = (df["opcode"].astype(str) == "SemaphoreWait").to_numpy()[m] if "opcode" in df \
            else np.zeros(int(m.sum()), bool)
        total_busy += int(clip[~wait].sum())
        waited += int(clip[wait].sum())
        from explorer.rows import event_label

        for n, c in zip(event_label(df[m], info.table), clip):
            by_name[n] = by_name.get(n, 0) + int(c)
    assert total_events > 0 and waited > 0
    assert int(tracks["events"].sum()) == total_events and int(tracks["busy_ns"].sum()) == total_busy
    assert dict(zip(names["name"], names["total_ns"].astype(int))) == by_name
    assert names["total_ns"].is_monotonic_decreasing


def test_area_stats_counters(ctx):
    idx = ctx.store.timeline("single.nprof")
    ci = next(i for i, info in enumerate(idx.infos) if info.table == "counters")
    ts, val = idx.counters[idx.infos[ci].track]
    t0, t1 = int(ts[len(ts) // 4] - idx.origin), int(ts[len(ts) // 2] - idx.origin)
    _, _, ctr = area_stats(idx, t0, t1, [ci])
    m = (ts >= idx.origin + t0) & (ts < idx.origin + t1)
    assert ctr["max"].iloc[0] == val[m].max() and ctr["samples"].iloc[0] == m.sum()


# ------------------------------------------------------------------ SQL
@pytest.fixture(scope="module")
def db(ctx):
    pytest.importorskip("duckdb")
    from explorer.pages.query import database

    return database(ctx, ViewState(page="query", trace="single.nprof"))


def test_sql_agrees_with_pandas(ctx, db):
    res = db.run("SELECT name, count(*) AS n, sum(duration_ns) AS total FROM instructions GROUP BY name")
    ins = ctx.store.trace("single.nprof").table("instructions")
    expect = ins.groupby(ins["name"].astype(str), observed=True)["duration_ns"].agg(["count", "sum"])
    got = res.frame.set_index("name")
    assert set(got.index) == set(expect.index)
    for name in expect.index:
        assert got.loc[name, "n"] == expect.loc[name, "count"] and got.loc[name, "total"] == expect.loc[name, "sum"]
    rid = db.run("SELECT row_id, start_ts FROM instructions ORDER BY row_id LIMIT 3").frame
    assert rid["start_ts"].tolist() == ins.loc[rid["row_id"].tolist(), "start_ts"].tolist()


@pytest.mark.parametrize("sql, msg", [
    ("SELECT * FROM read_csv('/etc/passwd')", "disabled"),
    ("COPY instructions TO 'x.csv'", "read-only"),
    ("CREATE TABLE t AS SELECT 1", "read-only"),
    ("SET enable_external_access = true", "read-only"),
    ("SELECT 1; SELECT 2", "one statement"),
    ("SELECT * FROM 'x.parquet'", "disabled"),
    ("SELEC nonsense", "syntax error"),
    ("SELECT no_such_column FROM instructions", "no_such_column"),
])
def test_sql_refuses_files_and_writes_and_reports_engine_errors(db, sql, msg):
    from explorer.sql import QueryError

    with pytest.raises(QueryError, match=f"(?i){msg}"):
        db.run(sql)


def test_sql_time_limit_and_row_cap(db):
    from explorer.sql import QueryError

    with pytest.raises(QueryError, match="longer than the limit"):
        db.run("SELECT count(*) FROM range(100000000000) a", timeout_s=0.3)
    res = db.run("SELECT * FROM range(50)", max_rows=10)
    assert len(res.frame) == 10 and res.truncated


def test_sql_over_every_rank_of_a_group(ctx):
    pytest.importorskip("duckdb")
    from explorer.pages.query import database

    db = database(ctx, ViewState(page="query", trace=GROUP))
    got = db.run("SELECT rank, count(*) AS n FROM instructions GROUP BY rank ORDER BY rank").frame
    expect = [len(t.table("instructions")) for t in ctx.store.open(GROUP).traces]
    assert got["rank"].tolist() == [0, 1] and got["n"].tolist() == expect


def test_query_page_links_rows_to_the_timeline(ctx):
    pytest.importorskip("duckdb")
    from explorer.pages import query

    state = ViewState(page="query", trace="single.nprof",
                      sql="SELECT row_id, start_ts, duration_ns, name FROM instructions LIMIT 5")
    s = _dump(query.layout(ctx, state))
    assert "q-table" in s and "sel=instructions%3A0" in s and "/timeline?" in s
    bad = _dump(query.layout(ctx, state.with_(sql="SELECT nope FROM instructions")))
    assert "q-error" in bad and "nope" in bad and "Traceback" not in bad


# ------------------------------------------------------------------ notes
def test_notes_live_in_the_data_dir_never_beside_the_trace(ctx, served_dir, data_dir):
    path = ctx.store.trace("single.nprof").path
    before = sorted(p.name for p in served_dir.rglob("*"))
    f = notes_mod.save_notes(path, [{"t0": 10, "t1": 20, "note": "warm-up"}])
    assert f.is_relative_to(data_dir) and str(served_dir) not in f.name
    assert sorted(p.name for p in served_dir.rglob("*")) == before
    assert notes_mod.load_notes(path) == [{"t0": 10, "t1": 20, "note": "warm-up"}]
    state = ViewState(page="summary", trace="single.nprof")
    s = _dump(build_page(ctx, state))
    assert "warm-up" in s and "notes-list" in s  # listed on the Summary


def test_notes_travel_in_the_url_and_bad_values_are_dropped(ctx, data_dir):
    st = decode("/timeline", "?trace=single.nprof&note=5%2C9%2Cslow+step&note=9%2C5%2Cbackwards&note=x%2C1%2Cy")
    assert notes_mod.from_url(st.notes) == [{"t0": 5, "t1": 9, "note": "slow step"}]
    assert decode("/timeline", encode(st).split("?")[1]).notes == st.notes
    assert {"t0": 5, "t1": 9, "note": "slow step"} in notes_mod.notes_for(ctx, st)


def test_a_bad_notes_file_is_ignored(ctx, data_dir):
    path = ctx.store.trace("single.nprof").path
    f = notes_mod.notes_file(path)
    f.parent.mkdir(parents=True, exist_ok=True)
    f.write_text('{"notes": [{"t0": "__import__(\'os\')", "t1": 2, "note": 1}, {"t0": 1, "t1": 3, "note": "ok"}]}')
    assert notes_mod.load_notes(path) == [{"t0": 1, "t1": 3, "note": "ok"}]
    f.write_text("not json")
    assert notes_mod.load_notes(path) == []


def test_area_stats_busy_is_the_union_of_overlapping_events(tmp_path):
    """Two DMA transfers on one queue overlapping: busy time counts the overlap once, never above 100 %."""
    from neuron_profiler.trace import TraceBuilder, make_header

    b = TraceBuilder(make_header("tests.explorer"))
    q = b.add_track("dma_queue", "qSyncIO0")
    b.add_rows("dma", {"track": q, "start_ts": [1000, 1500, 3000], "duration_ns": [1000, 1000, 500],
                       "transfer_bytes": [64, 64, 64]})
    b.write(tmp_path / "dma.nprof")
    idx = TraceStore(tmp_path).timeline("dma.nprof")
    row = next(i for i, info in enumerate(idx.infos) if info.table == "dma")
    tracks, names, _ = area_stats(idx, 1000 - idx.origin, 3000 - idx.origin, [row])  # [1000, 3000)
    assert tracks["events"].tolist() == [2]
    assert tracks["busy_ns"].tolist() == [1500]  # [1000, 2500): the 500 ns overlap once
    assert tracks["busy_percent"].tolist() == [75.0]
    assert names["total_ns"].sum() == 2000  # per name: the sum of the clipped durations, as Perfetto's panel


# ------------------------------------------------------------------ projected vs measured host timeline
def test_projected_host_timeline_gets_two_track_groups(tmp_path):
    from neuron_profiler.trace import TraceBuilder, make_header

    h = make_header("tests.explorer", simulated=True)
    h.simulation.host_timeline = "projected"
    h.simulation.target = "trn2"
    h.simulation.model = "test-model 1.0"
    b = TraceBuilder(h)
    proc = b.add_track("process", "rank 0")
    th = b.add_track("thread", "main", proc)
    b.add_rows("host_ops", {"track": th, "name": ["aten::mm", "aten::add"], "start_ts": [1000, 5000],
                            "duration_ns": [2000, 1000], "measured_start_ts": [1000, 9000],
                            "measured_duration_ns": [3000, 500]})
    b.write(tmp_path / "proj.nprof")
    store = TraceStore(tmp_path)
    idx = store.timeline("proj.nprof")
    groups = {i.path[-1]: i for i in idx.infos if i.table == "host_ops"}
    assert set(groups) == {"Host (projected for trn2)", "Host (measured on the capturing machine)"}
    m = next(i for i, info in enumerate(idx.infos) if info.measured)
    p = next(i for i, info in enumerate(idx.infos) if info.table == "host_ops" and not info.measured)
    assert idx.rows[m].start.tolist() == [1000, 9000] and idx.rows[p].start.tolist() == [1000, 5000]
    s = _dump(build_page(Ctx(store), ViewState(page="summary", trace="proj.nprof")))
    assert "test-model 1.0" in s and "trn2" in s and "/doc/simulation" in s  # the banner names the model


# ------------------------------------------------------------------ labels
@pytest.mark.parametrize("name, label, unit", [
    ("mfu_estimated_percent", "MFU (estimated)", "percent"), ("step_time_mean_ns", "Step time (mean)", "ns"),
    ("hbm_read_bytes", "HBM read", "bytes"), ("achieved_flops_per_s_b", "Achieved FLOP/s (B)", "FLOP/s"),
    ("start_ts", "Start", "ts"), ("bus_bandwidth", "Bus bandwidth", "bytes/s"), ("model_flops", "Model FLOPs", "FLOP"),
])
def test_human_labels_and_units(name, label, unit):
    assert humanize(name) == label and column_unit(name) == unit


def test_stack_labels_use_the_innermost_distinguishing_frames():
    stacks = ["main.py(1): <module>\ntrain.py(9): step\nmodel.py(3): forward\nlinear.py(5): mm",
              "main.py(1): <module>\ntrain.py(9): step\nmodel.py(3): forward\nact.py(2): gelu",
              "main.py(1): <module>\ntrain.py(9): step\nloss.py(7): backward\nlinear.py(5): mm"]
    labels = stack_labels(stacks)
    assert labels == ["linear.py(5): mm ← model.py(3): forward", "act.py(2): gelu ← model.py(3): forward",
                      "linear.py(5): mm ← loss.py(7): backward"]
    assert "main.py" not in "".join(labels)


def test_grid_has_no_index_column_and_formats_by_unit(ctx):
    from explorer.pages.common import data_table

    df = pd.DataFrame({"transfer_bytes": [4194304], "duration_ns": [1500]}, index=pd.RangeIndex(1))
    g = data_table(df, id="t")
    fields = [c["field"] for c in g.columnDefs]
    assert fields == ["transfer_bytes", "duration_ns"] and g.rowData == [{"transfer_bytes": 4194304,
                                                                          "duration_ns": 1500}]
    assert "bytes" in g.columnDefs[0]["valueFormatter"]["function"]


# ------------------------------------------------------------------ regions, compare, bare URLs, errors
def test_summary_of_regions_side_by_side(ctx):
    import analysis
    from explorer.regions import regions

    state = ViewState(page="summary", trace="single.nprof")
    regs = regions(ctx, state)
    steps = [r for r in regs if r["key"].startswith("step:")]
    assert len(steps) == len(analysis.steps(ctx.store.trace("single.nprof")))
    assert any(r["key"].startswith("cc:") for r in regs)
    keys = tuple(r["key"] for r in steps[:2])
    out = build_page(ctx, state.with_(regions=keys))
    s = _dump(out)
    assert "region-table" in s and steps[0]["label"] in s and steps[1]["label"] in s


def test_compare_defaults_to_another_rank_and_never_to_itself(ctx, served_dir):
    page = compare.layout(ctx, ViewState(page="compare", trace="run/rank00000_window000.nprof"))
    from test_explorer_pages import _find

    assert _find(page, "cmp-a").value == "run/rank00000_window000.nprof"
    assert _find(page, "cmp-b").value == "run/rank00001_window000.nprof"
    same = compare.layout(ctx, ViewState(page="compare", trace="single.nprof", other="single.nprof"))
    assert _find(same, "cmp-b").value != "single.nprof"
    lone = Ctx(TraceStore(served_dir / "single.nprof"))
    assert "never compared with itself" in _dump(compare.layout(lone, ViewState(page="compare",
                                                                                  trace="single.nprof")))


@pytest.mark.parametrize("page", PAGES)
def test_every_page_works_from_a_bare_url(ctx, page):
    s = _dump(build_page(ctx, ViewState(page=page)))
    assert f'"{page.replace("_", "-")}-page"' in s and "no trace selected" not in s


def test_failures_show_a_short_message_without_traceback_or_paths(ctx):
    def boom():
        raise KeyError("/work/secret/dir/x.nprof")

    s = _dump(guarded(boom))
    assert "Traceback" not in s and "/work/secret" not in s and "x.nprof" in s
    assert short_error(ValueError("a\nb")) == "ValueError: a (details in the server log)"


def test_api_refuses_unserved_traces_and_answers_errors_as_json(served_dir):
    app = create_app(served_dir)
    c = app.server.test_client()
    r = c.get("/api/timeline/view?trace=../../etc/passwd")
    assert r.status_code == 404 and "not served" in r.get_json()["error"]
    r = c.get("/api/timeline/view?trace=broken.nprof")
    assert r.status_code == 500 and "Traceback" not in r.get_data(as_text=True)
    r = c.get("/api/timeline/view?trace=single.nprof&t0=0&t1=1000000&w=99999999&g=0.1.x.999")
    assert r.status_code == 200 and r.get_json()["n"] >= 0
    bad = c.get("/timeline?trace=single.nprof&pick=99999999")
    assert bad.status_code == 200


def test_a_slow_frame_is_pending_for_the_page_and_computed_once(served_dir):
    import threading

    from explorer.store import FramePending

    store = TraceStore(served_dir)
    release, calls = threading.Event(), []

    def slow():
        calls.append(1)
        release.wait(30)
        return 42

    with pytest.raises(FramePending):
        store.memo("single.nprof", "slow", slow, wait=0.05)
    with pytest.raises(FramePending):  # asked again while running: the same computation, not a second one
        store.memo("single.nprof", "slow", slow, wait=0.05)
    release.set()
    assert store.memo("single.nprof", "slow", slow, wait=30) == 42
    assert store.memo("single.nprof", "slow", slow) == 42 and len(calls) == 1
    import time

    s = _dump(guarded(lambda: store.memo("single.nprof", "slower", lambda: time.sleep(1) or 1, wait=0.01)))
    assert "nx-pending" in s and "error-box" not in s


def test_event_fields_are_labelled_as_fields_not_as_analysis_columns():
    from explorer.labels import table_column_label

    assert table_column_label("duration_ns") == "Duration"
    assert table_column_label("start_ts") == "Start" and table_column_label("framework_op") == "Host op row"
    assert "profiler" in table_column_label("flops")  # Kineto's recorded flops, not the op model's
