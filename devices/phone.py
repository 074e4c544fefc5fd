"""Android phones through uiautomator2 3.7 and adbutils 2 (USB phones, Wi-Fi phones, virtual phones).

`PhoneDevice` implements `realbench.device.Device`. uiautomator2 itself retries a JSON-RPC call
once after an HTTP error, but a connection dropped mid-request (`http.client.RemoteDisconnected`,
`ConnectionError`), a socket timeout or a vanished adb transport reach the caller raw. Here every
call goes through `_call`, which turns them into typed `DeviceError`/`DeviceLost`, reconnects the
adb transport, restarts the on-device uiautomator server when it stopped answering, and retries —
freely for reads, and for actions only when the request provably never left the host (a retried
tap that had already landed would tap twice).
"""

from __future__ import annotations

import base64
import contextlib
import http.client
import io
import json
import logging
import re
import shlex
import socket
import threading
import time
from collections.abc import Callable
from dataclasses import dataclass, field
from enum import StrEnum
from typing import Any, TypeVar

import adbutils
import uiautomator2 as u2
from uiautomator2 import exceptions as u2e
from uiautomator2.core import AdbHTTPConnection

from devices.profile import PhoneProfile
from devices.settle import SettlePolicy, SettleResult, fingerprint, wait_until_settled
from realbench.actions import (
    Action,
    Answer,
    Click,
    DoubleClick,
    KeyPress,
    LongPress,
    OpenApp,
    Swipe,
    Terminate,
    Type,
    Wait,
)
from realbench.device import DeviceKind
from realbench.errors import DeviceError, DeviceLost
from realbench.observation import Observation, Screenshot

log = logging.getLogger(__name__)

T = TypeVar("T")

ADB_KEYBOARD = "com.github.uiautomator/.AdbKeyboard"
DOUBLE_TAP_GAP_S = 0.08  # well inside Android's 300 ms double-tap window
SWIPE_MS_PER_STEP = 5  # uiautomator throttles each swipe step to ~5 ms
BLACK_LEVEL = 8  # max 8-bit luminance of a frame we call black (screen off, secure window, injected fault)
# `mCurrentFocus=Window{4b1e2f0 u0 com.MobileTicket/com.alipay.mobile.nebulacore.ui.H5Activity}`
_FOCUSED_ACTIVITY = re.compile(r"mCurrentFocus=Window\{.*\s([^\s/]+)/([^\s}]+)\}")


class Idempotence(StrEnum):
    READ = "read"  # safe to repeat (observe, queries)
    ONCE = "once"  # must not happen twice (taps, keys, text)


@dataclass(frozen=True)
class RetryPolicy:
    attempts: int = 3
    backoff_s: float = 0.2
    read_timeout_s: float = 20.0  # per JSON-RPC read; uiautomator2's own default is 300 s
    act_timeout_s: float = 20.0
    reconnect_timeout_s: float = 10.0
    black_frame_retries: int = 2


@dataclass
class PhoneStats:
    """What recovery cost: the pool turns these into per-phone flake rates."""

    calls: int = 0
    retries: int = 0
    reconnects: int = 0
    server_restarts: int = 0
    black_frames: int = 0
    settle_waits: int = 0
    settle_timeouts: int = 0
    settle_s: float = 0.0
    recovery_s: float = 0.0
    recoveries: list[float] = field(default_factory=list)


class _NotSent(Exception):
    """Marks a failure that happened before the request reached the phone."""


# Errors that mean "the link or the on-device server failed", as opposed to a bad request.
_TRANSIENT: tuple[type[BaseException], ...] = (
    _NotSent,
    ConnectionError,  # includes http.client.RemoteDisconnected and ConnectionResetError
    http.client.HTTPException,  # IncompleteRead, BadStatusLine
    socket.timeout,
    TimeoutError,
    OSError,
    adbutils.AdbError,
    adbutils.AdbTimeout,
    u2e.DeviceError,  # HTTPError, ConnectError, UiAutomationError, AdbShellError
    u2e.RPCInvalidError,
    u2e.HierarchyEmptyError,
    json.JSONDecodeError,
)


