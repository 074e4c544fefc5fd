"""Episode video on phones (`realbench run --video`): adbutils' screen recording around each episode.

`VideoTarget` wraps a phone target: recording starts once the episode's setup is done and stops
before the verdict (after the final screenshot), so the video shows what the agent did. The phone's
scrcpy server streams H.264 that is muxed into MP4 on the host (devices/scrcpy_recording.py); where
scrcpy cannot start, adbutils records with `screenrecord` on the phone and pulls the MP4 back.
`with_video` attaches the video to the episode's result, and the run store keeps it beside the
steps as ``video.mp4``. A recording that fails never fails the episode: it is logged and the
episode is kept without video.
"""

from __future__ import annotations

import contextlib
import logging
import os
import tempfile
from pathlib import Path
from typing import Any

from realbench.device import Target
from realbench.episode import EpisodeResult
from realbench.runner import EpisodeExecutor
from realbench.store import EpisodeKey
from realbench.taskpack import TaskInstance

log = logging.getLogger(__name__)

RECORDING_ERRORS: tuple[type[BaseException], ...] = (OSError, RuntimeError, ValueError)


def _adb_errors() -> tuple[type[BaseException], ...]:
    import adbutils

    return (adbutils.AdbError, adbutils.AdbTimeout, *RECORDING_ERRORS)


class PhoneRecording:
    """One adbutils recording of a phone into a local temporary file."""

    def __init__(self, serial: str) -> None:
        import adbutils

        self.serial = serial
        self.device = adbutils.adb.device(serial)
        fd, name = tempfile.mkstemp(prefix="realbench-video-", suffix=".mp4")
        os.close(fd)
        self.file = Path(name)
        self.device.start_recording(str(self.file))

    def stop(self) -> bytes | None:
        try:
            self.device.stop_recording()
            data = self.file.read_bytes()
            return data or None
        finally:
            with contextlib.suppress(OSError):
                self.file.unlink()


def start_recording(serial: str) -> PhoneRecording | Any:
    """A recording of `serial`: scrcpy's stream, else (no server, a refused launch) screenrecord."""
    import adbutils

    from devices.scrcpy_client import ScrcpyUnavailable
    from devices.scrcpy_recording import ScrcpyRecording

    try:
        return ScrcpyRecording(adbutils.adb.device(serial))
    except ScrcpyUnavailable as exc:
        log.info("recording %s with screenrecord: scrcpy is unavailable: %s", serial, exc.message)
    return PhoneRecording(serial)


class VideoTarget:
    """A phone target whose episodes are recorded (see the module docstring)."""

    def __init__(self, inner: Target) -> None:
        self.inner = inner
        self._recording: Any = None  # a ScrcpyRecording or a PhoneRecording
        self._video: bytes | None = None

    def __getattr__(self, name: str) -> Any:
        return getattr(self.inner, name)

    def setup(self, instance: TaskInstance) -> None:
        self._stop()
        self._video = None
        self.inner.setup(instance)
        serial = self.inner.device.serial
        try:
            self._recording = start_recording(serial)
        except _adb_errors() as exc:
            log.warning("no video of this episode on %s: recording did not start: %s", serial, exc)

    def verify(self, instance: TaskInstance, answer: str | None) -> Any:
        self._stop()
        return self.inner.verify(instance, answer)

    def verify_at_boundary(self, instance: TaskInstance, answer: str | None, action: Any) -> Any:
        self._stop()
        return self.inner.verify_at_boundary(instance, answer, action)  # type: ignore[attr-defined]

    def take_video(self) -> bytes | None:
        """The last episode's MP4 (stopping a recording an aborted episode left running)."""
        self._stop()
        video, self._video = self._video, None
        return video

    def _stop(self) -> None:
        recording, self._recording = self._recording, None
        if recording is None:
            return
        try:
            self._video = recording.stop()
        except _adb_errors() as exc:
            log.warning("no video of this episode on %s: recording did not finish: %s", recording.serial, exc)


def with_video(execute: EpisodeExecutor) -> EpisodeExecutor:
    """An episode executor that attaches each `VideoTarget` episode's video to its result."""

    def run(target: Target, key: EpisodeKey) -> EpisodeResult:
        result = execute(target, key)
        if isinstance(target, VideoTarget):
            result.video = target.take_video()
        return result

    return run
