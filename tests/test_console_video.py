"""The console's live view without a phone: the packet feed the page decodes, the frame-change
wait after a scrcpy input, and the interlock deciding a byte-identical re-read once."""

from __future__ import annotations

import asyncio
from typing import Any

import numpy as np
import pytest

from devices import scrcpy_protocol as proto
from realbench.actions import Click
from realbench.console import video_feed
from realbench.console.video_feed import STREAM_HEADER, PacketFeed, stream

av = pytest.importorskip("av")


def _packet(pts: int, payload: bytes, *, config: bool = False, key: bool = False) -> tuple[Any, bytes]:
    return proto.FrameHeader(pts, len(payload), config, key), payload


def _encoded(header: Any, payload: bytes) -> bytes:
    return header.encode() + payload


def _feed(feed: PacketFeed, *packets: tuple[Any, bytes]) -> None:
    for header, payload in packets:
        feed.on_packet(header, payload)


async def _read(feed: PacketFeed, n: int, alive: bool = True) -> list[bytes]:
    out: list[bytes] = []
    async for chunk in stream(feed, 720, 1600, lambda: alive):
        out.append(chunk)
        if len(out) == n:
            break
    return out


def test_a_viewer_starts_from_the_config_and_the_last_key_frame() -> None:
    feed = PacketFeed()
    config = _packet(0, b"sps-pps", config=True)
    old_key, old_p = _packet(1, b"key-1", key=True), _packet(2, b"p-1")
    key, p1, p2 = _packet(3, b"key-2", key=True), _packet(4, b"p-2"), _packet(5, b"p-3")
    _feed(feed, config, old_key, old_p, key, p1, p2)
    chunks = asyncio.run(_read(feed, 5))
    assert STREAM_HEADER.unpack(chunks[0]) == (proto.CODEC_H264, 720, 1600, 3)
    # the config first, then only what follows the last key frame
    assert chunks[1:] == [_encoded(*config), _encoded(*key), _encoded(*p1), _encoded(*p2)]
    assert feed.viewers == 0  # a page that went away is forgotten


def test_live_packets_follow_the_replay_and_the_stream_end_ends_the_response() -> None:
    feed = PacketFeed()
    _feed(feed, _packet(0, b"cfg", config=True), _packet(1, b"key", key=True))

    async def run() -> list[bytes]:
        got: list[bytes] = []

        async def read() -> None:
            async for chunk in stream(feed, 720, 1600, lambda: True):
                got.append(chunk)

        task = asyncio.ensure_future(read())
        while feed.viewers == 0:
            await asyncio.sleep(0.01)
        # from another thread, as the scrcpy reader calls it
        await asyncio.to_thread(feed.on_packet, *_packet(2, b"live"))
        await asyncio.to_thread(feed.end)
        await asyncio.wait_for(task, 5)
        return got

    got = asyncio.run(run())
    assert got[-1] == _encoded(*_packet(2, b"live")) and len(got) == 4


