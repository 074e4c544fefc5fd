"""A scripted in-memory target (a test double, not a device driver): a few screens, each with a
button; tapping a screen's button moves to the next screen. Used to test the episode loop, the run
store and the runner without a browser or a phone."""

from __future__ import annotations

import io
import threading
from typing import Any

from PIL import Image

from realbench.actions import Action, Click
from realbench.device import DeviceKind, TargetKind
from realbench.errors import DeviceLost
from realbench.observation import Observation, Screenshot
from realbench.outcome import Verdict
from realbench.taskpack import TaskInstance

W, H = 200, 400


def _png() -> bytes:
    buf = io.BytesIO()
    Image.new("RGB", (W, H), (240, 240, 240)).save(buf, format="PNG")
    return buf.getvalue()


PNG = _png()
LABELS = ["开始", "下一步", "提交订单", "完成"]


def screen_xml(index: int) -> str:
    label = LABELS[index]
    return (
        "<hierarchy rotation='0'><node index='0' text='' resource-id='' class='android.widget.FrameLayout' "
        f"package='test.app' content-desc='' clickable='false' bounds='[0,0][{W},{H}]'>"
        f"<node index='0' text='{label}' resource-id='test.app:id/btn' class='android.widget.Button' "
        f"package='test.app' content-desc='' clickable='true' bounds='[20,300][180,360]'/></node></hierarchy>"
    )


class ScriptedDevice:
    def __init__(self, serial: str, fail_after: int | None = None) -> None:
        self._serial = serial
        self.screen = 0
        self.fail_after = fail_after
        self.acts: list[Action] = []
        self.lock = threading.Lock()

    @property
    def kind(self) -> DeviceKind:
        return DeviceKind.HEADLESS_CLONE

    @property
    def serial(self) -> str:
        return self._serial

    def observe(self) -> Observation:
        return Observation(
            Screenshot(PNG, W, H, Screenshot.from_bytes(PNG).format), screen_xml(self.screen), "test.app"
        )

    def act(self, action: Action) -> None:
        if self.fail_after is not None and len(self.acts) >= self.fail_after:
            raise DeviceLost(f"{self._serial} disconnected")
        self.acts.append(action)
        if isinstance(action, Click) and 700 <= action.y <= 900 and self.screen < len(LABELS) - 1:
            self.screen += 1

    def start_app(self, app: str) -> None: ...

    def stop_app(self, app: str) -> None: ...

    def size(self) -> tuple[int, int]:
        return (W, H)

    def close(self) -> None: ...


class ScriptedTarget:
    """Success means the device reached screen `goal` (default: the submit screen was tapped)."""

    def __init__(
        self,
        serial: str = "scripted-0",
        *,
        fail_after: int | None = None,
        goal: int = 3,
        delivers_boundary: bool = True,
    ) -> None:
        self._device = ScriptedDevice(serial, fail_after)
        self.goal = goal
        self._delivers = delivers_boundary
        self.setups = 0

    @property
    def kind(self) -> TargetKind:
        return TargetKind.CLONE

    @property
    def device(self) -> ScriptedDevice:
        return self._device

    @property
    def delivers_boundary(self) -> bool:
        return self._delivers

    def setup(self, instance: TaskInstance) -> None:
        self.setups += 1
        self._device.screen = 0
        self._device.acts.clear()

    def verify(self, instance: TaskInstance, answer: str | None) -> Verdict | None:
        if not self._delivers:
            return None
        reached = self._device.screen
        return Verdict(
            success=reached >= self.goal, progress=min(1.0, reached / self.goal), reason=f"screen {reached}"
        )

    def describe(self) -> dict[str, Any]:
        return {
            "kind": "headless-clone",
            "serial": self._device.serial,
            "virtual": False,
            "scripted_test_double": True,
        }

    def teardown(self) -> None: ...


PACK = {
    "app": "scripted",
    "clone": "scripted",
    "real_app": {"package": "test.app", "name": "Scripted"},
    "tasks": [
        {
            "id": "submit",
            "instruction": "提交订单",
            "difficulty": 1,
            "max_steps": 6,
            "clone": {"verifier": {"name": "reached"}},
            "real": {"boundary": [{"text": "提交订单"}]},
            "judge": {"rubric": "The order was submitted."},
            "golden": [{"tap": {"text": "开始"}}, {"tap": {"text": "下一步"}}, {"tap": {"text": "提交订单"}}],
        },
        {
            "id": "lost",
            "instruction": "点一个不存在的按钮",
            "difficulty": 2,
            "max_steps": 4,
            "clone": {"verifier": {"name": "reached"}},
            "judge": {"rubric": "never"},
            "golden": [{"tap": {"text": "不存在"}}],
        },
        {
            "id": "budget",
            "instruction": "一直点",
            "difficulty": 1,
            "max_steps": 2,
            "clone": {"verifier": {"name": "reached"}},
            "judge": {"rubric": "never"},
            "golden": [{"tap": {"text": "开始"}}, {"tap": {"text": "下一步"}}, {"tap": {"text": "提交订单"}}],
        },
    ],
}
