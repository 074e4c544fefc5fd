"""A phone whose touches and keys go over scrcpy's control socket, for use *inside* the interlock.

`InterlockedDevice(ScrcpyInputPhone(phone, live))` checks every action on fresh hierarchy dumps
exactly as before; only an allowed action reaches this class, which then sends it as scrcpy touch
or key messages when a scrcpy session is live and confirms its input (`ScrcpyClient.barrier`),
else through the phone's own path. Text, app launches and everything read from the phone stay
with the wrapped phone.

After a scrcpy input the wait is for the video, not for the hierarchy: it ends when a frame decoded
after the input differs from the one before it (outside the status bar), or after `FRAME_QUIET_S`
without a change — where the phone's own settle polls hierarchy dumps for at least its quiet
period. The wait is not part of the guard: the interlock still reads fresh dumps before the next
input and redoes its decision until two of them agree.
"""

from __future__ import annotations

import logging
import time
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

from devices.scrcpy_client import DecodedFrame, ScrcpyClient
from realbench.actions import Action, Click, DoubleClick, Key, KeyPress, LongPress, Swipe

log = logging.getLogger(__name__)

KEYCODES: dict[Key, int] = {Key.HOME: 3, Key.BACK: 4, Key.ENTER: 66, Key.RECENT: 187}
DOUBLE_TAP_GAP_S = 0.08
FRAME_QUIET_S = 0.3  # no changed frame this long after the input's barrier: the input changed nothing
STATUS_BAR = 0.05  # share of the frame's height left out of the comparison (its clock ticks)
PIXEL_STEP = 4  # every 4th luma pixel of every 4th row is compared
CHANGED_SHARE = 0.002  # share of compared pixels that must differ for a frame to count as changed
LUMA_DELTA = 24  # a pixel differs when its luma moved more than this (encoder noise moves less)


@dataclass(frozen=True)
class InputTiming:
    """Where the last input's time went: writing it (over scrcpy up to the barrier's answer, or
    the phone's own call) and waiting for its effect."""

    path: str  # "scrcpy" or "phone"
    send_s: float
    settle_s: float
    changed: bool | None = None  # scrcpy path: whether a changed frame ended the wait


def _luma(frame: DecodedFrame) -> Any:
    import numpy as np

    plane = frame.frame.planes[0]
    rows = np.frombuffer(memoryview(plane), dtype=np.uint8).reshape(-1, plane.line_size)
    height, width = frame.frame.height, frame.frame.width
    return rows[round(height * STATUS_BAR) : height : PIXEL_STEP, :width:PIXEL_STEP].astype(np.int16)


def frames_differ(a: DecodedFrame, b: DecodedFrame) -> bool:
    import numpy as np

    la, lb = _luma(a), _luma(b)
    if la.shape != lb.shape:
        return True
    return bool(np.count_nonzero(np.abs(la - lb) > LUMA_DELTA) > CHANGED_SHARE * la.size)


def wait_for_changed_frame(client: ScrcpyClient, before: DecodedFrame | None, quiet_s: float) -> bool:
    """Whether a frame newer than `before` that differs from it arrived within `quiet_s`."""
    if before is None:
        return False
    deadline = time.monotonic() + quiet_s
    seq = before.seq
    while (left := deadline - time.monotonic()) > 0:
        frame = client.wait_frame(seq, left)
        if frame is None:
            return False
        if frames_differ(before, frame):
            return True
        seq = frame.seq
    return False


class ScrcpyInputPhone:
    def __init__(self, phone: Any, live: Callable[[], ScrcpyClient | None]) -> None:
        self._phone = phone
        self._live = live
        self.sent_over_scrcpy = 0
        self.last: InputTiming | None = None

    def __getattr__(self, name: str) -> Any:
        # Reads (hierarchy, size, screenshot, describe …) and the phone's other operations.
        return getattr(self._phone, name)

    def act(self, action: Action) -> None:
        client = self._live()
        start = time.perf_counter()
        before = client.latest() if client is not None else None
        # Only where scrcpy confirms that input was applied: the interlock's next check must
        # read the screen this input made, never one from before it.
        if client is None or not client.confirms_input or not self._send(client, action):
            stats = getattr(self._phone, "stats", None)
            settled_before = getattr(stats, "settle_s", 0.0)
            self._phone.act(action)
            settle_s = getattr(stats, "settle_s", 0.0) - settled_before
            self.last = InputTiming("phone", time.perf_counter() - start - settle_s, settle_s)
            return
        self.sent_over_scrcpy += 1
        confirmed = client.barrier()
        sent = time.perf_counter()
        if not confirmed:
            client.confirms_input = False  # later input takes the phone's own (synchronous) path
            log.warning(
                "%s: scrcpy did not confirm an input; using the phone's input path", client.device.serial
            )
            settle = getattr(self._phone, "wait_until_settled", None)
            if settle is not None:
                settle()
            changed = None
        else:
            changed = wait_for_changed_frame(client, before, FRAME_QUIET_S)
        self.last = InputTiming("scrcpy", sent - start, time.perf_counter() - sent, changed)

    def _send(self, client: ScrcpyClient, action: Action) -> bool:
        screen = self._phone.size()

        def video(x: int, y: int) -> tuple[int, int]:
            px, py = self._phone.to_pixels(x, y)
            return client.to_video(px, py, screen)

        if isinstance(action, Click):
            client.tap(*video(action.x, action.y))
        elif isinstance(action, DoubleClick):
            point = video(action.x, action.y)
            client.tap(*point)
            time.sleep(DOUBLE_TAP_GAP_S)
            client.tap(*point)
        elif isinstance(action, LongPress):
            client.tap(*video(action.x, action.y), hold_s=action.duration_ms / 1000)
        elif isinstance(action, Swipe):
            client.swipe(*video(action.x, action.y), *video(action.x2, action.y2), action.duration_ms / 1000)
        elif isinstance(action, KeyPress):
            client.key(KEYCODES[action.key])
        else:
            return False
        return True
