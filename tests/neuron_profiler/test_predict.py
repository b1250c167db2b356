"""``neuron-profile predict`` on a small decoder: the composition's arithmetic, the run directory, the traces."""
from __future__ import annotations

import json

import numpy as np
import pytest

from neuron_profiler.predict import PredictConfig, predict
from neuron_profiler.predict.compose import fitted, framework
from neuron_profiler.predict.flops import layer_params
from neuron_profiler.predict.models.zoo import get_model
from neuron_profiler.trace import read_trace

pytestmark = pytest.mark.slow

TP, PP, MB, GB = 2, 2, 2, 64   # 1 x trn1.32xlarge: DP = 32 / (2 x 2) = 8, accumulation 64 / (2 x 8) = 4


@pytest.fixture(scope="module")
def pred(tmp_path_factory):
    out = tmp_path_factory.mktemp("predict")
    return predict(PredictConfig(model="tiny-gpt", tp=TP, pp=PP, microbatch=MB, global_batch=GB,
                                 output_dir=str(out), run_id="tiny"))


def test_layout_and_accumulation(pred):
    lay = pred.layout
    assert (lay.tp, lay.pp, lay.dp, lay.accumulation, lay.sp) == (2, 2, 8, 4, True)


def test_breakdown_adds_up_to_the_step_and_gives_the_throughput(pred):
    s = pred.step
    assert sum(s.parts.values()) == pytest.approx(s.step_ns, rel=1e-12)
    assert all(v >= 0 for v in s.parts.values())
    assert pred.samples_per_s == pytest.approx(GB / (s.step_ns / 1e9), rel=1e-12)


def test_1f1b_composition_by_hand(pred):
    """m micro-batches through p stages: m slots of work plus p - 1 slots of bubble of the slowest stage."""
    s, m, p = pred.step, pred.layout.accumulation, pred.layout.pp
    pf, ov = fitted("matmul_peak_fraction"), framework("tp_overlap")
    slots = [st.micro_ns + st.mm_extra_ns(pf) + st.tp_comm_ns * (1 - ov) + 2 * s.detail["p2p_ns"]
             for st in pred.stages]
    assert s.slot_ns == pytest.approx(max(slots))
    assert s.parts["pipeline bubble"] == pytest.approx((p - 1) * max(slots))
    slow = pred.stages[int(np.argmax(slots))]
    assert s.parts["compute"] == pytest.approx(m * (slow.micro_ns + slow.mm_extra_ns(pf)))
    assert s.parts["tp collectives"] == pytest.approx(m * slow.tp_comm_ns * (1 - ov))
    assert s.parts["pp send/recv"] == pytest.approx(m * 2 * s.detail["p2p_ns"]) and s.detail["p2p_ns"] > 0
    assert s.parts["optimizer"] == pytest.approx(max(st.opt_ns for st in pred.stages))


def test_matmul_cap_only_slows(pred):
    st = pred.stages[0]
    assert st.mm_extra_ns(1.0) == 0.0
    assert 0 <= st.mm_extra_ns(0.9) <= st.mm_extra_ns(0.5) <= st.mm_extra_ns(0.2)
    ops = st.mm_runs[-1]   # at fraction f an op takes max(span, peak time / f): never less than its FLOPs allow
    assert (ops[:, 1] <= ops[:, 0] * 1.0001).all()


def test_rank_parameters_match_the_config(pred):
    """First stage of a TP=2 rank: half the token embedding, the position embedding, 2 layers sharded by 2."""
    m = get_model("tiny-gpt")
    c = m.layers
    per_layer = (c.hidden * 3 * c.hidden // TP + 3 * c.hidden // TP        # QKV (column parallel) + bias
                 + c.hidden // TP * c.hidden + c.hidden                      # out (row parallel) + bias
                 + c.hidden * c.ffn // TP + c.ffn // TP + c.ffn // TP * c.hidden + c.hidden   # MLP
                 + 4 * c.hidden)                                             # two LayerNorms
    assert per_layer * TP > layer_params(m) - 4 * c.hidden * TP   # replicated biases/norms counted once per rank
    first = next(s for s in pred.stages if s.name == "first")
    assert first.params == m.vocab // TP * c.hidden + m.seq * c.hidden + 2 * per_layer


def test_hbm_per_core(pred):
    for st, h in zip(pred.stages, pred.hbm):
        assert h["weights"] == st.params * 4 and h["gradients"] == st.params * 4
        assert h["optimizer state"] == st.params * 8
        assert h["capacity"] == 16 * 2**30   # 32 GiB per trn1 chip, 2 cores
        assert h["activations"] == st.saved_bytes * min(PP - st.index, pred.layout.accumulation) > 0


def test_run_directory_holds_one_trace_per_stage_with_the_assumptions(pred):
    files = sorted(p.name for p in pred.run_dir.iterdir())
    # stage 0 is rank 0; stage 1 starts at rank dp * tp = 16
    assert files == ["prediction.jsonl", "prediction.txt", "rank00000_window000.nprof", "rank00016_window000.nprof"]
    tf = read_trace(pred.run_dir / "rank00016_window000.nprof")
    h = tf.header
    assert h.world_size == 32 and h.run_id == "tiny" and h.rank == 16
    a = json.loads(h.metadata["predict.assumptions"])
    assert a["layout"]["accumulation"] == 4 and a["fitted"]["matmul_peak_fraction"]["source"] == "FITTED"
    assert json.loads(h.metadata["predict.result"])["samples_per_s"] == pytest.approx(pred.samples_per_s)
    coll = tf.table("collectives")
    assert set(coll["group_size"]) == {TP} and set(coll["process_group"].astype(str).str[:7]) == {"stage1_"}
    # sequence parallel: all-gather in, reduce-scatter out, twice per layer, forward and backward
    ops = coll["operation"].astype(str).value_counts().to_dict()
    assert ops.get("all_gather", 0) >= 4 and ops.get("reduce_scatter", 0) >= 4
    line = json.loads((pred.run_dir / "prediction.jsonl").read_text())
    assert line["step_ns"] == pytest.approx(pred.step.step_ns)


