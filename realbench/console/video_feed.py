"""scrcpy's H.264 packets, passed on as they arrive to pages that decode them themselves.

The phone page decodes the video with the browser's WebCodecs `VideoDecoder` instead of asking
the console for one re-encoded JPEG after another. The console neither decodes nor re-encodes for
it: each viewer gets a 16-byte header (scrcpy's codec id, width and height, and how many frame
packets of catch-up follow), then the last config packet (SPS/PPS) and every packet since the last
key frame — the catch-up, which the page decodes without showing, so that it starts on the screen
as it is now and not up to a key frame interval in the past — then each new packet in scrcpy's
own framing (12-byte header + payload).

A viewer that falls `MAX_BEHIND` packets behind is ended rather than fed a stream with holes (a
decoder cannot skip P-frames); its page reconnects and starts again from the key frame.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
import struct
import threading
from collections.abc import AsyncIterator, Callable

from devices import scrcpy_protocol as proto

log = logging.getLogger(__name__)

GOP_LIMIT_BYTES = 16 * 1024 * 1024  # a key frame interval longer than this is not replayed
MAX_BEHIND = 240  # packets (8 s at 30 frames/s) a viewer may have waiting before it is ended
IDLE_CHECK_S = 1.0  # how often a waiting viewer checks that the stream is still alive
STREAM_HEADER = struct.Struct(">IIII")  # codec id, width, height, catch-up frame packets


class Viewer:
    """One page's queue of packets, fed from the scrcpy reader thread into the page's event loop."""

    def __init__(self, loop: asyncio.AbstractEventLoop, replay: list[bytes]) -> None:
        self._loop = loop
        self._queue: asyncio.Queue[bytes | None] = asyncio.Queue()
        for data in replay:
            self._queue.put_nowait(data)
        # frame packets (not the config) of the catch-up
        self.catch_up = sum(not proto.FrameHeader.decode(d[: proto.FRAME_HEADER.size]).config for d in replay)
        self.overrun = False

    def put(self, data: bytes | None) -> None:
        """From any thread."""
        with contextlib.suppress(RuntimeError):  # RuntimeError: the page's loop is gone
            self._loop.call_soon_threadsafe(self._put, data)

    def _put(self, data: bytes | None) -> None:
        if self.overrun:
            return
        if data is not None and self._queue.qsize() >= MAX_BEHIND:
            self.overrun = True
            data = None
        self._queue.put_nowait(data)

    async def get(self, timeout: float) -> bytes | None:
        """The next packet; b"" when none came within `timeout`; None when the viewer is ended."""
        try:
            return await asyncio.wait_for(self._queue.get(), timeout)
        except TimeoutError:
            return b""


class PacketFeed:
    """Registered as a `ScrcpyClient.packet_sink` before the client starts (so the config
    packet, which comes first, is kept)."""

    def __init__(self) -> None:
        self._lock = threading.Lock()
        self._config: bytes | None = None
        self._gop: list[bytes] = []
        self._gop_bytes = 0
        self._viewers: set[Viewer] = set()
        self.packets = 0

    def on_packet(self, header: proto.FrameHeader, payload: bytes) -> None:
        """Called on the scrcpy reader thread."""
        data = header.encode() + payload
        with self._lock:
            self.packets += 1
            if header.config:
                self._config, self._gop, self._gop_bytes = data, [], 0
            elif header.key_frame:
                self._gop, self._gop_bytes = [data], len(data)
            elif self._gop and self._gop_bytes + len(data) <= GOP_LIMIT_BYTES:
                self._gop.append(data)
                self._gop_bytes += len(data)
            elif self._gop:
                # Too long since the key frame to replay: a viewer joining now waits for the next.
                log.info(
                    "scrcpy key frame interval passed %d bytes; not kept for new viewers", GOP_LIMIT_BYTES
                )
                self._gop, self._gop_bytes = [], 0
            viewers = list(self._viewers)
        for viewer in viewers:
            viewer.put(data)

    def subscribe(self, loop: asyncio.AbstractEventLoop) -> Viewer:
        with self._lock:
            replay = ([self._config] if self._config is not None else []) + list(self._gop)
            viewer = Viewer(loop, replay)
            self._viewers.add(viewer)
        return viewer

    def unsubscribe(self, viewer: Viewer) -> None:
        with self._lock:
            self._viewers.discard(viewer)

    def end(self) -> None:
        """The stream is over: every viewer's response ends."""
        with self._lock:
            viewers, self._viewers = list(self._viewers), set()
        for viewer in viewers:
            viewer.put(None)

    @property
    def viewers(self) -> int:
        with self._lock:
            return len(self._viewers)


async def stream(
    feed: PacketFeed, width: int, height: int, alive: Callable[[], bool]
) -> AsyncIterator[bytes]:
    """The body of one page's video response: the codec header, the replay, then live packets,
    until the scrcpy stream ends, the viewer falls behind or the page goes away."""
    viewer = feed.subscribe(asyncio.get_running_loop())
    try:
        yield STREAM_HEADER.pack(proto.CODEC_H264, width, height, viewer.catch_up)
        while True:
            data = await viewer.get(IDLE_CHECK_S)
            if data is None:
                if viewer.overrun:
                    log.info("a video viewer fell %d packets behind; ended (its page reconnects)", MAX_BEHIND)
                return
            if not data:
                if not alive():
                    return
                continue
            yield data
    finally:
        feed.unsubscribe(viewer)
