"""A process's `/proc/PID/stat`, read the one way that survives its command name."""

from __future__ import annotations

from pathlib import Path

# positions in `stat_fields`, which start at the state (field 3 of proc(5))
STATE = 0
PARENT = 1
GROUP = 2  # the process group
START_TIME = 19  # clock ticks after boot


def stat_fields(pid: int | str) -> list[str] | None:
    """The fields of process `pid`'s stat after its command name (the state first), or None where
    there is no such process. The name is in parentheses and may itself hold spaces and
    parentheses, so the line is cut at its last ')'."""
    try:
        return Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()
    except (OSError, IndexError):
        return None
