"""`screenrecord` on the virtual phone: the phone's own frames, written as an MP4 into its file system.

Android's `screenrecord [--time-limit N] [--size WxH] [--bit-rate R] FILE` records until the time
limit (180 s) or SIGINT, then finishes the MP4. Here frames are the phone's screen, sampled a few
times a second and repeated so the video's clock matches the wall clock. Android encodes H.264;
opencv's wheel has no H.264 encoder, so the virtual phone writes VP9 in MP4, which browsers play
all the same. Encoding runs on a thread of its own while recording, so stopping is quick.
"""

from __future__ import annotations

import asyncio
import concurrent.futures
import contextlib
import logging
import os
import tempfile
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Any

from devices.virtual.shell import Result, fail

if TYPE_CHECKING:
    from devices.virtual.phone import VirtualPhone

log = logging.getLogger(__name__)

ANDROID_TIME_LIMIT_S = 180  # screenrecord's own default and maximum
FRAMES_PER_S = 2.0
FOURCC = "vp09"
USAGE = "Usage: screenrecord [options] <filename>\n"


@dataclass(frozen=True)
class RecordRequest:
    path: str
    time_limit_s: float = ANDROID_TIME_LIMIT_S
    size: tuple[int, int] | None = None


def parse_args(args: list[str]) -> RecordRequest | Result:
    """screenrecord's options, or the usage error Android prints."""
    path: str | None = None
    limit: float = ANDROID_TIME_LIMIT_S
    size: tuple[int, int] | None = None
    words = iter(args)
    for word in words:
        if word == "--time-limit":
            value = next(words, "")
            if not value.isdigit() or not 0 < int(value) <= ANDROID_TIME_LIMIT_S:
                return fail(f"Time limit {value} is invalid (1-{ANDROID_TIME_LIMIT_S})\n", 2)
            limit = int(value)
        elif word == "--size":
            value = next(words, "")
            w, _, h = value.partition("x")
            if not (w.isdigit() and h.isdigit()) or int(w) < 2 or int(h) < 2:
                return fail(f"Invalid size '{value}', must be width x height\n", 2)
            size = (int(w) // 2 * 2, int(h) // 2 * 2)
        elif word in ("--bit-rate", "--bugreport-dimensions"):
            next(words, None)  # accepted; the encoder picks its own rate
        elif word in ("--verbose", "--bugreport", "--rotate"):
            continue
        elif word.startswith("-"):
            return fail(f"Unknown option {word}\n" + USAGE, 2)
        else:
            path = word
    if path is None:
        return fail("Must specify output file (see --help).\n", 2)
    return RecordRequest(path, limit, size)


class _Encoder:
    """An MP4 writer fed from the event loop, encoding on its own thread."""

    def __init__(self, size: tuple[int, int] | None) -> None:
        fd, name = tempfile.mkstemp(prefix="vphone-screenrecord-", suffix=".mp4")
        os.close(fd)
        self.file = Path(name)
        self.size = size
        self.frames = 0
        self._writer: Any = None
        self._pool = concurrent.futures.ThreadPoolExecutor(max_workers=1, thread_name_prefix="screenrecord")

    def _write(self, image: Any, times: int) -> None:
        import cv2
        import numpy as np

        frame = cv2.cvtColor(np.asarray(image.convert("RGB")), cv2.COLOR_RGB2BGR)
        if self._writer is None:
            height, width = frame.shape[:2]
            self.size = self.size or (width // 2 * 2, height // 2 * 2)
            self._writer = cv2.VideoWriter(
                str(self.file), cv2.VideoWriter.fourcc(*FOURCC), FRAMES_PER_S, self.size
            )
            if not self._writer.isOpened():
                raise OSError(f"no {FOURCC} encoder in this opencv build")
        if (frame.shape[1], frame.shape[0]) != self.size:
            frame = cv2.resize(frame, self.size, interpolation=cv2.INTER_AREA)
        for _ in range(times):
            self._writer.write(frame)
            self.frames += 1

    async def write(self, image: Any, times: int) -> None:
        await asyncio.get_running_loop().run_in_executor(self._pool, self._write, image, times)

    def _finish(self) -> bytes:
        if self._writer is None:
            return b""
        self._writer.release()
        return self.file.read_bytes()

    async def finish(self) -> bytes:
        try:
            return await asyncio.get_running_loop().run_in_executor(self._pool, self._finish)
        finally:
            self._pool.shutdown(wait=False)
            with contextlib.suppress(OSError):
                self.file.unlink()


async def record_screen(phone: VirtualPhone, args: list[str], interrupt: asyncio.Event) -> Result:
    """Record until `interrupt` (SIGINT) or the time limit, then put the MP4 at the given path."""
    request = parse_args(args)
    if isinstance(request, Result):
        return request
    encoder = _Encoder(request.size)
    loop = asyncio.get_running_loop()
    started = loop.time()
    try:
        while True:
            image = await phone.ui_call(phone.ui.screenshot)
            due = int((loop.time() - started) * FRAMES_PER_S) + 1
            await encoder.write(image, max(1, due - encoder.frames))
            left = started + request.time_limit_s - loop.time()
            if interrupt.is_set() or left <= 0:
                break
            with contextlib.suppress(TimeoutError):
                await asyncio.wait_for(interrupt.wait(), timeout=min(1 / FRAMES_PER_S, left))
    finally:
        data = await encoder.finish()
    phone.fs.put(request.path, data)
    log.info(
        "%s: screenrecord wrote %s (%d frames, %d bytes)", phone.name, request.path, encoder.frames, len(data)
    )
    return Result()
