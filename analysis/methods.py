"""The analysis methods of :class:`analysis.Trace` and :class:`analysis.TraceSet`, written out.

Each method calls the public function of the same name (``t.hot_ops(by="module")`` is
``analysis.hot_ops(t, by="module")``): memoised per trace (window) and arguments, the result a copy the caller
owns. The functions and their documented columns are in :mod:`analysis.analyses` and
:mod:`analysis.registry`; ``tests/analysis/test_facade.py`` checks that every registered analysis with a
``method`` has it here and every method here has its registry entry.
"""
from __future__ import annotations

from collections.abc import Iterator
from typing import Any

import pandas as pd

from .analyses import breakdown as _breakdown
from .analyses import collectives as _collectives
from .analyses import cross_rank as _cross_rank
from .analyses import dependencies as _dependencies
from .analyses import diff as _diff
from .analyses import dma as _dma
from .analyses import explorer_summary as _explorer_summary
from .analyses import hot_ops as _hot_ops
from .analyses import idle as _idle
from .analyses import measured as _measured
from .analyses import memory as _memory
from .analyses import ranks as _ranks
from .analyses import recommend as _recommend
from .analyses import regions as _regions
from .analyses import roofline as _roofline
from .analyses import source_lines as _source_lines
from .analyses import steps as _steps
from .analyses import summary as _summary
from .analyses import summary_items as _items
from .analyses import timeline_tracks as _tracks
from .analyses.breakdown import TRACE_TABLES

__all__ = ["TraceAnalyses", "TraceSetAnalyses"]


