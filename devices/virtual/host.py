"""`VirtualPhoneHost`: N virtual phones and their control channel on one asyncio loop thread.

    with VirtualPhoneHost() as host:
        infos = host.start(4, drift="mild", screens="static")
        host.adb_connect()                      # `adb connect 127.0.0.1:PORT` for each phone
        phone = host.phone(infos[0].serial)     # in-process: phone.events, phone.set_faults(...)

Works in-process (tests) and inside the background process `realbench vphone up` starts.
"""

from __future__ import annotations

import asyncio
import logging
import os
import shutil
import subprocess
import threading
from collections.abc import Coroutine
from typing import Any, TypeVar

from pydantic import BaseModel, ValidationError

from devices.virtual.control import ControlServer
from devices.virtual.model import APP_CLONES, BROWSER_PACKAGE, Faults, PhoneIdentity, VirtualPhoneSpec
from devices.virtual.phone import ScreenMaker, VirtualPhone, static_screens
from realbench.errors import ConfigError, DeviceError, ServerError
from realbench.loop_thread import start_loop_thread

log = logging.getLogger(__name__)
T = TypeVar("T")


class PhoneInfo(BaseModel):
    """How to reach one started phone."""

    name: str
    serial: str
    port: int
    control_url: str
    drift: str
    device_kind: str = "virtual-phone"


def identity_for(profile: str | None = None) -> PhoneIdentity:
    """The phone's identity: a profile from devices/profiles/*.yaml when named, else the default."""
    from devices.virtual.profiles import default_identity, load_profile_identity

    return load_profile_identity(profile) if profile else default_identity()


def choose_screens(kind: str) -> ScreenMaker:
    if kind == "static":
        return static_screens
    if kind not in ("clone", "auto"):
        raise ConfigError(f"unknown screens kind {kind!r}", hint="use 'clone', 'static' or 'auto'")
    try:
        from devices.virtual.clone_screen import clone_screens_available, make_clone_screen
    except ImportError as exc:
        if kind == "clone":
            raise ConfigError(
                f"clone screens are not available: {exc}", hint="use --screens static"
            ) from None
        return static_screens
    reason = clone_screens_available()
    if reason is None:
        return make_clone_screen
    if kind == "clone":
        raise ConfigError(f"clone screens are not available: {reason}", hint="use --screens static")
    log.warning("virtual phones use static screens: %s", reason)
    return static_screens


