"""Virtual phone without the adb server: ADB framing and flow control over a raw socket, the shell,
sync file system, UI state (dialogs, faults) and the control channel. The tests through the real
adb server, adbutils and uiautomator2 are in test_vphone_farm.py."""

from __future__ import annotations

import asyncio
import hashlib
import io
import json
import socket
import struct
import time
import xml.etree.ElementTree as ET
from collections.abc import Iterator

import pytest
from PIL import Image

from devices.virtual import Faults, InputKind, PhoneControl, VirtualPhoneHost
from devices.virtual.adb_transport import HEADER, Command, Message
from devices.virtual.model import EventLog, InputSource, VirtualPhoneSpec
from devices.virtual.phone import VirtualPhone
from devices.virtual.phone_ui import PhoneUI, canonical_key
from devices.virtual.screen import StaticAppScreen
from devices.virtual.shell import split_commands
from devices.virtual.sync_service import MemoryFS
from realbench.errors import ConfigError, DeviceError
from realbench.hierarchy import Hierarchy, Selector

# --- a minimal host side of the ADB transport, to test the device side byte for byte ---------------


class RawHost:
    def __init__(self, port: int, max_payload: int = 4096) -> None:
        self.sock = socket.create_connection(("127.0.0.1", port), timeout=5)
        self.max_payload = max_payload
        self.next_id = 100

    def send(self, command: int, arg0: int, arg1: int, data: bytes = b"") -> None:
        self.sock.sendall(Message(command, arg0, arg1, data).encode())

    def recv(self) -> Message:
        header = self._exact(HEADER.size)
        command, arg0, arg1, length, checksum, magic = HEADER.unpack(header)
        data = self._exact(length)
        assert magic == command ^ 0xFFFFFFFF
        assert checksum == sum(data) & 0xFFFFFFFF
        return Message(command, arg0, arg1, data)

    def _exact(self, n: int) -> bytes:
        buf = b""
        while len(buf) < n:
            chunk = self.sock.recv(n - len(buf))
            if not chunk:
                raise ConnectionError("closed")
            buf += chunk
        return buf

    def handshake(self) -> Message:
        self.send(Command.CNXN, 0x01000001, self.max_payload, b"host::features=shell_v2,cmd\0")
        return self.recv()

    def open(self, service: str) -> tuple[int, Message]:
        self.next_id += 1
        self.send(Command.OPEN, self.next_id, 0, service.encode() + b"\0")
        return self.next_id, self.recv()

    def read_all(self, local_id: int, ack: bool = True) -> tuple[bytes, list[int]]:
        """Read WRTEs until CLSE, acknowledging each; returns the bytes and each WRTE's size."""
        out, sizes = b"", []
        while True:
            msg = self.recv()
            if msg.command == Command.CLSE:
                return out, sizes
            assert msg.command == Command.WRTE and msg.arg1 == local_id
            out += msg.data
            sizes.append(len(msg.data))
            if ack:
                self.send(Command.OKAY, local_id, msg.arg0)

    def close(self) -> None:
        self.sock.close()


@pytest.fixture(scope="module")
def host() -> Iterator[VirtualPhoneHost]:
    with VirtualPhoneHost() as h:
        h.start(1, screens="static")
        yield h


@pytest.fixture()
def phone(host: VirtualPhoneHost) -> VirtualPhone:
    return host.phones[0]


def test_message_encoding_has_checksum_and_magic() -> None:
    raw = Message(Command.WRTE, 1, 2, b"abc").encode()
    command, a0, a1, length, checksum, magic = HEADER.unpack(raw[:24])
    assert (command, a0, a1, length) == (Command.WRTE, 1, 2, 3)
    assert checksum == ord("a") + ord("b") + ord("c")
    assert magic == Command.WRTE ^ 0xFFFFFFFF
    assert raw[24:] == b"abc"


def test_handshake_banner_and_port_outside_emulator_range(phone: VirtualPhone) -> None:
    assert phone.port not in range(5555, 5586)
    raw = RawHost(phone.port)
    try:
        reply = raw.handshake()
        assert reply.command == Command.CNXN
        assert reply.arg0 == 0x01000001 and reply.arg1 <= 1024 * 1024
        banner = reply.data.decode()
        assert banner.startswith("device::ro.product.name=")
        assert "features=" in banner and "shell_v2" not in banner
    finally:
        raw.close()


