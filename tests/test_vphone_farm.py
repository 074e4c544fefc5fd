"""Virtual phones driven by the real stack: Debian's adb server, adbutils 2.12.0, uiautomator2 3.7.1.

One adb server on a free port (never the user's 5037) and one host with two phones per module.
"""

from __future__ import annotations

import http.client
import io
import json
import os
import shutil
import subprocess
import sys
import time
import xml.etree.ElementTree as ET
from collections.abc import Callable, Iterator
from pathlib import Path

import pytest

from devices.virtual import InputKind, InputSource, VirtualPhoneHost
from devices.virtual.phone import VirtualPhone
from realbench.hierarchy import Hierarchy, Selector

pytestmark = [pytest.mark.farm, pytest.mark.skipif(shutil.which("adb") is None, reason="needs Debian's adb")]

adbutils = pytest.importorskip("adbutils")
u2 = pytest.importorskip("uiautomator2")


@pytest.fixture(scope="module")
def host(adb_server_port: int) -> Iterator[VirtualPhoneHost]:
    with VirtualPhoneHost() as h:
        h.start(2, screens="static")
        h.adb_connect(adb_server_port)
        yield h


@pytest.fixture(scope="module")
def phone(host: VirtualPhoneHost) -> VirtualPhone:
    return host.phones[0]


@pytest.fixture(scope="module")
def d(phone: VirtualPhone):  # noqa: ANN201 - uiautomator2.Device
    return u2.connect(phone.serial)


def _new_events(phone: VirtualPhone, since: int) -> list:
    return phone.events.events(since)


def test_adb_devices_lists_phones_with_identity(host: VirtualPhoneHost, adb_server_port: int) -> None:
    out = subprocess.run(
        ["adb", "-P", str(adb_server_port), "devices", "-l"], capture_output=True, text=True, timeout=10
    ).stdout
    for phone in host.phones:
        line = next(ln for ln in out.splitlines() if ln.startswith(phone.serial))
        assert " device " in line and "model:Virtual_generic_1080x2400" in line


def test_adbutils_shell_push_pull(phone: VirtualPhone, tmp_path: Path) -> None:
    dev = adbutils.adb.device(phone.serial)
    assert dev.shell("echo hello") == "hello"
    ret = dev.shell2("toybox md5sum /nope")
    assert ret.returncode == 1 and "No such file" in ret.output
    assert dev.window_size() == (1080, 2400)
    assert dev.getprop("ro.build.version.sdk") == "33"
    data = os.urandom(300_000)
    src = tmp_path / "blob.bin"
    src.write_bytes(data)
    dev.sync.push(src, "/data/local/tmp/blob.bin", check=True)
    assert dev.sync.stat("/data/local/tmp/blob.bin").size == len(data)
    dst = tmp_path / "back.bin"
    dev.sync.pull("/data/local/tmp/blob.bin", dst)
    assert dst.read_bytes() == data
    info = dev.app_info("com.MobileTicket")
    assert info is not None and info.version_name == "5.8.0.8"


def test_u2_connect_pushes_jar_and_starts_server(phone: VirtualPhone, d) -> None:  # noqa: ANN001
    jar = phone.fs.get("/data/local/tmp/u2.jar")
    assert jar is not None and len(jar.data) > 3_000_000
    assert phone.uia_running
    info = d.info
    assert (info["displayWidth"], info["displayHeight"]) == (1080, 2400)
    assert info["productName"] == phone.spec.identity.product_name
    assert d.window_size() == (1080, 2400)


def test_u2_screenshot_and_hierarchy(d) -> None:  # noqa: ANN001
    d.press("home")
    img = d.screenshot()
    assert img.size == (1080, 2400)
    xml = d.dump_hierarchy()
    assert ET.fromstring(xml.encode()).tag == "hierarchy"
    assert Hierarchy(xml).find_one(Selector(text="中国建设银行")) is not None


