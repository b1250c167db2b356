"""Each page's layout builder on a captured-style Neuron trace, a multi-rank group and an imported GPU
trace; the timeline view's LOD cap, bytes per view and details panel."""
from __future__ import annotations

import json

import numpy as np
import pandas as pd
import plotly
import pytest

import analysis
from explorer.app import build_page, create_app
from explorer.pages import summary, timeline
from explorer.pages.common import Ctx
from explorer.state import PAGES, ViewState
from explorer.store import TraceStore
from explorer.tiles import view_payload
from explorer.viewport import BUDGET, query_view

GROUP = "group:run/synthetic"


def _dump(component) -> str:
    return json.dumps(component, cls=plotly.utils.PlotlyJSONEncoder)


def _find(component, id_):
    """The component with ``id`` inside a layout tree, or None."""
    if getattr(component, "id", None) == id_:
        return component
    kids = getattr(component, "children", None)
    for k in kids if isinstance(kids, (list, tuple)) else ([kids] if kids is not None else []):
        hit = _find(k, id_)
        if hit is not None:
            return hit
    return None


@pytest.fixture(scope="module")
def ctx(served_dir):
    return Ctx(TraceStore(served_dir))


@pytest.mark.parametrize("page", PAGES)
@pytest.mark.parametrize("key", ["single.nprof", GROUP, "empty.nprof"])
def test_every_page_builds_without_error(ctx, page, key):
    out = build_page(ctx, ViewState(page=page, trace=key))
    s = _dump(out)
    assert "error-box" not in s, s[s.find("error-box") - 400: s.find("error-box") + 200]
    assert f'"{page.replace("_", "-")}-page"' in s


def test_gpu_trace_pages(gpu_dir):
    ctx = Ctx(TraceStore(gpu_dir))
    key = ctx.store.default_key()
    idx = ctx.store.timeline(key)
    assert any(i.kind == "stream" and i.table == "instructions" for i in idx.infos)
    for page in PAGES:
        s = _dump(build_page(ctx, ViewState(page=page, trace=key)))
        assert "error-box" not in s, (page, s[s.find("error-box") - 400: s.find("error-box") + 200])


def test_bad_file_shows_error_in_page(ctx):
    for page in ("summary", "timeline"):
        s = _dump(build_page(ctx, ViewState(page=page, trace="broken.nprof")))
        assert "error-box" in s and "broken.nprof" in s
    s = _dump(build_page(ctx, ViewState(page="timeline", trace="../etc/passwd")))
    assert "error-box" in s and "not served" in s


def _cards(component) -> dict[str, tuple[str, str, str]]:
    """{metric: (label, shown text, data-value)} of every card in a layout."""
    out = {}

    def walk(c):
        props = c.to_plotly_json()["props"] if hasattr(c, "to_plotly_json") else {}
        if "kpi-card" in str(props.get("className", "")).split():
            out[props["data-metric"]] = (c.children[0].children, c.children[1].children, props["data-value"])
        kids = getattr(c, "children", None)
        for k in kids if isinstance(kids, (list, tuple)) else ([kids] if kids is not None else []):
            walk(k)

    walk(component)
    return out


@pytest.mark.parametrize("key", ["single.nprof", GROUP])
def test_summary_numbers_are_the_analyses_values(ctx, key):
    """Every card shows the value analysis.summary / analysis.summary_items give for the trace, formatted in
    its unit; an unknown one reads "unknown"; the answer comes first."""
    from analysis.units import format_value

    tr = ctx.store.trace(key)
    expect = {**{m: (v, u) for m, v, u in zip(*[analysis.summary(tr)[c] for c in ("metric", "value", "unit")])},
              **{m: (v, u) for m, v, u in zip(*[analysis.summary_items(tr)[c] for c in ("metric", "value", "unit")])}}
    page = summary.layout(ctx, ViewState(trace=key))
    cards = _cards(page)
    assert len(cards) >= 25
    for m, (_, shown, raw) in cards.items():
        v, u = expect[m]
        if np.isfinite(v):
            assert float(raw) == float(v) and shown == format_value(v, u), (m, shown, v)
        else:
            assert shown == "unknown" and raw == "nan", m
    answer = _cards(_find(page, "answer-cards"))
    assert list(answer)[:2] == ["step_time_mean_ns", "mfu_estimated_percent"]
    assert answer["mfu_estimated_percent"][0] == "MFU (estimated)"  # words, not identifiers
    split = analysis.time_split(tr)
    segs = _find(page, "time-split-fig").children[0].children  # the stacked bar's segments, drawn as HTML
    drawn = [float(sg.to_plotly_json()["props"]["data-value"]) for sg in segs]
    shown = {k: v for k, v in zip(split["part"], split["percent"]) if v > 0}
    assert sorted(drawn) == pytest.approx(sorted(shown.values()))
    assert [sg.style["width"] for sg in segs] == [f"{v:.4f}%" for v in split["percent"] if v > 0]
    top = analysis.recommendations(tr).iloc[0]["title"]
    assert top in _dump(_find(page, "top-recommendation"))