def test_shell_stream_with_flow_control_and_small_maxdata(phone: VirtualPhone) -> None:
    raw = RawHost(phone.port, max_payload=256)
    try:
        raw.handshake()
        local_id, okay = raw.open("shell:screencap -p")
        assert okay.command == Command.OKAY and okay.arg1 == local_id
        # One WRTE in flight: without our OKAY the phone must not send a second one.
        first = raw.recv()
        assert first.command == Command.WRTE and len(first.data) == 256
        raw.sock.settimeout(0.3)
        with pytest.raises(TimeoutError):
            raw.recv()
        raw.sock.settimeout(5)
        raw.send(Command.OKAY, local_id, first.arg0)
        rest, sizes = raw.read_all(local_id)
        png = first.data + rest
        assert max(sizes) <= 256
        with Image.open(io.BytesIO(png)) as img:
            assert img.size == (phone.spec.identity.width, phone.spec.identity.height)
    finally:
        raw.close()


def test_refuses_uiautomator_port_until_server_runs_and_unknown_services(phone: VirtualPhone) -> None:
    raw = RawHost(phone.port)
    try:
        raw.handshake()
        for service in ("tcp:9008", "jdwp:1", "framebuffer:"):
            local_id, reply = raw.open(service)
            assert reply.command == Command.CLSE and reply.arg0 == 0 and reply.arg1 == local_id
    finally:
        raw.close()


def test_sync_send_stat_recv_roundtrip(phone: VirtualPhone) -> None:
    payload = bytes(range(256)) * 700  # 179 KB: several DATA chunks
    raw = RawHost(phone.port, max_payload=4096)
    try:
        raw.handshake()
        local_id, _ = raw.open("sync:")

        def send(data: bytes) -> None:
            for start in range(0, len(data), 4096):
                raw.send(Command.WRTE, local_id, 1, data[start : start + 4096])
                assert raw.recv().command == Command.OKAY

        def reply() -> bytes:
            msg = raw.recv()
            raw.send(Command.OKAY, local_id, msg.arg0)
            return msg.data

        path = b"/data/local/tmp/blob.bin,33188"
        body = b"SEND" + struct.pack("<I", len(path)) + path
        for start in range(0, len(payload), 60000):
            chunk = payload[start : start + 60000]
            body += b"DATA" + struct.pack("<I", len(chunk)) + chunk
        send(body + b"DONE" + struct.pack("<I", 1_700_000_000))
        assert reply() == b"OKAY" + b"\0\0\0\0"
        stat_path = b"/data/local/tmp/blob.bin"
        send(b"STAT" + struct.pack("<I", len(stat_path)) + stat_path)
        answer = reply()
        assert answer[:4] == b"STAT" and len(answer) == 16
        mode, size, mtime = struct.unpack("<III", answer[4:])
        assert size == len(payload) and mtime == 1_700_000_000 and mode & 0o100000
        missing = b"/nope"
        send(b"STAT" + struct.pack("<I", len(missing)) + missing)
        assert reply() == b"STAT" + b"\0" * 12
        send(b"RECV" + struct.pack("<I", len(stat_path)) + stat_path)
        received = b""
        while not received.endswith(b"DONE\0\0\0\0") or len(received) < len(payload):
            received += reply()
        data, pos = b"", 0
        while received[pos : pos + 4] == b"DATA":
            (n,) = struct.unpack("<I", received[pos + 4 : pos + 8])
            data += received[pos + 8 : pos + 8 + n]
            pos += 8 + n
        assert data == payload
        assert phone.fs.get("/data/local/tmp/blob.bin") is not None
    finally:
        raw.close()


def test_shell_split_and_exit_code_suffix() -> None:
    parts = split_commands("toybox md5sum '/a b'; echo X4EXIT:$? && x || y")
    assert parts == [
        (";", ["toybox", "md5sum", "/a b"]),
        (";", ["echo", "X4EXIT:$?"]),
        ("&&", ["x"]),
        ("||", ["y"]),
    ]


