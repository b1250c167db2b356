"""Small traces captured by this project from plain-PyTorch models (see README.md here); shipped as package
data so `neuron-explorer` opens one by default in any install."""
from pathlib import Path

#: Folder holding the bundled ``*.nprof`` sample traces.
SAMPLE_DIR = Path(__file__).resolve().parent
#: The trace the explorer opens when given no argument.
DEFAULT_SAMPLE = SAMPLE_DIR / "gpt_train_step.nprof"
