"""A virtual phone driven in-process: composed commit screens, the phone's own input path, no adb.

Generated attacks on the interlock (benchmarks/interlock_fuzz.py) run by the thousand; an adb
endpoint and a uiautomator2 session per case would cost seconds each. `InProcessPhone` drives the
same `VirtualPhone` object the adb path serves — its `PhoneUI` (foreground app, hit-testing, input
log) and its `Shell` (launches, deep links) — by direct calls, each action mapped to the call the
uiautomator2 client makes for it (`devices.phone.PhoneDevice._act`): a click is `PhoneUI.tap`, a
swipe `PhoneUI.swipe`, typed text the clipboard paste `PhoneUI.text`, a key `PhoneUI.key`, and a
hierarchy read counts as a dump served, as over JSON-RPC. A sample of the same cases also runs
through the real adb server, and the two paths must agree.

Each app shows a `ComposedScreen`: a `CommitTestScreen` that also takes deep links (`open_url`).
The screens' commit records are the ground truth. Screenshots are a blank placeholder of the
phone's size (decisions here never read pixels); the adb path draws the real ones.
"""

from __future__ import annotations

import asyncio
import functools
import io
import shlex
import time
from collections.abc import Callable
from typing import Any

from PIL import Image

from devices.virtual.commit_screens import Commit, CommitTestScreen, Gesture, ScreenSpec
from devices.virtual.model import BROWSER_PACKAGE, InputSource, PhoneIdentity, VirtualPhoneSpec
from devices.virtual.phone import VirtualPhone, static_screens
from devices.virtual.screen import ScreenSource
from realbench.actions import (
    Action,
    Answer,
    Click,
    DoubleClick,
    KeyPress,
    LongPress,
    OpenApp,
    Swipe,
    Terminate,
    Type,
    Wait,
)
from realbench.device import DeviceKind
from realbench.errors import DeviceError
from realbench.observation import Observation, Screenshot

SWIPE_MS_PER_STEP = 5  # uiautomator2's swipe steps, as the uia server converts them back
SETTLE_DUMPS = 2  # PhoneDevice.act reads the screen until it settles: two equal dumps on a still one

ScreenBuilder = Callable[[], ScreenSpec]


class ComposedScreen(CommitTestScreen):
    """A commit test screen that a deep link can open (and commit, when opening it commits)."""

    def __init__(self, *args: Any, **kwargs: Any) -> None:
        super().__init__(*args, **kwargs)
        self.urls: list[str] = []

    def open_url(self, url: str) -> None:
        self.urls.append(url)
        if Gesture.LAUNCH in self.current().commit_on:
            self._commit(f"opened by deep link {url}", Gesture.LAUNCH)


def composed_maker(
    specs: dict[str, ScreenBuilder], made: list[CommitTestScreen]
) -> Callable[[VirtualPhone, str], ScreenSource]:
    """A `VirtualPhone` screen factory: the composed screen of each package in `specs` (appended
    to `made`, where its commits are read), the static placeholder for any other."""

    def maker(phone: VirtualPhone, package: str) -> ScreenSource:
        build = specs.get(package)
        if build is None:
            return static_screens(phone, package)
        ident = phone.spec.identity
        screen = ComposedScreen(
            package, build(), width=ident.width, height=ident.height, dumps_served=lambda: phone.dumps_served
        )
        made.append(screen)
        return screen

    return maker


@functools.cache
def _blank_jpeg(width: int, height: int) -> bytes:
    buf = io.BytesIO()
    Image.new("RGB", (width, height), (250, 250, 250)).save(buf, format="JPEG", quality=30)
    return buf.getvalue()


