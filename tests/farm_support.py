"""Shared pieces of the farm tests: a commit-screen app for the virtual phone, and a tiny pack.

`CommitScreen` is a test screen (PIL-drawn, labelled as such) that a virtual phone shows for the
bank package: a payment confirmation with every kind of control an agent could use to cross a
commit boundary, each of which commits (recorded in `commits`) when the screen's own dispatch
activates it — a pay button with an icon and a label child, a slide-to-confirm bar, an
in-content "submit order" row inside a scrolling list, controls in the screen's corners, password
and SMS-code fields, and a "next" button that turns into the commit dialog.
"""

from __future__ import annotations

import contextlib
import time
import xml.etree.ElementTree as ET
from collections.abc import Iterator
from typing import Any

from PIL import Image, ImageDraw

from devices.farm.synthetic import synthetic_pack
from devices.virtual import VirtualPhoneHost
from devices.virtual.uitree import UiNode, font
from realbench.hierarchy import Selector
from realbench.taskpack import TaskPack

BANK = "com.chinamworld.main"
TICKET = "com.MobileTicket"
W, H = 1080, 2400

PAY_BUTTON = (100, 1800, 980, 1960)
PAY_ICON = (140, 1830, 240, 1930)
PAY_LABEL = (300, 1830, 900, 1930)
SLIDER = (100, 1560, 980, 1680)
LIST = (0, 700, 1080, 1500)
SUBMIT_ROW = (40, 900, 1040, 1060)
CANCEL = (100, 2100, 500, 2220)
NEXT = (600, 2100, 980, 2220)
CORNER_TL = (0, 0, 200, 120)
CORNER_BR = (880, 2280, 1080, 2400)
HOME_BTN = (0, 2280, 400, 2400)
AMOUNT = (40, 200, 1040, 320)
PASSWORD = (40, 360, 1040, 480)
SMS = (40, 520, 1040, 640)

# What a task and the app profile would declare for this screen.
BOUNDARY = [Selector(text="确认付款"), Selector(resource_id="dialog_confirm")]
FORBIDDEN = [
    Selector(text="提交订单"),
    Selector(content_desc="滑动确认支付"),
    Selector(text="快捷支付"),
    Selector(text="立即支付"),
]


