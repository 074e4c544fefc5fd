"""scrcpy's server on the virtual phone: launched by `app_process`, reached by `adb forward`.

The host pushes its server jar to /data/local/tmp, forwards a local port to
`localabstract:scrcpy_<scid>` and runs `CLASSPATH=<jar> app_process / com.genymobile.scrcpy.Server
<version> key=value ...`. The phone checks the jar and the version as the real server does, then
accepts the video and control sockets in order, sends the dummy byte and the device name, streams
its own screen as H.264 (PyAV's libx264 stands in for MediaCodec: a frame when the sampled screen
changed, the last one again after 100 ms of stillness, as scrcpy configures MediaCodec; the next
sample is captured while the last one is encoded and sent) and applies the control socket's
touch, key and text messages as injected input, logged with source `scrcpy`. Closing the launch
stream stops the server, as killing app_process does. Wire format: devices/scrcpy_protocol.py.
"""

from __future__ import annotations

import asyncio
import concurrent.futures
import contextlib
import logging
import time
from dataclasses import dataclass, field
from fractions import Fraction
from typing import TYPE_CHECKING, Any

from devices import scrcpy_protocol as proto
from devices.virtual.model import InputSource
from devices.virtual.shell import split_commands, strip_env

if TYPE_CHECKING:
    from PIL import Image

    from devices.virtual.adb_transport import AdbStream
    from devices.virtual.phone import VirtualPhone

log = logging.getLogger(__name__)

DEFAULT_MAX_FPS = 30.0  # MediaCodec emits on change; the virtual screen is sampled at this rate
# scrcpy sets MediaCodec's KEY_REPEAT_PREVIOUS_FRAME_AFTER to 100 ms: a frame per change of the
# screen, and a still screen's last frame again every 100 ms (10 frames/s), not one per sample.
REPEAT_AFTER_US = 100_000
ACCEPT_TIMEOUT_S = 10.0  # the real server also gives up when the client never connects
SOURCE = InputSource.SCRCPY
# Options the server takes and the virtual phone either uses or may ignore without changing the stream.
IGNORED = {
    "log_level", "cleanup", "power_off_on_close", "clipboard_autosync", "downsize_on_error",
    "show_touches", "stay_awake", "power_on", "list_encoders", "list_displays", "display_id",
    "video_source", "video_encoder", "video_codec_options", "lock_video_orientation", "capture_orientation",
    "angle", "crop", "keep_active",
}  # fmt: skip
USED = {
    "scid", "tunnel_forward", "video", "audio", "control", "max_size", "max_fps", "video_bit_rate",
    "video_codec", "send_device_meta", "send_frame_meta", "send_dummy_byte", "send_codec_meta", "raw_stream",
}  # fmt: skip


def is_scrcpy_launch(line: str) -> bool:
    return "app_process" in line and proto.SERVER_CLASS in line


class LaunchError(Exception):
    """What the real server prints before it exits."""


@dataclass
class ServerOptions:
    scid: int | None = None
    tunnel_forward: bool = False
    video: bool = True
    control: bool = True
    max_size: int = 0
    max_fps: float = 0.0
    bit_rate: int = 8_000_000
    send_device_meta: bool = True
    send_frame_meta: bool = True
    send_dummy_byte: bool = True
    send_codec_meta: bool = True


def _flag(value: str) -> bool:
    return value.lower() == "true"


