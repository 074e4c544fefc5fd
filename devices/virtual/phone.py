"""One virtual phone: an ADB endpoint on loopback, its services, its UI thread, faults and event log.

The transport and services run on the host's asyncio loop; everything that touches the screen runs
on the phone's own UI thread (one worker), so a slow screen (Chromium) never blocks other phones.
Public methods without `async` are safe to call from any thread.
"""

from __future__ import annotations

import asyncio
import collections
import concurrent.futures
import contextlib
import logging
import zlib
from collections.abc import Callable
from typing import Any, TypeVar

from pydantic import ValidationError

from devices.virtual import shell_session
from devices.virtual.adb_transport import AdbConnection, AdbStream, ServiceHandler, device_banner
from devices.virtual.model import (
    APP_CLONES,
    BROWSER_PACKAGE,
    DEFAULT_APP_VERSIONS,
    LAUNCHER_PACKAGE,
    EventLog,
    Faults,
    InputEvent,
    VirtualPhoneSpec,
)
from devices.virtual.phone_ui import PhoneUI
from devices.virtual.scrcpy_server import ScrcpyServers, is_scrcpy_launch
from devices.virtual.screen import ScreenSource, StaticAppScreen
from devices.virtual.shell import Shell, is_uiautomator_launch
from devices.virtual.sync_service import MemoryFS, serve_sync
from devices.virtual.uia_server import UiautomatorServer
from realbench.errors import ConfigError, ServerError

log = logging.getLogger(__name__)
T = TypeVar("T")

EMULATOR_PORTS = range(5555, 5586)  # the adb server probes these for emulators: stay out
UIA_BANNER = b"[server] INFO: [UiAutomator2Server] Starting Server\n"
UIA_ALREADY = b"java.lang.IllegalStateException: UiAutomationService android.accessibilityservice.IAccessibilityServiceClient$Stub$Proxy@5deffd5already registered!\n"
SYSTEM_PACKAGES = (
    "android",
    "com.android.settings",
    LAUNCHER_PACKAGE,
    "com.android.inputmethod.latin",
    "com.android.systemui",
)
ScreenMaker = Callable[["VirtualPhone", str], ScreenSource]


def static_screens(phone: VirtualPhone, package: str) -> ScreenSource:
    ident = phone.spec.identity
    return StaticAppScreen(package, ident.width, ident.height, phone.app_version(package) or "")


