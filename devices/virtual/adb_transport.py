"""The device side of the ADB transport over TCP: messages, the CNXN handshake and streams.

The host (Debian's `adb` server after `adb connect 127.0.0.1:PORT`) opens one TCP connection per
device and multiplexes streams over it. A stream is opened by the host with OPEN(host_id, 0,
"service\\0"); the device answers OKAY(device_id, host_id) or refuses with CLSE(0, host_id).
Flow control is the classic one: at most one WRTE in flight per direction until the peer's OKAY.
We never ask for AUTH and advertise no features, so the host uses shell v1 and sync v1.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
import struct
from collections.abc import Awaitable, Callable
from dataclasses import dataclass
from enum import IntEnum

log = logging.getLogger(__name__)

HEADER = struct.Struct("<6I")
VERSION = 0x01000001
MAX_PAYLOAD = 1024 * 1024  # what we advertise; the host's own limit usually wins
FIRST_STREAM_ID = 1


class Command(IntEnum):
    CNXN = 0x4E584E43
    OPEN = 0x4E45504F
    OKAY = 0x59414B4F
    WRTE = 0x45545257
    CLSE = 0x45534C43
    AUTH = 0x48545541
    SYNC = 0x434E5953


@dataclass(frozen=True)
class Message:
    command: int
    arg0: int
    arg1: int
    data: bytes = b""

    def encode(self) -> bytes:
        checksum = sum(self.data) & 0xFFFFFFFF
        magic = self.command ^ 0xFFFFFFFF
        return HEADER.pack(self.command, self.arg0, self.arg1, len(self.data), checksum, magic) + self.data

    @property
    def name(self) -> str:
        try:
            return Command(self.command).name
        except ValueError:
            return hex(self.command)


class ProtocolError(Exception):
    """The peer sent bytes that are not an ADB message (bad magic, oversized payload)."""


async def read_message(reader: asyncio.StreamReader) -> Message:
    header = await reader.readexactly(HEADER.size)
    command, arg0, arg1, length, _checksum, magic = HEADER.unpack(header)
    if magic != command ^ 0xFFFFFFFF:
        raise ProtocolError(f"bad magic for command {command:#x}")
    if length > 16 * 1024 * 1024:
        raise ProtocolError(f"payload of {length} bytes is too large")
    data = await reader.readexactly(length) if length else b""
    return Message(command, arg0, arg1, data)


class StreamClosed(Exception):
    """The stream was closed by the peer or the connection went away."""


class AdbStream:
    """One service stream, as the service sees it: a byte reader plus a flow-controlled writer."""

    def __init__(self, conn: AdbConnection, local_id: int, remote_id: int, service: str) -> None:
        self.conn = conn
        self.local_id = local_id
        self.remote_id = remote_id
        self.service = service
        self.reader = asyncio.StreamReader(limit=64 * 1024 * 1024)
        self._ready = asyncio.Event()  # set when the peer has acknowledged our last WRTE
        self._ready.set()
        self._write_lock = asyncio.Lock()
        self.closed = False

    # --- called by the connection -----------------------------------------------------------

    def _on_data(self, data: bytes) -> None:
        if not self.closed:
            self.reader.feed_data(data)

    def _on_okay(self) -> None:
        self._ready.set()

    def _on_peer_close(self) -> None:
        self.closed = True
        self.reader.feed_eof()
        self._ready.set()

    # --- used by services -------------------------------------------------------------------

    async def write(self, data: bytes) -> None:
        """Send bytes in WRTE messages no larger than the negotiated payload, one in flight."""
        async with self._write_lock:
            view = memoryview(data)
            step = self.conn.max_payload
            for start in range(0, len(view), step):
                await self._ready.wait()
                if self.closed:
                    raise StreamClosed(self.service)
                self._ready.clear()
                await self.conn.send(
                    Message(Command.WRTE, self.local_id, self.remote_id, bytes(view[start : start + step]))
                )
            # The last WRTE must be acknowledged before a CLSE, or the host may drop its tail.
            await self._ready.wait()

    async def close(self) -> None:
        if self.closed:
            return
        self.closed = True
        self.reader.feed_eof()
        self.conn.forget(self.local_id)
        with contextlib.suppress(ConnectionError):
            await self.conn.send(Message(Command.CLSE, self.local_id, self.remote_id))

    async def wait_closed_by_peer(self) -> None:
        """Block until the host closes the stream (EOF on the reader); discards incoming bytes."""
        while await self.reader.read(65536):
            pass


ServiceHandler = Callable[[AdbStream], Awaitable[None]]
# Returns a handler for the service, or None to refuse the OPEN.
ServiceRouter = Callable[[str], ServiceHandler | None]


class AdbConnection:
    """One TCP connection from the host: handshake, then stream multiplexing."""

    def __init__(
        self,
        reader: asyncio.StreamReader,
        writer: asyncio.StreamWriter,
        banner: bytes,
        router: ServiceRouter,
        on_message: Callable[[Message], None] | None = None,
    ) -> None:
        self.reader = reader
        self.writer = writer
        self.banner = banner
        self.router = router
        self.on_message = on_message
        self.max_payload = 4096  # until the host's CNXN says otherwise
        self.streams: dict[int, AdbStream] = {}
        self.tasks: set[asyncio.Task[None]] = set()
        self._next_id = FIRST_STREAM_ID
        self._send_lock = asyncio.Lock()
        self.online = False
        self.alive = True

    async def send(self, message: Message) -> None:
        if not self.alive:
            raise ConnectionResetError("adb connection is closed")
        async with self._send_lock:
            self.writer.write(message.encode())
            await self.writer.drain()

    def forget(self, local_id: int) -> None:
        self.streams.pop(local_id, None)

    async def serve(self) -> None:
        """Read messages until the host goes away; always cleans up streams and tasks."""
        try:
            while True:
                message = await read_message(self.reader)
                if self.on_message is not None:
                    self.on_message(message)
                await self._dispatch(message)
        except (asyncio.IncompleteReadError, ConnectionError, ProtocolError) as exc:
            log.debug("adb connection ended: %s", exc)
        finally:
            await self.abort()

    async def abort(self) -> None:
        """Drop the connection: what a pulled USB cable looks like to the host."""
        if not self.alive:
            return
        self.alive = False
        for stream in list(self.streams.values()):
            stream._on_peer_close()
        self.streams.clear()
        for task in list(self.tasks):
            task.cancel()
        self.writer.close()
        with contextlib.suppress(Exception):
            await self.writer.wait_closed()

    async def _dispatch(self, msg: Message) -> None:
        if msg.command == Command.CNXN:
            self.max_payload = max(256, min(MAX_PAYLOAD, msg.arg1))
            await self.send(Message(Command.CNXN, VERSION, MAX_PAYLOAD, self.banner))
            self.online = True
        elif msg.command == Command.OPEN:
            await self._open(msg)
        elif msg.command == Command.WRTE:
            stream = self.streams.get(msg.arg1)
            if stream is None:
                await self.send(Message(Command.CLSE, 0, msg.arg0))
                return
            stream._on_data(msg.data)
            await self.send(Message(Command.OKAY, stream.local_id, stream.remote_id))
        elif msg.command == Command.OKAY:
            stream = self.streams.get(msg.arg1)
            if stream is not None:
                stream.remote_id = msg.arg0
                stream._on_okay()
        elif msg.command == Command.CLSE:
            stream = self.streams.pop(msg.arg1, None)
            if stream is not None:
                stream._on_peer_close()
        else:
            log.debug("ignoring adb message %s", msg.name)

    async def _open(self, msg: Message) -> None:
        service = msg.data.rstrip(b"\0").decode("utf-8", errors="replace")
        handler = self.router(service)
        if handler is None:
            log.debug("refusing service %r", service)
            await self.send(Message(Command.CLSE, 0, msg.arg0))
            return
        local_id = self._next_id
        self._next_id += 1
        stream = AdbStream(self, local_id, msg.arg0, service)
        self.streams[local_id] = stream
        await self.send(Message(Command.OKAY, local_id, msg.arg0))
        task = asyncio.get_running_loop().create_task(self._run(handler, stream), name=f"adb:{service[:40]}")
        self.tasks.add(task)
        task.add_done_callback(self.tasks.discard)

    async def _run(self, handler: ServiceHandler, stream: AdbStream) -> None:
        try:
            await handler(stream)
        except (StreamClosed, ConnectionError):
            pass
        except asyncio.CancelledError:
            raise
        except Exception:
            log.exception("service %r failed", stream.service)
        finally:
            if self.alive:
                await stream.close()


def device_banner(product_name: str, model: str, device: str) -> bytes:
    """The CNXN banner the host parses into `adb devices -l` (no features: shell v1, sync v1)."""
    return (
        f"device::ro.product.name={product_name};ro.product.model={model};ro.product.device={device};features="
    ).encode()
