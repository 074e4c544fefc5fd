"""An exclusive, per-store writer lock: one process writes a run store at a time.

The lock is an advisory `flock` on ``DIR/writer.lock``; the kernel drops it when the holder exits
(even on SIGKILL), so a crashed writer never leaves a stale lock behind. The file's content names the
holder (pid, host, command, since) so a second writer can say who it is waiting for.
"""

from __future__ import annotations

import fcntl
import json
import os
import socket
import time
from pathlib import Path

from realbench.errors import StoreError

LOCK_NAME = "writer.lock"


class StoreLockedError(StoreError):
    """Another process holds the store's writer lock."""


class StoreLock:
    """Held from construction until `release()`; fails at once when another process holds it."""

    def __init__(self, root: Path, command: str) -> None:
        self.path = Path(root) / LOCK_NAME
        self.path.parent.mkdir(parents=True, exist_ok=True)
        fd = os.open(self.path, os.O_RDWR | os.O_CREAT, 0o644)
        try:
            fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
        except BlockingIOError:
            holder = _read_holder(fd)
            os.close(fd)
            raise StoreLockedError(
                f"{root} is being written by {holder}",
                hint="wait for that command to finish (or stop it); one writer per store at a time",
            ) from None
        record = {"pid": os.getpid(), "host": socket.gethostname(), "command": command, "since": time.time()}
        os.ftruncate(fd, 0)
        os.pwrite(fd, json.dumps(record).encode(), 0)
        self._fd: int | None = fd

    def release(self) -> None:
        if self._fd is None:
            return
        fd, self._fd = self._fd, None
        try:
            os.ftruncate(fd, 0)
        finally:
            os.close(fd)  # closing drops the flock


def _read_holder(fd: int) -> str:
    try:
        data = json.loads(os.pread(fd, 4096, 0) or b"{}")
    except (OSError, ValueError):
        data = {}
    if not isinstance(data, dict) or "pid" not in data:
        return "another process (holder not recorded yet)"
    since = time.strftime("%Y-%m-%d %H:%M:%S", time.localtime(float(data.get("since", 0))))
    return f"`{data.get('command', '?')}` (pid {data['pid']} on {data.get('host', '?')}, since {since})"
