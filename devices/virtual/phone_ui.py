"""The phone's UI state: which app is in front, system dialogs, inputs and the event log.

Everything here is synchronous and runs on the phone's single UI thread (`VirtualPhone.ui_call`),
as on a phone: inputs are applied in order and a screenshot never sees half an update.
"""

from __future__ import annotations

import io
import logging
from collections.abc import Callable

from PIL import Image, ImageDraw

from devices.virtual.model import (
    LAUNCHER_PACKAGE,
    SYSTEM_PACKAGE,
    EventLog,
    Faults,
    HitNode,
    InputEvent,
    InputKind,
    InputSource,
    VirtualPhoneSpec,
)
from devices.virtual.screen import LauncherScreen, ScreenSource, app_label, status_bar_height
from devices.virtual.uitree import UiNode, font, hierarchy_xml
from realbench.hierarchy import Hierarchy

log = logging.getLogger(__name__)

ScreenFactory = Callable[[str], ScreenSource]

# Android key codes the `input keyevent` path accepts, by name and number.
KEYCODES: dict[str, str] = {
    "3": "home",
    "4": "back",
    "26": "power",
    "66": "enter",
    "67": "del",
    "82": "menu",
    "187": "recent",
    "224": "wakeup",
    "223": "sleep",
}
KEY_ALIASES = {"delete": "del", "app_switch": "recent", "recent_apps": "recent"}


def canonical_key(key: str) -> str:
    name = key.strip().lower()
    name = name.removeprefix("keycode_")
    name = KEYCODES.get(name, name)
    return KEY_ALIASES.get(name, name)