class TraceAnalyses:
    """The per-trace analyses as methods (mixed into :class:`analysis.Trace`)."""

    # ---------------------------------------------------------------- steps
    def steps(self) -> pd.DataFrame:
        """Training steps (ProfilerStep / iteration markers): :func:`analysis.steps`."""
        return _steps.steps(self)

    def step_window(self, first: int, last: int | None = None) -> tuple[int, int]:
        """(start_ns, end_ns) of steps ``first``..``last`` (inclusive): :func:`analysis.step_window`."""
        return _steps.step_window(self, first, last)

    # ---------------------------------------------------------------- HTA-definition breakdowns
    def device_activity(self, *, dma: Any = TRACE_TABLES, collectives: Any = TRACE_TABLES,
                        hta_compatible: bool = False) -> pd.DataFrame:
        """Device intervals with their kernel type: :func:`analysis.device_activity`."""
        return _breakdown.device_activity(self, dma=dma, collectives=collectives, hta_compatible=hta_compatible)

    def temporal_breakdown(self, rank: int | None = None, *, dma: Any = TRACE_TABLES,
                           collectives: Any = TRACE_TABLES, hta_compatible: bool = False,
                           span: tuple[int, int] | None = None) -> pd.DataFrame:
        """Idle / compute / non-compute device time (HTA ``get_temporal_breakdown``):
        :func:`analysis.temporal_breakdown`."""
        return _breakdown.temporal_breakdown(self, rank, dma=dma, collectives=collectives,
                                             hta_compatible=hta_compatible, span=span)

    def kernel_breakdown(self, *, include_memory_kernels: bool = True, dma: Any = TRACE_TABLES,
                         collectives: Any = TRACE_TABLES, hta_compatible: bool = False
                         ) -> tuple[pd.DataFrame, pd.DataFrame]:
        """Device time by kernel type and by kernel name (HTA ``get_gpu_kernel_breakdown``):
        :func:`analysis.kernel_breakdown`."""
        return _breakdown.kernel_breakdown(self, include_memory_kernels=include_memory_kernels, dma=dma,
                                           collectives=collectives, hta_compatible=hta_compatible)

    def comm_comp_overlap(self, rank: int | None = None, *, dma: Any = TRACE_TABLES,
                          collectives: Any = TRACE_TABLES, hta_compatible: bool = False) -> pd.DataFrame:
        """Share of communication time overlapped by computation (HTA ``get_comm_comp_overlap``):
        :func:`analysis.comm_comp_overlap`."""
        return _breakdown.comm_comp_overlap(self, rank, dma=dma, collectives=collectives,
                                            hta_compatible=hta_compatible)

    def idle_time_breakdown(self, *, streams: list[int] | None = None, consecutive_kernel_delay_ns: int = 30_000,
                            hta_compatible: bool = False) -> pd.DataFrame:
        """Why each stream sits idle between kernels (HTA ``get_idle_time_breakdown``):
        :func:`analysis.idle_time_breakdown`."""
        return _idle.idle_time_breakdown(self, streams=streams, consecutive_kernel_delay_ns=consecutive_kernel_delay_ns,
                                         hta_compatible=hta_compatible)

    # ---------------------------------------------------------------- what the time is spent on
    def collective_stats(self) -> pd.DataFrame:
        """This rank's collectives with their bandwidths (``t.collectives`` is the table):
        :func:`analysis.collectives`."""
        return _collectives.collectives(self)

    def summary(self) -> pd.DataFrame:
        """Headline metrics (metric, value, unit, description, label): :func:`analysis.summary`."""
        return _summary.summary(self)

    def summary_dict(self) -> dict[str, float]:
        """The summary as {metric: value}: :func:`analysis.summary_dict`."""
        return _summary.summary_dict(self)

    def hot_ops(self, by: str = "op", top: int | None = None) -> pd.DataFrame:
        """Where device time goes, by op, module, shape or name: :func:`analysis.hot_ops`."""
        return _hot_ops.hot_ops(self, by, top)

    def roofline_ceilings(self) -> pd.DataFrame:
        """The roofs of each device, engine and dtype: :func:`analysis.roofline_ceilings`."""
        return _roofline.roofline_ceilings(self)

    def roofline(self, by: str = "op") -> pd.DataFrame:
        """Arithmetic intensity and achieved rate per group against its roofs: :func:`analysis.roofline`."""
        return _roofline.roofline(self, by)

    def diff(self, other: Any, keys: tuple[str, ...] = _diff.KEYS) -> pd.DataFrame:
        """Op-by-op comparison of this trace (a) with ``other`` (b): :func:`analysis.diff`."""
        return _diff.diff(self, other, keys)

    def dma_throughput(self, bins: int = 200, by: str | None = None) -> pd.DataFrame:
        """DMA bytes per time bin: :func:`analysis.dma_throughput`."""
        return _dma.dma_throughput(self, bins, by)

    def dma_queues(self) -> pd.DataFrame:
        """DMA traffic per queue: :func:`analysis.dma_queues`."""
        return _dma.dma_queues(self)

    def dma_sizes(self) -> pd.DataFrame:
        """DMA transfer size histogram: :func:`analysis.dma_sizes`."""
        return _dma.dma_sizes(self)

    def recommendations(self) -> pd.DataFrame:
        """What to change, ranked by the time it could save: :func:`analysis.recommendations`."""
        return _recommend.recommendations(self)

    def regions(self, max_per_kind: int = 200) -> pd.DataFrame:
        """Steps, collectives and top-level module calls as named time ranges: :func:`analysis.regions`."""
        return _regions.regions(self, max_per_kind)

    def dependencies(self, table: str = "instructions", row: int = -1) -> pd.DataFrame:
        """What one event waited for and what waited for it: :func:`analysis.event_dependencies`."""
        return _dependencies.event_dependencies(self, table, row)

    def source_lines(self) -> pd.DataFrame:
        """Device time per Python source line of the recorded stacks: :func:`analysis.source_lines`."""
        return _source_lines.source_lines(self)

    # ---------------------------------------------------------------- derived timeline tracks
    def op_hierarchy(self) -> pd.DataFrame:
        """Module -> op spans on the device timeline (the hierarchy view): :func:`analysis.op_hierarchy`."""
        return _tracks.op_hierarchy(self)

    def dma_engines(self) -> pd.DataFrame:
        """The DMA engine track of every DMA transfer: :func:`analysis.dma_engines`."""
        return _tracks.dma_engines(self)

    def cumulative_utilization(self, bins: int = 1000) -> pd.DataFrame:
        """Cumulative MFU and DMA throughput over the span: :func:`analysis.cumulative_utilization`."""
        return _tracks.cumulative_utilization(self, bins=bins)

    def measured_flops(self) -> pd.DataFrame:
        """FLOPs the trace's own hardware counters measured (CUPTI profiler ranges): :func:`analysis.measured_flops`."""
        return _measured.measured_flops(self)

    def neuron_explorer_comparison(self) -> pd.DataFrame:
        """Our summary beside a Neuron Explorer profile's own metrics: :func:`analysis.neuron_explorer_comparison`."""
        return _explorer_summary.neuron_explorer_comparison(self)

    # ---------------------------------------------------------------- Neuron Explorer's Summary items
    def time_split(self) -> pd.DataFrame:
        """Exclusive device time: compute / collectives / DMA / other / idle: :func:`analysis.time_split`."""
        return _items.time_split(self)

    def flops_breakdown(self) -> pd.DataFrame:
        """TensorE capacity: model / transpose / throttled / unused FLOPs: :func:`analysis.flops_breakdown`."""
        return _items.flops_breakdown(self)

    def summary_items(self) -> pd.DataFrame:
        """Max achievable MFU, throttling, spill bytes: :func:`analysis.summary_items`."""
        return _items.summary_items(self)

    def dma_bytes_by(self, by: str = "source") -> pd.DataFrame:
        """DMA bytes by source or by data type: :func:`analysis.dma_bytes_by`."""
        return _items.dma_bytes_by(self, by)

    # ---------------------------------------------------------------- memory
    def memory_allocations(self, top: int | None = None) -> pd.DataFrame:
        """SBUF/PSUM buffers held over time: :func:`analysis.memory_allocations`."""
        return _memory.memory_allocations(self, top)

    def memory_occupancy(self) -> pd.DataFrame:
        """SBUF/PSUM bytes held over time against capacity: :func:`analysis.memory_occupancy`."""
        return _memory.memory_occupancy(self)

    def hbm_usage(self) -> pd.DataFrame:
        """HBM held over time by kind against capacity: :func:`analysis.hbm_usage`."""
        return _memory.hbm_usage(self)

    def memory_summary(self) -> pd.DataFrame:
        """Memory peaks, capacities and spill bytes: :func:`analysis.memory_summary`."""
        return _memory.memory_summary(self)


