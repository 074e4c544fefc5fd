"""Typed values of the virtual phone: identity, faults, the input event log and phone specs."""

from __future__ import annotations

import threading
import time
from enum import StrEnum
from typing import Any

from pydantic import BaseModel, ConfigDict, Field

from realbench.device import DeviceKind

DEVICE_KIND = DeviceKind.VIRTUAL_PHONE

# The real apps' package names and the clone that stands in for each on a virtual phone.
APP_CLONES: dict[str, str] = {
    "com.MobileTicket": "train_ticketing",
    "com.chinamworld.main": "bank",
}
APP_LABELS: dict[str, str] = {
    "com.MobileTicket": "铁路12306",
    "com.chinamworld.main": "中国建设银行",
}
# The phone's browser shows the undrifted clone: the clone-on-phone target.
BROWSER_PACKAGE = "com.android.chrome"
LAUNCHER_PACKAGE = "com.android.launcher3"
SYSTEM_PACKAGE = "android"
# Per app, the activities whose WebView ignores raw `adb shell input tap` (12306's Alipay Nebula UC
# WebView, docs/real-apps.md): the tap is logged but nothing happens; uiautomator2's clicks work.
SHELL_TAP_DROPPING_ACTIVITIES: dict[str, list[str]] = {
    "com.MobileTicket": ["com.alipay.mobile.nebulacore.ui.H5Activity"],
}
DEFAULT_APP_VERSIONS: dict[str, str] = {"com.MobileTicket": "5.8.0.8", "com.chinamworld.main": "6.3.2"}


class PhoneIdentity(BaseModel):
    """What `getprop`, the CNXN banner and `deviceInfo` report. Defaults: a 1080×2400 phone."""

    model_config = ConfigDict(extra="forbid", frozen=True)

    profile: str = "generic-1080x2400"
    rom: str = "stock"  # "stock" phones speak English system dialogs; other ROMs Chinese
    ime: str = "com.google.android.inputmethod.latin/com.android.inputmethod.latin.LatinIME"
    serialno: str = "VPHONE0001"
    product_name: str = "vphone"
    model: str = "Virtual Phone"
    device: str = "vphone"
    brand: str = "realbench"
    manufacturer: str = "realbench"
    sdk: int = Field(default=33, ge=21)
    release: str = "13"
    width: int = Field(default=1080, ge=240, le=4096)
    height: int = Field(default=2400, ge=320, le=4096)
    density: int = Field(default=420, ge=120, le=800)

    @property
    def dp_size(self) -> tuple[int, int]:
        return (round(self.width * 160 / self.density), round(self.height * 160 / self.density))


class Faults(BaseModel):
    """Faults a phone injects. Set at start (VirtualPhoneSpec.faults) or at run time (control channel)."""

    model_config = ConfigDict(extra="forbid")

    drop_after_steps: int | None = Field(
        default=None, ge=0, description="drop the ADB connection after N inputs"
    )
    drop_after_seconds: float | None = Field(
        default=None, gt=0, description="drop N s after the host connects"
    )
    offline: bool = Field(default=False, description="refuse (and drop) ADB connections while set")
    screenshot_delay_s: float = Field(default=0.0, ge=0, le=60)
    black_screenshots: bool = False
    anr: bool = Field(
        default=False, description="show an 'app isn't responding' dialog over the foreground app"
    )
    locked: bool = Field(
        default=False, description="the keyguard shows (swipe up or `wm dismiss-keyguard` unlocks)"
    )
    logged_out: list[str] = Field(default_factory=list, description="packages that show a login wall")
    versions: dict[str, str] = Field(default_factory=dict, description="versionName overrides per package")


class InputKind(StrEnum):
    TAP = "tap"
    LONG_TAP = "long_tap"
    TOUCH_DOWN = "touch_down"
    TOUCH_MOVE = "touch_move"
    SWIPE = "swipe"
    KEY = "key"
    TEXT = "text"


class InputSource(StrEnum):
    JSONRPC = "jsonrpc"
    SHELL = "shell"
    SCRCPY = "scrcpy"  # scrcpy's control socket (InputManager injection)


class HitNode(BaseModel):
    """The node an input landed on (innermost clickable, else innermost), from the live hierarchy."""

    text: str = ""
    resource_id: str = ""
    content_desc: str = ""
    class_name: str = ""
    package: str = ""
    bounds: str = ""


class InputEvent(BaseModel):
    """One input the phone received, from any path."""

    seq: int
    time: float
    source: InputSource
    method: str  # the JSON-RPC method or the shell command word
    kind: InputKind
    package: str  # foreground package when the input arrived
    x: int | None = None
    y: int | None = None
    x2: int | None = None
    y2: int | None = None
    duration_ms: int | None = None
    key: str | None = None
    text: str | None = None
    node: HitNode | None = None
    # The app ignored it (a WebView that drops raw shell taps): logged, never delivered.
    dropped: bool = False


class EventLog:
    """Thread-safe, append-only log of inputs; readable from tests in-process and over HTTP."""

    def __init__(self) -> None:
        self._events: list[InputEvent] = []
        self._lock = threading.Lock()

    def append(self, **fields: Any) -> InputEvent:
        with self._lock:
            event = InputEvent(seq=len(self._events), time=time.time(), **fields)
            self._events.append(event)
            return event

    def events(self, since: int = 0) -> list[InputEvent]:
        with self._lock:
            return list(self._events[since:])

    def __len__(self) -> int:
        with self._lock:
            return len(self._events)

    @property
    def steps(self) -> int:
        """Inputs that count as agent steps (not the intermediate touch-down/move of a gesture)."""
        with self._lock:
            return sum(1 for e in self._events if e.kind not in (InputKind.TOUCH_DOWN, InputKind.TOUCH_MOVE))


class VirtualPhoneSpec(BaseModel):
    """How to start one virtual phone."""

    model_config = ConfigDict(extra="forbid")

    identity: PhoneIdentity = Field(default_factory=PhoneIdentity)
    drift: str = Field(default="none", description="drift profile of the app clones on this phone")
    apps: list[str] = Field(default_factory=lambda: list(APP_CLONES))
    app_versions: dict[str, str] = Field(default_factory=lambda: dict(DEFAULT_APP_VERSIONS))
    faults: Faults = Field(default_factory=Faults)
    screens: str = Field(
        default="auto", description="'clone' (Chromium), 'static' (PIL, no browser) or 'auto'"
    )
    seed: int = 0
    shell_taps_dropped_in: dict[str, list[str]] = Field(
        default_factory=lambda: {k: list(v) for k, v in SHELL_TAP_DROPPING_ACTIVITIES.items()},
        description="per package, the activities that ignore `adb shell input tap` ({} models none)",
    )
