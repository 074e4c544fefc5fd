"""Health checks a phone passes before each episode, repairing what can be repaired.

Checked: the link and the uiautomator server answer; the screen is on and unlocked; no ROM
pop-up covers the screen (one whose dismiss control reads as a commit / money word, or overlaps
one, is not tapped: the check fails, naming it); the input method is the one the phone should have (typing may have
switched it); pinned app versions match; enough free storage. Items the phone cannot report
(e.g. `df` missing) are UNKNOWN, not failures. Logged-in state and the foreground app are
checked by the target's setup, once the app under test is launched.
"""

from __future__ import annotations

import logging
import time
from dataclasses import dataclass, field
from enum import StrEnum
from typing import Any, Protocol

from devices.farm.interlock import InterlockedDevice
from devices.farm.setup_doors import dismiss_refusal
from devices.profile import PhoneProfile
from realbench.actions import Click
from realbench.errors import DeviceError, RealbenchError
from realbench.hierarchy import Hierarchy
from realbench.taskpack import Popup

log = logging.getLogger(__name__)

POPUP_ROUNDS = 8  # an app may stack several at launch (12306: ad, upgrade, location, ...)


class CheckStatus(StrEnum):
    OK = "ok"
    FIXED = "fixed"  # was wrong, repaired
    FAIL = "fail"
    UNKNOWN = "unknown"  # the phone could not tell


@dataclass(frozen=True)
class HealthItem:
    name: str
    status: CheckStatus
    detail: str = ""


@dataclass
class HealthReport:
    serial: str
    items: list[HealthItem] = field(default_factory=list)
    took_s: float = 0.0
    time: float = field(default_factory=time.time)

    @property
    def ok(self) -> bool:
        return all(i.status is not CheckStatus.FAIL for i in self.items)

    def failures(self) -> list[HealthItem]:
        return [i for i in self.items if i.status is CheckStatus.FAIL]

    def summary(self) -> str:
        if self.ok:
            fixed = [i.name for i in self.items if i.status is CheckStatus.FIXED]
            return "ok" + (f" (fixed: {', '.join(fixed)})" if fixed else "")
        return "; ".join(f"{i.name}: {i.detail}" for i in self.failures())

    def to_dict(self) -> dict[str, Any]:
        return {
            "serial": self.serial,
            "ok": self.ok,
            "took_s": round(self.took_s, 3),
            "items": [{"name": i.name, "status": str(i.status), "detail": i.detail} for i in self.items],
        }


class CheckablePhone(Protocol):
    """What a health check needs (PhoneDevice provides it)."""

    @property
    def serial(self) -> str: ...

    def info(self) -> dict[str, Any]: ...

    def recover(self) -> None: ...

    def wake(self) -> None: ...

    def locked(self) -> bool | None: ...

    def shell(self, cmd: str | list[str]) -> str: ...

    def hierarchy(self) -> str: ...

    def act(self, action: Any) -> None: ...

    def to_pixels(self, x: int, y: int) -> tuple[int, int]: ...

    def size(self) -> tuple[int, int]: ...

    def ime_list(self) -> list[str]: ...

    def current_ime(self) -> str: ...

    def set_ime(self, ime: str) -> None: ...

    def app_version(self, package: str) -> str | None: ...

    def free_storage_mb(self) -> int | None: ...


class PopupPhone(Protocol):
    """What pop-up dismissal needs: a bare phone, or the phone behind the interlock."""

    @property
    def serial(self) -> str: ...

    def hierarchy(self) -> str: ...

    def size(self) -> tuple[int, int]: ...

    def act(self, action: Any) -> None: ...


class PopupRefused(DeviceError):
    """A pop-up's dismiss control was not tapped: it reads as (or overlaps) a commit control."""