def _not_sent(exc: BaseException) -> bool:
    """True when the request never reached the phone's server (safe to retry even an action)."""
    if isinstance(exc, _NotSent | ConnectionRefusedError):
        return True
    if isinstance(exc, u2e.HTTPError) and "Unable to connect" in str(exc):
        return True
    return (
        isinstance(exc, adbutils.AdbError)
        and "device" in str(exc).lower()
        and "not found" in str(exc).lower()
    )


_HEADERS = {"User-Agent": "realbench", "Accept-Encoding": "", "Content-Type": "application/json"}


class _KnownVersionClient(adbutils.AdbClient):
    """The adb client, remembering its server's version: adbutils asks for it before every stream
    it opens to a phone by serial — one more connection to the server and a 10 ms pause closing
    it, about 12 ms on each JSON-RPC call. A running server's version does not change; a failed
    stream forgets it (the server may have been restarted)."""

    versions: dict[tuple[str, int], int] = {}  # noqa: RUF012 — shared by every client of a server
    _lock = threading.Lock()

    def server_version(self) -> int:
        key = (self.host, self.port)
        with self._lock:
            known = self.versions.get(key)
        if known is None:
            known = int(super().server_version())
            with self._lock:
                self.versions[key] = known
        return known

    @classmethod
    def forget(cls, host: str, port: int) -> None:
        with cls._lock:
            cls.versions.pop((host, port), None)


class _TimedConnection(AdbHTTPConnection):
    """uiautomator2's HTTP-over-adb connection with its timeout actually applied (upstream sets
    `timeout` on the HTTPConnection, but the adb socket it creates ignores it, so a stalled
    server would block a call forever), opened without asking the adb server its version each time,
    and with Nagle's algorithm off."""

    def __init__(self, device: adbutils.AdbDevice, port: int, timeout: float) -> None:
        client = device._client
        self._server = (str(client.host), int(client.port))
        serial = device.serial
        if serial and not device._transport_id:
            device = adbutils.AdbDevice(_KnownVersionClient(*self._server), serial=serial)
        super().__init__(device, port)
        self._timeout_s = timeout

    def connect(self) -> None:
        try:
            super().connect()
        except u2e.HTTPError as exc:
            _KnownVersionClient.forget(*self._server)
            raise _NotSent(str(exc)) from exc
        self.sock.settimeout(self._timeout_s)
        if self.sock.family in (socket.AF_INET, socket.AF_INET6):
            # http.client writes the headers and the body separately; with Nagle's algorithm on,
            # the body waited for the adb server's delayed ACK of the headers: 40 ms on every call.
            self.sock.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)


def jsonrpc(dev: adbutils.AdbDevice, port: int, method: str, params: Any, timeout: float) -> Any:
    """One JSON-RPC call to the on-device uiautomator server, as uiautomator2 3.7 makes it
    (fresh `tcp:PORT` stream, POST /jsonrpc/0), with an enforced timeout and typed errors."""
    payload = json.dumps({"jsonrpc": "2.0", "id": 1, "method": method, "params": params})
    conn = _TimedConnection(dev, port, timeout)
    try:
        conn.request("POST", "/jsonrpc/0", payload, headers=_HEADERS)
        response = conn.getresponse()
        body = response.read()
    finally:
        conn.close()
    if response.status != 200:
        raise u2e.HTTPError(f"HTTP {response.status} {response.reason} from the uiautomator server")
    data = json.loads(body)
    if not isinstance(data, dict):
        raise u2e.RPCInvalidError("JSON-RPC reply is not an object")
    if "error" in data:
        error = data["error"] or {}
        message = str(error.get("message", ""))
        if (
            "UiAutomation not connected" in message
            or "DeadObjectException" in message
            or "DeadSystem" in message
        ):
            raise u2e.UiAutomationNotConnectedError(message)
        raise _RpcRefused(f"{method}: {error.get('code')} {message}"[:300])
    if "result" not in data:
        raise u2e.RPCInvalidError("JSON-RPC reply without a result")
    return data["result"]


