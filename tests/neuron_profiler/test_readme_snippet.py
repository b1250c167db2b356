"""The README's capture snippet, run as written on a tiny model: its traces have non-empty module views."""
from __future__ import annotations

import re
import warnings
from pathlib import Path

import pytest

torch = pytest.importorskip("torch")

import analysis  # noqa: E402

README = Path(__file__).resolve().parents[2] / "README.md"


def _capture_snippet() -> str:
    text = README.read_text()
    section = text[text.index("## Profile a PyTorch model (capture)"):]
    return re.search(r"```python\n(.*?)```", section, re.S).group(1)


class Net(torch.nn.Module):
    def __init__(self):
        super().__init__()
        self.fc1, self.act, self.fc2 = torch.nn.Linear(16, 32), torch.nn.ReLU(), torch.nn.Linear(32, 4)

    def forward(self, x):
        return self.fc2(self.act(self.fc1(x)))


@pytest.mark.slow
def test_readme_capture_snippet_gives_module_rows(tmp_path, monkeypatch):
    code = _capture_snippet()
    assert "with_modules=True" in code
    monkeypatch.chdir(tmp_path)  # the snippet writes to profiles/ under the working directory
    torch.manual_seed(0)
    model = Net()
    opt = torch.optim.SGD(model.parameters(), lr=0.1)

    def train_step(batch):
        opt.zero_grad()
        model(batch).sum().backward()
        opt.step()

    with warnings.catch_warnings():
        warnings.simplefilter("ignore", UserWarning)
        exec(compile(code, "README.md", "exec"), {"loader": [torch.randn(8, 16) for _ in range(4)],
                                                   "train_step": train_step})
    files = sorted((tmp_path / "profiles").glob("*/rank*_window*.nprof"))
    assert len(files) == 1  # wait=1, warmup=1, active=2 over 4 batches: one window
    t = analysis.load(files[0])
    ho = t.table("host_ops", ["name", "module"])
    fwd = ho[ho["name"].astype(str) == "aten::addmm"]
    assert len(fwd) == 4  # 2 active steps x 2 Linear layers
    assert all("fc1" in m or "fc2" in m for m in fwd["module"].astype(str))
    by_mod = analysis.hot_ops(t, by="module")
    keys = set(by_mod.index.astype(str))
    assert any("fc1" in k for k in keys) and any("fc2" in k for k in keys), keys
    assert by_mod["device_time_total_ns"].sum() > 0