def test_u2_inputs_reach_the_event_log(phone: VirtualPhone, d) -> None:  # noqa: ANN001
    d.app_start("com.MobileTicket", stop=True)
    assert d.app_current()["package"] == "com.MobileTicket"
    start = len(phone.events)
    tree = Hierarchy(d.dump_hierarchy())
    field = tree.find_one(Selector(resource_id="search"))
    button = tree.find_one(Selector(text="我的订单"))
    assert field is not None and button is not None
    d.click(*field.bounds.center)
    d.send_keys("上海虹桥")
    d.long_click(*button.bounds.center)
    d.swipe(540, 1800, 540, 1200, steps=10)
    d.press("back")
    events = _new_events(phone, start)
    kinds = [e.kind for e in events]
    assert kinds == [InputKind.TAP, InputKind.TEXT, InputKind.LONG_TAP, InputKind.SWIPE, InputKind.KEY]
    assert all(e.source == InputSource.JSONRPC for e in events)
    tap = events[0]
    assert (
        (tap.x, tap.y) == field.bounds.center
        and tap.node is not None
        and tap.node.resource_id.endswith(":id/search")
    )
    assert events[1].text == "上海虹桥" and events[1].method == "pasteClipboard"
    assert events[2].duration_ms == 500 and events[2].node is not None and events[2].node.text == "我的订单"
    assert (events[3].x, events[3].y, events[3].x2, events[3].y2, events[3].duration_ms) == (
        540,
        1800,
        540,
        1200,
        50,
    )
    assert events[4].key == "back"
    assert d(resourceId="com.MobileTicket:id/search").get_text() == "上海虹桥"
    d.app_stop("com.MobileTicket")
    assert d.app_current()["package"] == "com.android.launcher3"


def test_double_click_and_shell_input_are_logged(phone: VirtualPhone, d) -> None:  # noqa: ANN001
    start = len(phone.events)
    d.double_click(100, 200)
    d.shell("input tap 300 400")
    d.shell(["input", "text", "a%sb"])
    events = _new_events(phone, start)
    assert [e.kind for e in events] == [
        InputKind.TOUCH_DOWN,
        InputKind.TAP,
        InputKind.TAP,
        InputKind.TAP,
        InputKind.TEXT,
    ]
    assert events[3].source == InputSource.SHELL and (events[3].x, events[3].y) == (300, 400)
    assert events[4].text == "a b"


def test_unknown_method_is_jsonrpc_error(d) -> None:  # noqa: ANN001
    with pytest.raises(u2.exceptions.RPCUnknownError, match="-32601"):
        d.jsonrpc.noSuchMethod()


def test_black_and_slow_screenshots(phone: VirtualPhone, d) -> None:  # noqa: ANN001
    phone.set_faults(black_screenshots=True, screenshot_delay_s=0.3)
    try:
        t0 = time.perf_counter()
        img = d.screenshot()
        assert time.perf_counter() - t0 >= 0.3
        assert img.convert("L").getextrema() == (0, 0)
    finally:
        phone.set_faults(black_screenshots=False, screenshot_delay_s=0.0)
    assert d.screenshot().convert("L").getextrema() != (0, 0)


def test_anr_dialog_in_hierarchy(phone: VirtualPhone, d) -> None:  # noqa: ANN001
    d.app_start("com.chinamworld.main")
    phone.set_faults(anr=True)
    try:
        assert d(textContains="isn't responding").exists
        d(text="Wait").click()
        assert not phone.faults.anr
        assert not d(textContains="isn't responding").exists
    finally:
        phone.set_faults(anr=False)
        d.app_stop("com.chinamworld.main")


def test_version_drift_and_logged_out(phone: VirtualPhone, d) -> None:  # noqa: ANN001
    phone.set_faults(versions={"com.MobileTicket": "5.9.0.1"}, logged_out=["com.MobileTicket"])
    try:
        assert d.app_info("com.MobileTicket")["versionName"] == "5.9.0.1"
        d.app_start("com.MobileTicket")
        assert d(resourceId="com.MobileTicket:id/login_button").exists
    finally:
        phone.set_faults(versions={}, logged_out=[])
        d.app_stop("com.MobileTicket")


def test_killed_server_is_restarted_by_u2(phone: VirtualPhone, d) -> None:  # noqa: ANN001
    starts = phone.uia_starts
    assert phone.kill_uiautomator()
    assert d.info["screenOn"] is True  # u2: HTTP error -> stop, start server, retry once
    assert phone.uia_starts == starts + 1 and phone.uia_running


def test_dropped_connection_raises_then_adb_reconnects(host: VirtualPhoneHost) -> None:
    phone = host.phones[1]
    d2 = u2.connect(phone.serial)
    phone.set_faults(drop_after_steps=1)
    drops = phone.drops
    d2.click(10, 10)  # the step happens, then the cable goes
    # Wait for what a fixed sleep only hoped for: the phone dropped the link and the adb server
    # no longer lists it as a usable device (it retries TCP devices only seconds later).
    _wait_until(lambda: phone.drops > drops, "the phone never dropped its ADB connection")
    _wait_until(lambda: _adb_state(phone.serial) != "device", "the adb server never saw the drop")
    with pytest.raises(adbutils.AdbError, match="offline|not found"):
        d2.click(20, 20)
    deadline = time.time() + 10
    while time.time() < deadline:  # the adb server reconnects TCP devices by itself
        try:
            assert d2.info["displayWidth"] == 1080
            break
        except (adbutils.AdbError, u2.exceptions.BaseException):
            time.sleep(0.3)
    else:
        pytest.fail("adb server did not reconnect the phone")


