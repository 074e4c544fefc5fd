"""Chromium process accounting for environment hosts: which processes, and their memory (PSS)."""

from __future__ import annotations

from pathlib import Path

from devices.clone_browser import descendants


def chromium_command_lines(root: int) -> dict[int, list[str]]:
    """Chromium processes below `root`, pid -> command line. A child the browser has forked but not
    yet exec'd (a GPU or utility process being launched) still shows the browser's command line
    for a moment; it is left out, or it would pass for a second browser."""
    out: dict[int, list[str]] = {}
    for pid, parent in descendants(root).items():
        try:
            raw = (Path("/proc") / str(pid) / "cmdline").read_bytes()
        except OSError:
            continue
        # Chromium rewrites its command line into one space-separated string.
        argv = raw.replace(b"\0", b" ").decode(errors="replace").split()
        if argv and "chrom" in Path(argv[0]).name and out.get(parent) != argv:
            out[pid] = argv
    return out


def process_type(argv: list[str]) -> str:
    """A Chromium process's type from its command line ("browser", "renderer", "gpu-process"...)."""
    return next((a.split("=", 1)[1] for a in argv if a.startswith("--type=")), "browser")


def chromium_processes(root: int) -> dict[int, str]:
    """Chromium processes below `root`, pid -> process type (`process_type`)."""
    return {pid: process_type(argv) for pid, argv in chromium_command_lines(root).items()}


def rollup_mib(pids: list[int], field: str = "Pss") -> float:
    """One field of /proc/PID/smaps_rollup ("Pss", "Anonymous", ...) summed over `pids`, in MiB
    (gone pids count 0)."""
    total_kib = 0
    prefix = f"{field}:"
    for pid in pids:
        try:
            text = (Path("/proc") / str(pid) / "smaps_rollup").read_text()
        except OSError:
            continue
        for line in text.splitlines():
            if line.startswith(prefix):
                total_kib += int(line.split()[1])
                break
    return total_kib / 1024


def pss_mib(pids: list[int]) -> float:
    """Summed proportional set size of `pids`, in MiB (gone pids count 0)."""
    return rollup_mib(pids, "Pss")