class PhoneUI:
    def __init__(
        self, spec: VirtualPhoneSpec, faults: Faults, events: EventLog, screens: ScreenFactory
    ) -> None:
        self.spec = spec
        self.faults = faults
        self.events = events
        self.width = spec.identity.width
        self.height = spec.identity.height
        self._factory = screens
        self.installed = list(spec.apps)
        self.launcher = LauncherScreen(self.width, self.height, self.installed)
        self.apps: dict[str, ScreenSource] = {}
        self.running: list[str] = []
        self.foreground = LAUNCHER_PACKAGE
        self.screen_on = True
        self.clipboard: str | None = None
        self._touch_down: tuple[int, int] | None = None

    # --- apps -----------------------------------------------------------------------------------

    def is_installed(self, package: str) -> bool:
        return package in self.installed or package == LAUNCHER_PACKAGE

    def source(self, package: str | None = None) -> ScreenSource:
        pkg = package or self.foreground
        if pkg == LAUNCHER_PACKAGE:
            return self.launcher
        if pkg not in self.apps:
            self.apps[pkg] = self._factory(pkg)
        return self.apps[pkg]

    def start_app(self, package: str) -> bool:
        if package == LAUNCHER_PACKAGE:
            self.go_home()
            return True
        if package not in self.installed:
            return False
        src = self.source(package)
        if package not in self.running:
            src.start()
            self.running.append(package)
        self.foreground = package
        return True

    def open_url(self, package: str, url: str) -> bool:
        """`am start -a VIEW -d URL`: the browser shows the URL (clone-server pages only)."""
        if package not in self.installed:
            return False
        if package in self.apps:
            opener = getattr(self.apps[package], "open_url", None)
            if opener is not None:
                opener(url)
        return self.start_app(package)

    def stop_app(self, package: str) -> None:
        if package in self.running:
            self.running.remove(package)
            self.source(package).stop()
        if self.foreground == package:
            self.foreground = LAUNCHER_PACKAGE

    def clear_app(self, package: str) -> bool:
        if package not in self.installed:
            return False
        self.stop_app(package)
        self.source(package).clear()
        return True

    def go_home(self) -> None:
        self.foreground = LAUNCHER_PACKAGE

    def close(self) -> None:
        for src in self.apps.values():
            try:
                src.close()
            except Exception:
                log.exception("closing screen of %s failed", src.package)
        self.apps.clear()

    # --- what the screen shows -------------------------------------------------------------------

    @property
    def _logged_out(self) -> bool:
        return self.foreground in self.faults.logged_out and self.foreground != LAUNCHER_PACKAGE

    @property
    def _anr(self) -> bool:
        return self.faults.anr and self.foreground != LAUNCHER_PACKAGE

    def _anr_dialog(self) -> UiNode:
        w, h = self.width, self.height
        box = (round(w * 0.08), round(h * 0.38), round(w * 0.92), round(h * 0.60))
        left, top, right, bottom = box
        row = round(h * 0.055)
        label = app_label(self.foreground)
        english = self.spec.identity.rom == "stock"
        title = f"{label} isn't responding" if english else f"“{label}”无响应"
        close = (left, bottom - 2 * row, right, bottom - row)
        wait = (left, bottom - row, right, bottom)
        return UiNode(
            bounds=box,
            cls="android.widget.FrameLayout",
            package=SYSTEM_PACKAGE,
            resource_id="android:id/content",
            children=[
                UiNode(
                    bounds=(left, top, right, top + 2 * row),
                    cls="android.widget.TextView",
                    text=title,
                    resource_id="android:id/alertTitle",
                ),
                UiNode(
                    bounds=close,
                    cls="android.widget.Button",
                    text="Close app" if english else "关闭应用",
                    resource_id="android:id/aerr_close",
                    clickable=True,
                    focusable=True,
                ),
                UiNode(
                    bounds=wait,
                    cls="android.widget.Button",
                    text="Wait" if english else "等待",
                    resource_id="android:id/aerr_wait",
                    clickable=True,
                    focusable=True,
                ),
            ],
        )

    def _login_wall(self) -> UiNode:
        w, h = self.width, self.height
        sb = status_bar_height(w)
        pkg = self.foreground
        return UiNode(
            bounds=(0, 0, w, h),
            cls="android.widget.FrameLayout",
            package=pkg,
            children=[
                UiNode(
                    bounds=(0, sb, w, sb + round(h * 0.07)),
                    cls="android.widget.TextView",
                    text="登录",
                    resource_id=f"{pkg}:id/login_title",
                ),
                UiNode(
                    bounds=(60, round(h * 0.25), w - 60, round(h * 0.30)),
                    cls="android.widget.TextView",
                    text="登录已失效，请重新登录",
                    resource_id=f"{pkg}:id/login_hint",
                ),
                UiNode(
                    bounds=(60, round(h * 0.33), w - 60, round(h * 0.38)),
                    cls="android.widget.EditText",
                    text="",
                    resource_id=f"{pkg}:id/username",
                    clickable=True,
                    focusable=True,
                ),
                UiNode(
                    bounds=(60, round(h * 0.40), w - 60, round(h * 0.45)),
                    cls="android.widget.EditText",
                    text="",
                    resource_id=f"{pkg}:id/password",
                    clickable=True,
                    focusable=True,
                    password=True,
                ),
                UiNode(
                    bounds=(60, round(h * 0.50), w - 60, round(h * 0.56)),
                    cls="android.widget.Button",
                    text="登录",
                    resource_id=f"{pkg}:id/login_button",
                    clickable=True,
                    focusable=True,
                ),
            ],
        )

    def _keyguard(self) -> UiNode:
        w, h = self.width, self.height
        return UiNode(
            bounds=(0, 0, w, h),
            cls="android.widget.FrameLayout",
            package="com.android.systemui",
            resource_id="com.android.systemui:id/keyguard_root_view",
            children=[
                UiNode(
                    bounds=(0, round(h * 0.15), w, round(h * 0.25)),
                    cls="android.widget.TextView",
                    text="09:00",
                    resource_id="com.android.systemui:id/clock",
                ),
                UiNode(
                    bounds=(0, round(h * 0.85), w, round(h * 0.90)),
                    cls="android.widget.TextView",
                    text="向上滑动解锁" if self.spec.identity.rom != "stock" else "Swipe up to unlock",
                    resource_id="com.android.systemui:id/keyguard_indication_text",
                ),
            ],
        )

    def hierarchy(self) -> str:
        if self.faults.locked:
            return hierarchy_xml([self._keyguard().to_element(package="com.android.systemui")])
        if self._logged_out:
            windows = [self._login_wall().to_element(package=self.foreground)]
        else:
            windows = self.source().hierarchy()
        if self._anr:
            windows = [*windows, self._anr_dialog().to_element(package=SYSTEM_PACKAGE)]
        return hierarchy_xml(windows)

    def screenshot(self) -> Image.Image:
        if self.faults.black_screenshots or not self.screen_on:
            return Image.new("RGB", (self.width, self.height), (0, 0, 0))
        if self.faults.locked:
            img = Image.new("RGB", (self.width, self.height), (20, 24, 32))
            self._draw_node(img, self._keyguard(), dim=False)
            return img
        img = self._draw_login_wall() if self._logged_out else self.source().screenshot()
        if img.size != (self.width, self.height):
            img = img.resize((self.width, self.height))
        if img.mode != "RGB":
            img = img.convert("RGB")
        if self._anr:
            img = img.copy()
            self._draw_node(img, self._anr_dialog(), dim=True)
        return img

    def _shows_the_app_as_it_draws(self) -> bool:
        """Whether the screen is the foreground app's own frame: no injected fault, login wall or
        dialog drawn over it (what `screenshot` draws when one is)."""
        return (
            self.screen_on
            and not self.faults.black_screenshots
            and not self.faults.locked
            and not self._logged_out
            and not self._anr
        )

    def _draw_login_wall(self) -> Image.Image:
        img = Image.new("RGB", (self.width, self.height), (255, 255, 255))
        self._draw_node(img, self._login_wall(), dim=False)
        return img

    def _draw_node(self, img: Image.Image, node: UiNode, dim: bool) -> None:
        draw = ImageDraw.Draw(img, "RGBA")
        if dim:
            draw.rectangle((0, 0, self.width, self.height), fill=(0, 0, 0, 110))
        draw.rectangle(node.bounds, fill=(255, 255, 255, 255))
        text_font = font(round(self.width * 0.042))
        for child in node.children:
            left, top, right, bottom = child.bounds
            if child.cls.endswith("Button"):
                draw.rectangle(child.bounds, outline=(200, 200, 200, 255), width=2)
            elif child.cls.endswith("EditText"):
                draw.rectangle(child.bounds, outline=(150, 150, 150, 255), width=3)
            if child.text:
                draw.text(
                    (left + 40, (top + bottom) // 2),
                    child.text,
                    fill=(20, 20, 20, 255),
                    font=text_font,
                    anchor="lm",
                )

    def png(self) -> bytes:
        buf = io.BytesIO()
        self.screenshot().save(buf, format="PNG", compress_level=1)
        return buf.getvalue()

    def jpeg(self, quality: int = 80, scale: float = 1.0) -> bytes:
        if scale == 1.0 and self._shows_the_app_as_it_draws():
            # The browser's own JPEG, when it is this frame at this quality: decoding it and encoding
            # it again cost about 40 ms of CPU per screenshot and changed nothing.
            as_drawn = getattr(self.source(), "screenshot_jpeg", None)
            data = as_drawn(quality) if as_drawn is not None else None
            if data is not None:
                return bytes(data)
        img = self.screenshot()
        if scale != 1.0 and 0 < scale < 1:
            size = (max(1, round(img.width * scale)), max(1, round(img.height * scale)))
            # A whole-number reduction first (box filter, ~10x cheaper than a resize of the full frame).
            factor = int(1 / scale + 1e-6)
            if factor >= 2:
                img = img.reduce(factor)
            if img.size != size:
                img = img.resize(size)
        buf = io.BytesIO()
        img.save(buf, format="JPEG", quality=max(1, min(100, int(quality))))
        return buf.getvalue()

    # --- inputs ----------------------------------------------------------------------------------

    def _hit(self, x: int, y: int) -> HitNode | None:
        try:
            tree = Hierarchy(self.hierarchy())
        except Exception:
            log.exception("hierarchy of %s is not parseable", self.foreground)
            return None
        node = tree.target_at(x, y)
        if node is None:
            hits = tree.at(x, y)
            node = hits[0] if hits else None
        if node is None:
            return None
        return HitNode(
            text=node.text,
            resource_id=node.resource_id,
            content_desc=node.content_desc,
            class_name=node.class_name,
            package=node.package,
            bounds=str(node.bounds),
        )

    def _record(self, source: InputSource, method: str, kind: InputKind, **fields: object) -> InputEvent:
        return self.events.append(source=source, method=method, kind=kind, package=self.foreground, **fields)

    def activity(self) -> str:
        """The focused activity's full class name: what the front app's screen declares, else
        `<package>.MainActivity`."""
        pkg = self.foreground
        if pkg == LAUNCHER_PACKAGE:
            return "com.android.launcher3.uioverride.QuickstepLauncher"
        declared = getattr(self.source(), "activity", None)
        name = declared() if callable(declared) else None
        return name or f"{pkg}.MainActivity"

    def _drops_shell_tap(self, source: InputSource) -> bool:
        dropping = self.spec.shell_taps_dropped_in.get(self.foreground)
        if source is not InputSource.SHELL or not dropping or not self.screen_on or self.faults.locked:
            return False
        return self.activity() in dropping

    def tap(self, x: int, y: int, source: InputSource, method: str, long_ms: int | None = None) -> InputEvent:
        kind = InputKind.LONG_TAP if long_ms else InputKind.TAP
        dropped = self._drops_shell_tap(source)
        event = self._record(
            source, method, kind, x=x, y=y, duration_ms=long_ms, node=self._hit(x, y), dropped=dropped
        )
        if not dropped:
            self._deliver_tap(x, y, long=bool(long_ms))
        return event

    def touch(self, action: int, x: int, y: int, source: InputSource, method: str) -> InputEvent:
        """MotionEvent injection: down (0), up (1), move (2). A down then up is a tap."""
        if action == 0:
            self._touch_down = (x, y)
            return self._record(source, method, InputKind.TOUCH_DOWN, x=x, y=y, node=self._hit(x, y))
        if action == 2:
            return self._record(source, method, InputKind.TOUCH_MOVE, x=x, y=y)
        start = self._touch_down or (x, y)
        self._touch_down = None
        if abs(start[0] - x) + abs(start[1] - y) > 20:
            return self.swipe(start[0], start[1], x, y, 100, source, method)
        return self.tap(x, y, source, method)

    def _deliver_tap(self, x: int, y: int, long: bool) -> None:
        if not self.screen_on or self.faults.locked:
            return
        if self._anr:
            dialog = self._anr_dialog()
            close, wait = dialog.children[1], dialog.children[2]
            if close.contains(x, y):
                self.faults.anr = False
                self.stop_app(self.foreground)
            elif wait.contains(x, y):
                self.faults.anr = False
            return
        if self._logged_out:
            return
        src = self.source()
        src.tap(x, y, long=long)
        if src is self.launcher and self.launcher.launch_requests:
            self.start_app(self.launcher.launch_requests.pop())
            self.launcher.launch_requests.clear()

    def swipe(
        self, x1: int, y1: int, x2: int, y2: int, duration_ms: int, source: InputSource, method: str
    ) -> InputEvent:
        event = self._record(
            source,
            method,
            InputKind.SWIPE,
            x=x1,
            y=y1,
            x2=x2,
            y2=y2,
            duration_ms=duration_ms,
            node=self._hit(x1, y1),
        )
        if self.faults.locked:
            if self.screen_on and y1 - y2 > self.height // 8:
                self.faults.locked = False  # swipe up on the keyguard (no secure lock)
        elif self.screen_on and not self._anr and not self._logged_out:
            self.source().swipe(x1, y1, x2, y2, duration_ms)
        return event

    def key(self, key: str, source: InputSource, method: str) -> InputEvent:
        name = canonical_key(key)
        event = self._record(source, method, InputKind.KEY, key=name)
        if name in ("power", "sleep", "wakeup"):
            self.screen_on = name == "wakeup" or (name == "power" and not self.screen_on)
            if not self.screen_on:
                self.faults.locked = True  # turning the screen off locks the phone
        elif not self.screen_on or self.faults.locked:
            pass
        elif name in ("home", "recent"):
            self.go_home()
        elif self._anr:
            if name == "back":
                self.faults.anr = False
        elif self._logged_out:
            if name == "back":
                self.go_home()
        elif not self.source().key(name) and name == "back":
            self.go_home()
        return event

    def text(self, text: str, source: InputSource, method: str) -> InputEvent:
        event = self._record(source, method, InputKind.TEXT, text=text)
        if self.screen_on and not self.faults.locked and not self._anr and not self._logged_out:
            self.source().text(text)
        return event