def test_summary_sections_show_only_when_they_apply(ctx, gpu_dir):
    """A single-rank trace without collectives has no Collectives section, a GPU trace no DMA section nor
    throttling card; a run's title names the run, not rank 0; few steps are folded."""
    single = _dump(summary.layout(ctx, ViewState(trace="single.nprof")))
    assert analysis.summary_dict(ctx.store.trace("single.nprof"))["cc_op_count"] > 0
    assert "collective-cards" in single and "dma-cards" in single and "engine-fig" in single
    run = summary.layout(ctx, ViewState(trace=GROUP))
    title = run.children[0].children
    assert title.startswith("Summary of the run") and "2 ranks" in title and "rank 0" not in title
    gctx = Ctx(TraceStore(gpu_dir))
    key = gctx.store.default_key()
    gpu = summary.layout(gctx, ViewState(trace=key))
    s = _dump(gpu)
    assert analysis.summary_dict(gctx.store.trace(key))["cc_op_count"] == 0
    assert "collective-cards" not in s and "dma-cards" not in s and "dma-source-fig" not in s
    assert "throttling_percent" not in _cards(gpu) and "sbuf_usage_mean_percent" not in _cards(gpu)
    assert len(analysis.steps(gctx.store.trace(key))) <= 3 and "steps-fold" in s


def test_summary_flops_table_is_the_analysis(ctx):
    tr = ctx.store.trace("single.nprof")
    grid = _find(summary.layout(ctx, ViewState(trace="single.nprof")), "flops-table")
    fb = analysis.flops_breakdown(tr)
    assert [r["component"] for r in grid.rowData] == fb["component"].tolist()
    for r, f in zip(grid.rowData, fb["flops"]):
        assert (r["flops"] is None and not np.isfinite(f)) or r["flops"] == pytest.approx(f)


def _bars(component) -> dict[str, float]:
    """{name: value} of the HTML bars (explorer/bars.py) inside a component."""
    out = {}

    def walk(c):
        props = c.to_plotly_json()["props"] if hasattr(c, "to_plotly_json") else {}
        if "data-value" in props and "data-name" in props:
            out[props["data-name"]] = float(props["data-value"])
        kids = getattr(c, "children", None)
        for k in kids if isinstance(kids, (list, tuple)) else ([kids] if kids is not None else []):
            walk(k)

    walk(component)
    return out


def test_summary_small_charts_are_the_analysis(ctx):
    """The engine, FLOPs-split and DMA bars drawn as HTML show the analysis's values, one bar per row, with
    lengths in proportion (oracle: analysis.summary, flops_breakdown, dma_bytes_by on the trace)."""
    tr = ctx.store.trace("single.nprof")
    page = summary.layout(ctx, ViewState(trace="single.nprof"))
    sm = analysis.summary(tr)
    eng = sm[sm["metric"].str.endswith("_active_percent") & (sm["metric"] != "device_active_percent")
             & sm["value"].notna()]
    names = {"Tensor": "Tensor (weight loads)", "TensorMatrix": "TensorMatrix (matmuls)"}
    want = {names.get(m[: -len("_active_percent")], m[: -len("_active_percent")]): v
            for m, v in zip(eng["metric"], eng["value"])}
    engine_fig = _find(page, "engine-fig")
    assert _bars(engine_fig) == pytest.approx(want) and len(want) >= 2
    widths = {r.to_plotly_json()["props"]["data-name"]: float(r.children[1].children[0].style["width"][:-1])
              for r in engine_fig.children if "nx-bar-row" in str(getattr(r, "className", ""))}
    top = max(100.0, max(want.values()) * 1.1)
    assert widths == pytest.approx({k: v / top * 100 for k, v in want.items()}, abs=1e-3)
    fb = analysis.flops_breakdown(tr)
    known = fb[fb["percent"].notna()]
    assert sorted(_bars(_find(page, "flops-fig")).values()) == pytest.approx(sorted(known["percent"]))
    for by in ("source", "data_type"):
        d = analysis.dma_bytes_by(tr, by=by)
        assert _bars(_find(page, f"dma-{by}-fig")) == pytest.approx(dict(zip(d["group"].astype(str), d["percent"])))
        assert len(d) >= 1


