"""What the benchmarks print about the machine they ran on."""

from __future__ import annotations

import importlib.util
import os
import statistics
import sys
import time
import zlib
from pathlib import Path
from typing import Any

from realbench.machine import cpu_model

__all__ = ["bytecode_facts", "cpu_model", "host_speed_ms", "machine_facts", "machine_line"]

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


def _has_bytecode(module: Any) -> bool | None:
    """Whether the module's cached bytecode is what the import system would load instead of
    compiling: the header's magic number, source mtime and size (PEP 552's timestamp form; hash
    checked files count as found)."""
    spec = getattr(module, "__spec__", None)
    origin, cached = getattr(spec, "origin", None), getattr(spec, "cached", None)
    if not (origin and cached and origin.endswith(".py")):
        return None  # built in, an extension module, or frozen: nothing to compile
    try:
        with open(cached, "rb") as f:
            header = f.read(16)
        source = Path(origin).stat()
    except OSError:
        return False
    if len(header) < 16 or header[:4] != importlib.util.MAGIC_NUMBER:
        return False
    if int.from_bytes(header[4:8], "little") & 1:
        return True
    mtime, size = (int.from_bytes(header[i : i + 4], "little") for i in (8, 12))
    return mtime == int(source.st_mtime) & 0xFFFFFFFF and size == source.st_size & 0xFFFFFFFF


def bytecode_facts() -> dict[str, Any]:
    """Whether the Python modules loaded so far had their bytecode on disk, and whether this
    interpreter writes it. A process without it compiles every module from source: a spawned RL
    worker was ready 0.6 s later that way, 100 environments over two 1.0-1.7 s later
    (docs/benchmarks.md). That is the state of a virtualenv installed without bytecode, under
    PYTHONDONTWRITEBYTECODE, not of a used one."""
    found = [_has_bytecode(m) for m in list(sys.modules.values())]
    return {
        "writes": not sys.flags.dont_write_bytecode,
        "source_modules": sum(1 for f in found if f is not None),
        "with_bytecode": sum(1 for f in found if f),
    }


def machine_facts() -> dict[str, Any]:
    """CPU model, cores, the 1/5/15-minute load averages, `host_speed_ms` and `bytecode_facts`, for
    a benchmark's JSON."""
    return {
        "cpu": cpu_model(),
        "cores": os.cpu_count(),
        "load_avg": [round(x, 2) for x in os.getloadavg()],
        "host_speed_ms": host_speed_ms(),
        "bytecode": bytecode_facts(),
    }


def machine_line() -> str:
    """The same in one line, for a benchmark that prints its figures."""
    return (
        f"{cpu_model()}, {os.cpu_count()} cores, load average {os.getloadavg()[0]:.2f}, "
        f"host speed {host_speed_ms()} ms"
    )
