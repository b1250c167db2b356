# %% [markdown]
# # Walkthrough: from a trace to "what should I change"
#
# A notebook-style script (run it top to bottom, or cell by cell in VS Code / Jupyter with `# %%` cells).
# It opens a trace captured with `neuron_profiler` (simulated Trainium) and a real torch.profiler trace from a
# GPU, and asks the same questions of both: where does the time go, how close to the roof is each op,
# what should change, and how do the two runs compare.
#
#     python examples/walkthrough.py [CAPTURED.nprof|RUN_DIR] [GPU_TRACE.json.gz] [--html OUT_DIR]
#
# Defaults: the first captured sample under `sample_traces/` and the H100 BERT trace from
# `tests/data/realtraces` (a copy of TraceLens's test trace). Every number printed comes from `analysis`.

# %%
from __future__ import annotations

import argparse
import sys
from pathlib import Path

import pandas as pd

REPO = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(REPO))
import analysis  # noqa: E402
from analysis import figures  # noqa: E402

pd.set_option("display.width", 160)
pd.set_option("display.max_columns", 12)
pd.set_option("display.max_colwidth", 48)

GPU_DEFAULT = (REPO / "tests" / "data" / "realtraces" / "TraceLens" / "h100"
               / "gaunernst_bert-small-uncased__1016001.json.gz")


def default_captured() -> Path | None:
    found = sorted((REPO / "sample_traces").rglob("*.nprof"))
    found = [p for p in found if not p.name.endswith(".json.nprof")]
    gpt = [p for p in found if "gpt" in str(p).lower()]
    return (gpt or found or [None])[0]


ap = argparse.ArgumentParser(description="analysis walkthrough")
ap.add_argument("captured", nargs="?", type=Path, default=None)
ap.add_argument("gpu", nargs="?", type=Path, default=GPU_DEFAULT)
ap.add_argument("--html", type=Path, default=None, help="also write the figures as HTML files here")
args = ap.parse_args(sys.argv[1:] if __name__ == "__main__" else [])
captured_path = args.captured or default_captured()
if captured_path is None or not Path(captured_path).exists():
    sys.exit("no captured trace: pass one, or generate sample_traces/ (python sample_traces/regenerate.py)")
if not args.gpu.exists():
    sys.exit(f"no GPU trace at {args.gpu}: pass a torch.profiler .json(.gz)")


def show(title: str, df: pd.DataFrame, n: int = 10) -> None:
    print(f"\n## {title}\n{df.head(n).to_string()}")


def save(fig, name: str) -> None:
    if args.html:
        args.html.mkdir(parents=True, exist_ok=True)
        fig.write_html(args.html / f"{name}.html", include_plotlyjs="cdn")


# %% [markdown]
# ## 1. Open the captured trace
# `analysis.load` takes a `.nprof` file, a Kineto JSON, or a run directory (-> `TraceSet`, one trace per
# rank/window). Tables are DataFrames (index = row id, int64 ns timestamps, Categorical strings).

# %%
loaded = analysis.load(captured_path)
if isinstance(loaded, analysis.TraceSet):
    print(loaded, "-> looking at rank", loaded.ranks[0])
    trn = loaded.by_rank(loaded.ranks[0])[0]
else:
    trn = loaded
print(trn, "| devices:", trn.devices[["kind", "name", "simulated", "num_cores"]].to_dict("records"))
print({name: len(trn.table(name)) for name in analysis.trace.TABLE_NAMES})

# %% [markdown]
# ## 2. Steps and a steady-state window
# Warm-up steps distort everything; restrict the analysis to the later steps.

# %%
steps = trn.steps()
show("steps", steps)
steady = trn.select_steps(int(steps["step"].iloc[-1])) if len(steps) > 1 else trn
print("analysing", steady)

# %% [markdown]
# ## 3. Summary: Neuron Explorer's headline metrics
# MFU / HFU / MBU follow Neuron Explorer's definitions with per-NeuronCore peaks from the trace header.

# %%
summary = steady.summary()
show("summary", summary[["metric", "value", "unit"]], n=40)
save(figures.summary_figure(summary), "summary")

# %% [markdown]
# ## 4. Hot ops: by op, by module
# `device_time_self_ns` is time attributed to the op itself; `device_time_total_ns` adds nested ops /
# sub-modules.

# %%
show("hot ops by op", steady.hot_ops(by="op")[["calls", "device_time_self_ns", "device_time_total_ns", "flops",
                                                "achieved_flops_per_s", "share_of_step_time_percent"]])
