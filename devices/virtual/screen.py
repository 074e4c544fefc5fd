"""What a virtual phone shows: the `ScreenSource` protocol, the launcher and static app screens.

Every app on a virtual phone is a `ScreenSource`: something that renders a full-screen image and a
hierarchy and takes pixel inputs. The launcher is drawn with PIL (text icons only, no logos).
App screens come from the clones rendered by Chromium (`devices.virtual.clone_screen`) or, where no
browser is wanted (fast protocol tests), from `StaticAppScreen`: a small PIL-drawn screen labelled
as a static placeholder, never presented as the app.
"""

from __future__ import annotations

import xml.etree.ElementTree as ET
from typing import Protocol, runtime_checkable

from PIL import Image, ImageDraw

from devices.virtual.model import APP_LABELS, BROWSER_PACKAGE, LAUNCHER_PACKAGE
from devices.virtual.uitree import UiNode, font

BACKGROUND = (245, 246, 248)
TEXT = (30, 30, 30)
ACCENT = (33, 99, 200)
STATUS_BAR_DP = 24


@runtime_checkable
class ScreenSource(Protocol):
    """One app's screen on the phone, in phone pixels."""

    package: str

    def start(self) -> None:
        """Launch (a cold start if the app was stopped)."""

    def stop(self) -> None:
        """Force-stop: the next start is cold."""

    def clear(self) -> None:
        """`pm clear`: drop the app's data."""

    def screenshot(self) -> Image.Image:
        """The screen now. Never drawn on once returned; the same object again only while the
        screen is unchanged (scrcpy's capture loop then skips comparing and converting it)."""
        ...

    def hierarchy(self) -> list[ET.Element]:
        """The app window's root node(s), Android-style."""
        ...

    def tap(self, x: int, y: int, long: bool = False) -> None: ...

    def swipe(self, x1: int, y1: int, x2: int, y2: int, duration_ms: int) -> None: ...

    def key(self, key: str) -> bool:
        """Handle a key; False for `back` at the app's root (the phone then goes home)."""
        ...

    def text(self, text: str) -> None:
        """Type into the focused field."""

    def close(self) -> None: ...


def status_bar_height(width: int) -> int:
    return round(STATUS_BAR_DP * width / 411)


