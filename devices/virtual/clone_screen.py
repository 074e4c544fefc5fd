"""App screens of a virtual phone rendered by the clones: a clone-server session in a Chromium page.

`com.MobileTicket` shows the `train_ticketing` clone and `com.chinamworld.main` the `bank` clone,
each with the phone's drift profile. When a task is provisioned for an episode, the drift's seed
is a function of the episode (task and instance seed), not of the phone: which phone of a rig
takes an episode then changes nothing it shows, so the same seed gives the same study. The browser package shows the undrifted
clone (the clone-on-phone target): the page of the URL it was started with when that URL is a
clone-server page (`http://HOST:PORT/s/SESSION`), else a fresh undrifted session of the first clone.

One clone server and one Chromium serve every phone of a process; each app is one page.
"""

from __future__ import annotations

import hashlib
import io
import logging
import re
import threading
import xml.etree.ElementTree as ET
from pathlib import Path
from typing import TYPE_CHECKING, Any
from urllib.parse import parse_qs, urlsplit

import httpx
from PIL import Image

from devices.virtual.model import APP_CLONES, BROWSER_PACKAGE
from devices.virtual.screen import ScreenSource
from devices.virtual.uitree import window_elements
from realbench.errors import DeviceError
from realbench.http_guard import auth_headers, client_token
from realbench.observation import ImageFormat

if TYPE_CHECKING:
    from devices.clone_browser import BrowserPool
    from devices.clone_device import CloneDevice
    from devices.virtual.phone import VirtualPhone

log = logging.getLogger(__name__)

CSS_WIDTH = 412
DRIFT_OVERLAY_IDS = ("rb_launch_ad", "rb_update_dialog", "rb_notification_prompt")
_BOUNDS = re.compile(r"\[(-?\d+),(-?\d+)\]\[(-?\d+),(-?\d+)\]")
_CLONE_URL = re.compile(r"^(https?://[^/]+)/s/([A-Za-z0-9_-]+)")
# The page's `data-activity` as the dump carries it: `<hierarchy rotation="0" activity="...">`.
_ACTIVITY = re.compile(r'<hierarchy\b[^>]*\sactivity="([^"]+)"')


def episode_drift(drift: dict[str, Any], episode: str) -> dict[str, Any]:
    """The phone's drift profile with a seed drawn from the episode key (stable across processes)."""
    digest = hashlib.sha256(f"{drift['profile']}:{episode}".encode()).digest()
    return {**drift, "seed": int.from_bytes(digest[:4], "little")}


def css_width_for(width: int, height: int) -> int:
    """A CSS viewport width near a phone's (412) at which the page's pixel size is exactly the
    phone's, so screenshots need no resampling (1080x2400 -> 414x920 CSS px)."""
    for delta in range(0, 30):
        for css_w in (CSS_WIDTH + delta, CSS_WIDTH - delta):
            if (css_w * height) % width == 0:
                return css_w
    return CSS_WIDTH


def clone_screens_available() -> str | None:
    """None when clone screens can run here, else why not."""
    from devices.clone_browser import DEFAULT_CHROMIUM

    if not Path(DEFAULT_CHROMIUM).exists():
        return f"Chromium is not installed at {DEFAULT_CHROMIUM}"
    try:
        import clones.registry  # noqa: F401  (registers the built-in clones)
        from clones.base import clone_names
    except ImportError as exc:
        return f"the clones cannot be imported: {exc}"
    missing = [c for c in APP_CLONES.values() if c not in clone_names()]
    return f"clones not registered: {missing}" if missing else None


class CloneBackend:
    """The process's clone server and browser, started on first use and stopped at exit."""

    _lock = threading.Lock()
    _instance: CloneBackend | None = None

    def __init__(self) -> None:
        import clones.registry  # noqa: F401
        from clones.server import CloneServer
        from devices.clone_browser import BrowserPool, Isolation

        self.server = CloneServer().start()
        # A renderer of its own per phone, as each phone runs its own app: with phones sharing
        # renderers, every touch of a swipe on one phone's long list waited behind another phone's
        # page (1–2 s per touch event, a 19-event swipe 13–15 s, seen in every 4-phone run).
        self.pool: BrowserPool = BrowserPool(isolation=Isolation.CONTEXT).start()
        self.http = httpx.Client(base_url=self.server.url, timeout=30)

    @classmethod
    def get(cls) -> CloneBackend:
        with cls._lock:
            if cls._instance is None:
                cls._instance = cls()
            return cls._instance

    @classmethod
    def shutdown(cls) -> None:
        with cls._lock:
            backend, cls._instance = cls._instance, None
        if backend is not None:
            backend.http.close()
            backend.pool.close()
            backend.server.stop()


