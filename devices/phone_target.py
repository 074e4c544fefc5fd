"""Targets on a phone: the real app (`real`) and the clone in the phone's browser (`clone-on-phone`).

`real`: setup stops and relaunches the app, dismisses the profile's ROM pop-ups, waits for the app
to come to the foreground and runs the pack's logged-in probe (logging in with the rig's account
recipe when there is one). The device the episode loop sees is the phone behind the interlock,
armed with the task's boundary and the app's always-forbidden controls: the commit tap is never
sent (`delivers_boundary=False`). `verify` returns None: real-side checks and the judge decide.
On a virtual phone (a test rig whose apps are drifted clones) the account is provisioned with the
task's clone setup and the verdict is the clone verifier's on the app's state — ground truth that
a real phone cannot give, recorded as `virtual-phone-truth`; an episode stopped at the boundary is
graded on the state the blocked tap would have produced, computed on a snapshot.

`clone-on-phone`: a clone-server session is created from the task's clone setup and opened in
the phone's browser (a physical phone reaches the host's server through `adb reverse`); the
verdict comes from the clone's verifier on the session's state, exactly as for headless clones,
so the two differ only by the device.
"""

from __future__ import annotations

import contextlib
import logging
import time
from collections.abc import Iterator
from typing import Any
from urllib.parse import urlencode

import httpx

from devices.clone_target import server_client
from devices.farm.health import dismiss_popups
from devices.farm.interlock import InterlockedDevice
from devices.farm.interlock_policy import InterlockPolicy
from devices.phone import PhoneDevice
from devices.recipe_runner import SetupRunner, StepRecord
from devices.rig import Account
from devices.secrets import install_redaction
from devices.virtual.control import PhoneControl
from realbench.actions import Action, Click, DoubleClick, LongPress, Swipe
from realbench.device import Device, TargetKind
from realbench.errors import (
    BoundaryBlocked,
    ConfigError,
    DeviceError,
    DeviceLost,
    RealbenchError,
    ServerError,
)
from realbench.hierarchy import Hierarchy, Node, Selector
from realbench.http_guard import auth_headers, client_token
from realbench.observation import Observation
from realbench.outcome import Verdict
from realbench.taskpack import TaskInstance, TaskPack

log = logging.getLogger(__name__)


class SetupRefused(DeviceError):
    """The interlock refused an input of the task's setup (launch pop-ups, login, recipe steps).
    Nothing was sent; the episode aborts before the agent's first step and is rerun."""


FOREGROUND_TIMEOUT_S = 10.0
PROBE_TIMEOUT_S = 4.0
POLL_S = 0.25
BROWSER_PACKAGE = "com.android.chrome"
VIRTUAL_SETTLE_S = 0.05
# The verifier verdict of a virtual phone, whose apps are clones: ground truth the report labels.
VIRTUAL_TRUTH = "virtual-phone-truth"


def _find(phone: PhoneDevice | InterlockedDevice, selector: Selector) -> Node | None:
    try:
        return Hierarchy(phone.hierarchy()).find_one(selector)
    except RealbenchError:
        return None


def _tap(guard: InterlockedDevice, node: Node) -> None:
    """A setup tap: through the guard, decided as an agent's tap would be."""
    w, h = guard.size()
    cx, cy = node.bounds.center
    guard.act(
        Click(
            x=max(0, min(1000, round(cx * 1000 / (w - 1)))), y=max(0, min(1000, round(cy * 1000 / (h - 1))))
        )
    )


def wait_for(fn: Any, timeout: float, poll: float = POLL_S) -> Any:
    deadline = time.monotonic() + timeout
    while True:
        value = fn()
        if value or time.monotonic() >= deadline:
            return value
        time.sleep(poll)


