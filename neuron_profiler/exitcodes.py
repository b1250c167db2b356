"""Exit codes shared by the command-line tools (``neuron-trace``, ``neuron-analyze``): a leaf module, so the
analysis CLI does not import the trace CLI to agree with it."""
from __future__ import annotations

__all__ = ["EXIT_OK", "EXIT_PROBLEMS", "EXIT_BAD_INPUT"]

EXIT_OK = 0
#: the command ran and found problems (``neuron-trace validate``)
EXIT_PROBLEMS = 1
#: bad input, an unwritable output or a full disk: one line on stderr, never a traceback
EXIT_BAD_INPUT = 2