def _adb_state(serial: str) -> str | None:
    """The adb server's state of a device ("device", "offline"...), None when it is not listed."""
    return next((info.state for info in adbutils.adb.list() if info.serial == serial), None)


def _wait_until(condition: Callable[[], bool], failure: str, timeout_s: float = 15.0) -> None:
    deadline = time.monotonic() + timeout_s
    while not condition():
        if time.monotonic() > deadline:
            pytest.fail(failure)
        time.sleep(0.02)


def test_drop_mid_request_surfaces_as_remote_disconnected(host: VirtualPhoneHost) -> None:
    phone = host.phones[1]
    d2 = u2.connect(phone.serial)
    phone.set_faults(screenshot_delay_s=1.0)
    try:
        import threading

        threading.Timer(0.3, phone.drop_connection).start()
        with pytest.raises((http.client.RemoteDisconnected, ConnectionError)):
            d2.screenshot()
    finally:
        phone.set_faults(screenshot_delay_s=0.0)


def test_cli_up_ls_down(adb_server_port: int, tmp_path: Path) -> None:
    env = {**os.environ, "ANDROID_ADB_SERVER_PORT": str(adb_server_port), "XDG_RUNTIME_DIR": str(tmp_path)}
    cli = [sys.executable, "-m", "realbench", "vphone"]
    up = subprocess.run(
        [*cli, "up", "-n", "2", "--screens", "static", "--json"],
        env=env,
        capture_output=True,
        text=True,
        timeout=60,
    )
    assert up.returncode == 0, up.stderr
    record = json.loads(up.stdout)
    serials = [p["serial"] for p in record["phones"]]
    try:
        devices = subprocess.run(
            ["adb", "devices"], env=env, capture_output=True, text=True, timeout=10
        ).stdout
        assert all(f"{s}\tdevice" in devices for s in serials)
        dev = adbutils.AdbClient(port=adb_server_port).device(serials[1])
        assert dev.shell("getprop ro.realbench.device_kind") == "virtual-phone"
        ls = subprocess.run([*cli, "ls", "--json"], env=env, capture_output=True, text=True, timeout=30)
        hosts = json.loads(ls.stdout)
        assert hosts[0]["alive"] and [p["alive"] for p in hosts[0]["phones"]] == [True, True]
    finally:
        down = subprocess.run([*cli, "down"], env=env, capture_output=True, text=True, timeout=60)
    assert down.returncode == 0, down.stderr
    devices = subprocess.run(["adb", "devices"], env=env, capture_output=True, text=True, timeout=10).stdout
    assert not any(s in devices for s in serials)
    from devices.virtual.cli import pid_alive

    assert not pid_alive(record["pid"])


def test_screenshot_is_jpeg_from_takeScreenshot(d) -> None:  # noqa: ANN001,N802
    import base64

    raw = base64.b64decode(d.jsonrpc.takeScreenshot(1, 80))
    assert raw[:2] == b"\xff\xd8"
    from PIL import Image

    with Image.open(io.BytesIO(raw)) as img:
        assert img.size == (1080, 2400)


def test_screen_off_locks_and_u2_unlock_unlocks(phone: VirtualPhone, d) -> None:  # noqa: ANN001
    dev = adbutils.adb.device(phone.serial)
    d.screen_off()
    assert d.info["screenOn"] is False
    assert "mShowingLockscreen=true" in dev.shell(["dumpsys", "window"])
    d.unlock()  # uiautomator2: POWER key when the screen is off, then a swipe up
    assert d.info["screenOn"] is True
    assert "mShowingLockscreen=false" in dev.shell(["dumpsys", "window"])
    phone.set_faults(locked=True)
    assert (
        Hierarchy(d.dump_hierarchy()).find_one(Selector(resource_id="keyguard_indication_text")) is not None
    )
    dev.shell(["wm", "dismiss-keyguard"])
    assert not phone.faults.locked


def test_adbutils_screencap_and_reverse_rules(phone: VirtualPhone) -> None:
    dev = adbutils.adb.device(phone.serial)
    assert dev.screenshot().size == (1080, 2400)  # `screencap -p` PNG over shell v1
    dev.reverse("tcp:18765", "tcp:18765")
    assert [(r.remote, r.local) for r in dev.reverse_list()] == [("tcp:18765", "tcp:18765")]
    dev.reverse_remove_all()
    assert dev.reverse_list() == []