def test_shell_commands(phone: VirtualPhone) -> None:
    def run(line: str) -> str:
        return asyncio.run(phone.shell.run(line)).decode()

    phone.fs.put("/data/local/tmp/x", b"hello")
    assert (
        run("toybox md5sum /data/local/tmp/x; echo X4EXIT:$?")
        == f"{hashlib.md5(b'hello').hexdigest()}  /data/local/tmp/x\nX4EXIT:0\n"
    )
    assert run("toybox md5sum /missing; echo X4EXIT:$?").endswith("X4EXIT:1\n")
    assert run("nosuchcmd; echo X4EXIT:$?").endswith("X4EXIT:127\n")
    assert run("wm size") == "Physical size: 1080x2400\n"
    assert "orientation=0" in run("dumpsys display")
    assert "versionName=5.8.0.8" in run("dumpsys package com.MobileTicket")
    assert run("pm path com.nope; echo X4EXIT:$?") == "X4EXIT:1\n"
    assert "package:com.chinamworld.main" in run("pm list packages -3")
    assert run("getprop ro.build.version.sdk") == "33\n"
    assert run("settings get secure default_input_method").strip() == phone.spec.identity.ime
    assert "/data" in run("df /data")
    assert run("echo -n a b") == "a b"


def test_key_names() -> None:
    assert canonical_key("KEYCODE_BACK") == "back"
    assert canonical_key("4") == "back"
    assert canonical_key("HOME") == "home"
    assert canonical_key("delete") == "del"


def _ui(faults: Faults | None = None) -> PhoneUI:
    spec = VirtualPhoneSpec()
    ident = spec.identity
    return PhoneUI(
        spec, faults or Faults(), EventLog(), lambda pkg: StaticAppScreen(pkg, ident.width, ident.height, "1")
    )


def test_launcher_icon_tap_starts_app_and_back_goes_home() -> None:
    ui = _ui()
    tree = Hierarchy(ui.hierarchy())
    icon = tree.find_one(Selector(text="铁路12306"))
    assert icon is not None and icon.clickable
    event = ui.tap(*icon.bounds.center, InputSource.SHELL, "input tap")
    assert event.node is not None and event.node.text == "铁路12306"
    assert ui.foreground == "com.MobileTicket"
    assert Hierarchy(ui.hierarchy()).find_one(Selector(text="车票预订")) is not None
    ui.key("back", InputSource.JSONRPC, "pressKey")
    assert ui.foreground == "com.android.launcher3"
    assert [e.kind for e in ui.events.events()] == [InputKind.TAP, InputKind.KEY]


def test_anr_dialog_is_modal_and_wait_dismisses_it() -> None:
    faults = Faults(anr=True)
    ui = _ui(faults)
    assert ui.start_app("com.chinamworld.main")
    tree = Hierarchy(ui.hierarchy())
    assert tree.find_one(Selector(text_contains="isn't responding")) is not None
    menu = tree.find_one(Selector(text="转账汇款"))
    assert menu is not None
    ui.tap(*menu.bounds.center, InputSource.JSONRPC, "click")  # under the dialog: must not reach the app
    assert Hierarchy(ui.hierarchy()).find_one(Selector(text="转账汇款 页面")) is None
    wait = Hierarchy(ui.hierarchy()).find_one(Selector(text="Wait"))
    assert wait is not None
    ui.tap(*wait.bounds.center, InputSource.JSONRPC, "click")
    assert not faults.anr
    assert Hierarchy(ui.hierarchy()).find_one(Selector(text_contains="isn't responding")) is None


def test_logged_out_wall_and_black_screenshots() -> None:
    faults = Faults(logged_out=["com.MobileTicket"], black_screenshots=True)
    ui = _ui(faults)
    ui.start_app("com.MobileTicket")
    tree = Hierarchy(ui.hierarchy())
    assert tree.find_one(Selector(resource_id="login_button")) is not None
    assert tree.find_one(Selector(text="车票预订")) is None
    img = ui.screenshot()
    assert img.getextrema() == ((0, 0), (0, 0), (0, 0))
    faults.black_screenshots = False
    assert ui.screenshot().getextrema() != ((0, 0), (0, 0), (0, 0))


def test_text_goes_to_focused_field_only() -> None:
    ui = _ui()
    ui.start_app("com.MobileTicket")
    ui.text("ignored", InputSource.JSONRPC, "pasteClipboard")
    field = Hierarchy(ui.hierarchy()).find_one(Selector(resource_id="search"))
    assert field is not None
    ui.tap(*field.bounds.center, InputSource.JSONRPC, "click")
    ui.text("北京", InputSource.JSONRPC, "pasteClipboard")
    field = Hierarchy(ui.hierarchy()).find_one(Selector(resource_id="search"))
    assert field is not None and field.text == "北京" and field.focused


