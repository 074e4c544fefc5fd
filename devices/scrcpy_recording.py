"""An episode's video from scrcpy: the phone's H.264 packets muxed into MP4 as they arrive.

Nothing is decoded or encoded again on the host (as scrcpy's own `--record`): each frame packet
becomes one MP4 sample with the server's timestamp, the config packet (SPS/PPS) the track's codec
data.
A fresh scrcpy session per recording, so the file starts on the server's first key frame.
"""

from __future__ import annotations

import contextlib
import logging
import os
import tempfile
import threading
from fractions import Fraction
from pathlib import Path
from typing import Any

from devices import scrcpy_protocol as proto
from devices.scrcpy_client import ClientOptions, ScrcpyClient

log = logging.getLogger(__name__)

# The phone's own size, as screenrecord; a few frames a second keep the episode's CPU for the episode.
RECORD_OPTIONS = ClientOptions(max_size=0, max_fps=8, bit_rate=4_000_000, control=False)
TIME_BASE = Fraction(1, 1_000_000)  # scrcpy's PTS are microseconds


class ScrcpyRecording:
    """Starts recording `device` at once; `stop()` returns the MP4 (None if no frame arrived)."""

    def __init__(self, device: Any, options: ClientOptions = RECORD_OPTIONS) -> None:
        import av

        self.serial = device.serial
        fd, name = tempfile.mkstemp(prefix="realbench-scrcpy-", suffix=".mp4")
        os.close(fd)
        self.file = Path(name)
        self.samples = 0
        self._lock = threading.Lock()
        self._container: Any = None
        self._stream: Any = None
        self._config = b""
        self._av = av
        self.client = ScrcpyClient(device, options)
        self.client.packet_sinks.append(self._on_packet)
        try:
            self.client.start()
        except Exception:
            self.file.unlink(missing_ok=True)
            raise

    def _open(self) -> None:
        container = self._av.open(str(self.file), "w", format="mp4")
        stream = container.add_stream("h264")
        stream.width, stream.height = self.client.width, self.client.height
        stream.time_base = TIME_BASE
        self._container, self._stream = container, stream

    def _on_packet(self, header: proto.FrameHeader, payload: bytes) -> None:
        with self._lock:
            if header.config:
                self._config = payload
                return
            if self._container is None:
                if not header.key_frame or not self._config:
                    return  # a file starts on a key frame with its codec data
                self._open()
            # The muxer builds the track's avcC from the SPS/PPS in front of a key frame (Annex B
            # codec data set as extradata is not converted for the samples).
            packet = self._av.Packet(self._config + payload if header.key_frame else payload)
            packet.stream = self._stream
            packet.pts = packet.dts = header.pts_us
            packet.time_base = TIME_BASE
            packet.is_keyframe = header.key_frame
            self._container.mux(packet)
            self.samples += 1

    def stop(self) -> bytes | None:
        self.client.close()
        try:
            with self._lock:
                if self._container is None:
                    return None
                self._container.close()
                self._container = None
            data = self.file.read_bytes()
            log.info("scrcpy recording of %s: %d frames, %d bytes", self.serial, self.samples, len(data))
            return data or None
        finally:
            with contextlib.suppress(OSError):
                self.file.unlink()
