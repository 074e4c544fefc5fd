"""scrcpy's client/server wire format (scrcpy 3.1), shared by the virtual phone's server and our client.

scrcpy's protocol is internal to each release: a client must run the server of its own version, and
the server refuses any other. What is here is the 3.x layout, with the forward tunnel:

- the server listens on `localabstract:scrcpy_<scid as 8 hex digits>` (`scrcpy` without a scid);
- the client opens the video socket, then the control socket (audio is not used here);
- on the first socket the server sends one dummy byte, then the device name in 64 bytes;
- on the video socket: the codec id (u32) and the frame size (u32 width, u32 height), then packets,
  each behind a 12-byte header: u64 PTS in microseconds whose top bits flag a config packet (63) or
  a key frame (62), and the u32 payload size;
- on the control socket, client-to-device messages: a type byte and a fixed big-endian body.
"""

from __future__ import annotations

import struct
from dataclasses import dataclass
from enum import IntEnum

SERVER_VERSION = "3.1"
SERVER_CLASS = "com.genymobile.scrcpy.Server"
SERVER_PATH = "/data/local/tmp/scrcpy-server.jar"
DEVICE_NAME_LENGTH = 64
CODEC_H264 = 0x68323634  # "h264"
FLAG_CONFIG = 1 << 63
FLAG_KEY_FRAME = 1 << 62
PTS_MASK = FLAG_KEY_FRAME - 1
FRAME_HEADER = struct.Struct(">QI")
CODEC_META = struct.Struct(">III")
KEYCODE_BODY = struct.Struct(">BIII")  # action, keycode, repeat, meta state
TOUCH_BODY = struct.Struct(">BqiiHHHII")  # action, pointer, x, y, w, h, pressure, action button, buttons
TEXT_LENGTH = struct.Struct(">I")
MAX_TEXT_BYTES = 300


class ControlType(IntEnum):
    INJECT_KEYCODE = 0
    INJECT_TEXT = 1
    INJECT_TOUCH_EVENT = 2
    INJECT_SCROLL_EVENT = 3
    BACK_OR_SCREEN_ON = 4
    EXPAND_NOTIFICATION_PANEL = 5
    EXPAND_SETTINGS_PANEL = 6
    COLLAPSE_PANELS = 7
    GET_CLIPBOARD = 8


# Device-to-client messages on the control socket: a type byte, then the body.
DEVICE_CLIPBOARD = 0  # u32 length, UTF-8 text; sent for GET_CLIPBOARD only when the clipboard has text


class MotionAction(IntEnum):
    DOWN = 0
    UP = 1
    MOVE = 2


class KeyAction(IntEnum):
    DOWN = 0
    UP = 1


# Body sizes of the messages whose body is fixed (after the type byte).
FIXED_BODY: dict[ControlType, int] = {
    ControlType.INJECT_KEYCODE: KEYCODE_BODY.size,
    ControlType.INJECT_TOUCH_EVENT: TOUCH_BODY.size,
    ControlType.INJECT_SCROLL_EVENT: 20,  # position (12), h/v scroll (i16 each), buttons (u32)
    ControlType.BACK_OR_SCREEN_ON: 1,
    ControlType.EXPAND_NOTIFICATION_PANEL: 0,
    ControlType.EXPAND_SETTINGS_PANEL: 0,
    ControlType.COLLAPSE_PANELS: 0,
    ControlType.GET_CLIPBOARD: 1,  # copy key: 0 none, 1 copy, 2 cut
}
POINTER_MOUSE = -1
POINTER_FINGER = -2
FULL_PRESSURE = 0xFFFF


def socket_name(scid: int | None) -> str:
    return "scrcpy" if scid is None else f"scrcpy_{scid:08x}"


@dataclass(frozen=True)
class KeyMessage:
    action: KeyAction
    keycode: int
    repeat: int = 0
    meta_state: int = 0

    def encode(self) -> bytes:
        return bytes([ControlType.INJECT_KEYCODE]) + KEYCODE_BODY.pack(
            self.action, self.keycode, self.repeat, self.meta_state
        )


@dataclass(frozen=True)
class TouchMessage:
    """A touch at (x, y) in the video frame's pixels; (width, height) is that frame's size, which
    the server compares with its own to drop touches meant for another size."""

    action: MotionAction
    x: int
    y: int
    width: int
    height: int
    pointer: int = POINTER_FINGER
    pressure: int = FULL_PRESSURE

    def encode(self) -> bytes:
        return bytes([ControlType.INJECT_TOUCH_EVENT]) + TOUCH_BODY.pack(
            self.action, self.pointer, self.x, self.y, self.width, self.height, self.pressure, 0, 0
        )


@dataclass(frozen=True)
class TextMessage:
    text: str

    def encode(self) -> bytes:
        data = self.text.encode()[:MAX_TEXT_BYTES]
        return bytes([ControlType.INJECT_TEXT]) + TEXT_LENGTH.pack(len(data)) + data


@dataclass(frozen=True)
class OtherMessage:
    """A message the virtual phone reads past without acting on it."""

    type: int


ControlMessage = KeyMessage | TouchMessage | TextMessage | OtherMessage


def get_clipboard() -> bytes:
    return bytes([ControlType.GET_CLIPBOARD, 0])


def clipboard_message(text: str) -> bytes:
    data = text.encode()
    return bytes([DEVICE_CLIPBOARD]) + TEXT_LENGTH.pack(len(data)) + data


def decode_key(body: bytes) -> KeyMessage:
    action, keycode, repeat, meta = KEYCODE_BODY.unpack(body)
    return KeyMessage(KeyAction(action), keycode, repeat, meta)


def decode_touch(body: bytes) -> TouchMessage:
    action, pointer, x, y, w, h, pressure, _button, _buttons = TOUCH_BODY.unpack(body)
    return TouchMessage(MotionAction(action), x, y, w, h, pointer, pressure)


@dataclass(frozen=True)
class FrameHeader:
    pts_us: int
    size: int
    config: bool = False
    key_frame: bool = False

    def encode(self) -> bytes:
        flags = (FLAG_CONFIG if self.config else 0) | (FLAG_KEY_FRAME if self.key_frame else 0)
        return FRAME_HEADER.pack(flags | (self.pts_us & PTS_MASK), self.size)

    @classmethod
    def decode(cls, data: bytes) -> FrameHeader:
        pts, size = FRAME_HEADER.unpack(data)
        return cls(pts & PTS_MASK, size, bool(pts & FLAG_CONFIG), bool(pts & FLAG_KEY_FRAME))


def device_name_field(name: str) -> bytes:
    raw = name.encode()[: DEVICE_NAME_LENGTH - 1]
    return raw + b"\0" * (DEVICE_NAME_LENGTH - len(raw))


def parse_device_name(field: bytes) -> str:
    return field.split(b"\0", 1)[0].decode("utf-8", errors="replace")


def scaled_size(width: int, height: int, max_size: int) -> tuple[int, int]:
    """The video size scrcpy picks: the larger side capped at `max_size` (0: none), both sides
    rounded down to a multiple of 8, the aspect ratio kept."""
    longest = max(width, height)
    if max_size and longest > max_size:
        scale = max_size / longest
        width, height = round(width * scale), round(height * scale)
    return max(8, width // 8 * 8), max(8, height // 8 * 8)