def parse_launch(line: str, phone: VirtualPhone) -> ServerOptions:
    """Options of an `app_process … Server <version> k=v …` line; LaunchError as the server exits."""
    env, argv = strip_env(split_commands(line)[0][1])
    jar = env.get("CLASSPATH", "")
    if not jar or phone.fs.get(jar) is None:
        raise LaunchError(f"Error: Could not find or load main class {proto.SERVER_CLASS}\n")
    words = argv[argv.index(proto.SERVER_CLASS) + 1 :]
    version = words[0] if words else ""
    if version != proto.SERVER_VERSION:
        raise LaunchError(
            f"[server] ERROR: The server version ({proto.SERVER_VERSION}) does not match the client "
            f"({version or 'none'})\n"
        )
    opts = ServerOptions()
    for word in words[1:]:
        key, _, value = word.partition("=")
        if key in IGNORED:
            continue
        if key not in USED:
            raise LaunchError(f"[server] ERROR: Unknown server option: {key}\n")
        if key == "scid":
            opts.scid = int(value, 16)
        elif key == "tunnel_forward":
            opts.tunnel_forward = _flag(value)
        elif key in ("video", "control"):
            setattr(opts, key, _flag(value))
        elif key == "audio" and _flag(value):
            raise LaunchError(
                "[server] ERROR: audio capture is not available on a virtual phone (audio=false)\n"
            )
        elif key == "max_size":
            opts.max_size = int(value)
        elif key == "max_fps":
            opts.max_fps = float(value)
        elif key == "video_bit_rate":
            opts.bit_rate = int(value)
        elif key == "video_codec" and value != "h264":
            raise LaunchError(f"[server] ERROR: video codec {value} is not available here (h264)\n")
        elif key == "raw_stream" and _flag(value):
            opts.send_device_meta = opts.send_frame_meta = opts.send_dummy_byte = opts.send_codec_meta = False
        elif key.startswith("send_"):
            setattr(opts, key, _flag(value))
    if not opts.tunnel_forward:
        # A reverse tunnel needs the phone to connect out to the host's listener; the virtual
        # phone's `adb reverse` records rules but carries no streams.
        raise LaunchError("[server] ERROR: the virtual phone serves scrcpy over a forward tunnel only\n")
    if not (opts.video or opts.control):
        raise LaunchError("[server] ERROR: nothing to serve (video=false control=false)\n")
    return opts


class H264Encoder:
    """libx264 through PyAV, tuned like a phone's encoder for mirroring: no B-frames, no lookahead."""

    def __init__(self, width: int, height: int, bit_rate: int, fps: float) -> None:
        import av

        self.width, self.height = width, height
        codec = av.CodecContext.create("libx264", "w")
        codec.width, codec.height = width, height
        codec.pix_fmt = "yuv420p"
        codec.time_base = Fraction(1, 1_000_000)
        codec.framerate = Fraction(round(fps), 1)
        codec.bit_rate = bit_rate
        codec.gop_size = max(1, round(fps * 10))
        codec.flags |= (
            av.codec.context.Flags.global_header
        )  # SPS/PPS as a config packet, as MediaCodec's CODEC_CONFIG
        codec.options = {"preset": "ultrafast", "tune": "zerolatency", "bframes": "0"}
        codec.open()
        self._codec: Any = codec
        self.config = bytes(codec.extradata or b"")
        self._frame: Any = None
        self._image: Image.Image | None = None
        self._raw = b""
        self._last_pts: int | None = None

    def encode(self, image: Image.Image | None, pts_us: int) -> list[tuple[bytes, bool]]:
        """(payload, key frame) packets for `image` (None: the previous frame again). A screen
        equal to the last one is encoded again from the frame already converted (cheap P-frames),
        like MediaCodec's repeat-previous-frame."""
        if image is not None:
            self._take(image)
        return self._encode(pts_us)

    def encode_changed(
        self, image: Image.Image, pts_us: int, repeat_after_us: int
    ) -> list[tuple[bytes, bool]]:
        """As a phone's encoder fed by its display: packets only when the screen changed, or when
        `repeat_after_us` passed since the last frame (the previous frame again); else none."""
        changed = self._take(image)
        if not changed and self._last_pts is not None and pts_us - self._last_pts < repeat_after_us:
            return []
        return self._encode(pts_us)

    def _take(self, image: Image.Image) -> bool:
        """Convert `image` for the encoder; False when it shows what the last one did."""
        import av
        import numpy as np
        from PIL import Image

        if image is self._image and self._frame is not None:
            # The screen hands out the same image object only while nothing on it changed
            # (devices.virtual.screen): no resize, comparison or conversion.
            return False
        self._image = image  # held: the object cannot be reused for another frame meanwhile
        if image.size != (self.width, self.height):
            # Nearest neighbour: about 20x cheaper than a filtered resize of a 1080x2400 frame,
            # which alone cost more than a frame interval on this machine.
            image = image.resize((self.width, self.height), Image.Resampling.NEAREST)
        if image.mode != "RGB":
            image = image.convert("RGB")
        raw = image.tobytes()
        if raw == self._raw and self._frame is not None:
            return False
        self._raw = raw
        rgb = np.frombuffer(raw, dtype=np.uint8).reshape(self.height, self.width, 3)
        self._frame = av.VideoFrame.from_ndarray(rgb, format="rgb24").reformat(format="yuv420p")
        return True

    def _encode(self, pts_us: int) -> list[tuple[bytes, bool]]:
        if self._frame is None:
            return []
        self._frame.pts = pts_us
        self._last_pts = pts_us
        return [(bytes(p), bool(p.is_keyframe)) for p in self._codec.encode(self._frame)]


