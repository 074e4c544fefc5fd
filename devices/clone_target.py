"""`CloneTarget` — the `realbench.device.Target` of a task pack's clone in a headless page.

Per-task setup by restoring server state (no browser restart, no page reload) and verification with
the clone's verifiers.
"""

from __future__ import annotations

import atexit
import json
import logging
import threading
from collections import OrderedDict
from typing import Any, TypeVar

import httpx

from clones.base import State, get_clone
from clones.drift import Drift
from devices.clone_browser import CALL_TIMEOUT_S, BrowserPool, Emulation
from devices.clone_device import CloneDevice
from realbench.device import DeviceKind, TargetKind
from realbench.errors import DeviceError, DeviceLost
from realbench.http_guard import auth_headers, client_token
from realbench.observation import ImageFormat
from realbench.outcome import Verdict
from realbench.taskpack import TaskInstance, TaskPack

log = logging.getLogger(__name__)

T = TypeVar("T")

CACHE_SIZE = 256

_clients: dict[tuple[str, str | None], httpx.Client] = {}
_clients_lock = threading.Lock()


def server_client(server_url: str, token_env: str | None = None) -> httpx.Client:
    """The process's HTTP client for a clone server (and token). Building a client loads a TLS context
    (50-70 ms on a loaded core), which made bringing up 100 environments seconds slower; a client is
    thread-safe, and environments are kept apart by their server sessions, not by connections."""
    token = client_token(token_env)
    with _clients_lock:
        key = (server_url, token)
        client = _clients.get(key)
        if client is None or client.is_closed:
            client = _clients[key] = httpx.Client(
                base_url=server_url, timeout=CALL_TIMEOUT_S, headers=auth_headers(token)
            )
        return client


@atexit.register
def _close_clients() -> None:
    with _clients_lock:
        for client in _clients.values():
            client.close()
        _clients.clear()


