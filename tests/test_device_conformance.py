"""`check_device` on every Device implementation: headless clone pages (browser tier), phones
through uiautomator2 on a virtual phone, bare and behind the farm's interlock (farm tier)."""

from __future__ import annotations

import shutil
from collections.abc import Iterator
from typing import Any

import pytest

from clones.base import get_clone
from clones.toy import TOY
from devices.conformance import check_device
from realbench.device import DeviceKind

TICKET = "com.MobileTicket"


@pytest.mark.browser
def test_headless_clone_page_conforms(clone_server: Any, browser_pool: Any) -> None:
    import httpx

    from devices.clone_device import CloneDevice

    device = CloneDevice(browser_pool, clone_server.url, get_clone(TOY))
    try:
        sid = httpx.post(
            f"{clone_server.url}/api/sessions", json={"clone": TOY, "setup": {"seed": 3}}
        ).json()["session"]
        device.open(sid)
        assert device.kind is DeviceKind.HEADLESS_CLONE
        assert check_device(device) == []
    finally:
        device.close()


@pytest.fixture(scope="module")
def phone(adb_server_port: int) -> Iterator[Any]:
    from devices.phone import PhoneDevice
    from devices.virtual.host import VirtualPhoneHost

    with VirtualPhoneHost() as host:
        [info] = host.start(1, screens="static")
        host.adb_connect(adb_server_port)
        device = PhoneDevice(info.serial, virtual=True)
        try:
            device.start_app(TICKET)
            yield device
        finally:
            device.close()


@pytest.mark.farm
@pytest.mark.skipif(shutil.which("adb") is None, reason="needs Debian's adb")
def test_phone_through_uiautomator2_conforms(phone: Any) -> None:
    assert phone.kind is DeviceKind.VIRTUAL_PHONE
    assert check_device(phone) == []


@pytest.mark.farm
@pytest.mark.skipif(shutil.which("adb") is None, reason="needs Debian's adb")
def test_phone_behind_the_interlock_conforms(phone: Any) -> None:
    from devices.farm.interlock import InterlockedDevice

    guarded = InterlockedDevice(phone)
    guarded.arm([], [])
    phone.start_app(TICKET)
    assert check_device(guarded) == []
    assert guarded.checked > 0  # every action went through the interlock's fresh-screen check
