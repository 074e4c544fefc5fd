"""What the benchmarks print about the machine they ran on."""

from __future__ import annotations

import os
from typing import Any

from realbench.machine import cpu_model

__all__ = ["cpu_model", "machine_facts", "machine_line"]


def machine_facts() -> dict[str, Any]:
    """CPU model, cores and the 1/5/15-minute load averages, for a benchmark's JSON."""
    return {"cpu": cpu_model(), "cores": os.cpu_count(), "load_avg": [round(x, 2) for x in os.getloadavg()]}


def machine_line() -> str:
    """The same in one line, for a benchmark that prints its figures."""
    return f"{cpu_model()}, {os.cpu_count()} cores, load average {os.getloadavg()[0]:.2f}"
