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


def test_the_encoder_sends_a_frame_per_change_and_repeats_a_still_screen_after_100_ms() -> None:
    av = pytest.importorskip("av")
    from PIL import Image

    encoder = H264Encoder(360, 800, 2_000_000, 30)
    decoder = av.CodecContext.create("h264", "r")
    red = Image.new("RGB", (360, 800), (220, 20, 20))
    first = encoder.encode_changed(red, 0, 100_000)
    assert first, "the first frame is sent"
    decoder.decode(av.Packet(encoder.config + first[0][0]))
    # the same object, and an equal copy: nothing new on the screen, nothing sent within 100 ms
    assert encoder.encode_changed(red, 33_000, 100_000) == []
    assert encoder.encode_changed(red.copy(), 66_000, 100_000) == []
    repeat = encoder.encode_changed(red, 100_000, 100_000)
    assert repeat and not repeat[0][1], "a still screen's frame again, as a P-frame"
    decoder.decode(av.Packet(repeat[0][0]))
    blue = Image.new("RGB", (720, 1600), (20, 20, 220))  # the phone's size: scaled to the video's
    changed = encoder.encode_changed(blue, 133_000, 100_000)
    assert changed, "a change is sent at once, not after the repeat delay"
    frames = [f for payload, _ in changed for f in decoder.decode(av.Packet(payload))]
    pixel = frames[-1].to_image().getpixel((180, 400))
    assert pixel[2] > 180 and pixel[0] < 60, pixel


def test_a_static_screen_hands_out_one_image_until_its_state_changes() -> None:
    from devices.virtual.screen import StaticAppScreen

    screen = StaticAppScreen("com.MobileTicket", 540, 1200, "1")
    first = screen.screenshot()
    assert screen.screenshot() is first
    screen.field_text = "北京"
    typed = screen.screenshot()
    assert typed is not first and typed.tobytes() != first.tobytes()
    screen.field_text = ""
    assert screen.screenshot().tobytes() == first.tobytes()