class LauncherScreen:
    """The home screen: a grid of text icons, one per installed app."""

    package = LAUNCHER_PACKAGE

    def __init__(self, width: int, height: int, apps: list[str]) -> None:
        self.width = width
        self.height = height
        self.apps = apps
        self.launch_requests: list[str] = []  # taps on icons; the phone starts the app
        self._drawn: tuple[tuple[object, ...], Image.Image] | None = None

    def _icons(self) -> list[tuple[str, tuple[int, int, int, int]]]:
        cols = 4
        cell_w = self.width // cols
        cell_h = round(cell_w * 1.25)
        top = status_bar_height(self.width) + round(self.height * 0.12)
        out = []
        for i, pkg in enumerate(self.apps):
            row, col = divmod(i, cols)
            left = col * cell_w
            t = top + row * cell_h
            out.append((pkg, (left, t, left + cell_w, t + cell_h)))
        return out

    def start(self) -> None:
        pass

    def stop(self) -> None:
        pass

    def clear(self) -> None:
        pass

    def screenshot(self) -> Image.Image:
        """The same image object while the icons are unchanged (as the static app screen's)."""
        state = (self.width, self.height, tuple(self.apps))
        if self._drawn is None or self._drawn[0] != state:
            self._drawn = (state, self._draw())
        return self._drawn[1]

    def _draw(self) -> Image.Image:
        img = Image.new("RGB", (self.width, self.height), (40, 70, 110))
        draw = ImageDraw.Draw(img)
        label_font = font(round(self.width * 0.033))
        for pkg, (left, top, right, _bottom) in self._icons():
            size = round((right - left) * 0.55)
            cx = (left + right) // 2
            box = (cx - size // 2, top + 20, cx + size // 2, top + 20 + size)
            draw.rounded_rectangle(box, radius=size // 5, fill=(250, 250, 250))
            initial = app_label(pkg)[:2]
            draw.text((cx, top + 20 + size // 2), initial, fill=ACCENT, font=font(size // 3), anchor="mm")
            draw.text(
                (cx, top + 40 + size), app_label(pkg), fill=(255, 255, 255), font=label_font, anchor="ma"
            )
        # Screenshots of the rig say what they are.
        note = "realbench virtual phone · not a real device"
        draw.text(
            (self.width // 2, self.height - 60),
            note,
            fill=(170, 185, 205),
            font=font(round(self.width * 0.028)),
            anchor="mm",
        )
        return img

    def hierarchy(self) -> list[ET.Element]:
        icons = [
            UiNode(
                bounds=box,
                cls="android.widget.TextView",
                text=app_label(pkg),
                content_desc=app_label(pkg),
                resource_id=f"{LAUNCHER_PACKAGE}:id/icon",
                clickable=True,
                long_clickable=True,
                focusable=True,
            )
            for pkg, box in self._icons()
        ]
        workspace = UiNode(
            bounds=(0, 0, self.width, self.height),
            cls="android.widget.FrameLayout",
            resource_id=f"{LAUNCHER_PACKAGE}:id/workspace",
            scrollable=True,
            children=icons,
        )
        return [workspace.to_element(package=LAUNCHER_PACKAGE)]

    def tap(self, x: int, y: int, long: bool = False) -> None:
        for pkg, (left, top, right, bottom) in self._icons():
            if left <= x <= right and top <= y <= bottom and not long:
                self.launch_requests.append(pkg)
                return

    def swipe(self, x1: int, y1: int, x2: int, y2: int, duration_ms: int) -> None:
        pass

    def key(self, key: str) -> bool:
        return True

    def text(self, text: str) -> None:
        pass

    def close(self) -> None:
        pass


def app_label(package: str) -> str:
    if package == BROWSER_PACKAGE:
        return "浏览器"
    return APP_LABELS.get(package, package.rsplit(".", 1)[-1])


# The static placeholder's menu per app: labels in the app's language, invented content.
STATIC_MENUS: dict[str, list[str]] = {
    "com.MobileTicket": ["车票预订", "我的订单", "候补购票", "我的"],
    "com.chinamworld.main": ["转账汇款", "账户查询", "信用卡", "我的"],
    BROWSER_PACKAGE: ["打开网址"],
}


class StaticAppScreen:
    """A PIL-drawn placeholder app: a title, a search field, menu buttons and one page per button.

    It exists so the transport and uiautomator2 paths can be tested without a browser; its screen
    says it is a static placeholder of the virtual phone.
    """

    def __init__(self, package: str, width: int, height: int, version: str = "") -> None:
        self.package = package
        self.width = width
        self.height = height
        self.version = version
        self.page: str | None = None
        self.field_text = ""
        self.field_focused = False
        self.scroll = 0
        self.running = False
        self._drawn: tuple[tuple[object, ...], Image.Image] | None = None

    def _ids(self, name: str) -> str:
        return f"{self.package}:id/{name}"

    def _layout(
        self,
    ) -> tuple[
        tuple[int, int, int, int], tuple[int, int, int, int], list[tuple[str, tuple[int, int, int, int]]]
    ]:
        sb = status_bar_height(self.width)
        title = (0, sb, self.width, sb + round(self.height * 0.07))
        field = (40, title[3] + 30, self.width - 40, title[3] + 30 + round(self.height * 0.05))
        buttons = []
        top = field[3] + 60 - self.scroll
        h = round(self.height * 0.07)
        for label in STATIC_MENUS.get(self.package, ["打开"]):
            buttons.append((label, (40, top, self.width - 40, top + h)))
            top += h + 30
        return title, field, buttons

    def start(self) -> None:
        self.running = True

    def stop(self) -> None:
        self.running = False
        self.page = None
        self.field_focused = False
        self.scroll = 0

    def clear(self) -> None:
        self.stop()
        self.field_text = ""

    def _state(self) -> tuple[object, ...]:
        """Everything the drawing below reads."""
        return (self.package, self.width, self.height, self.version, self.page, self.field_text,
                self.field_focused, self.scroll)  # fmt: skip

    def screenshot(self) -> Image.Image:
        """The frame; the same image object while the screen's state is unchanged (drawing it
        again costs ~7 ms, and scrcpy's capture loop asks ~30 times a second). Callers draw on a copy."""
        state = self._state()
        if self._drawn is None or self._drawn[0] != state:
            self._drawn = (state, self._draw())
        return self._drawn[1]

    def _draw(self) -> Image.Image:
        img = Image.new("RGB", (self.width, self.height), BACKGROUND)
        draw = ImageDraw.Draw(img)
        title, field, buttons = self._layout()
        draw.rectangle(title, fill=ACCENT)
        heading = app_label(self.package) if self.page is None else self.page
        draw.text(
            (self.width // 2, (title[1] + title[3]) // 2),
            heading,
            fill=(255, 255, 255),
            font=font(round(self.width * 0.05)),
            anchor="mm",
        )
        draw.rectangle(
            field, outline=ACCENT if self.field_focused else (160, 160, 160), width=4, fill=(255, 255, 255)
        )
        draw.text(
            (field[0] + 24, (field[1] + field[3]) // 2),
            self.field_text or "搜索",
            fill=TEXT if self.field_text else (150, 150, 150),
            font=font(round(self.width * 0.04)),
            anchor="lm",
        )
        if self.page is None:
            for label, box in buttons:
                draw.rounded_rectangle(box, radius=20, fill=(255, 255, 255), outline=(210, 210, 210), width=3)
                draw.text(
                    (box[0] + 40, (box[1] + box[3]) // 2),
                    label,
                    fill=TEXT,
                    font=font(round(self.width * 0.045)),
                    anchor="lm",
                )
        else:
            draw.text(
                (self.width // 2, self.height // 2),
                f"{self.page} 页面",
                fill=TEXT,
                font=font(round(self.width * 0.05)),
                anchor="mm",
            )
        note = f"虚拟手机静态占位界面 · virtual-phone static placeholder · v{self.version}"
        draw.text(
            (self.width // 2, self.height - 60),
            note,
            fill=(120, 120, 120),
            font=font(round(self.width * 0.025)),
            anchor="mm",
        )
        return img

    def hierarchy(self) -> list[ET.Element]:
        title, field, buttons = self._layout()
        heading = app_label(self.package) if self.page is None else self.page
        children = [
            UiNode(bounds=title, cls="android.widget.TextView", text=heading, resource_id=self._ids("title")),
            UiNode(
                bounds=field,
                cls="android.widget.EditText",
                text=self.field_text,
                resource_id=self._ids("search"),
                clickable=True,
                focusable=True,
                focused=self.field_focused,
            ),
        ]
        if self.page is None:
            children.append(
                UiNode(
                    bounds=(0, field[3] + 30, self.width, self.height - 120),
                    cls="android.widget.ScrollView",
                    resource_id=self._ids("menu"),
                    scrollable=True,
                    children=[
                        UiNode(
                            bounds=box,
                            cls="android.widget.Button",
                            text=label,
                            resource_id=self._ids(f"menu_{i}"),
                            clickable=True,
                            long_clickable=True,
                            focusable=True,
                        )
                        for i, (label, box) in enumerate(buttons)
                    ],
                )
            )
        else:
            # the page scrolls on a swipe as the menu does (`swipe` below), and says so in its dump
            children.append(
                UiNode(
                    bounds=(0, field[3] + 30, self.width, self.height - 120),
                    cls="android.widget.ScrollView",
                    resource_id=self._ids("page"),
                    scrollable=True,
                    children=[
                        UiNode(
                            bounds=(0, self.height // 2 - 60, self.width, self.height // 2 + 60),
                            cls="android.widget.TextView",
                            text=f"{self.page} 页面",
                        )
                    ],
                )
            )
        root = UiNode(
            bounds=(0, 0, self.width, self.height), cls="android.widget.FrameLayout", children=children
        )
        return [root.to_element(package=self.package)]

    def tap(self, x: int, y: int, long: bool = False) -> None:
        _title, field, buttons = self._layout()
        fl, ft, fr, fb = field
        self.field_focused = fl <= x <= fr and ft <= y <= fb
        if self.page is None and not self.field_focused:
            for label, (left, top, right, bottom) in buttons:
                if left <= x <= right and top <= y <= bottom:
                    self.page = label
                    return

    def swipe(self, x1: int, y1: int, x2: int, y2: int, duration_ms: int) -> None:
        self.scroll = max(0, min(400, self.scroll + (y1 - y2)))

    def key(self, key: str) -> bool:
        if key == "back":
            if self.page is not None:
                self.page = None
                return True
            return False
        if key in ("del", "delete"):
            self.field_text = self.field_text[:-1]
        return True

    def text(self, text: str) -> None:
        if self.field_focused:
            self.field_text += text

    def close(self) -> None:
        pass
