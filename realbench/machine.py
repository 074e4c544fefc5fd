"""The CPU a process runs on: what a checkpoint records as the machine type its weights reproduce on
(float results of the same training differ between CPU models: docs/rl.md)."""

from __future__ import annotations

from pathlib import Path


def cpu_model() -> str:
    """/proc/cpuinfo's model name, or "unknown"."""
    try:
        for line in Path("/proc/cpuinfo").read_text().splitlines():
            if line.startswith("model name"):
                return line.split(":", 1)[1].strip()
    except OSError:
        pass
    return "unknown"