def _click_at(phone: PopupPhone, center: tuple[float, float]) -> Click:
    """A pixel in the normalised action space."""
    w, h = phone.size()
    x = max(0, min(1000, round(center[0] * 1000 / max(1, w - 1))))
    y = max(0, min(1000, round(center[1] * 1000 / max(1, h - 1))))
    return Click(x=x, y=y)


def dismiss_popups(phone: PopupPhone, popups: list[Popup], *, rounds: int = POPUP_ROUNDS) -> list[str]:
    """Tap away known pop-ups; returns the names of those dismissed.

    Behind the interlock (an armed `InterlockedDevice`) a pop-up of the pack's own app is dismissed
    by an ordinary guarded tap, so the pack's catalogue must know its screen, and one drawn by
    another package (a ROM prompt) through the guard's `dismiss_foreign_popup` door. On a bare
    phone (the health check, which knows no pack) a dismiss control whose label reads as a commit /
    money word, or that overlaps one, is not tapped: PopupRefused says which and why."""
    dismissed: list[str] = []
    if not popups:
        return dismissed
    guard = phone if isinstance(phone, InterlockedDevice) else None
    for _ in range(rounds):
        try:
            hierarchy = Hierarchy(phone.hierarchy())
        except RealbenchError:
            return dismissed
        shown = next((p for p in popups if hierarchy.find_one(p.when) is not None), None)
        if shown is None:
            return dismissed
        button = hierarchy.find_one(shown.tap)
        if button is None:
            log.warning("pop-up %r on %s has no %s to dismiss it", shown.name, phone.serial, shown.tap)
            return dismissed
        if guard is not None and guard.policy.foreign(button.package):
            if not guard.dismiss_foreign_popup(shown):
                return dismissed
        elif guard is not None:
            guard.act(_click_at(phone, button.bounds.center))
        else:
            reason = dismiss_refusal(hierarchy, button)
            if reason is not None:
                log.warning("pop-up %r on %s not dismissed: %s", shown.name, phone.serial, reason)
                raise PopupRefused(
                    f"pop-up {shown.name!r} on {phone.serial} not dismissed: {reason}",
                    hint="check the pop-up rule's `tap`; a person dismisses this one",
                )
            phone.act(_click_at(phone, button.bounds.center))
        dismissed.append(shown.name)
        time.sleep(0.2)
    return dismissed


@dataclass
class HealthPolicy:
    """What a phone must satisfy. `expected_ime` None means: whatever it had when first seen."""

    profile: PhoneProfile | None = None
    pins: dict[str, str | None] = field(default_factory=dict)
    expected_ime: str | None = None
    min_free_storage_mb: int | None = None
    repair: bool = True


