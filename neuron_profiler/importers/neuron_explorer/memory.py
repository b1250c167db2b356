"""Memory tables of a Neuron Explorer profile: ``SbufAllocation`` rows become the trace's ``allocations``
(SBUF buffers over time; Explorer has no PSUM allocation table), ``SystemProfileHbmUsage`` the ``HBM Usage``
counters (bytes held, summed over the HBM stacks at each timestamp: total, weights, tensors, spill), and
``SystemProfileMetadata.hbm_capacity_bytes`` the device's HBM capacity."""
from __future__ import annotations

from typing import Any

import numpy as np

from neuron_profiler.importers.neuron_explorer.columns import integer, number, text

__all__ = ["allocations", "hbm_usage", "HBM_SERIES"]

#: SystemProfileHbmUsage field -> counter track name (bytes)
HBM_SERIES = {"total_bytes": "HBM Usage", "weights_bytes": "HBM Usage: weights",
              "tensors_bytes": "HBM Usage: tensors", "dram_spill_bytes": "HBM Usage: spill"}


def allocations(ctx: Any) -> None:
    """``SbufAllocation`` -> ``allocations`` rows (one partition each; spill when the buffer was filled by a
    spill-reload queue)."""
    df = ctx.table("SbufAllocation")
    if df is None or not len(df):
        return
    start = integer(df, "start_ts")
    end = np.maximum(integer(df, "end_ts"), start)
    name = text(df, "tensor_name")
    hlo = text(df, "hlo_name")
    name = np.where(name == "", np.where(hlo == "", "unknown", hlo), name)
    queue = text(df, "queue_name")
    spill = np.array(["SpillReload" in q for q in queue], dtype=np.int64)
    tracks = np.array([ctx.tracks.core(int(p)) for p in integer(df, "pcore_idx")], dtype=np.int64)
    lo = integer(df, "start_address")
    ctx.b.add_rows("allocations", {
        "track": tracks, "start_ts": start, "duration_ns": end - start, "buffer": "SBUF",
        "partition": integer(df, "partition"), "num_partitions": np.ones(len(df), np.int64),
        "start_address": lo, "end_address": np.maximum(integer(df, "end_address"), lo), "tensor_name": name,
        "tensor_kind": text(df, "op_source_type"), "spill": spill})


def hbm_usage(ctx: Any) -> None:
    """``SystemProfileHbmUsage`` -> ``HBM Usage`` counters under the first NeuronCore; the capacity of
    ``SystemProfileMetadata`` into the device spec (when the hardware table did not give it)."""
    meta = ctx.table("SystemProfileMetadata")
    if meta is not None and len(meta) and "hbm_capacity_bytes" in meta.columns:
        cap = float(number(meta, "hbm_capacity_bytes")[0])
        spec = ctx.b.header.devices[ctx.tracks.dev_idx].spec
        if cap > 0 and not spec.hbm_capacity_bytes:
            spec.hbm_capacity_bytes = cap
    df = ctx.table("SystemProfileHbmUsage")
    if df is None or not len(df):
        return
    ts = integer(df, "timestamp")
    uniq, inv = np.unique(ts, return_inverse=True)
    for field, name in HBM_SERIES.items():
        if field not in df.columns:
            continue
        v = np.zeros(len(uniq))
        np.add.at(v, inv, number(df, field))  # summed over the device's HBM stacks at each timestamp
        tr = ctx.tracks.child("counter", 0, name, unit="bytes")
        ctx.b.add_rows("counters", {"track": tr, "ts": uniq, "value": v})