@dataclass
class Session:
    """One running server: its sockets as the client connects them."""

    phone: VirtualPhone
    opts: ServerOptions
    name: str
    sockets: list[AdbStream] = field(default_factory=list)
    connected: asyncio.Event = field(default_factory=asyncio.Event)
    done: asyncio.Event = field(default_factory=asyncio.Event)
    frames_sent: int = 0
    controls_applied: int = 0
    # Set when a control message was applied: the screen is sampled at once, as a phone's display
    # composes the app's redraw after a touch without waiting for a sampling tick.
    input_applied: asyncio.Event = field(default_factory=asyncio.Event)

    @property
    def expected(self) -> int:
        return int(self.opts.video) + int(self.opts.control)

    async def accept(self, stream: AdbStream) -> None:
        """A `localabstract:` stream the client opened; kept open until the server stops."""
        if len(self.sockets) >= self.expected:
            return
        if not self.sockets and self.opts.send_dummy_byte:
            await stream.write(b"\0")
        self.sockets.append(stream)
        if len(self.sockets) == self.expected:
            self.connected.set()
        await self.done.wait()

    async def serve(self) -> None:
        await asyncio.wait_for(self.connected.wait(), ACCEPT_TIMEOUT_S)
        first = self.sockets[0]
        if self.opts.send_device_meta:
            ident = self.phone.spec.identity
            await first.write(proto.device_name_field(ident.model))
        tasks = []
        if self.opts.video:
            tasks.append(asyncio.ensure_future(self._stream_video(self.sockets[0])))
        if self.opts.control:
            tasks.append(asyncio.ensure_future(self._read_control(self.sockets[-1])))
        try:
            await asyncio.wait(tasks, return_when=asyncio.FIRST_COMPLETED)
        finally:
            for task in tasks:
                task.cancel()
            for task in tasks:
                with contextlib.suppress(BaseException):
                    await task

    # --- video ---------------------------------------------------------------------------------

    async def _stream_video(self, sock: AdbStream) -> None:
        ident = self.phone.spec.identity
        width, height = proto.scaled_size(ident.width, ident.height, self.opts.max_size)
        fps = self.opts.max_fps or DEFAULT_MAX_FPS
        loop = asyncio.get_running_loop()
        pool = concurrent.futures.ThreadPoolExecutor(max_workers=1, thread_name_prefix="scrcpy-encode")
        sending: asyncio.Future[None] | None = None
        try:
            encoder = await loop.run_in_executor(pool, H264Encoder, width, height, self.opts.bit_rate, fps)
            if self.opts.send_codec_meta:
                await sock.write(proto.CODEC_META.pack(proto.CODEC_H264, width, height))
            if encoder.config:
                await self._send(sock, encoder.config, 0, config=True)
            started = time.monotonic()
            while not sock.closed:
                tick = time.monotonic()
                self.input_applied.clear()  # an input applied from now on is sampled next
                image = await self.phone.ui_call(self.phone.ui.screenshot)
                pts = int((tick - started) * 1_000_000)
                if sending is not None:
                    # The previous frame was encoded and sent while this one was captured.
                    await sending
                sending = asyncio.ensure_future(self._encode_and_send(sock, pool, encoder, image, pts))
                left = 1 / fps - (time.monotonic() - tick)
                if left > 0:
                    with contextlib.suppress(TimeoutError):
                        await asyncio.wait_for(self.input_applied.wait(), left)
            if sending is not None:
                await sending
        finally:
            if sending is not None and not sending.done():
                sending.cancel()
                with contextlib.suppress(BaseException):
                    await sending
            pool.shutdown(wait=False)

    async def _encode_and_send(
        self,
        sock: AdbStream,
        pool: concurrent.futures.ThreadPoolExecutor,
        encoder: H264Encoder,
        image: Image.Image,
        pts: int,
    ) -> None:
        loop = asyncio.get_running_loop()
        packets = await loop.run_in_executor(pool, encoder.encode_changed, image, pts, REPEAT_AFTER_US)
        for payload, key in packets:
            await self._send(sock, payload, pts, key_frame=key)
            self.frames_sent += 1

    async def _send(self, sock: AdbStream, payload: bytes, pts: int, **flags: bool) -> None:
        if self.opts.send_frame_meta:
            header = proto.FrameHeader(
                pts, len(payload), flags.get("config", False), flags.get("key_frame", False)
            )
            await sock.write(header.encode() + payload)
        else:
            await sock.write(payload)

    # --- control -------------------------------------------------------------------------------

    async def _read_control(self, sock: AdbStream) -> None:
        reader = sock.reader
        while True:
            try:
                kind = (await reader.readexactly(1))[0]
            except asyncio.IncompleteReadError:
                return
            try:
                ctype = proto.ControlType(kind)
            except ValueError:
                log.warning(
                    "%s: scrcpy control type %d is not handled; closing control", self.phone.name, kind
                )
                return
            if ctype is proto.ControlType.INJECT_TEXT:
                (length,) = proto.TEXT_LENGTH.unpack(await reader.readexactly(proto.TEXT_LENGTH.size))
                text = (await reader.readexactly(length)).decode("utf-8", errors="replace")
                await self.phone.input_call(self.phone.ui.text, text, SOURCE, "scrcpy inject_text")
            else:
                body = await reader.readexactly(proto.FIXED_BODY[ctype])
                await self._apply(ctype, body)
            self.controls_applied += 1
            self.input_applied.set()

    async def _apply(self, ctype: proto.ControlType, body: bytes) -> None:
        ui = self.phone.ui
        if ctype is proto.ControlType.INJECT_TOUCH_EVENT:
            touch = proto.decode_touch(body)
            ident = self.phone.spec.identity
            expected = proto.scaled_size(ident.width, ident.height, self.opts.max_size)
            if (touch.width, touch.height) != expected:
                # The server drops a touch made for another frame size (a rotation in flight).
                log.info("%s: scrcpy touch for %dx%d ignored", self.phone.name, touch.width, touch.height)
                return
            x = round(touch.x * ident.width / touch.width)
            y = round(touch.y * ident.height / touch.height)
            await self.phone.input_call(
                ui.touch, int(touch.action), x, y, SOURCE, "scrcpy inject_touch_event"
            )
        elif ctype is proto.ControlType.INJECT_KEYCODE:
            key = proto.decode_key(body)
            if key.action is proto.KeyAction.UP:  # a down/up pair is one press on the virtual phone
                await self.phone.input_call(ui.key, str(key.keycode), SOURCE, "scrcpy inject_keycode")
        elif ctype is proto.ControlType.BACK_OR_SCREEN_ON and body[0] == proto.KeyAction.UP:
            await self.phone.input_call(ui.key, "back", SOURCE, "scrcpy back_or_screen_on")
        elif ctype is proto.ControlType.GET_CLIPBOARD:
            # Answered after every earlier message was applied (one reader, in order); as the
            # real server, nothing is sent while the clipboard is empty. Copy/cut keys are ignored.
            text = await self.phone.ui_call(lambda: ui.clipboard)
            if text is not None:
                await self.sockets[-1].write(proto.clipboard_message(text))