class _RpcRefused(Exception):
    """The server answered with a JSON-RPC error: the request itself was refused (not retried)."""


def is_black(jpeg: bytes) -> bool:
    """Whether a screenshot is (almost) entirely black. Decodes at 1/8 scale (a few ms)."""
    from PIL import Image

    with Image.open(io.BytesIO(jpeg)) as img:
        img.draft("L", (max(1, img.width // 8), max(1, img.height // 8)))
        extrema = img.convert("L").getextrema()
    hi = extrema[1] if isinstance(extrema[1], int | float) else 255
    return hi <= BLACK_LEVEL


class PhoneDevice:
    """One Android phone driven through uiautomator2. Thread-safe: one call at a time."""

    def __init__(
        self,
        serial: str,
        *,
        profile: PhoneProfile | None = None,
        virtual: bool = False,
        retry: RetryPolicy | None = None,
        connect: bool = True,
        settle: SettlePolicy | None = None,
    ) -> None:
        self._serial = serial
        self.settle = settle or SettlePolicy()
        self.profile = profile
        self.virtual = virtual
        self.retry = retry or RetryPolicy()
        self.stats = PhoneStats()
        self.app_aliases: dict[str, str] = {}
        self._lock = threading.RLock()
        self._u2: u2.Device | None = None
        self._size: tuple[int, int] | None = None
        self._ime_list: list[str] | None = None
        self._info: dict[str, Any] = {}
        self._versions: dict[str, tuple[str | None, float]] = {}
        # the dump a settle ended on, with the call count and time then (see observe)
        self._settled: tuple[str, int, float] | None = None
        self._closed = False
        if connect:
            self.connect()

    # --- identity ---------------------------------------------------------------------------

    @property
    def kind(self) -> DeviceKind:
        return DeviceKind.VIRTUAL_PHONE if self.virtual else DeviceKind.PHONE

    @property
    def serial(self) -> str:
        return self._serial

    def describe(self) -> dict[str, Any]:
        props = self.properties()
        return {
            "kind": str(self.kind),
            "serial": self._serial,
            "model": props.get("model", ""),
            "brand": props.get("brand", ""),
            "sdk": props.get("sdk", ""),
            "profile": self.profile.name if self.profile else None,
            "virtual": self.virtual,
        }

    # --- connection and recovery --------------------------------------------------------------

    def connect(self) -> None:
        """Attach to the phone and make sure its uiautomator server runs (pushes the jar if needed)."""
        with self._lock:
            last: BaseException | None = None
            for attempt in range(self.retry.attempts):
                try:
                    self._ensure_transport()
                    self._u2 = u2.connect(self._serial)
                    self._u2.settings["operation_delay"] = (0, 0)
                    self._refresh_info()
                    return
                except _TRANSIENT as exc:
                    last = exc
                    log.info("connect %s failed (attempt %d): %s", self._serial, attempt + 1, exc)
                    time.sleep(self.retry.backoff_s * (attempt + 1))
            raise DeviceLost(
                f"phone {self._serial} is unreachable: {type(last).__name__}: {last}",
                hint="check the cable / `adb devices`; for virtual phones run `realbench vphone up`",
            ) from None

    def _ensure_transport(self) -> None:
        """Make sure adb lists the phone as `device`; reattach TCP serials that dropped."""
        adb = adbutils.adb
        states = {d.serial: d.state for d in adb.list()}
        if states.get(self._serial) == "device":
            return
        if ":" in self._serial:
            with contextlib.suppress(adbutils.AdbError):
                adb.disconnect(self._serial)
            try:
                adb.connect(self._serial, timeout=self.retry.reconnect_timeout_s)
            except (adbutils.AdbError, adbutils.AdbTimeout) as exc:
                raise DeviceLost(f"cannot reattach {self._serial}: {exc}") from None
        try:
            adb.wait_for(self._serial, state="device", timeout=self.retry.reconnect_timeout_s)
        except (adbutils.AdbError, adbutils.AdbTimeout) as exc:
            state = states.get(self._serial)
            listed = f"listed as {state!r}" if state else "not listed by `adb devices` on this host"
            raise DeviceLost(
                f"phone {self._serial} is not online: {listed} ({type(exc).__name__} after "
                f"{self.retry.reconnect_timeout_s:.0f} s)",
                hint="check the cable, USB debugging and the RSA prompt on the phone",
            ) from None

    def recover(self, *, restart_server: bool = False) -> None:
        """Reattach the transport and restart the uiautomator server if it does not answer (or
        answers but lost its UiAutomation connection)."""
        with self._lock:
            t0 = time.perf_counter()
            self._ensure_transport()
            self.stats.reconnects += 1
            if self._u2 is None:
                self._u2 = u2.connect(self._serial)
            elif restart_server or not self._u2._check_alive():
                self.stats.server_restarts += 1
                log.info("restarting the uiautomator server on %s", self._serial)
                with contextlib.suppress(*_TRANSIENT):
                    self._u2.stop_uiautomator(wait=False)
                self._u2.start_uiautomator()
            took = time.perf_counter() - t0
            self.stats.recovery_s += took
            self.stats.recoveries.append(took)

    def _device(self) -> u2.Device:
        if self._closed:
            raise DeviceLost(f"phone {self._serial} was closed", hint="lease the phone again from the pool")
        if self._u2 is None:
            self.connect()
        assert self._u2 is not None
        return self._u2

    def _call(self, what: str, fn: Callable[[u2.Device], T], idem: Idempotence = Idempotence.READ) -> T:
        """Run one uiautomator2/adbutils call with typed errors, recovery and (safe) retries."""
        with self._lock:
            self.stats.calls += 1
            last: BaseException | None = None
            for attempt in range(self.retry.attempts):
                try:
                    return fn(self._device())
                except DeviceError:
                    raise
                except u2e.RPCError as exc:
                    # The server answered and refused (unknown method, no such element): not a
                    # link problem, so not retried; still the device's failure, not the agent's.
                    raise DeviceError(
                        f"{what} on {self._serial} refused: {type(exc).__name__}: {str(exc)[:200]}"
                    ) from None
                except _TRANSIENT as exc:
                    last = exc
                    log.info(
                        "%s on %s failed (attempt %d): %s: %s",
                        what,
                        self._serial,
                        attempt + 1,
                        type(exc).__name__,
                        exc,
                    )
                    if idem is Idempotence.ONCE and not _not_sent(exc):
                        # The request may have landed; repeating a tap could tap twice.
                        self._try_recover(exc)
                        raise DeviceError(
                            f"{what} on {self._serial}: connection failed mid-request ({type(exc).__name__}); "
                            "whether it reached the phone is unknown",
                            hint="the episode is an unscored abort and will be rerun",
                        ) from None
                    self.stats.retries += 1
                    time.sleep(self.retry.backoff_s * (attempt + 1))
                    if not self._try_recover(exc):
                        break
            raise DeviceLost(
                f"{what} on {self._serial} failed after {self.retry.attempts} attempts: {type(last).__name__}: {last}",
                hint="the phone is reconnected by the pool's health check, or quarantined if it keeps failing",
            ) from None

    def _try_recover(self, cause: BaseException | None = None) -> bool:
        try:
            self.recover(restart_server=isinstance(cause, u2e.UiAutomationNotConnectedError))
            return True
        except DeviceError as exc:
            log.warning("recovery of %s failed: %s", self._serial, exc.message)
            return False
        except _TRANSIENT as exc:
            log.warning("recovery of %s failed: %s: %s", self._serial, type(exc).__name__, exc)
            return False

    def _rpc(
        self, method: str, *params: Any, idem: Idempotence = Idempotence.READ, timeout: float | None = None
    ) -> Any:
        t = timeout or (self.retry.read_timeout_s if idem is Idempotence.READ else self.retry.act_timeout_s)

        def call(d: u2.Device) -> Any:
            try:
                return jsonrpc(d.adb_device, d._device_server_port, method, list(params), t)
            except _RpcRefused as exc:
                raise DeviceError(
                    f"uiautomator refused {exc}", hint="a JSON-RPC error from the phone's server"
                ) from None

        return self._call(method, call, idem)

    def shell(
        self, cmd: str | list[str], *, idem: Idempotence = Idempotence.READ, timeout: float = 30
    ) -> str:
        def run(d: u2.Device) -> str:
            return str(d.adb_device.shell(cmd, timeout=timeout))

        return self._call(f"shell {cmd if isinstance(cmd, str) else shlex.join(cmd)}", run, idem)

    # --- observation ------------------------------------------------------------------------

    def _refresh_info(self) -> dict[str, Any]:
        assert self._u2 is not None
        info = jsonrpc(
            self._u2.adb_device, self._u2._device_server_port, "deviceInfo", {}, self.retry.read_timeout_s
        )
        self._apply_info(info)
        return info

    def _apply_info(self, info: dict[str, Any]) -> None:
        self._info = info
        w, h = int(info.get("displayWidth") or 0), int(info.get("displayHeight") or 0)
        if w > 0 and h > 0:
            self._size = (w, h)

    def info(self) -> dict[str, Any]:
        """uiautomator's deviceInfo: current package, display size and rotation, screen on."""
        info = self._rpc("deviceInfo")
        if not isinstance(info, dict):
            raise DeviceError(f"deviceInfo on {self._serial} returned {type(info).__name__}")
        self._apply_info(info)
        return info

    def screenshot(self) -> bytes:
        """A JPEG of the screen. Black frames are retried a few times, then reported."""
        for attempt in range(self.retry.black_frame_retries + 1):
            data = self._rpc("takeScreenshot", 1, 80)
            if not data:
                raise DeviceError(f"takeScreenshot on {self._serial} returned nothing")
            jpeg = base64.b64decode(data)
            if not is_black(jpeg):
                return jpeg
            self.stats.black_frames += 1
            log.info("black screenshot on %s (attempt %d)", self._serial, attempt + 1)
            time.sleep(self.retry.backoff_s)
        raise DeviceError(
            f"screenshots on {self._serial} stay black",
            hint="the screen may be off or locked, or the app sets FLAG_SECURE (screenshots of it are always black)",
        )

    def screenshot_frame(self, *, scale: float = 1.0, quality: int = 70) -> bytes:
        """A JPEG scaled on the phone (uiautomator's own `scale`), for live views: black frames are
        returned as they are, since a viewer should see them."""
        data = self._rpc("takeScreenshot", scale, quality)
        if not data:
            raise DeviceError(f"takeScreenshot on {self._serial} returned nothing")
        return base64.b64decode(data)

    def hierarchy(self) -> str:
        """A fresh UI hierarchy dump (Android XML)."""
        xml = self._rpc("dumpWindowHierarchy", False, 50)
        if not xml or "<hierarchy" not in xml:
            raise DeviceError(f"dumpWindowHierarchy on {self._serial} returned no hierarchy")
        return str(xml)

    def current_app(self) -> str | None:
        return self.info().get("currentPackageName") or None

    def current_activity(self) -> str | None:
        """The focused activity as `dumpsys window` names it (what uiautomator2's `app_current`
        reads): the full class name, or `.Name` relative to its package; None when none is focused."""
        out = self.shell(["dumpsys", "window", "windows"])
        m = _FOCUSED_ACTIVITY.search(out)
        if m is None:
            return None
        package, activity = m.group(1), m.group(2)
        return package + activity if activity.startswith(".") else activity

    def _take_settled(self) -> str | None:
        """The last settle's final dump, if nothing was sent to (or asked of) the phone since and
        the settle's quiet period has not passed: then it is the screen's hierarchy now. Once."""
        settled, self._settled = self._settled, None
        if settled is None or settled[1] != self.stats.calls:
            return None
        return settled[0] if time.monotonic() - settled[2] <= self.settle.quiet_s else None

    def settled_hierarchy(self) -> str:
        """The hierarchy now, without a second dump right after a settle that just read it."""
        return self._take_settled() or self.hierarchy()

    def observe(self) -> Observation:
        settled = self._take_settled()  # taken before the screenshot's call counts
        jpeg = self.screenshot()
        xml = settled or self.hierarchy()
        app = self.current_app()
        shot = Screenshot.from_bytes(jpeg)
        return Observation(screenshot=shot, hierarchy=xml, app=app)

    def size(self) -> tuple[int, int]:
        if self._size is None:
            self.info()
        if self._size is None:
            raise DeviceError(f"{self._serial} did not report its display size")
        return self._size

    def to_pixels(self, x: int, y: int) -> tuple[int, int]:
        """Normalised 0–1000 to the pixel a touch is sent to (same rule as `Screenshot.to_pixels`)."""
        w, h = self.size()
        return (round(x * (w - 1) / 1000), round(y * (h - 1) / 1000))

    # --- actions ----------------------------------------------------------------------------

    def act(self, action: Action) -> None:
        self._act(action)
        if not isinstance(action, Answer | Terminate | Wait):
            self.wait_until_settled()

    def wait_until_settled(self) -> SettleResult:
        """Block until the UI hierarchy stops changing (bounded by the settle policy)."""
        last: list[str] = []

        def probe() -> str:
            xml = self.hierarchy()
            last[:] = [xml]
            return fingerprint(xml)

        result = wait_until_settled(probe, self.settle)
        self._settled = (last[0], self.stats.calls, time.monotonic()) if result.settled and last else None
        self.stats.settle_waits += 1
        self.stats.settle_s += result.waited_s
        if not result.settled:
            self.stats.settle_timeouts += 1
            log.info("%s: screen still changing after %.1fs; observing anyway", self._serial, result.waited_s)
        return result

    def _act(self, action: Action) -> None:
        once = Idempotence.ONCE
        if isinstance(action, Click):
            px, py = self.to_pixels(action.x, action.y)
            self._rpc("click", px, py, idem=once)
        elif isinstance(action, DoubleClick):
            px, py = self.to_pixels(action.x, action.y)
            self._rpc("click", px, py, idem=once)
            time.sleep(DOUBLE_TAP_GAP_S)
            self._rpc("click", px, py, idem=once)
        elif isinstance(action, LongPress):
            px, py = self.to_pixels(action.x, action.y)
            self._rpc(
                "click",
                px,
                py,
                action.duration_ms,
                idem=once,
                timeout=self.retry.act_timeout_s + action.duration_ms / 1000,
            )
        elif isinstance(action, Swipe):
            fx, fy = self.to_pixels(action.x, action.y)
            tx, ty = self.to_pixels(action.x2, action.y2)
            steps = max(2, action.duration_ms // SWIPE_MS_PER_STEP)
            self._rpc(
                "swipe",
                fx,
                fy,
                tx,
                ty,
                steps,
                idem=once,
                timeout=self.retry.act_timeout_s + action.duration_ms / 1000,
            )
        elif isinstance(action, Type):
            self.type_text(action.text)
        elif isinstance(action, KeyPress):
            self._rpc("pressKey", str(action.key), idem=once)
        elif isinstance(action, OpenApp):
            self.start_app(self.app_aliases.get(action.app, action.app))
        elif isinstance(action, Wait):
            time.sleep(action.seconds)
        elif isinstance(action, Answer | Terminate):
            return
        else:  # pragma: no cover - the Action union is closed
            raise DeviceError(f"unsupported action {action!r}")

    def ime_list(self) -> list[str]:
        if self._ime_list is None:
            out = self.shell(["ime", "list", "-s", "-a"])
            self._ime_list = [line.strip() for line in out.splitlines() if line.strip()]
        return self._ime_list

    def current_ime(self) -> str:
        return self.shell(["settings", "get", "secure", "default_input_method"]).strip()

    def set_ime(self, ime: str) -> None:
        self.shell(["ime", "set", ime], idem=Idempotence.READ)

    def type_text(self, text: str) -> None:
        """Type into the focused field. With AdbKeyboard installed uiautomator2 switches the input
        method to it; the one that was active before is put back. Without it, the clipboard is
        used and cleared afterwards (so a typed secret does not stay on the phone)."""
        if ADB_KEYBOARD in self.ime_list():
            before = self.current_ime()
            try:
                self._call("send_keys", lambda d: u2.InputMethodMixIn.send_keys(d, text), Idempotence.ONCE)
            finally:
                if before and before != ADB_KEYBOARD and self.current_ime() != before:
                    self.set_ime(before)
            return
        self._rpc("setClipboard", None, text, idem=Idempotence.READ)
        if self._rpc("getClipboard") != text:
            raise DeviceError(
                f"the clipboard of {self._serial} did not take the text",
                hint="check the phone's clipboard access",
            )
        try:
            self._rpc("pasteClipboard", idem=Idempotence.ONCE)
        finally:
            self._rpc("setClipboard", None, "", idem=Idempotence.READ)

    # --- apps -------------------------------------------------------------------------------

    def start_app(self, app: str) -> None:
        out = self.shell(
            ["monkey", "-p", app, "-c", "android.intent.category.LAUNCHER", "1"], idem=Idempotence.READ
        )
        if "No activities found" in out or "monkey aborted" in out.lower():
            raise DeviceError(
                f"cannot start {app} on {self._serial}: {out.strip()[:200]}", hint="is the app installed?"
            )

    def stop_app(self, app: str) -> None:
        self.shell(["am", "force-stop", app])

    def clear_app(self, app: str) -> None:
        out = self.shell(["pm", "clear", app])
        if "Success" not in out:
            raise DeviceError(f"pm clear {app} on {self._serial} failed: {out.strip()[:200]}")

    def app_version(self, package: str) -> str | None:
        """versionName of an installed package, or None if it is not installed."""

        def run(d: u2.Device) -> str | None:
            info = d.adb_device.app_info(package)
            return info.version_name if info else None

        version = self._call(f"app_info {package}", run)
        self._versions[package] = (version, time.monotonic())
        return version

    def recent_app_version(self, package: str, max_age_s: float = 120.0) -> str | None:
        """The version read by the last check (health checks read it before every episode)."""
        seen = self._versions.get(package)
        if seen is not None and time.monotonic() - seen[1] <= max_age_s:
            return seen[0]
        return self.app_version(package)

    def screen_on(self) -> bool:
        return bool(self.info().get("screenOn", True))

    def wake(self) -> None:
        self._rpc("wakeUp", idem=Idempotence.READ)

    def locked(self) -> bool | None:
        """Whether the keyguard shows; None when `dumpsys window` does not say."""
        out = self.shell(["dumpsys", "window"])
        for marker in (
            "mDreamingLockscreen=",
            "mShowingLockscreen=",
            "isKeyguardShowing=",
            "mKeyguardShowing=",
        ):
            idx = out.find(marker)
            if idx >= 0:
                return out[idx + len(marker) : idx + len(marker) + 4] == "true"
        return None

    def free_storage_mb(self) -> int | None:
        """Free space on /data in MiB, or None when `df` is not available."""
        out = self.shell(["df", "-k", "/data"])
        for line in out.splitlines()[1:]:
            parts = line.split()
            if len(parts) >= 4 and parts[3].isdigit():
                return int(parts[3]) // 1024
        return None

    def properties(self) -> dict[str, str]:
        if not hasattr(self, "_props"):

            def run(d: u2.Device) -> dict[str, str]:
                dev = d.adb_device
                return {
                    "model": dev.getprop("ro.product.model") or "",
                    "brand": dev.getprop("ro.product.brand") or "",
                    "sdk": dev.getprop("ro.build.version.sdk") or "",
                }

            self._props = self._call("getprop", run)
        return self._props

    def close(self) -> None:
        """Forget the connection. The on-device server keeps running for the next user."""
        with self._lock:
            self._closed = True
            self._u2 = None

    def reopen(self) -> None:
        with self._lock:
            self._closed = False
            self.connect()
