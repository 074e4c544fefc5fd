"""`sync:` — file transfer (STAT/LIST/SEND/RECV/DONE/QUIT, protocol v1) over an in-memory file system."""

from __future__ import annotations

import asyncio
import stat
import struct
import threading
import time
from dataclasses import dataclass

from devices.virtual.adb_transport import AdbStream

MAX_CHUNK = 64 * 1024
DIR_MODE = stat.S_IFDIR | 0o771
DEFAULT_DIRS = (
    "/",
    "/data",
    "/data/local",
    "/data/local/tmp",
    "/sdcard",
    "/storage",
    "/storage/emulated",
    "/storage/emulated/0",
    "/system",
)


@dataclass
class FileEntry:
    data: bytes
    mode: int
    mtime: int


def _norm(path: str) -> str:
    parts = [p for p in path.split("/") if p and p != "."]
    return "/" + "/".join(parts)


class MemoryFS:
    """Files and directories of one phone. Thread-safe: the control channel may read it too."""

    def __init__(self) -> None:
        self._files: dict[str, FileEntry] = {}
        self._dirs: set[str] = set(DEFAULT_DIRS)
        self._lock = threading.Lock()

    def get(self, path: str) -> FileEntry | None:
        with self._lock:
            return self._files.get(_norm(path))

    def is_dir(self, path: str) -> bool:
        with self._lock:
            return _norm(path) in self._dirs

    def put(self, path: str, data: bytes, mode: int = 0o644, mtime: int | None = None) -> None:
        path = _norm(path)
        with self._lock:
            parent = path.rsplit("/", 1)[0] or "/"
            while parent not in self._dirs:
                self._dirs.add(parent)
                parent = parent.rsplit("/", 1)[0] or "/"
            self._files[path] = FileEntry(data, stat.S_IFREG | (mode & 0o7777), mtime or int(time.time()))

    def mkdir(self, path: str) -> None:
        path = _norm(path)
        with self._lock:
            while path not in self._dirs:
                self._dirs.add(path)
                path = path.rsplit("/", 1)[0] or "/"

    def remove(self, path: str) -> bool:
        path = _norm(path)
        with self._lock:
            if self._files.pop(path, None) is not None:
                return True
            if path in self._dirs and path not in DEFAULT_DIRS:
                self._dirs.discard(path)
                for name in [f for f in self._files if f.startswith(path + "/")]:
                    del self._files[name]
                return True
            return False

    def listdir(self, path: str) -> list[str]:
        prefix = _norm(path).rstrip("/") + "/"
        with self._lock:
            names = {
                p[len(prefix) :].split("/", 1)[0]
                for p in (*self._files, *self._dirs)
                if p.startswith(prefix) and p != prefix
            }
        return sorted(n for n in names if n)

    def stat(self, path: str) -> tuple[int, int, int]:
        """(mode, size, mtime); zeros when missing, as adbd answers."""
        path = _norm(path)
        with self._lock:
            if path in self._files:
                entry = self._files[path]
                return entry.mode, len(entry.data), entry.mtime
            if path in self._dirs:
                return DIR_MODE, 4096, int(time.time())
        return 0, 0, 0

    @property
    def used_bytes(self) -> int:
        with self._lock:
            return sum(len(e.data) for e in self._files.values())


async def _request(stream: AdbStream) -> tuple[bytes, bytes]:
    header = await stream.reader.readexactly(8)
    cmd, length = header[:4], struct.unpack("<I", header[4:])[0]
    if length > 1024 * 1024:
        raise ValueError(f"sync request of {length} bytes")
    return cmd, await stream.reader.readexactly(length) if length else b""


async def _fail(stream: AdbStream, message: str) -> None:
    data = message.encode()
    await stream.write(b"FAIL" + struct.pack("<I", len(data)) + data)


async def serve_sync(stream: AdbStream, fs: MemoryFS) -> None:
    """One sync session: requests until QUIT or the host closes the stream."""
    while True:
        try:
            cmd, payload = await _request(stream)
        except asyncio.IncompleteReadError:
            return
        path = payload.decode("utf-8", errors="replace")
        if cmd == b"STAT":
            mode, size, mtime = fs.stat(path)
            await stream.write(b"STAT" + struct.pack("<III", mode, size, mtime))
        elif cmd == b"LIST":
            for name in fs.listdir(path):
                mode, size, mtime = fs.stat(path.rstrip("/") + "/" + name)
                raw = name.encode()
                await stream.write(b"DENT" + struct.pack("<IIII", mode, size, mtime, len(raw)) + raw)
            await stream.write(b"DONE" + struct.pack("<IIII", 0, 0, 0, 0))
        elif cmd == b"SEND":
            await _receive_file(stream, fs, path)
        elif cmd == b"RECV":
            entry = fs.get(path)
            if entry is None:
                await _fail(stream, f"remote object '{path}' does not exist")
                continue
            data = entry.data
            for start in range(0, len(data), MAX_CHUNK):
                chunk = data[start : start + MAX_CHUNK]
                await stream.write(b"DATA" + struct.pack("<I", len(chunk)) + chunk)
            await stream.write(b"DONE" + struct.pack("<I", 0))
        elif cmd == b"QUIT":
            return
        else:
            await _fail(stream, f"unknown sync command {cmd!r}")
            return


async def _receive_file(stream: AdbStream, fs: MemoryFS, spec: str) -> None:
    path, _, mode_text = spec.rpartition(",")
    if not path:
        path, mode_text = spec, "420"
    try:
        mode = int(mode_text)
    except ValueError:
        mode = 0o644
    chunks: list[bytes] = []
    while True:
        header = await stream.reader.readexactly(8)
        kind, value = header[:4], struct.unpack("<I", header[4:])[0]
        if kind == b"DATA":
            if value > MAX_CHUNK:
                await _fail(stream, "data chunk too large")
                return
            chunks.append(await stream.reader.readexactly(value))
        elif kind == b"DONE":
            if fs.is_dir(path):
                await _fail(stream, f"{path}: is a directory")
                return
            fs.put(path, b"".join(chunks), mode, value)
            await stream.write(b"OKAY" + struct.pack("<I", 0))
            return
        else:
            await _fail(stream, f"unexpected {kind!r} during SEND")
            return
