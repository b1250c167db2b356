"""Issue 26: the explorer lists traces only. Was: the ``truth.json`` a synthetic run writes beside its ranks was
listed as a Kineto trace, and errored when opened."""
from __future__ import annotations

import gzip
import json
from pathlib import Path

from explorer.store import TraceStore
from neuron_profiler.synthetic_run import write_synthetic_run

EVENT = {"ph": "X", "cat": "cpu_op", "name": "aten::mm", "pid": 1, "tid": 1, "ts": 1, "dur": 2}


def test_a_synthetic_run_lists_its_ranks_not_its_truth(tmp_path: Path) -> None:
    truth = write_synthetic_run(tmp_path, 4, 2000)
    run = Path(truth["paths"][0]).parent
    assert (run / "truth.json").is_file()
    keys = [e.key for e in TraceStore(tmp_path).entries()]
    assert [k for k in keys if not k.startswith("group:")] == \
        [f"{run.name}/rank{r:05d}_window000.nprof" for r in range(4)]
    assert len([k for k in keys if k.startswith("group:")]) == 1


def test_json_files_are_listed_by_what_they_hold(tmp_path: Path) -> None:
    (tmp_path / "kineto.json").write_text(json.dumps({"schemaVersion": 1, "traceEvents": [EVENT]}))
    (tmp_path / "events.json").write_text(json.dumps([EVENT]))
    with gzip.open(tmp_path / "zipped.pt.trace.json.gz", "wt") as f:
        json.dump({"traceEvents": [EVENT]}, f)
    (tmp_path / "config.json").write_text(json.dumps({"lr": 0.1, "layers": [1, 2]}))
    (tmp_path / "empty.json").write_text("")
    keys = sorted(e.key for e in TraceStore(tmp_path).entries())
    assert keys == ["events.json", "kineto.json", "zipped.pt.trace.json.gz"]