class VirtualPhone:
    def __init__(
        self, spec: VirtualPhoneSpec, screens: ScreenMaker | None = None, name: str = "vphone"
    ) -> None:
        self.spec = spec
        self.name = name
        self.faults = spec.faults.model_copy(deep=True)
        self.events = EventLog()
        # When each hierarchy dump served over JSON-RPC read the screen (not the phone's own reads).
        self.dump_times: collections.deque[float] = collections.deque(maxlen=4096)
        self.dumps_served = 0
        self.fs = MemoryFS()
        self._screens = screens or static_screens
        self.ui = PhoneUI(spec, self.faults, self.events, lambda pkg: self._screens(self, pkg))
        self.shell = Shell(self)
        self.uia = UiautomatorServer(self)
        self.scrcpy = ScrcpyServers(self)
        self._ui_thread = concurrent.futures.ThreadPoolExecutor(
            max_workers=1, thread_name_prefix=f"{name}-ui"
        )
        self.loop: asyncio.AbstractEventLoop | None = None
        self.port = 0
        self._server: asyncio.Server | None = None
        self.connections: set[AdbConnection] = set()
        self._conn_tasks: set[asyncio.Task[None]] = set()
        self.uia_running = False
        self.uia_port = 9008
        self._uia_stream: AdbStream | None = None
        self.uia_starts = 0
        self.drops = 0
        self._steps_baseline = 0
        self._drop_timer: asyncio.TimerHandle | None = None
        self.imes = [spec.identity.ime]
        self.ime_current = spec.identity.ime
        self.settings: dict[tuple[str, str], str] = {}
        self.browser_package = BROWSER_PACKAGE
        self.browser_url: str | None = None
        self.free_storage_kb = 52_000_000
        self.reverse_rules: dict[str, str] = {}

    # --- lifecycle (on the loop) ------------------------------------------------------------------

    async def start(self, port: int = 0) -> int:
        self.loop = asyncio.get_running_loop()
        for _ in range(20):
            self._server = await asyncio.start_server(self._accept, "127.0.0.1", port)
            self.port = self._server.sockets[0].getsockname()[1]
            if self.port not in EMULATOR_PORTS:
                break
            self._server.close()
            await self._server.wait_closed()
            port = 0
        else:
            raise ServerError("could not bind a port outside 5555-5585", hint="free some local ports")
        self._arm_faults()
        if self.faults.offline:
            await self._go_offline()
        log.info("%s listening on 127.0.0.1:%d", self.name, self.port)
        return self.port

    async def stop(self) -> None:
        if self._drop_timer is not None:
            self._drop_timer.cancel()
        if self._server is not None:
            self._server.close()
            with contextlib.suppress(Exception):
                await self._server.wait_closed()
        await self.drop_connections_async()
        for task in list(self._conn_tasks):
            task.cancel()
        await asyncio.get_running_loop().run_in_executor(self._ui_thread, self.ui.close)
        self._ui_thread.shutdown(wait=False)

    @property
    def serial(self) -> str:
        return f"127.0.0.1:{self.port}"

    async def _accept(self, reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        if self.faults.offline:
            writer.close()
            return
        ident = self.spec.identity
        conn = AdbConnection(
            reader, writer, device_banner(ident.product_name, ident.model, ident.device), self.route
        )
        self.connections.add(conn)
        task = asyncio.current_task()
        if task is not None:
            self._conn_tasks.add(task)
        try:
            await conn.serve()
        finally:
            self.connections.discard(conn)
            if task is not None:
                self._conn_tasks.discard(task)

    # --- services ---------------------------------------------------------------------------------

    def route(self, service: str) -> ServiceHandler | None:
        if service.startswith("shell:"):
            line = service[len("shell:") :]
            return lambda stream: self._shell(stream, line)
        if service == "sync:":
            return lambda stream: serve_sync(stream, self.fs)
        if service.startswith("reverse:"):
            command = service[len("reverse:") :]
            return lambda stream: self._reverse(stream, command)
        if service.startswith("localabstract:"):
            return self.scrcpy.route(service)  # type: ignore[no-any-return]
        if service.startswith("tcp:"):
            port = service[len("tcp:") :].split(":")[-1]
            if self.uia_running and port == str(self.uia_port):
                return self.uia.serve
            return None
        return None

    async def _reverse(self, stream: AdbStream, command: str) -> None:
        """`adb reverse`, answered as adbd does. Nothing is forwarded: the phone's apps (Chromium
        pages) run on this machine, so the phone's localhost already is the host's loopback."""
        if command == "list-forward":
            listing = "".join(
                f"{self.serial} {remote} {local}\n" for remote, local in self.reverse_rules.items()
            )
            data = listing.encode()
            await stream.write(f"{len(data):04x}".encode() + data)
        elif command == "killforward-all":
            self.reverse_rules.clear()
            await stream.write(b"OKAY")
        elif command.startswith("killforward:"):
            if self.reverse_rules.pop(command.split(":", 1)[1], None) is None:
                message = b"listener not found"
                await stream.write(b"FAIL" + f"{len(message):04x}".encode() + message)
            else:
                await stream.write(b"OKAY")
        elif command.startswith("forward:"):
            spec = command[len("forward:") :].removeprefix("norebind:")
            remote, _, local = spec.partition(";")
            if not remote or not local:
                message = b"malformed forward spec"
                await stream.write(b"FAIL" + f"{len(message):04x}".encode() + message)
                return
            self.reverse_rules[remote] = local
            await stream.write(b"OKAY")
        else:
            message = f"unknown reverse command {command}".encode()
            await stream.write(b"FAIL" + f"{len(message):04x}".encode() + message)

    async def _shell(self, stream: AdbStream, line: str) -> None:
        if is_uiautomator_launch(line):
            await self._run_uiautomator(stream, line)
            return
        if is_scrcpy_launch(line):
            await self.scrcpy.launch(stream, line)
            return
        if shell_session.handles(line):
            await shell_session.serve_session(self, stream, line)
            return
        output = await self.shell.run(line)
        if output:
            await stream.write(output)

    async def _run_uiautomator(self, stream: AdbStream, line: str) -> None:
        if self.fs.get("/data/local/tmp/u2.jar") is None:
            await stream.write(b"Error: Could not find or load main class com.wetest.uia2.Main\n")
            return
        if self.uia_running:
            await stream.write(UIA_ALREADY)
            return
        words = line.split()
        if "-p" in words and words.index("-p") + 1 < len(words):
            self.uia_port = int(words[words.index("-p") + 1])
        self.uia_running = True
        self.uia_starts += 1
        self._uia_stream = stream
        try:
            await stream.write(UIA_BANNER)
            await stream.wait_closed_by_peer()  # the host closing the stream kills app_process
        finally:
            if self._uia_stream is stream:
                self.uia_running = False
                self._uia_stream = None

    # --- helpers for services -------------------------------------------------------------------

    async def ui_call(self, fn: Callable[..., T], *args: Any) -> T:
        loop = asyncio.get_running_loop()
        return await loop.run_in_executor(self._ui_thread, fn, *args)

    async def input_call(self, fn: Callable[..., InputEvent], *args: Any) -> InputEvent:
        event = await self.ui_call(fn, *args)
        limit = self.faults.drop_after_steps
        if limit is not None and self.events.steps - self._steps_baseline >= limit:
            self.faults.drop_after_steps = None
            log.info("%s: dropping the connection after %d steps (fault)", self.name, limit)
            # After the reply is on its way: the step happened, then the cable went.
            asyncio.get_running_loop().call_later(
                0.05, lambda: asyncio.ensure_future(self.drop_connections_async())
            )
        return event

    async def screenshot_delay(self) -> None:
        if self.faults.screenshot_delay_s > 0:
            await asyncio.sleep(self.faults.screenshot_delay_s)

    def app_version(self, package: str) -> str | None:
        if package in self.faults.versions:
            return self.faults.versions[package]
        if package in self.spec.apps:
            return self.spec.app_versions.get(package) or DEFAULT_APP_VERSIONS.get(package, "1.0.0")
        if package in SYSTEM_PACKAGES:
            return self.spec.identity.release
        return None

    def packages(self, third_party: bool = False) -> list[str]:
        apps = list(self.spec.apps)
        return apps if third_party else [*SYSTEM_PACKAGES, *apps]

    def pid_of(self, package: str) -> int:
        return 2000 + zlib.crc32(package.encode()) % 28000

    def props(self) -> dict[str, str]:
        ident = self.spec.identity
        return {
            "ro.serialno": ident.serialno,
            "ro.product.name": ident.product_name,
            "ro.product.model": ident.model,
            "ro.product.device": ident.device,
            "ro.product.brand": ident.brand,
            "ro.product.manufacturer": ident.manufacturer,
            "ro.product.cpu.abi": "x86_64",
            "ro.build.version.sdk": str(ident.sdk),
            "ro.build.version.release": ident.release,
            "ro.build.characteristics": "virtual-phone",
            "ro.kernel.qemu": "0",
            "ro.realbench.device_kind": "virtual-phone",
            "ro.sf.lcd_density": str(ident.density),
            "sys.boot_completed": "1",
            "persist.sys.locale": "zh-CN",
        }

    # --- faults -----------------------------------------------------------------------------------

    def _arm_faults(self) -> None:
        if self._drop_timer is not None:
            self._drop_timer.cancel()
            self._drop_timer = None
        self._steps_baseline = self.events.steps
        seconds = self.faults.drop_after_seconds
        if seconds is not None and self.loop is not None:
            self._drop_timer = self.loop.call_later(seconds, self._drop_timer_fired)

    def _drop_timer_fired(self) -> None:
        self._drop_timer = None
        self.faults.drop_after_seconds = None
        log.info("%s: dropping the connection on timer (fault)", self.name)
        asyncio.ensure_future(self.drop_connections_async())

    async def set_faults_async(self, patch: dict[str, Any]) -> Faults:
        try:
            updated = Faults.model_validate({**self.faults.model_dump(), **patch})
        except ValidationError as exc:
            raise ConfigError(
                f"invalid faults for {self.name}: {exc}", hint="see the Faults fields in docs/vphone.md"
            ) from None
        was_offline = self.faults.offline

        def apply() -> None:
            for key, value in updated.model_dump().items():
                setattr(self.faults, key, value)

        await self.ui_call(apply)
        if {"drop_after_steps", "drop_after_seconds"} & patch.keys():
            self._arm_faults()
        if self.faults.offline and not was_offline:
            await self._go_offline()
        elif was_offline and not self.faults.offline:
            await self._go_online()
        return self.faults.model_copy(deep=True)

    async def _go_offline(self) -> None:
        if self._server is not None:
            self._server.close()
            self._server = None
        await self.drop_connections_async()

    async def _go_online(self) -> None:
        if self._server is None:
            self._server = await asyncio.start_server(self._accept, "127.0.0.1", self.port)

    async def drop_connections_async(self) -> int:
        conns = list(self.connections)
        for conn in conns:
            await conn.abort()
        self.drops += len(conns)
        return len(conns)

    async def kill_uiautomator_async(self) -> bool:
        stream = self._uia_stream
        if stream is None:
            return False
        self.uia_running = False
        self._uia_stream = None
        await stream.close()
        return True

    async def state_async(self) -> dict[str, Any]:
        ui_state = await self.ui_call(
            lambda: {
                "foreground": self.ui.foreground,
                "running": list(self.ui.running),
                "screen_on": self.ui.screen_on,
                "clipboard": self.ui.clipboard,
            }
        )
        return {
            "name": self.name,
            "serial": self.serial,
            "port": self.port,
            "device_kind": "virtual-phone",
            "identity": self.spec.identity.model_dump(),
            "drift": self.spec.drift,
            "apps": {
                pkg: {"clone": APP_CLONES.get(pkg), "version": self.app_version(pkg)}
                for pkg in self.spec.apps
            },
            "faults": self.faults.model_dump(),
            "uiautomator_running": self.uia_running,
            "uiautomator_starts": self.uia_starts,
            "connections": len(self.connections),
            "drops": self.drops,
            "events": len(self.events),
            "files": self.fs.listdir("/data/local/tmp"),
            "reverse": dict(self.reverse_rules),
            **ui_state,
        }

    async def provision_async(
        self, package: str, setup: dict[str, Any], params: dict[str, Any], episode: str | None = None
    ) -> None:
        def run() -> None:
            source = self.ui.source(package)
            provision = getattr(source, "provision", None)
            if provision is None:
                raise ConfigError(f"{package} on {self.name} shows static screens: it cannot be provisioned")
            if episode is None:
                provision(setup, params)
            else:
                provision(setup, params, episode=episode)

        await self.ui_call(run)

    async def app_state_async(self, package: str) -> dict[str, Any]:
        def run() -> dict[str, Any]:
            source = self.ui.apps.get(package)
            read = getattr(source, "app_state", None)
            if read is None:
                raise ConfigError(f"{package} on {self.name} is not running a clone")
            return read()  # type: ignore[no-any-return]

        return await self.ui_call(run)

    async def what_if_tap_async(self, package: str, x: int, y: int) -> dict[str, Any]:
        def run() -> dict[str, Any]:
            source = self.ui.apps.get(package)
            what_if = getattr(source, "what_if_tap", None)
            if what_if is None:
                raise ConfigError(f"{package} on {self.name} is not running a clone")
            return what_if(x, y)  # type: ignore[no-any-return]

        return await self.ui_call(run)

    # --- thread-safe wrappers -------------------------------------------------------------------

    def _sync(self, coro: Any) -> Any:
        if self.loop is None:
            coro.close()  # never scheduled: close it so it is not reported as never awaited
            raise ServerError(
                f"{self.name} is not started", hint="start phones with VirtualPhoneHost.start()"
            )
        return asyncio.run_coroutine_threadsafe(coro, self.loop).result(timeout=30)

    def set_faults(self, **patch: Any) -> Faults:
        """Change faults at run time, e.g. set_faults(anr=True) or set_faults(drop_after_steps=3)."""
        return self._sync(self.set_faults_async(patch))  # type: ignore[no-any-return]

    def kill_uiautomator(self) -> bool:
        """Kill the on-phone uiautomator server (its launch stream closes, tcp:9008 is refused)."""
        return self._sync(self.kill_uiautomator_async())  # type: ignore[no-any-return]

    def drop_connection(self) -> int:
        """Drop the ADB connection now (the host sees the device go offline, then may reconnect)."""
        return self._sync(self.drop_connections_async())  # type: ignore[no-any-return]

    def set_screens(self, maker: ScreenMaker) -> None:
        """Use another app-screen factory from now on (e.g. a test screen); apps already created
        are closed and stopped, so the next start builds them with `maker`."""

        def swap() -> None:
            self._screens = maker
            for package in list(self.ui.apps):
                self.ui.stop_app(package)
                self.ui.apps.pop(package).close()

        if self.loop is None:
            swap()
        else:
            self._sync(self.ui_call(swap))

    def state(self) -> dict[str, Any]:
        return self._sync(self.state_async())  # type: ignore[no-any-return]