def test_hierarchy_has_android_attributes() -> None:
    root = ET.fromstring(_ui().hierarchy())
    assert root.tag == "hierarchy"
    node = next(root.iter("node"))
    for attr in (
        "index",
        "text",
        "resource-id",
        "class",
        "package",
        "content-desc",
        "checkable",
        "checked",
        "clickable",
        "enabled",
        "focusable",
        "focused",
        "scrollable",
        "long-clickable",
        "password",
        "selected",
        "bounds",
    ):
        assert attr in node.attrib


def test_memory_fs() -> None:
    fs = MemoryFS()
    fs.put("/data/local/tmp/a/b.txt", b"x")
    assert fs.is_dir("/data/local/tmp/a")
    assert fs.listdir("/data/local/tmp") == ["a"]
    assert fs.stat("/data/local/tmp/a/b.txt")[1] == 1
    assert fs.remove("/data/local/tmp/a") and fs.get("/data/local/tmp/a/b.txt") is None


def test_control_channel_faults_events_and_errors(host: VirtualPhoneHost, phone: VirtualPhone) -> None:
    control = PhoneControl(host.info(phone).control_url)
    try:
        before = len(control.events())
        asyncio.run(phone.shell.run("input tap 10 20"))
        events = control.events(since=before)
        assert [(e.kind, e.x, e.y, e.source) for e in events] == [(InputKind.TAP, 10, 20, InputSource.SHELL)]
        faults = control.set_faults(versions={"com.MobileTicket": "9.9.9"}, screenshot_delay_s=0.0)
        assert faults.versions == {"com.MobileTicket": "9.9.9"}
        assert (
            "versionName=9.9.9" in asyncio.run(phone.shell.run("dumpsys package com.MobileTicket")).decode()
        )
        assert control.state()["device_kind"] == "virtual-phone"
        with pytest.raises(DeviceError):
            control.set_faults(screenshot_delay_s=-1)
        assert control.kill_uiautomator() is False  # not running
    finally:
        phone.set_faults(versions={})
        control.close()


def test_host_rejects_bad_config(host: VirtualPhoneHost) -> None:
    with pytest.raises(ConfigError):
        host.start(1, apps=["com.unknown.app"], screens="static")
    with pytest.raises(ConfigError):
        host.start(2, drift=["none"], screens="static")


def test_drop_after_seconds_and_offline_faults(phone: VirtualPhone) -> None:
    raw = RawHost(phone.port)
    try:
        raw.handshake()
        phone.set_faults(drop_after_seconds=0.2)
        t0 = time.monotonic()
        with pytest.raises((ConnectionError, OSError)):
            raw.recv()  # the phone closes the TCP connection: what a pulled cable looks like
        assert time.monotonic() - t0 < 3
        assert phone.faults.drop_after_seconds is None  # one-shot
    finally:
        raw.close()
    phone.set_faults(offline=True)
    try:
        with pytest.raises(OSError):
            RawHost(phone.port).handshake()
    finally:
        phone.set_faults(offline=False)
    raw = RawHost(phone.port)
    try:
        assert raw.handshake().command == Command.CNXN
    finally:
        raw.close()


class _BrokenScreen(StaticAppScreen):
    """An app screen whose renderer fails (e.g. the clone server errors)."""

    def start(self) -> None:
        if self.package == "com.chinamworld.main":
            raise DeviceError("clone server answered 500")
        super().start()

    def screenshot(self) -> Image.Image:
        raise DeviceError("page crashed")


def test_failing_app_screen_gives_errors_not_dead_streams() -> None:
    phone = VirtualPhone(VirtualPhoneSpec(), screens=lambda p, pkg: _BrokenScreen(pkg, 1080, 2400, "1"))

    async def scenario() -> tuple[str, dict[str, object]]:
        out = await phone.shell.run(
            "monkey -p com.chinamworld.main -c android.intent.category.LAUNCHER 1; echo X4EXIT:$?"
        )
        await phone.shell.run("monkey -p com.MobileTicket -c android.intent.category.LAUNCHER 1")
        reply = await phone.uia.handle_jsonrpc(
            b'{"jsonrpc": "2.0", "id": 1, "method": "takeScreenshot", "params": [1, 80]}'
        )
        await phone.stop()
        return out.decode(), json.loads(reply)

    out, reply = asyncio.run(scenario())
    assert "clone server answered 500" in out and out.endswith("X4EXIT:1\n")
    assert reply["error"]["code"] == -32000 and "page crashed" in reply["error"]["message"]  # type: ignore[index]


