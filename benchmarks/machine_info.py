"""What the benchmarks print about the machine they ran on."""

from __future__ import annotations

import os
import statistics
import time
import zlib
from typing import Any

from realbench.machine import cpu_model

__all__ = ["cpu_model", "host_speed_ms", "machine_facts", "machine_line"]

_PAYLOAD = bytes(range(256)) * 4096  # 1 MiB, compressible like a page's text


def host_speed_ms(repeats: int = 5) -> float:
    """Milliseconds one core takes for a fixed piece of work (compression and interpreted Python),
    the median of `repeats`: lower is faster. The same host ran the same benchmark 40 % slower in
    some hours than in others with no other load on it (docs/benchmarks.md, RL environments), so a
    figure without this one cannot be compared with a figure from another hour."""
    times = []
    for _ in range(repeats):
        start = time.perf_counter()
        zlib.compress(_PAYLOAD, 6)
        table: dict[str, int] = {}
        for i in range(200_000):
            key = f"k{i % 997}"
            table[key] = table.get(key, 0) + i
        times.append((time.perf_counter() - start) * 1000)
    return round(statistics.median(times), 1)


def machine_facts() -> dict[str, Any]:
    """CPU model, cores, the 1/5/15-minute load averages and `host_speed_ms`, for a benchmark's JSON."""
    return {
        "cpu": cpu_model(),
        "cores": os.cpu_count(),
        "load_avg": [round(x, 2) for x in os.getloadavg()],
        "host_speed_ms": host_speed_ms(),
    }


def machine_line() -> str:
    """The same in one line, for a benchmark that prints its figures."""
    return (
        f"{cpu_model()}, {os.cpu_count()} cores, load average {os.getloadavg()[0]:.2f}, "
        f"host speed {host_speed_ms()} ms"
    )