class VirtualPhoneHost:
    def __init__(self) -> None:
        self._loop, self._thread = start_loop_thread("vphone-host")
        self.phones: list[VirtualPhone] = []
        self.control = ControlServer(lambda: list(self.phones), self._shutdown_requested)
        self._run(self.control.start())
        self.stopped = threading.Event()
        self._adb_connected: list[tuple[str, int | None]] = []
        self._uses_clone_screens = False

    def _run(self, coro: Coroutine[Any, Any, T], timeout: float = 60) -> T:
        return asyncio.run_coroutine_threadsafe(coro, self._loop).result(timeout=timeout)

    def start(
        self,
        n: int = 1,
        *,
        drift: str | list[str] = "none",
        apps: list[str] | None = None,
        faults: Faults | dict[str, Any] | None = None,
        screens: str | ScreenMaker = "auto",
        profile: str | list[str] | None = None,
        ports: list[int] | None = None,
    ) -> list[PhoneInfo]:
        """Start n phones on free loopback ports (outside 5555-5585); returns how to reach each.

        `screens` is "clone", "static", "auto" or a factory `(phone, package) -> ScreenSource`
        (a test's own app screens)."""
        if n < 1:
            raise ConfigError("need at least one phone", hint="pass n >= 1")
        drifts = drift if isinstance(drift, list) else [drift] * n
        if len(drifts) != n:
            raise ConfigError(
                f"{len(drifts)} drift profiles for {n} phones",
                hint="give one drift per phone or a single one",
            )
        app_list = apps or list(APP_CLONES)
        unknown = [a for a in app_list if a not in APP_CLONES and a != BROWSER_PACKAGE]
        if unknown:
            raise ConfigError(
                f"unknown app package(s) {unknown}",
                hint=f"known: {', '.join([*APP_CLONES, BROWSER_PACKAGE])}",
            )
        if BROWSER_PACKAGE not in app_list:
            app_list = [*app_list, BROWSER_PACKAGE]
        from clones.drift import DRIFT_PROFILES

        bad_drifts = sorted({d for d in drifts if d not in DRIFT_PROFILES})
        if bad_drifts:
            raise ConfigError(
                f"unknown drift profile(s) {bad_drifts}", hint=f"known: {', '.join(DRIFT_PROFILES)}"
            )
        try:
            fault_spec = faults if isinstance(faults, Faults) else Faults.model_validate(faults or {})
        except ValidationError as exc:
            raise ConfigError(
                f"invalid faults: {exc}", hint="see the Faults fields in docs/vphone.md"
            ) from None
        profiles = profile if isinstance(profile, list) else [profile] * n
        if len(profiles) != n:
            raise ConfigError(
                f"{len(profiles)} profiles for {n} phones", hint="give one profile per phone or a single one"
            )
        identities = [identity_for(p) for p in profiles]
        maker = screens if callable(screens) else choose_screens(screens)
        self._uses_clone_screens |= maker is not static_screens
        infos = []
        for i in range(n):
            index = len(self.phones)
            identity = identities[i]
            spec = VirtualPhoneSpec(
                identity=identity,
                drift=drifts[i],
                apps=app_list,
                faults=fault_spec.model_copy(deep=True),
                screens=screens if isinstance(screens, str) else "custom",
                seed=index,
            )
            phone = VirtualPhone(spec, screens=maker, name=f"vphone{index}")
            port = self._run(phone.start(ports[i] if ports else 0))
            # `getprop ro.serialno` differs per phone, like real ones: derived from the port.
            phone.spec = spec.model_copy(
                update={"identity": identity.model_copy(update={"serialno": f"VPHONE{port}"})}
            )
            self.phones.append(phone)
            infos.append(self.info(phone))
        return infos

    def info(self, phone: VirtualPhone) -> PhoneInfo:
        return PhoneInfo(
            name=phone.name,
            serial=phone.serial,
            port=phone.port,
            control_url=self.control.phone_url(phone),
            drift=phone.spec.drift,
        )

    def infos(self) -> list[PhoneInfo]:
        return [self.info(p) for p in self.phones]

    def phone(self, serial: str) -> VirtualPhone:
        for phone in self.phones:
            if serial in (phone.serial, phone.name, str(phone.port)):
                return phone
        raise DeviceError(
            f"no virtual phone {serial!r} on this host", hint=f"phones: {[p.serial for p in self.phones]}"
        )

    def adb_connect(self, adb_port: int | None = None) -> list[str]:
        """Run `adb connect` for every phone against the adb server on adb_port (default: env or 5037)."""
        serials = []
        for phone in self.phones:
            out = run_adb(["connect", phone.serial], adb_port)
            if "connected" not in out:
                raise DeviceError(
                    f"adb connect {phone.serial} failed: {out.strip()}",
                    hint="is the adb server running? try `adb start-server`",
                )
            self._adb_connected.append((phone.serial, adb_port))
            serials.append(phone.serial)
        return serials

    def adb_disconnect(self) -> None:
        for serial, adb_port in self._adb_connected:
            try:
                run_adb(["disconnect", serial], adb_port)
            except DeviceError as exc:
                log.debug("adb disconnect %s: %s", serial, exc)
        self._adb_connected.clear()

    def _shutdown_requested(self) -> None:
        self.stopped.set()

    def stop(self) -> None:
        if not self._thread.is_alive():
            return
        self.adb_disconnect()

        async def shutdown() -> None:
            for phone in self.phones:
                await phone.stop()
            await self.control.stop()

        try:
            self._run(shutdown(), timeout=30)
            if self._uses_clone_screens:
                from devices.virtual.clone_screen import CloneBackend

                CloneBackend.shutdown()
        finally:
            self._loop.call_soon_threadsafe(self._loop.stop)
            self._thread.join(timeout=10)
            self.stopped.set()

    def __enter__(self) -> VirtualPhoneHost:
        return self

    def __exit__(self, *exc: object) -> None:
        self.stop()


def adb_path() -> str:
    path = shutil.which("adb")
    if path is None:
        raise ServerError(
            "the adb command is not installed", hint="apt-get install adb (Debian package `adb`)"
        )
    return path


def run_adb(args: list[str], adb_port: int | None = None, timeout: float = 20) -> str:
    env = dict(os.environ)
    if adb_port is not None:
        env["ANDROID_ADB_SERVER_PORT"] = str(adb_port)
    try:
        proc = subprocess.run(
            [adb_path(), *args], capture_output=True, text=True, timeout=timeout, env=env, check=False
        )
    except subprocess.TimeoutExpired:
        raise DeviceError(
            f"adb {' '.join(args)} timed out", hint="restart the adb server: adb kill-server"
        ) from None
    return proc.stdout + proc.stderr
