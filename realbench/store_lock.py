"""An exclusive, per-store writer lock: one process writes a run store at a time.

The lock is an advisory `flock` on ``DIR/writer.lock``; the kernel drops it when the holder exits
(even on SIGKILL), so a crashed writer never leaves a stale lock behind. The file's content names the
holder (pid, host, command, since) so a second writer can say who it is waiting for.

The file is opened with ``O_NOFOLLOW`` and must be a regular file with one link: a symlinked or
hard-linked ``writer.lock`` would make every writer truncate a file outside the store.
"""

from __future__ import annotations

import errno
import fcntl
import json
import os
import socket
import stat
import time
from pathlib import Path

from realbench.errors import StoreError
from realbench.store_paths import (
    StoreLinkError,
    StoreReadOnlyError,
    disk_full_error,
    is_disk_full,
    is_read_only,
    read_only_error,
)

__all__ = ["LOCK_NAME", "StoreLock", "StoreLockedError", "StoreLinkError", "StoreReadOnlyError"]

LOCK_NAME = "writer.lock"


class StoreLockedError(StoreError):
    """Another process holds the store's writer lock."""


class StoreLock:
    """Held from construction until `release()`; fails at once when another process holds it."""

    def __init__(self, root: Path, command: str) -> None:
        self.path = Path(root) / LOCK_NAME
        fd = _open_lock_file(Path(root), self.path, command)
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


def _open_lock_file(root: Path, path: Path, command: str) -> int:
    try:
        root.mkdir(parents=True, exist_ok=True)
        fd = os.open(path, os.O_RDWR | os.O_CREAT | os.O_NOFOLLOW | os.O_CLOEXEC, 0o644)
    except OSError as exc:
        if exc.errno == errno.ELOOP:
            raise StoreLinkError(
                f"{path} is a symbolic link; refusing to use it as the store's writer lock",
                hint="remove the link (the lock file is recreated); nothing was written",
            ) from None
        if is_read_only(exc):
            raise read_only_error(root, f"`{command}`", exc) from None
        if is_disk_full(exc):
            raise disk_full_error(root, "the writer lock") from None
        raise StoreError(f"cannot open the writer lock {path}: {exc.strerror}") from None
    info = os.fstat(fd)
    if not stat.S_ISREG(info.st_mode) or info.st_nlink != 1:
        os.close(fd)
        raise StoreLinkError(
            f"{path} is not a plain file of the store (a hard link or a special file); refusing to lock it",
            hint="remove it (the lock file is recreated); nothing was written",
        )
    return fd


def _read_holder(fd: int) -> str:
    try:
        data = json.loads(os.pread(fd, 4096, 0) or b"{}")
    except (OSError, ValueError):
        data = {}
    if not isinstance(data, dict) or "pid" not in data:
        return "another process (holder not recorded yet)"
    since = time.strftime("%Y-%m-%d %H:%M:%S", time.localtime(float(data.get("since", 0))))
    return f"`{data.get('command', '?')}` (pid {data['pid']} on {data.get('host', '?')}, since {since})"
