"""The fault script, short: a few SIGKILLs of a multi-window capture and one run meeting a full disk (real
RLIMIT_FSIZE and injected ENOSPC) and a write-protected run directory. Every finished window stays intact, none
is partial under a final name, the training loop runs on."""
from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import pytest

pytest.importorskip("torch")

REPO = Path(__file__).resolve().parents[2]


@pytest.mark.slow
def test_fault_script_short(tmp_path):
    out = tmp_path / "figures.json"
    r = subprocess.run([sys.executable, str(REPO / "bench" / "fault_capture.py"), "--kills", "2", "--windows", "8",
                        "--max-delay", "1.5", "--seed", "1", "--json", str(out)],
                       capture_output=True, text=True, timeout=600)
    assert r.returncode == 0, r.stdout + r.stderr[-3000:]
    res = json.loads(out.read_text())
    kill, disk = res["kill"], res["disk"]
    assert res["failed_checks"] == []
    assert kill["kills"] == 2 and kill["partial"] == 0 and kill["intact"] == kill["windows_found"]
    assert disk["steps_run"] == disk["steps_asked"] == 8 and disk["exit_status"] == 0
    assert disk["windows_written"] == disk["intact"] == 5 and disk["tmp_leftovers"] == 0
    assert disk["recorded_in_next_window"] == [2, 4, 6] and disk["console_lines"] == 3
    assert "all checks hold" in r.stdout
