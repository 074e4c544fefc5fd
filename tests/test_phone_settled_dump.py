"""A phone reuses the dump its settle ended on only right after that settle: nothing sent to or
asked of the phone since, and within the settle's quiet period. Counted by the virtual phone's own
uiautomator server (the dumps it served), through the real adb server."""

from __future__ import annotations

import shutil
import time
from collections.abc import Iterator
from typing import Any

import pytest

from devices.phone import PhoneDevice
from devices.virtual import VirtualPhoneHost
from realbench.actions import Click

pytestmark = [pytest.mark.farm, pytest.mark.skipif(shutil.which("adb") is None, reason="needs Debian's adb")]


@pytest.fixture(scope="module")
def phones(adb_server_port: int) -> Iterator[tuple[Any, PhoneDevice]]:
    with VirtualPhoneHost() as host:
        (info,) = host.start(1, screens="static")
        host.adb_connect(adb_server_port)
        device = PhoneDevice(info.serial, virtual=True)
        try:
            yield host.phone(info.serial), device
        finally:
            device.close()


def _dumps_during(vphone: Any, fn: Any) -> tuple[int, Any]:
    before = vphone.dumps_served
    value = fn()
    return vphone.dumps_served - before, value


def test_observe_right_after_a_settle_does_not_dump_again(phones: tuple[Any, PhoneDevice]) -> None:
    vphone, device = phones
    device.act(Click(x=500, y=500))
    dumps, obs = _dumps_during(vphone, device.observe)
    assert dumps == 0
    assert obs.hierarchy == device.hierarchy()  # what it reused is the screen now
    # the reuse happens once: the next look dumps
    assert _dumps_during(vphone, device.observe)[0] == 1


def test_any_call_or_the_quiet_period_in_between_means_a_fresh_dump(phones: tuple[Any, PhoneDevice]) -> None:
    vphone, device = phones
    device.act(Click(x=500, y=500))
    device.info()  # anything asked of (or sent to) the phone since the settle
    assert _dumps_during(vphone, device.observe)[0] == 1
    device.act(Click(x=500, y=500))
    time.sleep(device.settle.quiet_s + 0.05)  # the screen may have moved on since
    assert _dumps_during(vphone, device.settled_hierarchy)[0] == 1
    device.act(Click(x=500, y=500))
    assert _dumps_during(vphone, device.settled_hierarchy)[0] == 0
    assert _dumps_during(vphone, device.settled_hierarchy)[0] == 1
