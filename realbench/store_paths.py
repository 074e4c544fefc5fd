"""Keeping every write and delete of a run store inside its folder, and saying so when it cannot write.

A store folder can hold links that anyone able to write it planted (or a careless copy left): a
symlinked ``writer.lock``, ``index.sqlite`` or ``episodes/<run>`` would make a writer truncate,
create or delete files elsewhere. So the store refuses such links when it opens (`refuse_links`),
and every path it writes or deletes goes through `StorePaths.inside`: no component below the root
may be a symbolic link and the resolved path must stay under the resolved root. Files are created
with ``O_NOFOLLOW`` so a link planted between the check and the write is not followed either.

A full disk or a read-only folder is a one-line `StoreError` naming the folder and its file system,
never an `OSError` traceback.
"""

from __future__ import annotations

import errno
import os
import shutil
import sqlite3
from pathlib import Path

from realbench.errors import StoreError

# Names directly under the root that must never be links (the WAL files too: SQLite writes them).
ROOT_FILES = ("index.sqlite", "index.sqlite-wal", "index.sqlite-shm", "index.sqlite-journal", "writer.lock")
ROOT_FOLDERS = ("episodes", "damaged")
DISK_FULL_ERRNOS = frozenset({errno.ENOSPC, errno.EDQUOT})
READ_ONLY_ERRNOS = frozenset({errno.EACCES, errno.EPERM, errno.EROFS})


class StoreLinkError(StoreError):
    """A path of the store is a symbolic link or leads outside the store."""


class StoreReadOnlyError(StoreError):
    """The store's folder cannot be written (permissions or a read-only file system)."""


class StoreFullError(StoreError):
    """The file system holding the store is full."""


def _link_error(path: Path) -> StoreLinkError:
    return StoreLinkError(
        f"{path} is a symbolic link; a run store never writes, reads or deletes through one",
        hint="replace the link with the real file or folder (or remove it); nothing was written",
    )


class StorePaths:
    """Containment checks for one store root."""

    def __init__(self, root: Path) -> None:
        self.root = root
        self.real_root = root.resolve()

    def inside(self, path: Path) -> Path:
        """`path` (built from the root) after checking it cannot lead outside; else StoreLinkError."""
        try:
            rel = path.relative_to(self.root)
        except ValueError:
            raise StoreLinkError(
                f"{path} is outside the run store {self.root}; refusing to touch it",
                hint="the index may have been edited by hand: `realbench store check` lists its problems",
            ) from None
        if ".." in rel.parts:
            raise StoreLinkError(f"{path} leads outside the run store {self.root}; refusing to touch it")
        current = self.root
        for part in rel.parts:
            current = current / part
            if current.is_symlink():
                raise _link_error(current)
        if not path.resolve().is_relative_to(self.real_root):
            raise StoreLinkError(f"{path} resolves outside the run store {self.root}; refusing to touch it")
        return path

    def is_inside(self, path: Path) -> bool:
        try:
            self.inside(path)
        except StoreLinkError:
            return False
        return True

    def refuse_links(self) -> None:
        """Refuse a store whose index, lock, episodes folders or run folders are links."""
        for name in (*ROOT_FILES, *ROOT_FOLDERS):
            if (self.root / name).is_symlink():
                raise _link_error(self.root / name)
        episodes = self.root / "episodes"
        if not episodes.is_dir():
            return
        with os.scandir(episodes) as runs:
            for run in runs:
                if run.is_symlink():
                    raise _link_error(Path(run.path))
                if not run.is_dir(follow_symlinks=False):
                    continue
                with os.scandir(run.path) as entries:
                    for entry in entries:
                        if entry.is_symlink():
                            raise _link_error(Path(entry.path))


def write_new_file(path: Path, data: bytes) -> None:
    """Create or truncate `path` and write `data`, never through a symbolic link."""
    fd = os.open(path, os.O_WRONLY | os.O_CREAT | os.O_TRUNC | os.O_NOFOLLOW | os.O_CLOEXEC, 0o644)
    with os.fdopen(fd, "wb") as f:
        f.write(data)


def append_file(path: Path, data: bytes) -> None:
    """Append `data` to `path` (created if missing), never through a symbolic link."""
    fd = os.open(path, os.O_WRONLY | os.O_CREAT | os.O_APPEND | os.O_NOFOLLOW | os.O_CLOEXEC, 0o644)
    with os.fdopen(fd, "ab") as f:
        f.write(data)


def is_disk_full(exc: BaseException) -> bool:
    if isinstance(exc, OSError):
        return exc.errno in DISK_FULL_ERRNOS
    if isinstance(exc, sqlite3.OperationalError):
        return "disk is full" in str(exc) or getattr(exc, "sqlite_errorcode", 0) & 0xFF == 13  # SQLITE_FULL
    return False


def is_read_only(exc: BaseException) -> bool:
    if isinstance(exc, OSError):
        return exc.errno in READ_ONLY_ERRNOS
    if isinstance(exc, sqlite3.OperationalError):
        # SQLITE_READONLY (8); SQLITE_CANTOPEN (14) when the -wal/-shm files cannot be created
        return getattr(exc, "sqlite_errorcode", 0) & 0xFF in (8, 14) or "readonly" in str(exc)
    return False


def mount_of(path: Path) -> Path:
    current = path.resolve()
    while not current.exists() and current != current.parent:
        current = current.parent
    while not os.path.ismount(current) and current != current.parent:
        current = current.parent
    return current


def disk_full_error(root: Path, what: str) -> StoreFullError:
    mount = mount_of(root)
    try:
        free = f"{shutil.disk_usage(mount).free / 1e6:.0f} MB free"
    except OSError:
        free = "free space unknown"
    return StoreFullError(
        f"the disk holding {root} is full (file system {mount}, {free}): {what} was not written",
        hint="free space on that disk, then rerun the same command: what was written is kept and the run resumes",
    )


def read_only_error(root: Path, command: str, exc: BaseException | None = None) -> StoreReadOnlyError:
    why = f" ({exc.strerror})" if isinstance(exc, OSError) and exc.strerror else ""
    return StoreReadOnlyError(
        f"{root} is read-only{why}: {command} cannot write to it",
        hint="readers (show, report, store check, console) open it as it is; to write, use a writable copy or --out",
    )
