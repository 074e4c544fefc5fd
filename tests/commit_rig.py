"""One virtual phone showing an app's clone, bare and behind an armed interlock: the rig of the
commit-point attack tests (tests/test_bank_commit_points.py, tests/test_train_commit_points.py).

The attacked screens are catalogued as safe screens in the policy the rig arms, so that what stops
an attack is the pack's own forbidden list, not the default-deny of uncatalogued screens.
"""

from __future__ import annotations

from collections.abc import Iterator, Sequence
from contextlib import contextmanager
from dataclasses import dataclass
from typing import Any

import pytest

from realbench.errors import BoundaryBlocked
from realbench.hierarchy import Hierarchy, Selector
from realbench.taskpack import SafeScreen, TaskPack


@dataclass
class CommitRig:
    package: str
    host: Any
    serial: str
    phone: Any
    control: Any
    guard: Any

    def show(self, setup: dict[str, Any]) -> dict[str, Any]:
        """Provision the app with `setup`, bring it up, and return its state (what the app holds)."""
        self.control.provision(self.package, setup, {})
        self.phone.start_app(self.package)
        return self.app_state()

    def app_state(self) -> dict[str, Any]:
        return self.control.app_state(self.package)  # type: ignore[no-any-return]

    def tap(self, selector: Selector, *, guarded: bool) -> tuple[bool, int]:
        """Tap the control's centre (normalised 0-1000) bare or through the guard: (blocked, inputs
        that reached the phone)."""
        from realbench.actions import Click

        node = Hierarchy(self.phone.hierarchy()).find_one(selector)
        assert node is not None, f"{selector} is not on the screen"
        w, h = self.phone.size()
        x, y = node.bounds.center
        action = Click(x=round(x * 1000 / (w - 1)), y=round(y * 1000 / (h - 1)))
        events = self.host.phone(self.serial).events
        start = len(events)
        try:
            (self.guard if guarded else self.phone).act(action)
        except BoundaryBlocked:
            return True, len(events) - start
        return False, len(events) - start

    def tap_by_id(self, rid: str, *, guarded: bool) -> tuple[bool, int]:
        return self.tap(Selector(resource_id=rid), guarded=guarded)


@contextmanager
def commit_rig(pack: TaskPack, safe_screens: Sequence[SafeScreen]) -> Iterator[CommitRig]:
    """A virtual phone with the pack's app, its interlock armed with the pack's forbidden list."""
    from devices.farm.interlock import InterlockedDevice
    from devices.farm.interlock_policy import InterlockPolicy
    from devices.phone import PhoneDevice
    from devices.virtual import VirtualPhoneHost
    from devices.virtual.control import PhoneControl

    with VirtualPhoneHost() as host:
        try:
            infos = host.start(1, screens="clone")
        except Exception as exc:  # Chromium missing: this tier needs it
            pytest.skip(f"clone screens unavailable: {exc}")
        host.adb_connect()
        phone = PhoneDevice(infos[0].serial, virtual=True)
        control = PhoneControl(infos[0].control_url, timeout=60.0)  # the first render waits for Chromium
        guard = InterlockedDevice(phone)
        base = InterlockPolicy.for_pack(pack)
        policy = InterlockPolicy(
            money_moving=True,
            packages=base.packages,
            safe_screens=tuple(safe_screens),
            url_schemes=base.url_schemes,
        )
        guard.arm([], list(pack.real_app.forbidden), policy)
        try:
            yield CommitRig(pack.real_app.package, host, infos[0].serial, phone, control, guard)
        finally:
            control.close()
            phone.close()