class CloneTarget:
    """A task pack's clone in a headless page. Implements `realbench.device.Target`.

    `setup` builds the task's start state on the clone server once per (setup, params), keeps a
    snapshot of it, and on later episodes restores that snapshot and swaps the screen in place.
    """

    def __init__(
        self,
        pack: TaskPack,
        server_url: str,
        *,
        browser: BrowserPool | None = None,
        scale: float = 2.625,
        image_format: ImageFormat = ImageFormat.JPEG,
        jpeg_quality: int = 80,
        drift: Drift | str | dict[str, Any] | None = None,
        emulation: Emulation | None = None,
        token_env: str | None = None,
    ) -> None:
        """`token_env`: the environment variable holding the clone server's token (the server's
        default, REALBENCH_SERVER_TOKEN, is sent when set); the API calls and the page send it."""
        self.pack = pack
        self.clone = get_clone(pack.clone)
        self.server_url = server_url.rstrip("/")
        self.pool = (browser or BrowserPool.shared()).start()
        self.emulation = emulation or Emulation(scale=scale)
        self.drift = drift
        token = client_token(token_env)
        self._http = server_client(self.server_url, token_env)
        self._device = CloneDevice(
            self.pool,
            self.server_url,
            self.clone,
            emulation=self.emulation,
            image_format=image_format,
            jpeg_quality=jpeg_quality,
            token=token,
        )
        self._session: str | None = None
        self._starts: OrderedDict[str, tuple[str, State]] = OrderedDict()
        self._before: State | None = None

    # --- Target protocol ---

    @property
    def kind(self) -> TargetKind:
        return TargetKind.CLONE

    @property
    def device(self) -> CloneDevice:
        return self._device

    @property
    def delivers_boundary(self) -> bool:
        return True

    @property
    def session(self) -> str | None:
        return self._session

    def describe(self) -> dict[str, Any]:
        drift = self.drift
        drift_name = (
            drift.name
            if isinstance(drift, Drift)
            else drift.get("profile", "custom")
            if isinstance(drift, dict)
            else drift
        )
        return {
            "kind": DeviceKind.HEADLESS_CLONE.value,
            "serial": self._device.serial,
            "virtual": False,
            "model": f"Chromium {self.pool.version} (headless, {self.emulation.width}x{self.emulation.height} CSS px)",
            "browser": self.pool.version,
            "scale": self.emulation.scale,
            "screen": list(self.emulation.pixel_size),
            "clone": self.clone.name,
            "package": self.clone.package,
            "drift": drift_name,
        }

    def setup(self, instance: TaskInstance) -> None:
        if not self.pool.running:
            self.pool.start()  # the browser died: relaunch it (once per pool, whoever comes first)
        if self._device.lost:
            # A crashed page (or one closed with its shared renderer or browser) is replaced; the
            # server session, and so every cached start state, survives.
            log.info("%s: page lost; opening a new one", self._device.serial)
            self._device.close()
        setup = instance.task.clone.setup.model_dump(mode="json")
        key = json.dumps([setup, instance.params], sort_keys=True, default=str, ensure_ascii=False)
        for attempt in range(2):
            try:
                self._setup(key, setup, instance.params)
                return
            except _SessionGone:
                if attempt:
                    raise DeviceLost(
                        f"{self._device.serial}: the clone server lost the session twice"
                    ) from None
                log.info("%s: session gone on the server; starting a new one", self._device.serial)
                self._session = None
                self._starts.clear()

    def verify(self, instance: TaskInstance, answer: str | None) -> Verdict:
        if self._before is None:
            raise DeviceError(f"{self._device.serial}: verify called before setup")
        return self.clone.verify_instance(instance, self._before, self.state(), answer)

    def teardown(self) -> None:
        sid, self._session = self._session, None
        if sid is not None:
            try:
                self._http.delete(f"/api/sessions/{sid}")
            except httpx.HTTPError as exc:
                log.debug("deleting session %s: %s", sid, exc)
        self._device.close()

    # --- state access (the server owns the state) ---

    def state(self) -> State:
        return dict(self._api("GET", f"/api/sessions/{self._require_session()}/state"))

    def before(self) -> State | None:
        """The state at the last setup (what `verify` compares against)."""
        return self._before

    # --- internals ---

    def _require_session(self) -> str:
        if self._session is None:
            raise DeviceError(f"{self._device.serial}: no session yet", hint="call setup first")
        return self._session

    def _api(self, method: str, path: str, body: Any = None) -> Any:
        try:
            resp = self._http.request(method, path, json=body)
        except httpx.HTTPError as exc:
            raise DeviceLost(
                f"the clone server at {self.server_url} is unreachable: {exc}", hint="is it running?"
            ) from None
        if resp.status_code == 404 and "/api/sessions/" in path:
            raise _SessionGone(resp.text)
        if resp.status_code != 200:
            raise DeviceError(f"clone server {method} {path} answered {resp.status_code}: {resp.text[:300]}")
        return resp.json()

    def _remember(self, key: str, snapshot: str, before: State) -> None:
        self._starts[key] = (snapshot, before)
        while len(self._starts) > CACHE_SIZE:
            self._starts.popitem(last=False)

    def _setup(self, key: str, setup: dict[str, Any], params: dict[str, Any]) -> None:
        known = self._starts.get(key)
        if self._session is None:
            body: dict[str, Any] = {"clone": self.clone.name, "setup": setup, "params": params}
            if self.drift is not None:
                body["drift"] = self.drift.model_dump() if isinstance(self.drift, Drift) else self.drift
            created = self._api("POST", "/api/sessions", body)
            self._session = str(created["session"])
            snapshot = self._api("POST", f"/api/sessions/{self._session}/snapshot")["snapshot"]
            before = self.state()
            self._remember(key, snapshot, before)
            self._device.open(self._session)
        elif known is not None:
            snapshot, before = known
            self._starts.move_to_end(key)
            try:
                screen = self._api("POST", f"/api/sessions/{self._session}/restore", {"snapshot": snapshot})
            except _SessionGone:
                # The session lives but the server dropped the snapshot: rebuild from the setup.
                self._starts.pop(key, None)
                self._rebuild(key, setup, params)
                return
            self._present(screen)
        else:
            self._rebuild(key, setup, params)
            return
        self._before = before

    def _rebuild(self, key: str, setup: dict[str, Any], params: dict[str, Any]) -> None:
        sid = self._require_session()
        screen = self._api("POST", f"/api/sessions/{sid}/restore", {"setup": setup, "params": params})
        snapshot = self._api("POST", f"/api/sessions/{sid}/snapshot")["snapshot"]
        before = self.state()
        self._remember(key, snapshot, before)
        self._present(screen)
        self._before = before

    def _present(self, screen: dict[str, Any]) -> None:
        """Show the restored screen: swapped into the live page, or by opening the session."""
        sid = self._require_session()
        if self._device.session == sid:
            self._device.show(screen)
        else:
            self._device.open(sid)


class _SessionGone(DeviceError):
    """The server no longer knows the session (or snapshot); the target starts a new one."""

    def __init__(self, detail: str) -> None:
        super().__init__(f"the clone server no longer has this session: {detail[:200]}")