def test_host_per_phone_profiles_and_validation(host: VirtualPhoneHost) -> None:
    infos = host.start(2, screens="static", profile=["xiaomi-miui", "huawei-emui"], drift=["none", "mild"])
    first, second = (host.phone(i.serial) for i in infos)
    assert first.spec.identity.ime.startswith("com.sohu.inputmethod")
    assert (second.spec.identity.width, second.spec.identity.height) == (1080, 2340)
    assert asyncio.run(second.shell.run("wm size")) == b"Physical size: 1080x2340\n"
    assert first.spec.identity.serialno != second.spec.identity.serialno
    with pytest.raises(ConfigError):
        host.start(1, drift="stormy", screens="static")
    with pytest.raises(ConfigError):
        host.start(1, faults={"screenshot_delay_s": -1}, screens="static")


def test_custom_app_screens_via_public_api(host: VirtualPhoneHost) -> None:
    made: list[str] = []

    def maker(phone: VirtualPhone, package: str) -> StaticAppScreen:
        made.append(package)
        return StaticAppScreen(package, 1080, 2400, "test")

    (info,) = host.start(1, screens=maker)
    phone = host.phone(info.serial)
    asyncio.run(phone.shell.run("monkey -p com.MobileTicket 1"))
    assert made == ["com.MobileTicket"]
    phone.set_screens(maker)  # drops the app built so far; the next start builds a new one
    assert phone.state()["foreground"] == "com.android.launcher3"
    asyncio.run(phone.shell.run("monkey -p com.MobileTicket 1"))
    assert made == ["com.MobileTicket", "com.MobileTicket"]


def test_invalid_fault_patch_is_a_config_error(phone: VirtualPhone) -> None:
    before = phone.faults.model_copy(deep=True)
    with pytest.raises(ConfigError, match="invalid faults"):
        phone.set_faults(no_such_fault=True, anr=True)
    assert phone.faults == before  # nothing of a refused patch is applied


class _DrawnJpegScreen(StaticAppScreen):
    """A static screen that also hands out the JPEG its renderer drew (as the clone screens do)."""

    def __init__(self, *args: object) -> None:
        super().__init__(*args)  # type: ignore[arg-type]
        buf = io.BytesIO()
        self.screenshot().save(buf, format="JPEG", quality=80)
        self.drawn = buf.getvalue()

    def screenshot_jpeg(self, quality: int) -> bytes | None:
        return self.drawn if quality == 80 else None


def test_a_screenshot_is_the_renderers_jpeg_only_when_nothing_is_drawn_over_it() -> None:
    faults = Faults()
    spec = VirtualPhoneSpec()
    ident = spec.identity
    ui = PhoneUI(spec, faults, EventLog(), lambda pkg: _DrawnJpegScreen(pkg, ident.width, ident.height, "1"))
    assert ui.start_app("com.chinamworld.main")
    drawn = ui.source().screenshot_jpeg(80)  # type: ignore[attr-defined]
    assert ui.jpeg(80) == drawn
    assert ui.jpeg(60) != drawn  # another quality: encoded here
    half = Image.open(io.BytesIO(ui.jpeg(80, scale=0.5)))
    assert half.size == (ident.width // 2, ident.height // 2)
    overlays = {
        "anr": lambda on: setattr(faults, "anr", on),
        "logged out": lambda on: setattr(faults, "logged_out", ["com.chinamworld.main"] if on else []),
        "black": lambda on: setattr(faults, "black_screenshots", on),
        "locked": lambda on: setattr(faults, "locked", on),
        "screen off": lambda on: setattr(ui, "screen_on", not on),
    }
    for name, switch in overlays.items():
        switch(True)
        try:
            shot = ui.jpeg(80)
            assert shot != drawn, name
            expected = io.BytesIO()
            ui.screenshot().save(expected, format="JPEG", quality=80)
            assert shot == expected.getvalue(), name
        finally:
            switch(False)
    assert ui.jpeg(80) == drawn