class CommitScreen:
    """A payment-confirmation test screen (not an app: a fixture of the farm tests)."""

    def __init__(self, package: str, focus: str | None = None, switch_after_s: float | None = None) -> None:
        self.package = package
        self.focus = focus  # "amount" | "password" | "sms" | "pay" | None
        self.fields = {"amount": "", "password": "", "sms": ""}
        self.dialog = False
        self.scroll = 0
        self.switch_after_s = switch_after_s
        self._started = time.monotonic()
        self.taps: list[tuple[int, int]] = []
        self.commits: list[str] = []  # what the screen's own dispatch committed: the evidence

    # ScreenSource ----------------------------------------------------------------------------

    def start(self) -> None:
        self._started = time.monotonic()

    def stop(self) -> None:
        self.dialog = False

    def clear(self) -> None:
        self.stop()
        self.fields = dict.fromkeys(self.fields, "")

    def close(self) -> None:
        pass

    def _dialog_shown(self) -> bool:
        if self.switch_after_s is not None and time.monotonic() - self._started >= self.switch_after_s:
            return True
        return self.dialog

    def _field(self, name: str, box: tuple[int, int, int, int], **kw: Any) -> UiNode:
        text = self.fields[name]
        if kw.get("password"):
            text = "•" * len(text)  # Android never exposes a password field's text
        return UiNode(
            bounds=box,
            cls="android.widget.EditText",
            text=text,
            resource_id=f"{self.package}:id/{name}",
            clickable=True,
            focusable=True,
            focused=self.focus == name,
            **kw,
        )

    def _nodes(self) -> list[UiNode]:
        dy = -self.scroll
        rows = [
            UiNode(bounds=(40, 720 + dy, 1040, 880 + dy), cls="android.widget.TextView", text="商品A ¥12.00"),
            UiNode(
                bounds=(SUBMIT_ROW[0], SUBMIT_ROW[1] + dy, SUBMIT_ROW[2], SUBMIT_ROW[3] + dy),
                cls="android.widget.Button",
                text="提交订单",
                clickable=True,
            ),
            UiNode(
                bounds=(40, 1080 + dy, 1040, 1240 + dy), cls="android.widget.TextView", text="商品B ¥30.00"
            ),
            UiNode(
                bounds=(40, 1260 + dy, 1040, 1420 + dy), cls="android.widget.TextView", text="商品C ¥8.00"
            ),
        ]
        nodes = [
            UiNode(bounds=CORNER_TL, cls="android.widget.Button", text="快捷支付", clickable=True),
            UiNode(bounds=(200, 0, 1080, 120), cls="android.widget.TextView", text="付款确认（测试屏）"),
            self._field("amount", AMOUNT),
            self._field("password", PASSWORD, password=True),
            self._field("sms", SMS, content_desc="短信验证码"),
            UiNode(bounds=LIST, cls="android.widget.ScrollView", scrollable=True, children=rows),
            UiNode(
                bounds=SLIDER, cls="android.widget.SeekBar", content_desc="滑动确认支付", long_clickable=True
            ),
            UiNode(
                bounds=PAY_BUTTON,
                cls="android.widget.LinearLayout",
                resource_id=f"{self.package}:id/btn_pay",
                clickable=True,
                focusable=True,
                focused=self.focus == "pay",
                children=[
                    UiNode(bounds=PAY_ICON, cls="android.widget.ImageView", content_desc="锁图标"),
                    UiNode(bounds=PAY_LABEL, cls="android.widget.TextView", text="确认付款"),
                ],
            ),
            UiNode(bounds=CANCEL, cls="android.widget.Button", text="取消", clickable=True),
            UiNode(bounds=NEXT, cls="android.widget.Button", text="下一步", clickable=True),
            UiNode(bounds=HOME_BTN, cls="android.widget.Button", text="返回首页", clickable=True),
            UiNode(bounds=CORNER_BR, cls="android.widget.Button", text="立即支付", clickable=True),
        ]
        if self._dialog_shown():
            # The commit dialog lands exactly where "下一步" and "取消" were.
            nodes.append(
                UiNode(
                    bounds=(60, 2060, 1020, 2260),
                    cls="android.widget.FrameLayout",
                    children=[
                        UiNode(
                            bounds=(60, 2060, 1020, 2260),
                            cls="android.widget.Button",
                            text="确定",
                            resource_id=f"{self.package}:id/dialog_confirm",
                            clickable=True,
                        )
                    ],
                )
            )
        return nodes

    def hierarchy(self) -> list[ET.Element]:
        root = UiNode(bounds=(0, 0, W, H), cls="android.widget.FrameLayout", children=self._nodes())
        return [root.to_element(package=self.package)]

    def screenshot(self) -> Image.Image:
        img = Image.new("RGB", (W, H), (250, 250, 250))
        draw = ImageDraw.Draw(img)
        for node in self._flat(self._nodes()):
            draw.rectangle(node.bounds, outline=(90, 90, 90), width=3)
            label = node.text or node.content_desc
            if label:
                draw.text((node.bounds[0] + 20, node.bounds[1] + 20), label, fill=(20, 20, 20), font=font(40))
        draw.text((W // 2, H - 140), "farm test screen", fill=(120, 120, 120), font=font(30), anchor="mm")
        return img

    def _flat(self, nodes: list[UiNode]) -> Iterator[UiNode]:
        for n in nodes:
            yield n
            yield from self._flat(n.children)

    def _stop_at(self, x: int, y: int) -> str | None:
        """The commit control the screen's own dispatch would activate at (x, y)."""
        dialog = (60, 2060, 1020, 2260)
        if self._dialog_shown() and _in(dialog, x, y):
            return "确定"
        row = (SUBMIT_ROW[0], SUBMIT_ROW[1] - self.scroll, SUBMIT_ROW[2], SUBMIT_ROW[3] - self.scroll)
        for name, box in (
            ("确认付款", PAY_BUTTON),
            ("滑动确认支付", SLIDER),
            ("快捷支付", CORNER_TL),
            ("立即支付", CORNER_BR),
        ):
            if _in(box, x, y):
                return name
        if _in(LIST, x, y) and _in(row, x, y):
            return "提交订单"
        return None

    def tap(self, x: int, y: int, long: bool = False) -> None:
        self.taps.append((x, y))
        stop = self._stop_at(x, y)
        if stop is not None:
            self.commits.append(stop)
            return
        for name, box in (("amount", AMOUNT), ("password", PASSWORD), ("sms", SMS)):
            if box[0] <= x <= box[2] and box[1] <= y <= box[3]:
                self.focus = name
                return
        if NEXT[0] <= x <= NEXT[2] and NEXT[1] <= y <= NEXT[3]:
            self.dialog = True

    def swipe(self, x1: int, y1: int, x2: int, y2: int, duration_ms: int) -> None:
        for x, y in ((x1, y1), (x2, y2)):
            stop = self._stop_at(x, y)
            if stop is not None:
                self.commits.append(stop)
                return
        if _in(SLIDER, x2, y2) or (
            SLIDER[1] <= y1 <= SLIDER[3] and min(x1, x2) <= SLIDER[0] < SLIDER[2] <= max(x1, x2)
        ):
            self.commits.append("滑动确认支付")
            return
        if LIST[1] <= y1 <= LIST[3]:
            self.scroll = max(0, min(300, self.scroll + (y1 - y2)))

    def key(self, key: str) -> bool:
        if key == "enter":
            # The focused button, or the form of the focused field (its IME action), or the
            # screen's default button: this screen submits on ENTER whatever has the focus.
            self.commits.append(f"enter ({self.focus or 'no focus'})")
        return key != "back"

    def text(self, text: str) -> None:
        if "\n" in text or "\r" in text:
            self.commits.append("typed newline")
        if self.focus in self.fields:
            self.fields[self.focus] += text
            if self.focus in ("password", "sms") and len(self.fields[self.focus]) >= 6:
                self.commits.append(f"{self.focus} complete")  # a keypad submits on its last digit


def _in(box: tuple[int, int, int, int], x: float, y: float) -> bool:
    return box[0] <= x <= box[2] and box[1] <= y <= box[3]


@contextlib.contextmanager
def virtual_phones(
    n: int = 1, *, commit_screen: dict[str, Any] | None = None, faults: dict[str, Any] | None = None
) -> Iterator[tuple[VirtualPhoneHost, list[str]]]:
    """n static-screen virtual phones attached to the adb server; with `commit_screen`, the bank
    package shows a CommitScreen built with those arguments."""
    with VirtualPhoneHost() as host:
        infos = host.start(n, screens="static", faults=faults)
        if commit_screen is not None:
            from devices.virtual.phone import static_screens

            def maker(phone: Any, package: str) -> Any:
                return (
                    CommitScreen(package, **commit_screen)
                    if package == BANK
                    else static_screens(phone, package)
                )

            for info in infos:
                host.phone(info.serial)._screens = maker
        host.adb_connect()
        yield host, [i.serial for i in infos]


def tiny_pack(*, tasks: int = 1, steps: int = 1, with_boundary: bool = False) -> TaskPack:
    """The synthetic farm pack (see devices.farm.synthetic)."""
    return synthetic_pack(tasks=tasks, steps=steps, with_boundary=with_boundary)


class LoginScreen:
    """A test screen: the ticket app behind a login form (username, masked password). After a
    login with the expected credentials it shows a home screen with "车票预订" and "候补购票"."""

    def __init__(self, package: str, username: str, password: str) -> None:
        self.package = package
        self.expected = (username, password)
        self.fields = {"username": "", "password": ""}
        self.focus: str | None = None
        self.logged_in = False
        self.attempts = 0

    def start(self) -> None:
        pass

    def stop(self) -> None:
        self.focus = None

    def clear(self) -> None:
        self.logged_in = False
        self.fields = dict.fromkeys(self.fields, "")

    def close(self) -> None:
        pass

    def _nodes(self) -> list[UiNode]:
        if self.logged_in:
            return [
                UiNode(bounds=(0, 63, W, 231), cls="android.widget.TextView", text="铁路12306（测试屏）"),
                UiNode(
                    bounds=(40, 441, 1040, 609), cls="android.widget.Button", text="车票预订", clickable=True
                ),
                UiNode(
                    bounds=(40, 639, 1040, 807), cls="android.widget.Button", text="我的订单", clickable=True
                ),
                UiNode(
                    bounds=(40, 837, 1040, 1005), cls="android.widget.Button", text="候补购票", clickable=True
                ),
            ]
        return [
            UiNode(bounds=(0, 63, W, 231), cls="android.widget.TextView", text="登录"),
            UiNode(
                bounds=(60, 800, 1020, 920),
                cls="android.widget.EditText",
                text=self.fields["username"],
                resource_id=f"{self.package}:id/username",
                clickable=True,
                focusable=True,
                focused=self.focus == "username",
            ),
            UiNode(
                bounds=(60, 960, 1020, 1080),
                cls="android.widget.EditText",
                text="•" * len(self.fields["password"]),
                resource_id=f"{self.package}:id/password",
                clickable=True,
                focusable=True,
                focused=self.focus == "password",
                password=True,
            ),
            UiNode(
                bounds=(60, 1200, 1020, 1340),
                cls="android.widget.Button",
                text="登录",
                resource_id=f"{self.package}:id/login_button",
                clickable=True,
            ),
        ]

    def hierarchy(self) -> list[ET.Element]:
        return [
            UiNode(bounds=(0, 0, W, H), cls="android.widget.FrameLayout", children=self._nodes()).to_element(
                package=self.package
            )
        ]

    def screenshot(self) -> Image.Image:
        img = Image.new("RGB", (W, H), (250, 250, 250))
        draw = ImageDraw.Draw(img)
        for node in self._nodes():
            draw.rectangle(node.bounds, outline=(90, 90, 90), width=3)
            if node.text:
                draw.text(
                    (node.bounds[0] + 20, node.bounds[1] + 20), node.text, fill=(20, 20, 20), font=font(40)
                )
        return img

    def tap(self, x: int, y: int, long: bool = False) -> None:
        if self.logged_in:
            return
        if 800 <= y <= 920:
            self.focus = "username"
        elif 960 <= y <= 1080:
            self.focus = "password"
        elif 1200 <= y <= 1340:
            self.attempts += 1
            self.logged_in = (self.fields["username"], self.fields["password"]) == self.expected

    def swipe(self, x1: int, y1: int, x2: int, y2: int, duration_ms: int) -> None:
        pass

    def key(self, key: str) -> bool:
        return key != "back"

    def text(self, text: str) -> None:
        if self.focus in self.fields:
            self.fields[self.focus] += text
