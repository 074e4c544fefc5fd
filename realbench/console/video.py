"""The console's live view: scrcpy video per phone, with the screenshot stream as the fallback.

A phone's scrcpy session starts on the first frame asked of it and runs while the console does.
When the server cannot start (no server jar for a real phone, a version mismatch, a phone that
refuses `app_process`), or its stream dies, the console serves screenshots and says why on the
page; it tries scrcpy again after `RETRY_S`.
"""

from __future__ import annotations

import io
import logging
import threading
import time
from dataclasses import dataclass
from typing import Any

from devices.scrcpy_client import ClientOptions, ScrcpyClient, ScrcpyUnavailable
from realbench.console.video_feed import PacketFeed

log = logging.getLogger(__name__)

RETRY_S = 30.0
NEW_FRAME_WAIT_S = 0.5  # a viewer asking again gets the next frame, not the same one twice
SCRCPY = "scrcpy"
SCREENSHOTS = "screenshots"


@dataclass
class _Live:
    client: ScrcpyClient | None = None
    feed: PacketFeed | None = None  # the packets as they are, for pages that decode them
    failed_at: float = 0.0
    reason: str = ""
    served_seq: int = 0
    cache: tuple[int, int, int, bytes] | None = None  # (seq, width, quality, jpeg)


@dataclass(frozen=True)
class VideoStatus:
    source: str
    note: str


class LiveVideo:
    def __init__(self, pool: Any, options: ClientOptions | None = None, *, enabled: bool = True) -> None:
        self.pool = pool
        self.options = options or ClientOptions()
        self.enabled = enabled
        self._live: dict[str, _Live] = {}
        self._lock = threading.Lock()

    def _state(self, serial: str) -> _Live:
        with self._lock:
            return self._live.setdefault(serial, _Live())

    def live(self, serial: str) -> ScrcpyClient | None:
        """The running session of `serial`, if any (never starts one)."""
        st = self._live.get(serial)
        client = st.client if st is not None else None
        return client if client is not None and client.alive else None

    def ensure(self, serial: str) -> ScrcpyClient | None:
        if not self.enabled:
            return None
        st = self._state(serial)
        with self._lock:
            if st.client is not None and st.client.alive:
                return st.client
            if st.client is not None:  # the stream died: fall back, and retry later
                st.reason = f"scrcpy stream ended ({st.client.error or 'closed'})"
                st.failed_at = time.monotonic()
                st.client.close()
                st.client = None
                if st.feed is not None:
                    st.feed.end()
                    st.feed = None
            if st.failed_at and time.monotonic() - st.failed_at < RETRY_S:
                return None
            try:
                import adbutils

                client = ScrcpyClient(adbutils.adb.device(serial), self.options)
                feed = PacketFeed()
                client.packet_sinks.append(feed.on_packet)  # before start: the config packet comes first
                st.client, st.feed = client.start(), feed
                st.reason, st.failed_at = "", 0.0
            except ScrcpyUnavailable as exc:
                st.reason, st.failed_at = exc.message, time.monotonic()
                log.warning(
                    "console: no scrcpy video from %s, streaming screenshots: %s", serial, exc.message
                )
                return None
            return st.client

    def packets(self, serial: str) -> tuple[ScrcpyClient, PacketFeed] | None:
        """The live session and its packet feed (starting scrcpy if need be); None: no video."""
        client = self.ensure(serial)
        st = self._state(serial)
        if client is None or st.feed is None:
            return None
        return client, st.feed

    def frame(self, serial: str, width: int | None, quality: int) -> bytes | None:
        """The next scrcpy frame as JPEG at `width` (None: fall back to a screenshot)."""
        client = self.ensure(serial)
        if client is None:
            return None
        st = self._state(serial)
        decoded = client.wait_frame(st.served_seq, NEW_FRAME_WAIT_S) or client.latest()
        if decoded is None:
            return None
        w = width or client.width
        cached = st.cache
        if cached is not None and cached[:3] == (decoded.seq, w, quality):
            return cached[3]
        frame = decoded.frame
        # Scaled and converted from YUV in one swscale pass (a PIL resize of the RGB frame cost
        # several times more).
        h = round(frame.height * w / frame.width) // 2 * 2
        image = frame.reformat(width=w, height=h, format="rgb24").to_image()
        buf = io.BytesIO()
        image.save(buf, format="JPEG", quality=quality)
        data = buf.getvalue()
        st.served_seq, st.cache = decoded.seq, (decoded.seq, w, quality, data)
        return data

    def status(self, serial: str) -> VideoStatus:
        if self.live(serial) is not None:
            return VideoStatus(SCRCPY, "live video (scrcpy)")
        st = self._live.get(serial)
        if not self.enabled:
            return VideoStatus(SCREENSHOTS, "screenshot stream (scrcpy is off)")
        why = st.reason if st is not None and st.reason else "scrcpy not started"
        return VideoStatus(SCREENSHOTS, f"screenshot stream: {why}")

    def close(self) -> None:
        with self._lock:
            for st in self._live.values():
                if st.client is not None:
                    st.client.close()
                    st.client = None
                if st.feed is not None:
                    st.feed.end()
                    st.feed = None
