"""The example notebook (examples/walkthrough.py) runs end to end on a captured and a real GPU trace."""
import subprocess
import sys
from pathlib import Path

import pytest
from realdata import real_trace

REPO = Path(__file__).resolve().parents[2]


@pytest.mark.slow
def test_walkthrough_runs(tmp_path):
    captured = REPO / "sample_traces" / "gpt_train_step.nprof"
    if not captured.is_file():
        pytest.fail(f"captured sample trace {captured} is missing (python sample_traces/regenerate.py)")
    gpu = real_trace("TraceLens/h100/gaunernst_bert-small-uncased__1016001.json.gz")
    before = set(gpu.parent.iterdir())
    out = subprocess.run([sys.executable, str(REPO / "examples" / "walkthrough.py"), str(captured), str(gpu),
                          "--html", str(tmp_path / "html")], capture_output=True, text=True, timeout=300)
    assert out.returncode == 0, out.stderr[-3000:]
    text = out.stdout
    for section in ("## summary", "mfu_estimated_percent", "## roofline", "## recommendations",
                    "## GPU roofline", "## diff (a = GPU, b = Trainium)", "walkthrough done"):
        assert section in text
    html = {p.name for p in (tmp_path / "html").iterdir()}
    assert {"summary.html", "roofline.html", "gpu_roofline.html", "diff.html", "recommendations.html"} <= html
    assert set(gpu.parent.iterdir()) == before          # nothing written next to the shared corpus


@pytest.mark.slow
def test_walkthrough_on_a_run_directory_shows_the_ranks(tmp_path):
    """Given the 2-rank DDP run (a directory), the walkthrough adds the cross-rank views."""
    import shutil

    run = tmp_path / "ddp"
    run.mkdir()
    for r in (0, 1):
        shutil.copy(REPO / "sample_traces" / f"ddp_train_rank{r}.nprof", run)
    gpu = real_trace("TraceLens/h100/gaunernst_bert-small-uncased__1016001.json.gz")
    out = subprocess.run([sys.executable, str(REPO / "examples" / "walkthrough.py"), str(run), str(gpu),
                          "--html", str(tmp_path / "html")], capture_output=True, text=True, timeout=300)
    assert out.returncode == 0, out.stderr[-3000:]
    assert "## collectives across ranks" in out.stdout and "## rank balance" in out.stdout
    assert {"skew.html", "rank_balance.html", "rank_timeline.html"} <= {p.name for p in (tmp_path / "html").iterdir()}