show("hot ops by module", steady.hot_ops(by="module")[["calls", "device_time_self_ns", "device_time_total_ns"]])
show("by engine", steady.hot_ops(by="engine")[["instructions", "device_time_self_ns"]])
save(figures.hot_ops_figure(steady), "hot_ops")

# %% [markdown]
# ## 5. Roofline
# Each op's arithmetic intensity (FLOPs per HBM byte) against the device's ceilings; `time_saved_at_roof_ns`
# ranks what is worth optimising.

# %%
show("ceilings", steady.roofline_ceilings())
show("roofline", steady.roofline()[["op", "dtype", "engine", "arithmetic_intensity", "achieved_flops_per_s",
                                    "bound", "efficiency_percent", "time_saved_at_roof_ns"]])
save(figures.roofline_figure(steady), "roofline")

# %% [markdown]
# ## 6. DMA and collectives

# %%
show("DMA queues", trn.dma_queues())
show("DMA sizes", trn.dma_sizes())
show("collectives", trn.collective_stats()[["operation", "process_group", "duration_ns", "size_bytes",
                                            "busbw_bytes_per_s"]])
if isinstance(loaded, analysis.TraceSet) and len(loaded.ranks) > 1:
    across = loaded.collectives()
    show("collectives across ranks", across[["collective", "rank", "arrival_skew_ns", "wait_ns", "transfer_ns"]])
    save(figures.skew_heatmap(across), "skew")
    balance = analysis.rank_balance(loaded)  # per rank: device time split, step time vs median, straggling
    show("rank balance", balance[["rank", "compute_time_ns", "idle_time_ns", "step_time_vs_median",
                                  "times_last", "total_wait_caused_ns"]])
    save(figures.rank_balance_figure(balance), "rank_balance")
    save(figures.rank_timeline_figure(loaded), "rank_timeline")
save(figures.dma_throughput_figure(trn), "dma_throughput")

# %% [markdown]
# ## 7. Recommendations
# Neuron Explorer's rules (model-FLOP share, transposes, spilling, small DMAs, collective outliers,
# throttling) and ours (host gaps, FP32 matmuls, exposed collectives, low matrix utilisation), ranked by
# the time they could save.

# %%
recs = trn.recommendations()
show("recommendations", recs[["rule", "severity", "title", "est_time_saved_ns"]])
for _, r in recs.head(3).iterrows():
    print(f"- [{r['severity']}] {r['title']}\n    evidence: {r['evidence']}\n    action:   {r['action']}")
save(figures.recommendations_figure(recs), "recommendations")

# %% [markdown]
# ## 8. The same questions on a real GPU trace
# A torch.profiler trace is converted on the fly (and, by default, cached next to it as `.nprof` when the
# folder is writable; `cache=False` here because the default trace sits in a shared corpus).
# FLOPs and bytes come from the ops' input shapes; peaks from the GPU's row in the hardware table.

# %%
gpu = analysis.load(args.gpu, cache=False)
print(gpu, "|", gpu.devices[["kind", "name"]].to_dict("records"))
g = gpu.summary_dict()
print({k: round(g[k], 3) for k in ("total_time", "device_active_percent", "mfu_estimated_percent",
                                   "mbu_estimated_percent", "idle_percent")})
show("GPU hot ops", gpu.hot_ops()[["calls", "device_time_self_ns", "flops", "achieved_flops_per_s"]])
show("GPU roofline", gpu.roofline()[["op", "dtype", "arithmetic_intensity", "bound", "efficiency_percent",
                                     "time_saved_at_roof_ns"]])
show("GPU recommendations", gpu.recommendations()[["rule", "severity", "title", "est_time_saved_ns"]])
try:
    show("GPU temporal breakdown (HTA definition)", gpu.temporal_breakdown())
except ImportError:
    pass
save(figures.roofline_figure(gpu), "gpu_roofline")

# %% [markdown]
# ## 9. Diff: GPU trace vs the captured Trainium trace
# Aligned by op name (modules and shapes differ between these two models); each op's delta is split into
# more calls, slower per call, and moved across the roofline. Ops present in only one trace show up with
# 0 calls on the other side.

# %%
d = analysis.diff(gpu, trn, keys=("op",))
show("diff (a = GPU, b = Trainium)", d[["calls_a", "calls_b", "delta_ns", "more_calls_ns", "slower_per_call_ns",
                                       "moved_across_roofline_ns", "bound_a", "bound_b"]])
save(figures.diff_figure(d), "diff")
print("\nwalkthrough done")
