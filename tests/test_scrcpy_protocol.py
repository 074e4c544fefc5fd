"""scrcpy's wire format as both ends of realbench write and read it (no phone needed)."""

from __future__ import annotations

import pytest

from devices import scrcpy_protocol as proto
from devices.virtual.scrcpy_server import H264Encoder


def test_frame_header_flags_and_size_round_trip() -> None:
    header = proto.FrameHeader(pts_us=123_456_789, size=4242, config=False, key_frame=True)
    raw = header.encode()
    assert len(raw) == 12
    assert raw[0] & 0x80 == 0 and raw[0] & 0x40  # config bit clear, key-frame bit set
    assert proto.FrameHeader.decode(raw) == header
    config = proto.FrameHeader(0, 30, config=True)
    assert proto.FrameHeader.decode(config.encode()) == config


def test_control_messages_have_scrcpy_3_sizes() -> None:
    touch = proto.TouchMessage(proto.MotionAction.DOWN, 10, 20, 720, 1600).encode()
    key = proto.KeyMessage(proto.KeyAction.UP, 4).encode()
    assert len(touch) == 32 and touch[0] == proto.ControlType.INJECT_TOUCH_EVENT
    assert len(key) == 14 and key[0] == proto.ControlType.INJECT_KEYCODE
    assert proto.decode_touch(touch[1:]) == proto.TouchMessage(proto.MotionAction.DOWN, 10, 20, 720, 1600)
    assert proto.decode_key(key[1:]).keycode == 4
    text = proto.TextMessage("你好").encode()
    assert text[0] == proto.ControlType.INJECT_TEXT and int.from_bytes(text[1:5], "big") == 6


def test_sizes_and_names_follow_the_server() -> None:
    assert proto.scaled_size(1080, 2400, 1600) == (720, 1600)
    assert proto.scaled_size(1080, 2400, 0) == (1080, 2400)
    assert proto.scaled_size(1080, 2340, 1024) == (472, 1024)
    assert proto.socket_name(0x1234) == "scrcpy_00001234" and proto.socket_name(None) == "scrcpy"
    field = proto.device_name_field("Virtual Phone")
    assert len(field) == 64 and proto.parse_device_name(field) == "Virtual Phone"


def test_the_encoder_emits_a_config_packet_then_decodable_frames() -> None:
    av = pytest.importorskip("av")
    from PIL import Image

    encoder = H264Encoder(360, 800, 2_000_000, 30)
    assert encoder.config.startswith(b"\0\0\0\1")  # Annex B SPS/PPS, sent as the config packet
    red = Image.new("RGB", (360, 800), (220, 20, 20))
    packets = encoder.encode(red, 0) + encoder.encode(None, 33_000)
    assert packets and packets[0][1], "the first frame is a key frame"
    decoder = av.CodecContext.create("h264", "r")
    frames = list(decoder.decode(av.Packet(encoder.config + packets[0][0])))
    pixel = frames[0].to_image().getpixel((180, 400))
    assert abs(pixel[0] - 220) < 20 and pixel[1] < 50, pixel
