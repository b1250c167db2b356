"""Construction of trace headers."""
from __future__ import annotations

import functools
import json
import socket
import time
from collections.abc import Iterable, Mapping
from typing import Any

from neuron_profiler.trace.columns import FORMAT_MAJOR, FORMAT_MINOR
from schemas import pb


@functools.lru_cache(maxsize=1)  # the metadata lookup scans sys.path (0.3 ms a call, 9 ms the first)
def package_version() -> str:
    """Version of the installed neuron-profiler distribution ("0+unknown" when not installed)."""
    try:
        from importlib.metadata import version

        return version("neuron-profiler")
    except Exception:  # noqa: BLE001 - any metadata failure means "not installed"
        return "0+unknown"


def make_header(producer: str, *, source_format: str = "", rank: int = 0, world_size: int = 1,
                simulated: bool = False, devices: Iterable[pb.Device] = (), capture_config: Any = None,
                metadata: Mapping[str, Any] | None = None, run_id: str = "", window_index: int = 0,
                process_id: int = 0, instance_id: str | None = None, source_path: str = "") -> pb.Header:
    """A header stamped with the current format version, producer version and creation time.

    ``capture_config`` is stored as JSON (a str is stored as is); metadata values are stringified."""
    if world_size < 1 or not 0 <= rank < world_size:
        raise ValueError(f"rank must be in [0, world_size) and world_size >= 1, got rank={rank}, "
                         f"world_size={world_size}")
    h = pb.Header(format_major=FORMAT_MAJOR, format_minor=FORMAT_MINOR, producer=producer,
                  producer_version=package_version(), created_unix_ns=time.time_ns(),
                  source_format=source_format, source_path=source_path, rank=rank, world_size=world_size,
                  simulated=simulated, run_id=run_id, window_index=window_index, process_id=process_id,
                  instance_id=socket.gethostname() if instance_id is None else instance_id)
    if capture_config is not None:
        h.capture_config_json = capture_config if isinstance(capture_config, str) else json.dumps(
            capture_config, sort_keys=True, default=str)
    for d in devices:
        h.devices.append(d)
    for k, v in (metadata or {}).items():
        h.metadata[str(k)] = v if isinstance(v, str) else json.dumps(v, default=str)
    return h


def simulated_by(header: pb.Header) -> str:
    """``"simulated by <model> for <target>"`` for a header with simulated device events, else ``""``: the
    words every export and report puts where it says "simulated" (``Header.simulation``; "an unnamed model" /
    "an unnamed target" when the header does not say)."""
    if not header.simulated:
        return ""
    sim = header.simulation if header.HasField("simulation") else None
    model = (sim.model if sim is not None else "") or "an unnamed model"
    target = (sim.target if sim is not None else "") or "an unnamed target"
    return f"simulated by {model} for {target}"


def simulation_note(header: pb.Header) -> str:
    """:func:`simulated_by` with what else a reader needs to judge the numbers: the host timeline, the instance
    topology the model assumed and how many model constants it used, e.g. "simulated by
    neuron_profiler.simulated 2.0 for trn2; host timeline projected; assumptions: topology trn2.48xlarge: 16
    chips x 8 NeuronCores ...; 46 model constants (``neuron-trace info --assumptions`` lists them, with sources;
    docs/simulation.md)". ``""`` for a trace that is not simulated."""
    text = simulated_by(header)
    if not text:
        return ""
    sim = header.simulation if header.HasField("simulation") else None
    if sim is None:
        return text + "; assumptions not recorded"
    parts = [text]
    if sim.host_timeline:
        parts.append(f"host timeline {sim.host_timeline}")
    assumptions = dict(sim.assumptions)
    topology = assumptions.pop("topology", "")
    said = [f"topology {topology}"] if topology else []
    if assumptions:
        said.append(f"{len(assumptions)} model constants (neuron-trace info --assumptions lists them, with sources; "
                    f"{sim.documentation or 'docs/simulation.md'})")
    parts.append("assumptions: " + ("; ".join(said) if said else "none recorded"))
    return "; ".join(parts)