class CloneAppScreen:
    """One app of the phone: a page showing a clone-server session, in phone pixels."""

    def __init__(self, package: str, clone_name: str, drift: Any, width: int, height: int) -> None:
        from devices.clone_browser import Emulation

        self.package = package
        self.clone_name = clone_name
        self.drift = drift
        self.phone_drift = drift  # the profile; episodes draw their own seeds from it
        self.width = width
        self.height = height
        css_w = css_width_for(width, height)
        scale = width / css_w
        self.emulation = Emulation(width=css_w, height=round(height * css_w / width), scale=scale)
        self.backend = CloneBackend.get()
        self.server_url = self.backend.server.url
        # the token of the server at server_url (the backend's own reads the same variable)
        self._token = client_token()
        self.session: str | None = None
        self.device: CloneDevice | None = None
        self._owns_session = True

    # --- lifecycle ---

    def _api(self, method: str, path: str, body: Any = None, base: str | None = None) -> Any:
        from devices.clone_target import server_client

        url = base or self.server_url
        try:
            resp = server_client(url).request(
                method,
                url + path,
                json=body,
                timeout=30,
                headers=auth_headers(self._token),
            )
        except httpx.HTTPError as exc:
            raise DeviceError(f"{self.package}: clone server unreachable: {exc}") from None
        if resp.status_code != 200:
            raise DeviceError(
                f"{self.package}: clone server {method} {path} answered {resp.status_code}: {resp.text[:200]}"
            )
        return resp.json()

    def _device(self) -> CloneDevice:
        from clones.base import get_clone
        from devices.clone_device import CloneDevice

        if self.device is None:
            self.device = CloneDevice(
                self.backend.pool,
                self.server_url,
                get_clone(self.clone_name),
                emulation=self.emulation,
                serial=f"vphone-{self.package}",
                token=self._token,
            )
        return self.device

    def open_url(self, url: str) -> None:
        """Show an existing clone-server page (browser package, clone-on-phone)."""
        match = _CLONE_URL.match(url)
        if match is None:
            raise DeviceError(
                f"the virtual phone's browser only opens clone-server pages, not {url!r}",
                hint="pass http://HOST:PORT/s/SESSION",
            )
        self.close()
        self.server_url, self.session = match.group(1), match.group(2)
        # Like a phone's browser: only the link can carry a token-guarded server's token (the
        # server's cookie then keeps it); this process's environment is not the browser's.
        self._token = parse_qs(urlsplit(url).query).get("token", [None])[0]
        self._owns_session = False
        self._device().open(self.session)

    def start(self) -> None:
        if self.session is None:
            body: dict[str, Any] = {"clone": self.clone_name}
            if self.drift is not None:
                body["drift"] = self.drift
            self.session = str(self._api("POST", "/api/sessions", body)["session"])
            self._device().open(self.session)
            return
        # A cold start after force-stop: same data, launch pop-ups re-armed, home screen.
        state = self._api("GET", f"/api/sessions/{self.session}/state")
        screen = self._api("POST", f"/api/sessions/{self.session}/restore", {"state": state})
        self._device().show(screen)

    def stop(self) -> None:
        if self.device is not None and self.session is not None:
            self.device.stop_app(self.device.clone.package)

    def provision(self, setup: dict[str, Any], params: dict[str, Any], episode: str | None = None) -> None:
        """Put the app's account in a task's start state (what a lab does by hand on a real phone),
        keeping the phone's drift profile: the clone builds the state from the task's clone setup.
        With ``episode`` the drift's seed comes from the episode, so any phone shows it the same."""
        if episode is not None and isinstance(self.phone_drift, dict):
            wanted = episode_drift(self.phone_drift, episode)
            if wanted != self.drift:
                self.drift = wanted
                if self._owns_session and self.session is not None:
                    self._delete_session()
        if not self._owns_session:
            self.close()
        if self.session is None:
            self.start()
        screen = self._api(
            "POST", f"/api/sessions/{self.session}/restore", {"setup": setup, "params": params}
        )
        self._device().show(screen)

    def app_state(self) -> dict[str, Any]:
        """The app's whole state: on a virtual phone the ground truth a verifier can read."""
        if self.session is None:
            raise DeviceError(f"{self.package} has not been started on this virtual phone")
        return self._api("GET", f"/api/sessions/{self.session}/state")  # type: ignore[no-any-return]

    def what_if_tap(self, x: int, y: int) -> dict[str, Any]:
        """The app state a tap at (x, y) would lead to, leaving the app as it was: a snapshot is
        taken, the tap applied to the clone page directly (not as phone input, so it never shows
        in the phone's input log), the state read and the snapshot restored. This is how a virtual
        phone grades an episode that its interlock stopped at a commit boundary."""
        if self.session is None:
            raise DeviceError(f"{self.package} has not been started on this virtual phone")
        snap = self._api("POST", f"/api/sessions/{self.session}/snapshot")["snapshot"]
        try:
            self.tap(x, y)
            return self._api("GET", f"/api/sessions/{self.session}/state")  # type: ignore[no-any-return]
        finally:
            screen = self._api("POST", f"/api/sessions/{self.session}/restore", {"snapshot": snap})
            self._device().show(screen)

    def clear(self) -> None:
        if self.session is not None and self.device is not None:
            screen = self._api("POST", f"/api/sessions/{self.session}/restore", {"setup": {}})
            self.device.show(screen)

    def _delete_session(self) -> None:
        try:
            self._api("DELETE", f"/api/sessions/{self.session}")
        except DeviceError as exc:
            log.debug("deleting session: %s", exc)
        self.session = None

    def close(self) -> None:
        if self.device is not None:
            self.device.close()
            self.device = None
        if self.session is not None and self._owns_session:
            self._delete_session()
        self.session = None

    # --- screen ---

    def screenshot(self) -> Image.Image:
        return self._frame(self._device().screenshot().data)

    def _frame(self, data: bytes) -> Image.Image:
        img = Image.open(io.BytesIO(data))
        img.load()
        return img if img.size == (self.width, self.height) else img.resize((self.width, self.height))

    def screenshot_jpeg(self, quality: int) -> bytes | None:
        """The browser's JPEG as it is when it is encoded at this quality (and the phone's size;
        else resized and encoded again); None when the browser encodes otherwise."""
        device = self._device()
        if device.image_format is not ImageFormat.JPEG or device.jpeg_quality != quality:
            return None
        shot = device.screenshot()
        if (shot.width, shot.height) == (self.width, self.height):
            return shot.data
        buf = io.BytesIO()
        self._frame(shot.data).save(buf, format="JPEG", quality=quality)
        return buf.getvalue()

    def hierarchy(self) -> list[ET.Element]:
        xml = self._device().hierarchy()
        pw, ph = self.emulation.pixel_size
        sx, sy = self.width / pw, self.height / ph
        windows = window_elements(xml)
        for win in windows:
            for el in win.iter("node"):
                el.set("package", self.package)
                rid = el.get("resource-id", "")
                if ":id/" in rid:
                    el.set("resource-id", f"{self.package}:id/{rid.split(':id/', 1)[1]}")
                m = _BOUNDS.fullmatch(el.get("bounds", ""))
                if m and (sx, sy) != (1.0, 1.0):
                    left, top, right, bottom = (int(g) for g in m.groups())
                    el.set(
                        "bounds",
                        f"[{round(left * sx)},{round(top * sy)}][{round(right * sx)},{round(bottom * sy)}]",
                    )
        return windows

    def activity(self) -> str | None:
        """The activity the page in front declares (`data-activity`, see clones/base.py), as a full
        class name; None when it declares none."""
        if self.session is None and self.device is None:
            return None
        try:
            m = _ACTIVITY.search(self._device().hierarchy()[:1000])
        except DeviceError as exc:  # a page that cannot be read declares nothing; dumpsys still answers
            log.debug("%s: no activity: %s", self.package, exc.message)
            return None
        if m is None:
            return None
        name = m.group(1)
        return self.package + name if name.startswith(".") else name

    # --- input ---

    def _norm(self, x: int, y: int) -> tuple[int, int]:
        nx = round(min(max(x, 0), self.width - 1) * 1000 / (self.width - 1))
        ny = round(min(max(y, 0), self.height - 1) * 1000 / (self.height - 1))
        return nx, ny

    def tap(self, x: int, y: int, long: bool = False) -> None:
        from realbench.actions import Click, LongPress

        nx, ny = self._norm(x, y)
        self._device().act(LongPress(x=nx, y=ny) if long else Click(x=nx, y=ny))

    def swipe(self, x1: int, y1: int, x2: int, y2: int, duration_ms: int) -> None:
        from realbench.actions import Swipe

        (a, b), (c, d) = self._norm(x1, y1), self._norm(x2, y2)
        self._device().act(Swipe(x=a, y=b, x2=c, y2=d, duration_ms=max(50, min(10_000, duration_ms))))

    def key(self, key: str) -> bool:
        from realbench.actions import Key, KeyPress

        if key == "back":
            if self._at_root():
                return False
            self._device().act(KeyPress(key=Key.BACK))
        elif key == "enter":
            self._device().act(KeyPress(key=Key.ENTER))
        return True

    def _at_root(self) -> bool:
        if self.session is None:
            return True
        state = self._api("GET", f"/api/sessions/{self.session}/state")
        ui = state.get("ui", {})
        if ui.get("dialog") or ui.get("stack"):
            return False
        xml = self._device().hierarchy()
        # every drift overlay's outermost element has an id starting rb_ (clones/drift.py,
        # clones/interruptions.py): back closes it rather than leaving the app
        return not any(f'id/{overlay}"' in xml for overlay in DRIFT_OVERLAY_IDS) and ":id/rb_" not in xml

    def text(self, text: str) -> None:
        from realbench.actions import Type

        if text:
            self._device().act(Type(text=text[:2000]))


def make_clone_screen(phone: VirtualPhone, package: str) -> ScreenSource:
    ident = phone.spec.identity
    if package == BROWSER_PACKAGE:
        screen = CloneAppScreen(package, next(iter(APP_CLONES.values())), None, ident.width, ident.height)
        if phone.browser_url:
            screen.open_url(phone.browser_url)
        return screen
    clone = APP_CLONES.get(package)
    if clone is None:
        raise DeviceError(
            f"no clone stands in for {package} on the virtual phone",
            hint=f"apps with clones: {list(APP_CLONES)}",
        )
    drift = None if phone.spec.drift == "none" else {"profile": phone.spec.drift, "seed": phone.spec.seed}
    return CloneAppScreen(package, clone, drift, ident.width, ident.height)