class ScrcpyServers:
    """The phone's running scrcpy servers, by socket name."""

    def __init__(self, phone: VirtualPhone) -> None:
        self.phone = phone
        self.sessions: dict[str, Session] = {}
        self.starts = 0

    def route(self, service: str) -> Any:
        """The handler of a `localabstract:` service, or None when no server listens there."""
        session = self.sessions.get(service.removeprefix("localabstract:"))
        return None if session is None else session.accept

    async def launch(self, stream: AdbStream, line: str) -> None:
        try:
            opts = parse_launch(line, self.phone)
        except LaunchError as exc:
            await stream.write(str(exc).encode())
            return
        name = proto.socket_name(opts.scid)
        if name in self.sessions:
            await stream.write(b"[server] ERROR: Could not listen on socket: Address already in use\n")
            return
        session = Session(self.phone, opts, name)
        self.sessions[name] = session
        self.starts += 1
        ident = self.phone.spec.identity
        await stream.write(
            f"[server] INFO: Device: [{ident.manufacturer}] {ident.brand} {ident.model} "
            f"(Android {ident.release})\n".encode()
        )
        serving = asyncio.ensure_future(session.serve())
        killed = asyncio.ensure_future(stream.wait_closed_by_peer())
        try:
            await asyncio.wait({serving, killed}, return_when=asyncio.FIRST_COMPLETED)
            if serving.done() and serving.exception() is not None:
                log.info("%s: scrcpy server ended: %r", self.phone.name, serving.exception())
        finally:
            serving.cancel()
            killed.cancel()
            session.done.set()
            self.sessions.pop(name, None)
            for sock in session.sockets:
                with contextlib.suppress(Exception):
                    await sock.close()
            log.info(
                "%s: scrcpy server %s stopped (%d frames sent)", self.phone.name, name, session.frames_sent
            )