def test_a_viewer_that_falls_behind_is_ended_not_fed_holes(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(video_feed, "MAX_BEHIND", 3)
    feed = PacketFeed()
    _feed(feed, _packet(0, b"cfg", config=True), _packet(1, b"key", key=True))

    async def run() -> list[bytes]:
        gen = stream(feed, 720, 1600, lambda: True)
        got = [await gen.__anext__()]  # the header; the viewer is subscribed now
        for i in range(10):
            feed.on_packet(*_packet(2 + i, b"p%d" % i))
        await asyncio.sleep(0.05)
        got += [chunk async for chunk in gen]
        return got

    got = asyncio.run(run())
    # the replay (2) and one live packet fit; then the response ends instead of skipping P-frames
    assert len(got) == 1 + 3
    assert feed.viewers == 0


def test_a_dead_stream_ends_an_idle_viewer(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(video_feed, "IDLE_CHECK_S", 0.05)
    feed = PacketFeed()
    chunks = asyncio.run(asyncio.wait_for(_read(feed, 99, alive=False), 5))
    assert len(chunks) == 1  # the header, then nothing: the scrcpy stream is gone


# --- the wait for a changed frame after a scrcpy input ------------------------------------------


def _frame(seq: int, luma: np.ndarray) -> Any:
    from devices.scrcpy_client import DecodedFrame

    rgb = np.repeat(luma[:, :, None], 3, axis=2)
    frame = av.VideoFrame.from_ndarray(rgb, format="rgb24").reformat(format="yuv420p")
    return DecodedFrame(seq, 0.0, frame)


def test_only_a_change_below_the_status_bar_counts() -> None:
    from devices.scrcpy_input import frames_differ

    base = np.full((320, 144), 200, np.uint8)
    clock = base.copy()
    clock[2:10, 100:140] = 0  # the status bar's clock ticked
    noise = (base.astype(np.int16) + np.random.default_rng(0).integers(-6, 7, base.shape)).astype(np.uint8)
    opened = base.copy()
    opened[100:200, :] = 30  # a new screen's panel
    assert not frames_differ(_frame(1, base), _frame(2, base))
    assert not frames_differ(_frame(1, base), _frame(2, clock))
    assert not frames_differ(_frame(1, base), _frame(2, noise))
    assert frames_differ(_frame(1, base), _frame(2, opened))


class FakeVideo:
    """A fake scrcpy client: serves the given frames in turn to `wait_frame`."""

    def __init__(self, frames: list[Any]) -> None:
        self.frames = frames

    def wait_frame(self, after: int, timeout: float) -> Any:
        return next((f for f in self.frames if f.seq > after), None)


def test_the_wait_ends_on_the_first_changed_frame_and_not_before() -> None:
    from devices.scrcpy_input import wait_for_changed_frame

    base = np.full((320, 144), 200, np.uint8)
    opened = base.copy()
    opened[100:200, :] = 30
    frames = [_frame(1, base), _frame(2, base), _frame(3, opened)]
    assert wait_for_changed_frame(FakeVideo(frames), frames[0], 1.0)  # type: ignore[arg-type]
    assert not wait_for_changed_frame(FakeVideo(frames[:2]), frames[0], 0.05)  # type: ignore[arg-type]
    assert not wait_for_changed_frame(FakeVideo(frames), None, 1.0)  # type: ignore[arg-type]


# --- the interlock's re-read ---------------------------------------------------------------------


def test_a_byte_identical_re_read_is_not_decided_again_but_a_changed_one_is(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    from devices.farm.interlock import InterlockedDevice
    from realbench.errors import BoundaryBlocked
    from tests.test_interlock_rules import DIALOG, NEXT, STOP, ScriptedPhone, _xml, norm

    parsed: list[str] = []
    original = InterlockedDevice._parse_dump

    def counting(self: InterlockedDevice, xml: str) -> Any:
        parsed.append(xml)
        return original(self, xml)

    monkeypatch.setattr(InterlockedDevice, "_parse_dump", counting)
    x, y = norm(780, 2160)
    calm = ScriptedPhone([_xml(NEXT)])
    guard = InterlockedDevice(calm, settle_s=0)  # type: ignore[arg-type]
    guard.arm(STOP, [])
    guard.act(Click(x=x, y=y))
    assert calm.served == 2 and len(parsed) == 1 and len(calm.sent) == 1  # read twice, decided once
    # the re-read is still what decides: a dialog that came after the first look blocks the tap
    sudden = ScriptedPhone([_xml(NEXT), _xml(NEXT, DIALOG)])
    guard = InterlockedDevice(sudden, settle_s=0)  # type: ignore[arg-type]
    guard.arm(STOP, [])
    with pytest.raises(BoundaryBlocked):
        guard.act(Click(x=x, y=y))
    assert sudden.sent == []
