"""Calibration of the simulated NeuronCore: every case within its tolerance of the public or derived figure."""
import pytest

from neuron_profiler.runtime.simulated.calibration import CASES, calibration_table


@pytest.fixture(scope="module")
def table():
    return calibration_table().set_index("case")


@pytest.mark.parametrize("case", [c.name for c in CASES])
def test_calibration_case_within_tolerance(table, case):
    row = table.loc[case]
    assert abs(row.error) <= row.tolerance, (f"{case}: simulated {row.simulated:.4g} {row.unit}, expected "
                                             f"{row.expected:.4g} ({row.source})")


def test_calibration_table_documents_every_case(table):
    from pathlib import Path
    doc = (Path(__file__).resolve().parents[2] / "docs" / "simulation.md").read_text()
    for c in CASES:
        assert c.description in doc, f"docs/simulation.md lacks the calibration case {c.name!r}"