class InProcessPhone:
    """A virtual phone in this process with the device surface of `PhoneDevice` that the
    interlock, the setup runner and the targets use."""

    virtual = True
    profile = None

    def __init__(
        self,
        specs: dict[str, ScreenBuilder],
        *,
        apps: list[str],
        width: int = 1080,
        height: int = 2400,
        serial: str = "inproc-vphone",
    ) -> None:
        installed = list(dict.fromkeys([*apps, *specs, BROWSER_PACKAGE]))
        spec = VirtualPhoneSpec(
            identity=PhoneIdentity(width=width, height=height, serialno=serial),
            apps=installed,
            screens="static",
        )
        self.screens: list[CommitTestScreen] = []
        self.vphone = VirtualPhone(spec, screens=composed_maker(specs, self.screens), name=serial)
        self._serial = serial
        self.app_aliases: dict[str, str] = {}

    # --- what tests read --------------------------------------------------------------------

    @property
    def commits(self) -> list[Commit]:
        return [c for s in self.screens for c in s.commits]

    @property
    def ui(self) -> Any:
        return self.vphone.ui

    # --- the device surface -----------------------------------------------------------------

    @property
    def kind(self) -> DeviceKind:
        return DeviceKind.VIRTUAL_PHONE

    @property
    def serial(self) -> str:
        return self._serial

    def size(self) -> tuple[int, int]:
        return (self.ui.width, self.ui.height)

    def to_pixels(self, x: int, y: int) -> tuple[int, int]:
        w, h = self.size()
        return (round(x * (w - 1) / 1000), round(y * (h - 1) / 1000))

    def hierarchy(self) -> str:
        xml = self.ui.hierarchy()
        self.vphone.dump_times.append(time.time())
        self.vphone.dumps_served += 1
        return str(xml)

    def settled_hierarchy(self) -> str:
        return self.hierarchy()

    def screenshot(self) -> bytes:
        return _blank_jpeg(*self.size())

    def current_app(self) -> str | None:
        return str(self.ui.foreground)

    def observe(self) -> Observation:
        shot = Screenshot.from_bytes(self.screenshot())
        return Observation(screenshot=shot, hierarchy=self.hierarchy(), app=self.current_app())

    def act(self, action: Action) -> None:
        ui, rpc = self.ui, InputSource.JSONRPC
        if isinstance(action, Click | DoubleClick):
            px, py = self.to_pixels(action.x, action.y)
            ui.tap(px, py, rpc, "click")
            if isinstance(action, DoubleClick):
                ui.tap(px, py, rpc, "click")
        elif isinstance(action, LongPress):
            px, py = self.to_pixels(action.x, action.y)
            ui.tap(px, py, rpc, "click", action.duration_ms)
        elif isinstance(action, Swipe):
            fx, fy = self.to_pixels(action.x, action.y)
            tx, ty = self.to_pixels(action.x2, action.y2)
            steps = max(2, action.duration_ms // SWIPE_MS_PER_STEP)
            ui.swipe(fx, fy, tx, ty, steps * SWIPE_MS_PER_STEP, rpc, "swipe")
        elif isinstance(action, Type):
            self.type_text(action.text)
        elif isinstance(action, KeyPress):
            ui.key(str(action.key), rpc, "pressKey")
        elif isinstance(action, OpenApp):
            self.start_app(self.app_aliases.get(action.app, action.app))
        elif isinstance(action, Wait | Answer | Terminate):
            return
        for _ in range(SETTLE_DUMPS):
            self.hierarchy()

    def type_text(self, text: str) -> None:
        self.ui.text(text, InputSource.JSONRPC, "pasteClipboard")

    def shell(self, argv: list[str] | str, **_: Any) -> str:
        """A shell command through the virtual phone's own `Shell` (what `adb shell` runs)."""
        line = argv if isinstance(argv, str) else shlex.join(argv)
        return asyncio.run(self.vphone.shell.run(line)).decode(errors="replace")

    def start_app(self, app: str) -> None:
        if not self.ui.start_app(app):
            raise DeviceError(f"cannot start {app} on {self._serial}", hint="is the app installed?")

    def stop_app(self, app: str) -> None:
        self.ui.stop_app(app)

    def clear_app(self, app: str) -> None:
        self.ui.clear_app(app)

    def app_version(self, package: str) -> str | None:
        return self.vphone.app_version(package)

    def recent_app_version(self, package: str, max_age_s: float = 120.0) -> str | None:
        return self.vphone.app_version(package)

    def describe(self) -> dict[str, Any]:
        return {"serial": self._serial, "virtual": True, "in_process": True}

    def close(self) -> None:
        self.vphone.ui.close()
        self.vphone._ui_thread.shutdown(wait=False)