def test_run_directory_opens_in_neuron_analyze(pred, capsys):
    from analysis.cli import main
    assert main([str(pred.run_dir)]) == 0
    out = capsys.readouterr().out
    assert "2 traces (ranks 0, 16)" in out and "arrives last" not in out


def test_run_directory_is_one_run_in_the_explorer(pred):
    from explorer.store import TraceStore
    groups = [e for e in TraceStore(pred.run_dir).entries() if e.is_group]
    assert len(groups) == 1 and len(groups[0].members) == 2
    assert not any(e.key.startswith("prediction") for e in TraceStore(pred.run_dir).entries())


def test_refuses_to_write_over_a_run(pred):
    from neuron_profiler.predict import ConfigError
    with pytest.raises(ConfigError, match="already holds files"):
        predict(PredictConfig(model="tiny-gpt", output_dir=str(pred.run_dir.parent), run_id="tiny"))


def test_custom_stage_builder(tmp_path):
    """examples/predict_custom.py: its 4 all-reduces per micro-step on a TP=2 group, MFU from its FLOPs."""
    from pathlib import Path
    root = Path(__file__).resolve().parents[2]
    p = predict(PredictConfig(model=f"{root}/examples/predict_custom.py:make_stage", tp=2, microbatch=4,
                              global_batch=64, output_dir=str(tmp_path), run_id="custom"))
    assert [s.name for s in p.stages] == ["whole"] and p.layout.accumulation == 1
    coll = read_trace(p.run_dir / "rank00000_window000.nprof").table("collectives")
    assert len(coll) == 4 and set(coll["group_size"]) == {2}
    assert set(coll["input_size"]) == {4 * 512 * 1024 * 2}   # [4, 512, 1024] BF16 (autocast linear output)
    assert p.mfu == pytest.approx(64 * 6 * 4 * 2 * 1024 * 4096 * 512 / (p.step.step_ns / 1e9) / (32 * 91.75e12))


def test_every_explorer_page_builds_on_the_run(pred):
    """The explorer's run view (the group of the run's rank traces): every page builds without an error box."""
    import json as _json

    import plotly

    from explorer.app import build_page
    from explorer.pages.common import Ctx
    from explorer.state import PAGES, ViewState
    from explorer.store import TraceStore
    ctx = Ctx(TraceStore(pred.run_dir))
    key = next(e.key for e in ctx.store.entries() if e.is_group)
    for page in PAGES:
        s = _json.dumps(build_page(ctx, ViewState(page=page, trace=key)), cls=plotly.utils.PlotlyJSONEncoder)
        assert "error-box" not in s, (page, s[s.find("error-box") - 300: s.find("error-box") + 200])


def test_compiled_dry_run_fuses(pred, tmp_path):
    """--compiled: the same stage through torch.compile(backend="neuron"), the TP collectives between the
    compiled regions: the same collectives by kind and size (the backward re-gathers of the sequence-parallel
    inputs included), same matmul FLOPs, less non-matmul device time (fused chains)."""
    from collections import Counter
    c = pred.config.replace(compiled=True, output_dir=str(tmp_path), run_id="compiled")
    p = predict(c)

    def colls(run_dir) -> Counter:
        out: Counter = Counter()
        for f in sorted(run_dir.glob("rank*.nprof")):
            t = read_trace(f).table("collectives")
            out.update(zip(t["operation"].astype(str), t["input_size"], t["dtype"].astype(str)))
        return out
    assert colls(p.run_dir) == colls(pred.run_dir)
    for e, k in zip(pred.stages, p.stages):
        # durations: the same messages, issued at other points of the device's timeline
        assert k.tp_comm_ns == pytest.approx(e.tp_comm_ns, rel=0.1)
        assert k.mm_runs[-1][:, 1].sum() == pytest.approx(e.mm_runs[-1][:, 1].sum(), rel=1e-6)
        assert k.micro_ns - k.mm_ns < e.micro_ns - e.mm_ns


def test_report_names_the_eager_mode_and_its_band(pred):
    """The printed report: the band of the mode that ran (eager here, its leave-one-out band from the table),
    the note that the calibrated mode is --compiled, and breakdown lines that add up to the printed total."""
    from neuron_profiler.predict.config import calibration_band
    from neuron_profiler.predict.report import format_prediction
    text = format_prediction(pred)
    lo, hi = calibration_band(False)
    assert pred.band == (lo, hi) and f"{lo * 100:+.0f} % .. {hi * 100:+.0f} %" in text
    clo, chi = calibration_band(True)
    assert "eager dry run" in text and f"--compiled, their mode, has leave-one-out errors {clo * 100:+.0f} %" in text
    ms = {ln[2:22].strip(): float(ln[22:37].replace(",", "").replace("ms", "")) for ln in text.splitlines()
          if ln.startswith("  ") and ln.rstrip().endswith(("%", "ms")) and ln[22:37].strip().endswith("ms")}
    assert set(pred.step.parts) | {"total"} == set(ms)
    assert ms["total"] == pytest.approx(pred.step.step_ns / 1e6, abs=0.06)
    assert sum(v for k, v in ms.items() if k != "total") == pytest.approx(ms["total"], abs=0.06 * len(ms))
    assert (pred.run_dir / "prediction.txt").read_text(encoding="utf-8").strip() == text.strip()