def test_timeline_layout_lod_and_zoom(ctx):
    state = ViewState(page="timeline", trace="single.nprof")
    meta = _find(timeline.layout(ctx, state), "tl-meta").data
    idx = ctx.store.timeline("single.nprof")
    assert len(meta["rows"]) == len(idx.infos) and meta["groups"] == idx.groups
    assert meta["t0"] == 0 and meta["t1"] == idx.end - idx.origin
    span = idx.end - idx.origin
    full = query_view(idx, None, None, 1400)
    assert 0 < full.n_shapes <= BUDGET
    zoom = query_view(idx, span // 2, span // 2 + span // 500, 1400)
    singles = lambda v: sum(int((s.count == 1).sum()) for s in v.shapes.values())  # noqa: E731
    assert zoom.threshold_ns < full.threshold_ns / 100
    assert singles(zoom) > 0 and singles(zoom) / max(zoom.n_shapes, 1) > singles(full) / max(full.n_shapes, 1)
    assert len(json.dumps(view_payload(idx, full))) < 1_000_000


def test_timeline_search_and_groups(ctx):
    idx = ctx.store.timeline("single.nprof")
    v = query_view(idx, None, None, 1400, q="gelu")
    assert v.highlight and all(len(s) for s in v.highlight.values())
    g = idx.groups[-1]
    v2 = query_view(idx, None, None, 1400, groups=[g])
    assert {idx.infos[i].group for i in v2.rows} == {g}


def test_details_panel_shows_fields_parent_and_children(ctx):
    idx = ctx.store.timeline("single.nprof")
    ins = idx.trace.table("instructions")
    rid = int(ins.index[ins["framework_op"] >= 0][0])
    s = _dump(timeline.details(ctx, ViewState(page="timeline", trace="single.nprof", sel=("instructions", rid))))
    host = int(ins.loc[rid, "framework_op"])
    assert "Launched by host op" in s and f"host_ops #{host}" in s and f"sel=host_ops%3A{host}" in s
    s2 = _dump(timeline.details(ctx, ViewState(page="timeline", trace="single.nprof", sel=("host_ops", host))))
    assert "Device work and flows" in s2 and f"instructions #{rid}" in s2


def test_view_payload_ids_name_real_events(ctx):
    """Every single shape of a view carries its table row id, and its start / duration are that event's."""
    idx = ctx.store.timeline("single.nprof")
    span = idx.end - idx.origin
    pay = view_payload(idx, query_view(idx, 0, span // 1000, 1400))
    checked = 0
    for row, start, dur, count, _c, _n, ids in pay["rows"]:
        info = idx.infos[row]
        table = info.table
        if info.kind == "hierarchy" and table != "instructions":  # module / op spans: the op_hierarchy frame's
            h = idx.hierarchy
            if table == "host_ops":
                h = h[(h["kind"] == "op") & (h["core"] == info.track)].set_index("host_op")
            df = pd.DataFrame({"start_ts": h["start_ts"], "duration_ns": h["end_ts"] - h["start_ts"]})
        else:
            df = idx.trace.table(table, ["start_ts", "duration_ns"])
        for s0, d0, n0, rid in zip(start, dur, count, ids):
            if n0 == 1:
                assert rid >= 0 and df.loc[rid, "start_ts"] - idx.origin == s0 and df.loc[rid, "duration_ns"] == d0
                checked += 1
            else:
                assert rid == -1
    assert checked > 0


def test_create_app_registers_routes(served_dir):
    app = create_app(served_dir)
    assert app._explorer_ctx.store.default_key() is not None
    assert not app.server.debug


def test_bundled_sample_trace_pages():
    """The bundled captured Neuron sample (written by the capture package) opens on every page."""
    from pathlib import Path

    sample = Path(__file__).resolve().parents[2] / "sample_traces" / "gpt_train_step.nprof"
    if not sample.is_file():
        pytest.fail(f"bundled sample {sample} is missing (python sample_traces/regenerate.py)")
    ctx = Ctx(TraceStore(sample))
    idx = ctx.store.timeline("gpt_train_step.nprof")
    assert {"Tensor", "TensorMatrix", "Vector", "Scalar"} <= {i.label for i in idx.infos}
    for page in PAGES:
        s = _dump(build_page(ctx, ViewState(page=page, trace="gpt_train_step.nprof")))
        assert "error-box" not in s, (page, s[s.find("error-box") - 400: s.find("error-box") + 200])


def test_colour_modes_label_events(ctx):
    import analysis  # noqa: F401  (the trace object comes from analysis.load)

    idx = ctx.store.timeline("single.nprof")
    tr = idx.trace
    ins = tr.table("instructions")
    host = tr.table("host_ops")
    codes, labels = idx.color_codes("instructions", "module")
    rid = int(ins.index[ins["framework_op"] >= 0][0])
    assert labels[codes[rid]] == str(host.loc[int(ins.loc[rid, "framework_op"]), "module"])
    codes, labels = idx.color_codes("instructions", "engine")
    assert labels[codes[rid]] == str(ins.loc[rid, "engine"])
    codes, labels = idx.color_codes("instructions", "op")
    assert labels[codes[rid]] == str(ins.loc[rid, "name"])
    with pytest.raises(ValueError, match="op, engine, module"):
        idx.color_codes("instructions", "rainbow")


def test_recommendations_link_to_cited_time_and_events(ctx):
    import analysis

    tr = ctx.store.trace("single.nprof")
    rec = analysis.recommendations(tr)
    s = _dump(summary.layout(ctx, ViewState(trace="single.nprof")))
    origin = int(tr.time_range[0])
    with_range = rec.dropna(subset=["start_ts", "end_ts"])
    assert len(with_range), "the synthetic trace should trigger at least one recommendation"
    for r in with_range.itertuples():
        assert r.title in s
    r = with_range.iloc[0]
    d = max(int(r.end_ts) - int(r.start_ts), 1000)
    assert f"t0={int(int(r.start_ts) - origin - 0.1 * d)}" in s


def test_recommendation_links_to_cited_event_on_sample():
    """The bundled CNN capture (FP32 matmuls) triggers a rule that cites events: its link selects the first one."""
    from pathlib import Path

    import analysis

    sample = Path(__file__).resolve().parents[2] / "sample_traces" / "cnn_inference.nprof"
    if not sample.is_file():
        pytest.fail(f"bundled sample {sample} is missing (python sample_traces/regenerate.py)")
    ctx = Ctx(TraceStore(sample))
    rec = analysis.recommendations(ctx.store.trace("cnn_inference.nprof"))
    from explorer.state import SEL_TABLES  # events the timeline can select (counter samples cannot be)
    cited = rec[[len(x) > 0 and t in SEL_TABLES for x, t in zip(rec["event_rows"], rec["event_table"])]]
    assert len(cited)
    s = _dump(summary.layout(ctx, ViewState(trace="cnn_inference.nprof")))
    assert f"sel={cited.iloc[0]['event_table']}%3A{int(cited.iloc[0]['event_rows'][0])}" in s


def test_trace_names_cannot_inject_script(tmp_path):
    from neuron_profiler.synthetic_trace import write_synthetic_trace

    (tmp_path / "<").mkdir()
    write_synthetic_trace(tmp_path / "<" / "script>x.nprof", 500)
    app = create_app(tmp_path)
    assert app._explorer_ctx.store.default_key() == "</script>x.nprof"
    assert "</script>x" not in app.index()


def test_search_by_op_name_finds_gpu_kernels(gpu_dir):
    """Roofline points are ops; on a GPU trace their kernels carry kernel names, so the timeline search
    also matches the launching host op's name."""
    idx = TraceStore(gpu_dir).timeline(TraceStore(gpu_dir).default_key())
    ins = idx.trace.table("instructions")
    host = idx.trace.table("host_ops")
    launched = ins[ins["framework_op"] >= 0]
    assert len(launched)
    ops = host.loc[launched["framework_op"].to_numpy(), "name"].astype(str).to_numpy()
    names = launched["name"].astype(str).to_numpy()
    k = next(i for i in range(len(ops)) if ops[i].lower() not in names[i].lower())  # kernel named otherwise
    m = idx.match("instructions", ops[k])
    assert m[int(launched.index[k])]


def test_roofline_point_selects_its_instructions_on_the_timeline(ctx):
    import analysis
    from explorer.pages import roofline

    tr = ctx.store.trace("single.nprof")
    pts = analysis.roofline(tr)
    point = int(pts["device_time_ns"].idxmax())
    rows = analysis.roofline_point_rows(tr, point)
    work = analysis.instruction_work(tr).loc[rows]
    assert len(rows) == pts.loc[point, "instructions"]
    assert work["flops"].sum() == pytest.approx(pts.loc[point, "flops"])
    assert set(work["op"].astype(str)) == {pts.loc[point, "op"]}
    # the figure's points carry their roofline row, the link carries it to the timeline
    fig = roofline.figure(tr, pts, ViewState(page="roofline", trace="single.nprof"))
    labels = {int(c[3]) for d in fig.data if d.mode == "markers" for c in d.customdata}
    assert point in labels and labels <= set(pts.index)
    link = _find(roofline._selected(ctx, ViewState(page="roofline", trace="single.nprof"), point),
                 "rf-timeline-link")
    assert f"pick={point}" in link.href and f"sel=instructions%3A{rows[0]}" in link.href
    state = ViewState(page="timeline", trace="single.nprof", pick=point)
    idx = ctx.store.timeline("single.nprof")
    v = query_view(idx, None, None, 1400, picked=timeline.picked_of(idx, point))
    lit = {int(r) for i, s in v.highlight.items() for r in idx.ids[i][s.rep]}
    assert lit and lit <= set(rows.tolist())
    page = timeline.layout(ctx, state)
    items = _find(page, "tl-results").data["items"]
    assert sorted(r for _, r, *_ in items) == sorted(rows.tolist())  # the result list: exactly its instructions
    assert [s0 for *_, s0, _e in items] == sorted(s0 for *_, s0, _e in items)
    assert f"{len(rows):,} instructions of the picked roofline point" in _dump(page)


def test_roofline_filters_and_colour_come_from_the_url(ctx):
    import analysis
    from explorer.pages import roofline

    tr = ctx.store.trace("single.nprof")
    pts = analysis.roofline(tr)
    eng = sorted(map(str, pts["engine"].unique()))[0]
    fig = roofline.figure(tr, pts, ViewState(page="roofline", roof_color="engine", engines=(eng,)))
    assert [d.name for d in fig.data if d.mode == "markers"] == [eng]
    page = roofline.layout(ctx, ViewState(page="roofline", trace="single.nprof", engines=(eng,), bounds=("memory",)))
    assert _find(page, "rf-engines").value == [eng] and _find(page, "rf-bounds").value == ["memory"]


def test_timeline_rows_from_the_url(ctx):
    idx = ctx.store.timeline("single.nprof")
    state = ViewState(page="timeline", trace="single.nprof", rows=(len(idx.groups) - 1, 0, 999))
    meta = _find(timeline.layout(ctx, state), "tl-meta").data
    assert meta["shown"] == [len(idx.groups) - 1, 0]  # positions that exist here


def test_group_summary_shows_rank_balance_with_links_to_each_rank(ctx):
    import analysis

    out = summary.layout(ctx, ViewState(trace=GROUP))
    s = _dump(out)
    assert "rank-balance-fig" in s and "rank-timeline-fig" in s and "error-box" not in s
    lanes = {d.name for d in _find(out, "rank-timeline-fig").figure.data}
    assert lanes == {"steps", "compute", "communication", "memory"}
    table = _find(out, "rank-balance-table")
    expect = analysis.rank_balance(ctx.store.open(GROUP))
    data = table.rowData
    assert [r["rank"] for r in data] == expect["rank"].tolist() == [0, 1]
    assert [r["compute_time_ns"] for r in data] == expect["compute_time_ns"].tolist()
    assert data[1]["open"].startswith("[rank 1](/summary?") and data[1]["open"].endswith("&rank=1)")
    assert "rank-balance-fig" not in _dump(summary.layout(ctx, ViewState(trace="single.nprof")))


@pytest.mark.parametrize("key", ["ne_parquet.nprof", "ne_json.nprof"])
def test_summary_shows_neuron_explorers_numbers_beside_ours(explorer_imports, key):
    """Both Explorer formats, imported through the CLI, open with Explorer's Summary beside ours: values
    computed by hand from the fixture (4 bf16 matmuls of 2·128·128·512 FLOP on 2 physical cores; our span
    T0 .. T0 + 1400 ns, the all-reduce's end; Explorer's MFU 21.3 %, total_time 2000 ns)."""
    from realdata import explorer_fixture

    fx = explorer_fixture()
    ctx = Ctx(TraceStore(explorer_imports))
    page = summary.layout(ctx, ViewState(trace=key))
    grid = _find(page, "ne-compare-table")
    assert grid is not None, "no Neuron Explorer comparison on the Summary"
    assert "Neuron Explorer's numbers beside ours" in _dump(page)
    rows = {r["label"]: r for r in grid.rowData}
    peak = ctx.store.trace(key).header.devices[0].spec.peak_flops_per_s["bfloat16"]
    mfu = rows["MFU (estimated)"]
    assert mfu["ours"] == pytest.approx(100 * 4 * fx.MATMUL_FLOPS / (peak * 2 * 1400e-9), rel=1e-9)
    assert mfu["neuron_explorer"] == 21.3 and mfu["difference"] == pytest.approx(mfu["ours"] - 21.3)
    assert (rows["Total time"]["ours"], rows["Total time"]["neuron_explorer"]) == (1400, 2000)
    assert rows["NeuronCore cycle count"]["ours"] is None and rows["NeuronCore cycle count"]["neuron_explorer"] == 4800
    heads = {c["field"]: c for c in grid.columnDefs}
    assert heads["ours"]["headerName"] == "Ours" and heads["neuron_explorer"]["headerName"] == "Neuron Explorer"
    assert heads["ours"]["valueFormatter"]["function"] == "fmtUnit(params.value, params.data.unit)"
    assert heads["metric"].get("hide") and heads["unit"].get("hide") and not heads["note"].get("hide")
    assert _find(page, "answer-cards") is not None  # our answer stays above it


def test_no_explorer_table_without_explorer_summary(ctx):
    s = _dump(summary.layout(ctx, ViewState(trace="single.nprof")))
    assert "ne-compare-table" not in s and "Neuron Explorer's numbers" not in s


@pytest.mark.parametrize("page_size", [15, 20, 50])
def test_grid_page_size_is_one_of_its_choices(page_size):
    """AG Grid shows an empty page-size selector when the page size is not among its choices."""
    import pandas as pd

    from explorer.pages.common import data_table

    grid = data_table(pd.DataFrame({"x": range(200)}), id="t", page_size=page_size)
    opts = grid.dashGridOptions
    assert opts["pagination"] is True and opts["paginationPageSize"] == page_size
    assert page_size in opts["paginationPageSizeSelector"]
    assert opts["paginationPageSizeSelector"] == sorted(opts["paginationPageSizeSelector"])


def test_gpu_kernel_details_show_the_op_models_work_not_unrecorded_zeros(gpu_dir):
    """An imported kernel records no FLOPs or bytes: its details show its op's FLOPs (from shapes), never
    "0 FLOP" for a field the profiler did not record."""
    store = TraceStore(gpu_dir)
    key = store.default_key()
    idx = store.timeline(key)
    ins = idx.trace.table("instructions")
    w = analysis.instruction_work(idx.trace)
    rid = int(w.index[(w["flops"] > 0).to_numpy()][0])
    s = _dump(timeline.details(Ctx(store), ViewState(page="timeline", trace=key, sel=("instructions", rid))))
    assert "FLOPs (op model)" in s and f"{w.loc[rid, 'flops']:,.0f} FLOP" in s
    assert "Raw FLOPs" not in s and int(ins.loc[rid, "raw_flops"]) == 0


def test_an_instruction_without_a_dtype_says_why(tmp_path):
    """The compiled GPT sample's graph-level waits record no dtype (nor does the graph call that launched them):
    the details say "unknown" and why instead of leaving the field out."""
    import shutil
    from pathlib import Path

    samples = Path(__file__).resolve().parents[2] / "sample_traces"
    shutil.copy(samples / "gpt_train_step_compiled.nprof", tmp_path / "c.nprof")
    store = TraceStore(tmp_path)
    idx = store.timeline("c.nprof")
    ins = idx.trace.table("instructions")
    blank = ins.index[(ins["dtype"].astype(str) == "").to_numpy()]
    assert len(blank)
    w = analysis.instruction_work(idx.trace)
    unknown = [r for r in blank if str(w.at[r, "dtype"]) in ("", "nan")]
    assert unknown
    s = _dump(timeline.details(Ctx(store), ViewState(page="timeline", trace="c.nprof", sel=("instructions",
                                                                                          int(unknown[0])))))
    assert "unknown: neither this instruction nor the op that launched it records a data type" in s
    known = int(ins.index[(ins["dtype"].astype(str) != "").to_numpy()][0])
    s2 = _dump(timeline.details(Ctx(store), ViewState(page="timeline", trace="c.nprof", sel=("instructions", known))))
    assert str(ins.at[known, "dtype"]) in s2 and "unknown: neither" not in s2
