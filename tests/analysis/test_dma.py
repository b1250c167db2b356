"""DMA analyses on a hand-built queue set."""
import numpy as np
import pytest
from _traces import neuron_builder

import analysis


def _trace():
    b, t = neuron_builder()
    q2 = b.add_track(kind="dma_queue", name="qScalarSpillReload0", parent=t["core"], device=0, nc_idx=0)
    b.add_rows("dma", {"track": [t["qSyncIO0"], t["qSyncIO0"], q2, q2],
                       "start_ts": [0, 500, 0, 2000], "duration_ns": [1000, 1000, 100, 100],
                       "transfer_bytes": [1000, 65536, 512, 512], "source": "HBM", "dest": "SBUF",
                       "queue_type": ["input", "input", "data", "data"]})
    # device span from one instruction [0, 4000)
    b.add_rows("instructions", {"track": t["Vector"], "start_ts": [0], "duration_ns": [4000], "engine": "Vector"})
    return analysis.Trace.from_builder(b)


def test_throughput_conserves_bytes():
    t = _trace()
    th = analysis.dma_throughput(t, bins=40)
    assert len(th) == 40 and th["bytes"].sum() == pytest.approx(1000 + 65536 + 1024)
    assert th["bin_start_ts"].iloc[0] == 0 and th["bin_end_ts"].iloc[-1] == 4000
    # first 100 ns bin: 1000 B over 1000 ns -> 100 B, plus 512 B over 100 ns
    assert th["bytes"].iloc[0] == pytest.approx(100 + 512)
    assert th["throughput_bytes_per_s"].iloc[0] == pytest.approx(612 / 100e-9)
    by = analysis.dma_throughput(t, bins=10, by="queue_type")
    assert set(by["queue_type"]) == {"input", "data"}
    assert by.groupby("queue_type")["bytes"].sum()["data"] == pytest.approx(1024)
    with pytest.raises(ValueError, match="valid"):
        analysis.dma_throughput(t, by="engine")


def test_queues():
    q = analysis.dma_queues(_trace()).set_index("queue")
    io = q.loc["qSyncIO0"]
    assert io["transfers"] == 2 and io["bytes"] == 66536 and io["busy_ns"] == 1500
    assert io["utilization_percent"] == pytest.approx(100 * 1500 / 4000)
    assert io["achieved_bandwidth_bytes_per_s"] == pytest.approx(66536 / 1.5e-6)
    assert io["small_transfer_percent"] == 50.0 and io["queue_type"] == "input"


def test_size_histogram():
    h = analysis.dma_sizes(_trace())
    assert h["transfers"].sum() == 4
    row = h[h["bucket_low_bytes"] == 512].iloc[0]
    assert row["transfers"] == 3 and row["bucket_high_bytes"] == 1024   # 512, 512 and 1000 B and row["below_efficient"]
    big = h[h["bucket_low_bytes"] == 65536].iloc[0]
    assert not big["below_efficient"]
    assert np.all(h["bucket_low_bytes"] < h["bucket_high_bytes"])


def test_summary_dma_stats():
    s = _trace().summary_dict()
    assert s["dma_transfer_count"] == 4
    assert s["dma_transfer_average_bytes"] == pytest.approx((1000 + 65536 + 1024) / 4)
    assert s["small_dma_transfer_percent"] == 75.0
    assert s["dma_active_time_percent"] == pytest.approx(100 * 1600 / 4000)   # [0,1500) ∪ [2000,2100)
    assert s["hbm_read_bytes"] == 1000 + 65536 + 1024                          # from DMA source=HBM