class TraceSetAnalyses:
    """The analyses of several traces (ranks) as methods (mixed into :class:`analysis.TraceSet`).

    Each takes ``engine="pandas"`` (default) or ``"dask"`` with ``scheduler`` / ``workers``
    (:mod:`analysis.distributed`)."""

    traces: list[Any]

    def __iter__(self) -> Iterator[Any]:
        return iter(self.traces)

    def collectives_across_ranks(self, *, engine: str = "pandas", scheduler: Any = None,
                                 workers: int | None = None) -> pd.DataFrame:
        """Collectives matched across ranks: :func:`analysis.collectives_across_ranks`."""
        return _cross_rank.collectives_across_ranks(self, engine=engine, scheduler=scheduler, workers=workers)

    def collectives(self) -> pd.DataFrame:
        """Collectives matched across ranks (:func:`analysis.collectives_across_ranks`)."""
        return self.collectives_across_ranks()

    def rank_balance(self, *, engine: str = "pandas", scheduler: Any = None,
                     workers: int | None = None) -> pd.DataFrame:
        """Per-rank busy, compute, idle and communication time: :func:`analysis.rank_balance`."""
        return _ranks.rank_balance(self, engine=engine, scheduler=scheduler, workers=workers)

    def rank_timeline(self, *, max_intervals: int = 1000, engine: str = "pandas", scheduler: Any = None,
                      workers: int | None = None) -> pd.DataFrame:
        """Coarse busy intervals per rank for a timeline: :func:`analysis.rank_timeline`."""
        return _ranks.rank_timeline(self, max_intervals=max_intervals, engine=engine, scheduler=scheduler,
                                    workers=workers)

    def run_recommendations(self, *, engine: str = "pandas", scheduler: Any = None,
                            workers: int | None = None) -> pd.DataFrame:
        """Stragglers and slow links with the time lost: :func:`analysis.run_recommendations`."""
        return _ranks.run_recommendations(self, engine=engine, scheduler=scheduler, workers=workers)

    def stragglers(self, *, engine: str = "pandas", scheduler: Any = None,
                   workers: int | None = None) -> pd.DataFrame:
        """Ranks that make the others wait: :func:`analysis.stragglers`."""
        return _ranks.stragglers(self, engine=engine, scheduler=scheduler, workers=workers)

    def slow_links(self, *, engine: str = "pandas", scheduler: Any = None,
                   workers: int | None = None) -> pd.DataFrame:
        """Process groups whose transfers are slower than their peers': :func:`analysis.slow_links`."""
        return _ranks.slow_links(self, engine=engine, scheduler=scheduler, workers=workers)

    def slowest_ranks_per_step(self, *, engine: str = "pandas", scheduler: Any = None,
                               workers: int | None = None) -> pd.DataFrame:
        """Step time median and max over the ranks, per step: :func:`analysis.slowest_ranks_per_step`."""
        return _ranks.slowest_ranks_per_step(self, engine=engine, scheduler=scheduler, workers=workers)