def check_phone(phone: CheckablePhone, policy: HealthPolicy) -> HealthReport:
    """Run every check; repair what `policy.repair` allows. Never raises for a failed check."""
    t0 = time.perf_counter()
    report = HealthReport(phone.serial)
    items = report.items

    def run(name: str, fn: Any) -> None:
        try:
            items.append(fn())
        except DeviceError as exc:
            items.append(HealthItem(name, CheckStatus.FAIL, exc.message))

    # 1. link + uiautomator server (everything else needs it)
    try:
        info = phone.info()
        items.append(HealthItem("link", CheckStatus.OK))
    except DeviceError as exc:
        if not policy.repair:
            items.append(HealthItem("link", CheckStatus.FAIL, exc.message))
            report.took_s = time.perf_counter() - t0
            return report
        try:
            phone.recover()
            info = phone.info()
            items.append(HealthItem("link", CheckStatus.FIXED, f"reconnected after: {exc.message}"))
        except DeviceError as exc2:
            items.append(HealthItem("link", CheckStatus.FAIL, exc2.message))
            report.took_s = time.perf_counter() - t0
            return report

    def screen() -> HealthItem:
        if info.get("screenOn", True):
            return HealthItem("screen_on", CheckStatus.OK)
        if policy.repair:
            phone.wake()
            if phone.info().get("screenOn", True):
                return HealthItem("screen_on", CheckStatus.FIXED, "woke the screen")
        return HealthItem("screen_on", CheckStatus.FAIL, "the screen is off")

    def unlocked() -> HealthItem:
        locked = phone.locked()
        if locked is None:
            return HealthItem("unlocked", CheckStatus.UNKNOWN, "dumpsys window does not say")
        if not locked:
            return HealthItem("unlocked", CheckStatus.OK)
        if policy.repair:
            phone.shell(["wm", "dismiss-keyguard"])
            time.sleep(0.3)
            if phone.locked() is False:
                return HealthItem("unlocked", CheckStatus.FIXED, "dismissed the keyguard")
        return HealthItem(
            "unlocked", CheckStatus.FAIL, "the keyguard is showing (a secure lock needs a person)"
        )

    def popups() -> HealthItem:
        known = policy.profile.popups if policy.profile else []
        if not policy.repair or not known:
            return HealthItem(
                "popups",
                CheckStatus.OK if known else CheckStatus.UNKNOWN,
                "" if known else "no pop-ups in the profile",
            )
        gone = dismiss_popups(phone, known)
        return HealthItem("popups", CheckStatus.FIXED if gone else CheckStatus.OK, ", ".join(gone))

    def ime() -> HealthItem:
        expected = policy.expected_ime
        if not expected:
            return HealthItem("ime", CheckStatus.UNKNOWN, "no expected input method")
        current = phone.current_ime()
        if current == expected:
            return HealthItem("ime", CheckStatus.OK, current)
        if policy.repair and expected in phone.ime_list():
            phone.set_ime(expected)
            if phone.current_ime() == expected:
                return HealthItem("ime", CheckStatus.FIXED, f"{current} -> {expected}")
        return HealthItem("ime", CheckStatus.FAIL, f"input method is {current!r}, expected {expected!r}")

    def versions() -> HealthItem:
        wrong: list[str] = []
        for package, pin in policy.pins.items():
            have = phone.app_version(package)
            if have is None:
                wrong.append(f"{package} not installed")
            elif pin is not None and have != pin:
                wrong.append(f"{package} is {have}, pinned {pin}")
        if wrong:
            return HealthItem("app_versions", CheckStatus.FAIL, "; ".join(wrong))
        return HealthItem("app_versions", CheckStatus.OK if policy.pins else CheckStatus.UNKNOWN)

    def storage() -> HealthItem:
        free = phone.free_storage_mb()
        if free is None:
            return HealthItem("storage", CheckStatus.UNKNOWN, "df reports nothing")
        need = policy.min_free_storage_mb
        if need is None and policy.profile is not None:
            need = policy.profile.min_free_storage_mb
        if need is not None and free < need:
            return HealthItem("storage", CheckStatus.FAIL, f"{free} MiB free, need {need}")
        return HealthItem("storage", CheckStatus.OK, f"{free} MiB free")

    for name, fn in (
        ("screen_on", screen),
        ("unlocked", unlocked),
        ("popups", popups),
        ("ime", ime),
        ("app_versions", versions),
        ("storage", storage),
    ):
        run(name, fn)
    report.took_s = time.perf_counter() - t0
    return report


def pack_pin_item(phone: CheckablePhone, package: str, version: str) -> HealthItem:
    """The pack's own pin (`real_app.version`): its recipes and certificates hold for that version."""
    try:
        have = phone.app_version(package)
    except DeviceError as exc:
        return HealthItem("pack_app_version", CheckStatus.FAIL, exc.message)
    if have is None:
        return HealthItem("pack_app_version", CheckStatus.FAIL, f"{package} not installed")
    if have != version:
        return HealthItem(
            "pack_app_version", CheckStatus.FAIL, f"{package} is {have}; the pack's recipes are for {version}"
        )
    return HealthItem("pack_app_version", CheckStatus.OK, version)
