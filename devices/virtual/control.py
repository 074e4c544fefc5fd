"""The control channel: a small loopback HTTP endpoint per host process, and its client.

Routes (JSON in and out; `{port}` is the phone's ADB port, i.e. the part after ':' in its serial):

    GET  /phones                           -> [{name, serial, port, control_url}]
    GET  /phones/{port}/state              -> foreground app, faults, uiautomator state, counters
    GET  /phones/{port}/events?since=N     -> [InputEvent...] (seq >= N)
    POST /phones/{port}/faults   {patch}   -> the faults after the update
    POST /phones/{port}/kill-uiautomator   -> {"killed": bool}
    POST /phones/{port}/drop               -> {"dropped": n}
    POST /shutdown                         -> stops the host process (used by `realbench vphone down`)
"""

from __future__ import annotations

import asyncio
import json
import logging
from collections.abc import Callable
from typing import TYPE_CHECKING, Any
from urllib.parse import parse_qs, urlsplit

import httpx

from devices.virtual.model import Faults, InputEvent
from realbench.errors import ConfigError, DeviceError

if TYPE_CHECKING:
    from devices.virtual.phone import VirtualPhone

log = logging.getLogger(__name__)


class ControlServer:
    def __init__(self, phones: Callable[[], list[VirtualPhone]], on_shutdown: Callable[[], None]) -> None:
        self._phones = phones
        self._on_shutdown = on_shutdown
        self._server: asyncio.Server | None = None
        self.port = 0

    @property
    def url(self) -> str:
        return f"http://127.0.0.1:{self.port}"

    def phone_url(self, phone: VirtualPhone) -> str:
        return f"{self.url}/phones/{phone.port}"

    async def start(self) -> None:
        self._server = await asyncio.start_server(self._handle, "127.0.0.1", 0)
        self.port = self._server.sockets[0].getsockname()[1]

    async def stop(self) -> None:
        if self._server is not None:
            self._server.close()
            await self._server.wait_closed()

    async def _handle(self, reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        try:
            head = await reader.readuntil(b"\r\n\r\n")
            lines = head.decode("latin-1").split("\r\n")
            method, target = lines[0].split(" ")[:2]
            headers = {
                k.strip().lower(): v.strip() for k, v in (ln.split(":", 1) for ln in lines[1:] if ":" in ln)
            }
            body = await reader.readexactly(int(headers.get("content-length", "0") or 0))
            status, payload = await self._route(method.upper(), target, body)
        except (asyncio.IncompleteReadError, ValueError) as exc:
            status, payload = 400, {"error": str(exc)}
        data = json.dumps(payload, ensure_ascii=False).encode()
        writer.write(
            f"HTTP/1.1 {status} X\r\nContent-Type: application/json\r\nContent-Length: {len(data)}\r\nConnection: close\r\n\r\n".encode()
            + data
        )
        try:
            await writer.drain()
        finally:
            writer.close()

    async def _route(self, method: str, target: str, body: bytes) -> tuple[int, Any]:
        url = urlsplit(target)
        parts = [p for p in url.path.split("/") if p]
        if parts == ["phones"] and method == "GET":
            return 200, [
                {"name": p.name, "serial": p.serial, "port": p.port, "control_url": self.phone_url(p)}
                for p in self._phones()
            ]
        if parts == ["shutdown"] and method == "POST":
            asyncio.get_running_loop().call_soon(self._on_shutdown)
            return 200, {"stopping": True}
        if len(parts) != 3 or parts[0] != "phones":
            return 404, {"error": f"no route {method} {url.path}"}
        phone = next((p for p in self._phones() if str(p.port) == parts[1]), None)
        if phone is None:
            return 404, {"error": f"no phone on port {parts[1]}"}
        action = parts[2]
        if action == "state" and method == "GET":
            return 200, await phone.state_async()
        if action == "events" and method == "GET":
            since = int(parse_qs(url.query).get("since", ["0"])[0])
            return 200, [e.model_dump(mode="json") for e in phone.events.events(since)]
        if action == "faults" and method == "POST":
            try:
                faults = await phone.set_faults_async(json.loads(body or b"{}"))
            except ConfigError as exc:
                return 400, {"error": str(exc)}
            return 200, faults.model_dump()
        if action == "kill-uiautomator" and method == "POST":
            return 200, {"killed": await phone.kill_uiautomator_async()}
        if action == "drop" and method == "POST":
            return 200, {"dropped": await phone.drop_connections_async()}
        if action == "provision" and method == "POST":
            req = json.loads(body or b"{}")
            try:
                await phone.provision_async(
                    str(req["package"]), req.get("setup") or {}, req.get("params") or {}, req.get("episode")
                )
            except (KeyError, ConfigError, DeviceError) as exc:
                return 400, {"error": str(exc)}
            return 200, {"provisioned": req["package"]}
        if action == "what-if-tap" and method == "POST":
            req = json.loads(body or b"{}")
            try:
                return 200, await phone.what_if_tap_async(str(req["package"]), int(req["x"]), int(req["y"]))
            except (KeyError, ValueError, ConfigError, DeviceError) as exc:
                return 400, {"error": str(exc)}
        if action == "app-state" and method == "GET":
            package = parse_qs(url.query).get("package", [""])[0]
            try:
                return 200, await phone.app_state_async(package)
            except (ConfigError, DeviceError) as exc:
                return 400, {"error": str(exc)}
        return 404, {"error": f"no route {method} {url.path}"}


# The first provision of an app on a phone opens its clone's page (a headless browser page, the
# clone's state built and drawn): 9 s on a 2-core VM at load 14, past the 10 s of a control call
# at higher load, and a retry queues behind the first on the phone's UI thread and times out too.
# A lab's preparation step, not an input: it may take its time.
PROVISION_TIMEOUT_S = 120.0


class PhoneControl:
    """Client of one phone's control URL (from `VirtualPhoneHost.start` or `realbench vphone ls`)."""

    def __init__(self, url: str, timeout: float = 10.0) -> None:
        self.url = url.rstrip("/")
        self._client = httpx.Client(timeout=timeout)

    def _call(self, method: str, path: str, body: Any = None, timeout: float | None = None) -> Any:
        extra: dict[str, Any] = {} if timeout is None else {"timeout": timeout}
        try:
            response = self._client.request(method, f"{self.url}/{path}", json=body, **extra)
        except httpx.HTTPError as exc:
            raise DeviceError(
                f"virtual phone control channel {self.url} failed: {exc}",
                hint="is the vphone host running? see `realbench vphone ls`",
            ) from None
        if response.status_code != 200:
            raise DeviceError(
                f"virtual phone control {path}: HTTP {response.status_code} {response.text[:200]}",
                hint="check the request against docs/vphone.md",
            )
        return response.json()

    def state(self) -> dict[str, Any]:
        return self._call("GET", "state")  # type: ignore[no-any-return]

    def events(self, since: int = 0) -> list[InputEvent]:
        return [InputEvent.model_validate(e) for e in self._call("GET", f"events?since={since}")]

    def set_faults(self, **patch: Any) -> Faults:
        return Faults.model_validate(self._call("POST", "faults", patch))

    def kill_uiautomator(self) -> bool:
        return bool(self._call("POST", "kill-uiautomator")["killed"])

    def drop_connection(self) -> int:
        return int(self._call("POST", "drop")["dropped"])

    def provision(
        self, package: str, setup: dict[str, Any], params: dict[str, Any], episode: str | None = None
    ) -> None:
        """Put an app in a task's start state (virtual phones only; a lab prepares real phones).
        ``episode`` keys the app's drift to the episode rather than to the phone."""
        body: dict[str, Any] = {"package": package, "setup": setup, "params": params}
        if episode is not None:
            body["episode"] = episode
        self._call("POST", "provision", body, timeout=PROVISION_TIMEOUT_S)

    def app_state(self, package: str) -> dict[str, Any]:
        """The app's clone state: ground truth for verifying episodes run on a virtual phone."""
        return self._call("GET", f"app-state?package={package}")  # type: ignore[no-any-return]

    def what_if_tap(self, package: str, x: int, y: int) -> dict[str, Any]:
        """The app's state had a tap at pixel (x, y) been delivered; the app itself is unchanged
        and the tap is not phone input (grading an episode stopped at a commit boundary)."""
        return self._call("POST", "what-if-tap", {"package": package, "x": x, "y": y})  # type: ignore[no-any-return]

    def close(self) -> None:
        self._client.close()