class WatchedDevice:
    """Passes everything through, and turns environment failures visible on screen (the app's
    login screen showing up mid-episode) into `DeviceError`, so they end as env_invalid instead
    of being scored as the agent's failure. The interlock runs the same check on the fresh screen
    it dumps before each action, so a tap is not sent into a login screen either."""

    def __init__(self, inner: Any, package: str, login_screen: Selector | None) -> None:
        self.inner = inner
        self.package = package
        self.login_screen = login_screen

    def __getattr__(self, name: str) -> Any:
        return getattr(self.inner, name)

    def check(self, hierarchy: Hierarchy) -> None:
        if self.login_screen is None:
            return
        node = hierarchy.find_one(self.login_screen)
        if node is not None and node.package in ("", self.package):
            raise DeviceError(
                f"{self.package} on {self.inner.serial} logged out during the episode",
                hint="log the phone back in (or give the rig account a login recipe); the episode is rerun",
            )

    def observe(self) -> Observation:
        obs = self.inner.observe()
        if self.login_screen is not None and obs.hierarchy and obs.app == self.package:
            try:
                hierarchy = Hierarchy(obs.hierarchy)
            except RealbenchError:
                return obs
            self.check(hierarchy)
        return obs

    def act(self, action: Any) -> None:
        self.inner.act(action)


