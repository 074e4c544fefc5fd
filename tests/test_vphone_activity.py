"""The activity a screen declares, as the virtual phone reports it, and 12306's WebView dropping raw
`adb shell input tap` — with the device path proved never to fall back to it.

Verdicts come from the virtual phone's own input log and the screen's record of what reached it.
"""

from __future__ import annotations

import asyncio
import contextlib
import time
from collections.abc import Iterator
from typing import Any

import adbutils
import pytest
import uiautomator2 as u2

from devices.phone import PhoneDevice
from devices.recipe_runner import SetupFailed, SetupRunner
from devices.virtual import VirtualPhoneHost
from devices.virtual.model import InputSource
from devices.virtual.phone import VirtualPhone
from devices.virtual.screen import StaticAppScreen
from realbench.actions import Click, DoubleClick, LongPress
from realbench.errors import DeviceError
from realbench.recipes import WaitForStep

pytestmark = pytest.mark.farm

TICKET = "com.MobileTicket"
H5 = "com.alipay.mobile.nebulacore.ui.H5Activity"
MAIN = "com.MobileTicket.ui.activity.MainActivity"


class ActivityScreen(StaticAppScreen):
    """A static test screen (not the app) that declares its activity and records the taps it gets."""

    def __init__(self, package: str) -> None:
        super().__init__(package, 1080, 2400, "test")
        self.current = H5
        self.taps: list[tuple[int, int]] = []

    def activity(self) -> str:
        return self.current

    def tap(self, x: int, y: int, long: bool = False) -> None:
        self.taps.append((x, y))
        super().tap(x, y, long)


@pytest.fixture(scope="module")
def rig() -> Iterator[tuple[VirtualPhone, str, dict[str, ActivityScreen]]]:
    screens: dict[str, ActivityScreen] = {}

    def maker(phone: Any, package: str) -> ActivityScreen:
        screens[package] = ActivityScreen(package)
        return screens[package]

    with VirtualPhoneHost() as host:
        (info,) = host.start(1, screens=maker)
        host.adb_connect()
        phone = host.phone(info.serial)
        asyncio.run(phone.shell.run(f"monkey -p {TICKET} 1"))
        yield phone, info.serial, screens


def shell(serial: str, cmd: str) -> str:
    return str(adbutils.adb.device(serial).shell(cmd))


def test_dumpsys_reports_the_declared_activity(
    rig: tuple[VirtualPhone, str, dict[str, ActivityScreen]],
) -> None:
    phone, serial, screens = rig
    screens[TICKET].current = MAIN
    out = shell(serial, "dumpsys window windows")
    assert f"mCurrentFocus=Window{{4b1e2f0 u0 {TICKET}/{MAIN}}}" in out
    # an activity record prints the short form, as Android does
    assert f"{TICKET}/.ui.activity.MainActivity" in shell(serial, "dumpsys activity activities")
    screens[TICKET].current = H5
    d = u2.connect(serial)
    assert d.app_current()["activity"] == H5
    assert d.wait_activity(H5, timeout=2)
    assert PhoneDevice(serial, virtual=True).current_activity() == H5


def test_shell_taps_are_dropped_in_the_h5_activity_only(
    rig: tuple[VirtualPhone, str, dict[str, ActivityScreen]],
) -> None:
    phone, serial, screens = rig
    screen = screens[TICKET]
    screen.current = H5
    screen.taps.clear()
    before = len(phone.events)
    shell(serial, "input tap 500 600")
    [event] = phone.events.events(before)
    assert (event.method, event.source, event.dropped) == ("input tap", InputSource.SHELL, True)
    assert screen.taps == []  # logged, never delivered
    screen.current = MAIN
    shell(serial, "input tap 500 600")
    assert screen.taps == [(500, 600)]
    assert phone.events.events(before)[-1].dropped is False


def test_the_device_path_never_falls_back_to_input_tap(
    rig: tuple[VirtualPhone, str, dict[str, ActivityScreen]],
) -> None:
    phone, serial, screens = rig
    screen = screens[TICKET]
    screen.current = H5
    screen.taps.clear()
    device = PhoneDevice(serial, virtual=True)
    try:
        before = len(phone.events)
        for action in (Click(x=500, y=300), LongPress(x=500, y=300), DoubleClick(x=500, y=300)):
            device.act(action)
        events = phone.events.events(before)
    finally:
        device.close()
    assert events, "no input reached the phone"
    assert not [e for e in events if e.source is InputSource.SHELL or e.method.startswith("input")]
    assert not [e for e in events if e.dropped]
    assert len(screen.taps) == 4  # click, long press, two taps of the double tap: all delivered


def test_no_fallback_to_input_tap_when_the_uiautomator_server_dies(
    rig: tuple[VirtualPhone, str, dict[str, ActivityScreen]],
) -> None:
    """The tap an agent meant still goes through uiautomator2 after its server is killed (the device
    path restarts it or fails); it is never re-sent as `adb shell input tap`, which the WebView drops."""
    phone, serial, screens = rig
    screen = screens[TICKET]
    screen.current = H5
    screen.taps.clear()
    device = PhoneDevice(serial, virtual=True)
    try:
        device.act(Click(x=500, y=300))
        before = len(phone.events)
        assert phone.kill_uiautomator()
        with contextlib.suppress(DeviceError):
            device.act(Click(x=500, y=300))
        events = phone.events.events(before)
    finally:
        device.close()
    assert not [e for e in events if e.source is InputSource.SHELL or e.method.startswith("input")], events
    assert not [e for e in events if e.dropped]


def test_recipe_wait_for_activity(rig: tuple[VirtualPhone, str, dict[str, ActivityScreen]]) -> None:
    phone, serial, screens = rig
    device = PhoneDevice(serial, virtual=True)
    runner = SetupRunner(device, device, package=TICKET, relaunch=lambda _pkg: None)
    try:
        screens[TICKET].current = H5
        runner.run([WaitForStep(do="wait_for", activity="H5Activity", timeout_s=1)], {})
        assert runner.records[-1].ok and H5 in runner.records[-1].detail
        screens[TICKET].current = MAIN
        t0 = time.monotonic()
        with pytest.raises(SetupFailed, match="never came to the front"):
            runner.run([WaitForStep(do="wait_for", activity=H5, timeout_s=0.5)], {})
        assert time.monotonic() - t0 >= 0.5
    finally:
        device.close()


@pytest.mark.parametrize(
    ("line", "expected"),
    [
        (
            "  mCurrentFocus=Window{4b1e2f0 u0 com.MobileTicket/com.alipay.mobile.nebulacore.ui.H5Activity}",
            H5,
        ),
        ("  mCurrentFocus=Window{a1 u0 com.MobileTicket/.ui.activity.MainActivity}", MAIN),
        ("  mCurrentFocus=Window{a1 u0 NotificationShade}", None),
        ("  mCurrentFocus=null", None),
    ],
)
def test_the_focused_activity_as_real_phones_print_it(line: str, expected: str | None) -> None:
    class Shell(PhoneDevice):
        def __init__(self) -> None:  # no phone: only the parsing of `dumpsys window` is under test
            pass

        def shell(self, *args: Any, **kwargs: Any) -> str:
            return f"WINDOW MANAGER WINDOWS\n{line}\n  mFocusedApp=null\n"

    assert Shell().current_activity() == expected
