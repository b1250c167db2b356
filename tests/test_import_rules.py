"""The package rules of the one-way flow (tools/check_imports.py) hold on every import, also inside functions;
and the checker does catch a violation."""
from __future__ import annotations

import importlib.util
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]
_spec = importlib.util.spec_from_file_location("check_imports", REPO / "tools" / "check_imports.py")
check_imports = importlib.util.module_from_spec(_spec)
_spec.loader.exec_module(check_imports)


def test_the_package_rules_hold():
    assert check_imports.violations() == []


def test_the_checker_sees_function_level_and_relative_imports(tmp_path):
    cap = tmp_path / "neuron_profiler" / "capture"
    cap.mkdir(parents=True)
    (cap / "__init__.py").write_text("")
    (cap / "bad.py").write_text("import os\n\ndef f():\n    import analysis.trace\n    return analysis\n")
    rt = tmp_path / "neuron_profiler" / "runtime" / "simulated"
    rt.mkdir(parents=True)
    (rt / "p.py").write_text("from ...capture.sync import SYNC_PREFIX\n")
    ex = tmp_path / "explorer"
    ex.mkdir()
    (ex / "v.py").write_text("import analysis\nfrom analysis import figures\nfrom analysis.core import intervals\n")
    (tmp_path / "analysis").mkdir()
    (tmp_path / "analysis" / "a.py").write_text("import dash\n")
    assert check_imports.violations(tmp_path) == [
        "analysis/a.py:1: imports dash: analysis never imports Dash, torch, the explorer, the simulator or capture",
        "explorer/v.py:3: imports analysis.core: the explorer uses analysis's public API only",
        "neuron_profiler/capture/bad.py:4: imports analysis.trace: capture never imports analysis or explorer",
        "neuron_profiler/runtime/simulated/p.py:1: imports neuron_profiler.capture.sync: the runtime never "
        "imports capture",
    ]