class PhoneTarget:
    """A phone running one pack's app (real) or its clone in the browser (clone-on-phone)."""

    def __init__(
        self,
        phone: PhoneDevice,
        pack: TaskPack,
        kind: TargetKind,
        *,
        account: Account | None = None,
        login_screen: Selector | None = None,
        clone_server_url: str | None = None,
        browser_package: str = BROWSER_PACKAGE,
        phone_server_url: str | None = None,
        virtual_control: str | None = None,
        token_env: str | None = None,
    ) -> None:
        """`token_env`: the environment variable holding the clone server's token, for
        clone-on-phone (the server's default, REALBENCH_SERVER_TOKEN, is sent when set)."""
        if kind is TargetKind.CLONE:
            raise ConfigError("PhoneTarget runs `real` or `clone-on-phone`; headless clones use CloneTarget")
        if kind is TargetKind.CLONE_ON_PHONE and not clone_server_url:
            raise ConfigError(
                "clone-on-phone needs a clone server URL", hint="the farm starts one; pass clone_server_url"
            )
        self.phone = phone
        self.pack = pack
        self._kind = kind
        self.account = account
        self.clone_server_url = clone_server_url.rstrip("/") if clone_server_url else None
        # The address the phone itself uses for the server (after `adb reverse`, its own localhost).
        self.phone_server_url = (phone_server_url or clone_server_url or "").rstrip("/")
        self.browser_package = browser_package
        self._token = client_token(token_env) if kind is TargetKind.CLONE_ON_PHONE else None
        if self._token:
            install_redaction([self._token])  # the phone's browser is sent it in the page's URL
        self.interlock = InterlockedDevice(phone) if kind is TargetKind.REAL else None
        self.login_screen = login_screen
        self._watched = (
            WatchedDevice(self.interlock, pack.real_app.package, login_screen) if self.interlock else None
        )
        self.virtual_control = PhoneControl(virtual_control) if virtual_control else None
        self._session: str | None = None
        self._before: dict[str, Any] | None = None
        # certify records each setup step (screenshot, hierarchy); runs do not
        self.record_setup = False
        self.setup_records: list[StepRecord] = []
        phone.app_aliases.setdefault(pack.clone, pack.real_app.package)
        phone.app_aliases.setdefault(pack.app, pack.real_app.package)

    # --- Target protocol --------------------------------------------------------------------

    @property
    def kind(self) -> TargetKind:
        return self._kind

    @property
    def device(self) -> Device:
        return self._watched if self._watched is not None else self.phone  # type: ignore[return-value]

    @property
    def delivers_boundary(self) -> bool:
        return self._kind is not TargetKind.REAL

    def describe(self) -> dict[str, Any]:
        info = self.phone.describe()
        info["target"] = str(self._kind)
        if self._kind is TargetKind.REAL:
            info["app"] = self.pack.real_app.package
            try:
                info["app_version"] = self.phone.recent_app_version(self.pack.real_app.package)
            except DeviceError:
                info["app_version"] = None
        else:
            info["app"] = self.browser_package
            info["clone"] = self.pack.clone
        return info

    def setup(self, instance: TaskInstance) -> None:
        if self._kind is not TargetKind.REAL:
            self._setup_clone(instance)
            return
        try:
            self._setup_real(instance)
        except BoundaryBlocked as exc:
            # Nothing was sent, and the agent has not acted: the episode never started, like any
            # other setup that could not run (a pop-up redrawn under a dismiss tap, a recipe step
            # the guard does not allow). It aborts and is rerun; it must not end the whole run.
            raise SetupRefused(
                f"the interlock refused a setup input on {self.phone.serial}: {exc.message}",
                hint="nothing was sent; the episode is aborted and rerun. If it repeats, a pop-up rule or "
                "setup step of the pack taps a control the guard does not allow (docs/farm.md, the guard)",
            ) from exc

    def verify(self, instance: TaskInstance, answer: str | None) -> Verdict | None:
        if self._kind is TargetKind.REAL:
            package = self.pack.package_for(instance.task)
            self._still_logged_in(package)
            if self.virtual_control is None:
                return None  # a real app: real-side checks, judges and labels decide
            return self._virtual_truth(instance, answer, self.virtual_control.app_state(package))
        return self._verify_clone(instance, answer)

    def verify_at_boundary(
        self, instance: TaskInstance, answer: str | None, action: Action
    ) -> Verdict | None:
        """The verdict of an episode stopped at its commit boundary (the tap was not sent). On a
        real phone nothing programmatic can say what the tap would have done: None. A virtual
        phone can: it evaluates the tap on a snapshot of the app and leaves the app unchanged."""
        if self._kind is not TargetKind.REAL:
            return self.verify(instance, answer)
        if self.virtual_control is None:
            self._still_logged_in(self.pack.package_for(instance.task))
            return None
        point = action.point if isinstance(action, Click | DoubleClick | LongPress | Swipe) else None
        if point is None:
            return self.verify(instance, answer)
        package = self.pack.package_for(instance.task)
        w, h = self.phone.size()
        px, py = round(point[0] * (w - 1) / 1000), round(point[1] * (h - 1) / 1000)
        return self._virtual_truth(instance, answer, self.virtual_control.what_if_tap(package, px, py))

    def _virtual_truth(self, instance: TaskInstance, answer: str | None, after: dict[str, Any]) -> Verdict:
        from clones.base import get_clone

        if self._before is None:
            raise DeviceError("virtual-phone verify before setup")
        verdict = get_clone(self.pack.clone).verify_instance(instance, self._before, after, answer)
        return verdict.model_copy(
            update={"name": VIRTUAL_TRUTH, "reason": f"virtual phone (clone state): {verdict.reason}"}
        )

    def _still_logged_in(self, package: str) -> None:
        """After the episode: was the app still logged in? A session that expired while the agent
        was outside the app (or pressed back on the login screen) would otherwise pass for the
        agent's failure. The final screen is already recorded; bringing the app forward is harmless."""
        if self._watched is None or self.login_screen is None:
            return
        if self.phone.current_app() != package:
            self.phone.start_app(package)
            time.sleep(self._settle_s())
        try:
            hierarchy = Hierarchy(self.phone.hierarchy())
        except RealbenchError:
            return
        self._watched.check(hierarchy)

    def teardown(self) -> None:
        if self.interlock is not None:
            self.interlock.disarm()
        self._delete_session()

    # --- real app ---------------------------------------------------------------------------

    def _setup_real(self, instance: TaskInstance) -> None:
        assert self.interlock is not None
        # Every setup input goes through the armed interlock, from the cold start's pop-ups and
        # the login recipe on: none can cross the boundary or touch a forbidden control.
        self.interlock.arm(
            instance.boundary(), list(self.pack.real_app.forbidden), InterlockPolicy.for_pack(self.pack)
        )
        package = self.pack.package_for(instance.task)
        self.setup_records = []
        if self.virtual_control is not None:
            # What a lab does by hand before a session on a real phone: put the account in the
            # task's start state. A virtual phone's app is a (drifted) clone, so it can be exact.
            self.virtual_control.provision(
                package,
                instance.task.clone.setup.model_dump(mode="json"),
                instance.params,
                # the drift an episode sees depends on the episode, not on which phone took it
                episode=f"{instance.task.id}:{instance.seed}",
            )
        self._launch(package)
        self._ensure_logged_in()
        runner = SetupRunner(
            self.phone,
            self.interlock,
            package=package,
            relaunch=self._cold_start,
            record=self.record_setup,
            settle_s=self._settle_s(),
        )
        try:
            runner.run(instance.task.real.setup, instance.params)
        finally:
            self.setup_records = runner.records
        if self.virtual_control is not None:
            self._before = self.virtual_control.app_state(package)

    def _launch(self, package: str) -> None:
        """Cold start through the guard: refused unless `package` is one of the pack's."""
        with self._setup_guard() as guard:
            guard.launch(package, cold_start=self._cold_start)

    def _cold_start(self, package: str) -> None:
        """Stop, start, skip the ROM's and the app's launch pop-ups, wait for the app. Run by the
        guard's `launch` once it allowed `package`; the pop-ups are tapped through the guard."""
        phone = self.phone
        with self._setup_guard() as guard:
            if not guard.policy.may_launch(package):
                raise DeviceError(f"cold start of {package!r}: not one of the pack's packages")
            phone.stop_app(package)
            phone.start_app(package)
            profile = phone.profile
            time.sleep(self._settle_s())
            popups = [*(profile.popups if profile else []), *self.pack.real_app.popups]
            if popups:
                dismiss_popups(guard, popups)
        if wait_for(lambda: phone.current_app() == package, FOREGROUND_TIMEOUT_S) is not True:
            raise DeviceError(
                f"{package} did not come to the foreground on {phone.serial} (foreground: {phone.current_app()})",
                hint="the app may crash on launch, or a system dialog covers it",
            )

    def _settle_s(self) -> float:
        """Launch animations and splash screens: the profile knows the phone's; virtual phones have none."""
        if self.phone.virtual:
            return VIRTUAL_SETTLE_S
        return self.phone.profile.settle_s if self.phone.profile else 0.3

    def _login_state(self, probe: Selector) -> str | None:
        """ "in" (probe shown), "out" (the app's login screen shown) or None (neither, yet)."""
        try:
            hierarchy = Hierarchy(self.phone.hierarchy())
        except RealbenchError:
            return None
        if hierarchy.find_one(probe) is not None:
            return "in"
        if self.login_screen is not None and hierarchy.find_one(self.login_screen) is not None:
            return "out"
        return None

    def _probe_steps(self, steps: list[Any]) -> None:
        """Steps around the logged-in probe go through the interlock like any setup step, armed
        with the app's forbidden controls and the pack's policy (a sheet that pops up on the way
        is not trusted to be harmless)."""
        if not steps:
            return
        with self._setup_guard() as guard:
            SetupRunner(self.phone, guard, package=self.pack.real_app.package, relaunch=self._cold_start).run(
                steps, {}
            )

    @contextlib.contextmanager
    def _setup_guard(self) -> Iterator[InterlockedDevice]:
        """The interlock as setup uses it: as armed (by `_setup_real`, with the task's boundary),
        or, when not armed, armed for the block with the app's forbidden controls and the pack's
        policy and disarmed after it."""
        guard = self.interlock or InterlockedDevice(self.phone)
        if guard.armed:
            yield guard
            return
        guard.arm([], list(self.pack.real_app.forbidden), InterlockPolicy.for_pack(self.pack))
        try:
            yield guard
        finally:
            guard.disarm()

    def _ensure_logged_in(self) -> None:
        probe = self.pack.real_app.logged_in_probe
        if probe is None:
            return
        app = self.pack.real_app
        if app.probe_via:
            # the login screen may cover the way there: the probe below decides
            with contextlib.suppress(DeviceError):
                self._probe_steps(app.probe_via)
        state = wait_for(lambda: self._login_state(probe), PROBE_TIMEOUT_S)
        if state == "in":
            self._probe_steps(app.probe_back)
            return
        if self.account is None or not self.account.login:
            raise DeviceError(
                f"{self.pack.real_app.package} on {self.phone.serial} is not logged in (probe {probe} not found)",
                hint="log the phone in by hand, or give the rig account a login recipe",
            )
        self._login(self.account)
        self._probe_steps(app.probe_via)
        if wait_for(lambda: self._login_state(probe), PROBE_TIMEOUT_S) != "in":
            raise DeviceError(
                f"login with account {self.account.name!r} on {self.phone.serial} did not reach the logged-in screen",
                hint="check the account's login recipe and its environment variables",
            )
        self._probe_steps(app.probe_back)

    def _login(self, account: Account) -> None:
        """Run the account's login recipe through the guard: its taps are decided as an agent's
        would be, and its text goes through the guard's login door (`type_credential`): only on
        the pack's declared login screen, only into the field the step names."""
        creds = account.credentials()
        login_screen = self.pack.real_app.login_screen
        log.info("logging %s in with account %s", self.phone.serial, account.name)
        with self._setup_guard() as guard:
            for i, step in enumerate(account.login):
                if step.wait is not None:
                    time.sleep(step.wait)
                    continue
                if step.text is not None and (step.into is None or login_screen is None):
                    raise DeviceError(
                        f"login step {i} of account {account.name!r} types text "
                        + (
                            "with no `into` field"
                            if step.into is None
                            else "but the pack declares no login screen"
                        ),
                        hint="a login text step names its field (`into`), and the pack's real_app.login_screen "
                        "names the catalogue entry of the app's login screen",
                    )
                target = step.tap or step.into
                if target is not None:
                    node = wait_for(lambda t=target: _find(guard, t), PROBE_TIMEOUT_S)
                    if node is None:
                        raise DeviceError(f"login step {i}: {target} not on screen of {self.phone.serial}")
                    _tap(guard, node)
                if step.text is not None:
                    assert step.into is not None and login_screen is not None
                    what = next((k for k in ("password", "username") if "{" + k + "}" in step.text), "text")
                    guard.type_credential(
                        step.text.format(**creds), into=step.into, login_screen=login_screen, what=what
                    )

    # --- clone in the phone's browser -----------------------------------------------------

    def _api(self, method: str, path: str, **kwargs: Any) -> Any:
        assert self.clone_server_url is not None
        try:
            r = server_client(self.clone_server_url).request(
                method,
                f"{self.clone_server_url}{path}",
                timeout=15,
                headers=auth_headers(self._token),
                **kwargs,
            )
        except httpx.HTTPError as exc:
            raise ServerError(
                f"clone server {self.clone_server_url}: {exc}", hint="is the clone server running?"
            ) from None
        if r.status_code >= 400:
            raise ServerError(f"clone server {method} {path}: {r.status_code} {r.text[:200]}")
        return r.json()

    def _setup_clone(self, instance: TaskInstance) -> None:
        self._delete_session()
        body = {
            "clone": self.pack.clone,
            "setup": instance.task.clone.setup.model_dump(mode="json"),
            "params": instance.params,
        }
        try:
            sid = self._api("POST", "/api/sessions", json=body)["session"]
        except ServerError as exc:
            raise DeviceError(f"clone-on-phone setup: {exc.message}", hint=exc.hint) from None
        self._session = sid
        self._before = self._api("GET", f"/api/sessions/{sid}/state")
        url = f"{self.phone_server_url}/s/{sid}"
        # The phone's browser cannot send a header: the page link carries the token once and the
        # server answers with a same-site cookie that the page's own requests then carry.
        link = f"{url}?{urlencode({'token': self._token})}" if self._token else url
        self.phone.stop_app(self.browser_package)
        try:
            self.phone.shell(
                ["am", "start", "-a", "android.intent.action.VIEW", "-d", link, "-p", self.browser_package]
            )
        except DeviceError as exc:
            if not self._token:
                raise
            # the error names the command, link and token included; episodes store errors
            kind = DeviceLost if isinstance(exc, DeviceLost) else DeviceError
            raise kind(exc.message.replace(self._token, "***"), hint=exc.hint) from None
        if (
            wait_for(lambda: self.phone.current_app() == self.browser_package, FOREGROUND_TIMEOUT_S)
            is not True
        ):
            raise DeviceError(f"the browser did not open {url} on {self.phone.serial}")

    def _verify_clone(self, instance: TaskInstance, answer: str | None) -> Verdict:
        from clones.base import get_clone

        if self._session is None or self._before is None:
            raise DeviceError("clone-on-phone verify before setup")
        after = self._api("GET", f"/api/sessions/{self._session}/state")
        return get_clone(self.pack.clone).verify_instance(instance, self._before, after, answer)

    def _delete_session(self) -> None:
        if self._session is not None and self.clone_server_url:
            with contextlib.suppress(httpx.HTTPError):
                server_client(self.clone_server_url).delete(
                    f"{self.clone_server_url}/api/sessions/{self._session}",
                    timeout=5,
                    headers=auth_headers(self._token),
                )
        self._session = None
        self._before = None
