"""The device protocol every driver implements, and the targets an episode can run on."""

from __future__ import annotations

from enum import StrEnum
from typing import Any, Protocol, runtime_checkable

from realbench.actions import Action
from realbench.observation import Observation
from realbench.outcome import Verdict
from realbench.taskpack import TaskInstance


class TargetKind(StrEnum):
    CLONE = "clone"  # the clone, headless (Playwright + Chromium)
    CLONE_ON_PHONE = "clone-on-phone"  # the clone in the phone's browser: isolates the device gap
    REAL = "real"  # the real app on a phone


class DeviceKind(StrEnum):
    HEADLESS_CLONE = "headless-clone"
    VIRTUAL_PHONE = "virtual-phone"  # a test rig speaking ADB/uiautomator2, not a phone
    PHONE = "phone"


@runtime_checkable
class Device(Protocol):
    """Something with a screen the agent can observe and act on."""

    @property
    def kind(self) -> DeviceKind: ...

    @property
    def serial(self) -> str: ...

    def observe(self) -> Observation: ...

    def act(self, action: Action) -> None:
        """Perform a touch/key/text action. Raises DeviceError (or DeviceLost) on failure."""
        ...

    def start_app(self, app: str) -> None: ...

    def stop_app(self, app: str) -> None: ...

    def size(self) -> tuple[int, int]:
        """Screen size in pixels (width, height)."""
        ...

    def close(self) -> None: ...


@runtime_checkable
class Target(Protocol):
    """A device plus what an episode needs around it: per-task setup and (on clones) verification."""

    @property
    def kind(self) -> TargetKind: ...

    @property
    def device(self) -> Device: ...

    @property
    def delivers_boundary(self) -> bool:
        """True where crossing the commit boundary is harmless (clones): the tap is sent, then the
        episode ends. False on real apps: the tap is never sent."""
        ...

    def setup(self, instance: TaskInstance) -> None:
        """Bring the app to the task's start state. Raises DeviceError if it cannot."""
        ...

    def verify(self, instance: TaskInstance, answer: str | None) -> Verdict | None:
        """The programmatic verdict (clones) or None where only checks/judges can decide (real)."""
        ...

    def describe(self) -> dict[str, Any]:
        """What the run store records about the device: kind, serial, model, virtual or not."""
        ...

    def teardown(self) -> None: ...
