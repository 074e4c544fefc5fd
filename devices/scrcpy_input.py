"""A phone whose touches and keys go over scrcpy's control socket, for use *inside* the interlock.

`InterlockedDevice(ScrcpyInputPhone(phone, live))` checks every action on fresh hierarchy dumps
exactly as before; only an allowed action reaches this class, which then sends it as scrcpy touch
or key messages when a scrcpy session is live and confirms its input (`ScrcpyClient.barrier`),
else through the phone's own path. Text, app launches and everything read from the phone stay
with the wrapped phone.
"""

from __future__ import annotations

import logging
import time
from collections.abc import Callable
from typing import Any

from devices.scrcpy_client import ScrcpyClient
from realbench.actions import Action, Click, DoubleClick, Key, KeyPress, LongPress, Swipe

log = logging.getLogger(__name__)

KEYCODES: dict[Key, int] = {Key.HOME: 3, Key.BACK: 4, Key.ENTER: 66, Key.RECENT: 187}
DOUBLE_TAP_GAP_S = 0.08


class ScrcpyInputPhone:
    def __init__(self, phone: Any, live: Callable[[], ScrcpyClient | None]) -> None:
        self._phone = phone
        self._live = live
        self.sent_over_scrcpy = 0

    def __getattr__(self, name: str) -> Any:
        # Reads (hierarchy, size, screenshot, describe …) and the phone's other operations.
        return getattr(self._phone, name)

    def act(self, action: Action) -> None:
        client = self._live()
        # Only where scrcpy confirms that input was applied: the interlock's next check must
        # read the screen this input made, never one from before it.
        if client is None or not client.confirms_input or not self._send(client, action):
            self._phone.act(action)
            return
        self.sent_over_scrcpy += 1
        if not client.barrier():
            client.confirms_input = False  # later input takes the phone's own (synchronous) path
            log.warning(
                "%s: scrcpy did not confirm an input; using the phone's input path", client.device.serial
            )
        settle = getattr(self._phone, "wait_until_settled", None)
        if settle is not None:
            settle()

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
