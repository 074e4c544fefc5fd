"""Turning a rig into leased, health-checked phone targets for the runner.

`targets_from_rig(rig, pack, kind)` is what `realbench run --target real|clone-on-phone --rig R`
calls: it starts the rig's virtual phones if it has any, starts a clone server for
clone-on-phone, and yields one `FarmTarget` per phone. A FarmTarget leases its phone for each
episode, health-checks (and repairs) it before the episode, and counts the outcome afterwards;
after K environment failures in a row the phone is quarantined and the runner's worker for it
stops (`ready_for_episode()` turns False), so its episodes go to the other phones.
"""

from __future__ import annotations

import contextlib
import logging
import subprocess
from collections.abc import Iterator
from datetime import date
from pathlib import Path
from typing import Any

from devices.farm.health import HealthReport, pack_pin_item
from devices.farm.pool import Lease, PhonePool
from devices.phone_target import PhoneTarget
from devices.rig import Account, PhoneSpec, Rig, load_rig
from devices.secrets import install_redaction
from realbench.actions import Action
from realbench.device import Device, TargetKind
from realbench.errors import ConfigError, DeviceError
from realbench.outcome import Outcome, Verdict
from realbench.taskpack import Task, TaskInstance, TaskPack, instantiate_from_fixture

log = logging.getLogger(__name__)


class FarmTarget:
    """One phone of the pool as a runner target (Target protocol + the runner's hooks)."""

    def __init__(
        self,
        pool: PhonePool,
        serial: str,
        pack: TaskPack,
        kind: TargetKind,
        *,
        clone_server_url: str | None = None,
        phone_server_url: str | None = None,
    ) -> None:
        self.pool = pool
        self.serial = serial
        self.pack = pack
        self._kind = kind
        self.clone_server_url = clone_server_url
        self.phone_server_url = phone_server_url
        self._inner: PhoneTarget | None = None
        self._lease: Lease | None = None
        self.last_health: HealthReport | None = None

    def _target(self) -> PhoneTarget:
        if self._inner is None:
            rec = self.pool.record(self.serial)
            package = self.pack.real_app.package
            account = self.pool.rig.account_for(rec.spec.accounts, package)
            pin = self.pool.rig.app_pin(package)
            self._inner = PhoneTarget(
                self.pool.phone(self.serial),
                self.pack,
                self._kind,
                account=account,
                login_screen=pin.login_screen if pin else None,
                clone_server_url=self.clone_server_url,
                phone_server_url=self.phone_server_url,
                virtual_control=rec.spec.control_url if rec.virtual else None,
            )
        return self._inner

    # --- Target protocol --------------------------------------------------------------------

    @property
    def kind(self) -> TargetKind:
        return self._kind

    @property
    def device(self) -> Device:
        return self._target().device

    @property
    def delivers_boundary(self) -> bool:
        return self._kind is not TargetKind.REAL

    def describe(self) -> dict[str, Any]:
        """Cheap and offline-safe: the runner calls it before anything is connected."""
        rec = self.pool.record(self.serial)
        base: dict[str, Any] = {
            "kind": "virtual-phone" if rec.virtual else "phone",
            "serial": self.serial,
            "profile": rec.profile.name,
            "host": rec.spec.host,
            "virtual": rec.virtual,
            "target": str(self._kind),
        }
        if rec.phone is not None:
            with contextlib.suppress(DeviceError):
                base.update(self._target().describe())
        return base

    def setup(self, instance: TaskInstance) -> None:
        if self._lease is None:
            self._lease = self.pool.acquire(self.serial, holder=f"episode:{instance.task.id}:{instance.seed}")
        report = self.pool.check(self.serial)
        if self._kind is TargetKind.REAL and self.pack.real_app.version is not None:
            report.items.append(
                pack_pin_item(
                    self.pool.phone(self.serial), self.pack.real_app.package, self.pack.real_app.version
                )
            )
        self.last_health = report
        if not report.ok:
            raise DeviceError(
                f"phone {self.serial} failed its health check: {report.summary()}",
                hint="see `realbench devices --rig …`",
            )
        self._target().setup(instance)

    def verify(self, instance: TaskInstance, answer: str | None) -> Verdict | None:
        return self._target().verify(instance, answer)

    def account(self) -> Account | None:
        rec = self.pool.record(self.serial)
        return self.pool.rig.account_for(rec.spec.accounts, self.pack.real_app.package)

    def instantiate(self, task: Task, seed: int) -> TaskInstance:
        """On the real app, parameters named by the task's fixture fields come from the account."""
        if self._kind is not TargetKind.REAL:
            return task.instantiate(seed, self.today(task))
        account = self.account()
        return instantiate_from_fixture(task, seed, self.today(task), account.fixture if account else None)

    def verify_at_boundary(
        self, instance: TaskInstance, answer: str | None, action: Action
    ) -> Verdict | None:
        return self._target().verify_at_boundary(instance, answer, action)

    def teardown(self) -> None:
        if self._inner is not None:
            self._inner.teardown()
        self._release()

    # --- runner hooks -----------------------------------------------------------------------

    def ready_for_episode(self) -> bool:
        return not self.pool.record(self.serial).quarantined

    def after_episode(self, result: Any) -> None:
        outcome = getattr(result, "outcome", None)
        if isinstance(outcome, Outcome):
            self.pool.record_outcome(self.serial, outcome, reason=str(getattr(result, "error", "") or ""))
        if self._inner is not None and self._inner.interlock is not None:
            self._inner.interlock.disarm()
        self._release()

    def today(self, task: Task) -> date:
        """Relative dates on a real phone resolve against today's date."""
        # A virtual phone's apps run on the task's virtual clock, like the headless clone.
        virtual = self.pool.record(self.serial).virtual
        return (
            date.today() if self._kind is TargetKind.REAL and not virtual else task.clone.setup.clock.date()
        )

    def _release(self) -> None:
        lease, self._lease = self._lease, None
        if lease is not None:
            lease.release()


# --- building targets from a rig --------------------------------------------------------------


def _adb_reverse(serial: str, port: int) -> None:
    """Let a physical phone reach the host's clone server as its own localhost:port."""
    try:
        subprocess.run(
            ["adb", "-s", serial, "reverse", f"tcp:{port}", f"tcp:{port}"],
            check=True,
            capture_output=True,
            timeout=20,
        )
    except (OSError, subprocess.SubprocessError) as exc:
        raise DeviceError(
            f"adb reverse on {serial} failed: {exc}", hint="clone-on-phone needs `adb reverse` (Android 5+)"
        ) from None


def running_virtual_phones() -> list[tuple[str, str | None]]:
    """(serial, control URL) of live phones that `realbench vphone up` started (and recorded)."""
    try:
        from devices.virtual.cli import ls
    except ImportError:
        return []
    try:
        hosts = ls()
    except (OSError, ValueError, DeviceError):
        return []
    return [
        (p["serial"], p.get("control_url"))
        for h in hosts
        if h.get("alive")
        for p in h.get("phones", [])
        if p.get("alive")
    ]


def mismatch_with_rig(control_url: str | None, rig: Rig) -> str | None:
    """How a running virtual phone departs from the rig's virtual section (drift, profile, pinned
    app versions), or None when it follows the rig."""
    import httpx

    assert rig.virtual is not None
    if control_url is None:
        return "no control channel"
    try:
        state = httpx.get(f"{control_url}/state", timeout=3).json()
    except (httpx.HTTPError, ValueError):
        return "its control channel does not answer"
    problems = []
    if state.get("drift") != rig.virtual.drift:
        problems.append(f"drift {state.get('drift')!r}, the rig asks for {rig.virtual.drift!r}")
    profile = (state.get("identity") or {}).get("profile")
    if profile != rig.virtual.profile:
        problems.append(f"profile {profile!r}, the rig asks for {rig.virtual.profile!r}")
    apps = state.get("apps") or {}
    for pin in rig.apps:
        installed = (apps.get(pin.package) or {}).get("version")
        if pin.package in apps and pin.version is not None and installed != pin.version:
            problems.append(f"{pin.package} {installed}, the rig pins {pin.version}")
    return "; ".join(problems) or None


@contextlib.contextmanager
def start_virtual_phones(
    rig: Rig, *, faults: dict[str, Any] | None = None, reuse: bool = True
) -> Iterator[list[PhoneSpec]]:
    """The rig's virtual phones: those `realbench vphone up` already runs when there are enough,
    else started in this process (attached to the adb server, stopped on exit)."""
    from devices.virtual import VirtualPhoneHost

    assert rig.virtual is not None
    v = rig.virtual

    def spec(serial: str, label: str, control_url: str | None) -> PhoneSpec:
        return PhoneSpec(
            serial=serial,
            profile=v.profile,
            host=v.host,
            accounts=v.accounts,
            label=label,
            virtual=True,
            control_url=control_url,
        )

    running = running_virtual_phones() if reuse and faults is None else []
    up = [(serial, url) for serial, url in running if not mismatch_with_rig(url, rig)]
    if len(up) >= v.count:
        log.info("using %d virtual phones that are already up", v.count)
        yield [spec(serial, "vphone-up", url) for serial, url in up[: v.count]]
        return
    if running:
        # Phones that show another drift, profile or app version would measure another setting.
        why = "; ".join(f"{serial}: {m}" for serial, url in running if (m := mismatch_with_rig(url, rig)))
        log.warning(
            "not reusing the virtual phones `vphone up` started (%s); starting the rig's own",
            why or "too few",
        )
    with VirtualPhoneHost() as host:
        infos = host.start(v.count, drift=v.drift, screens=v.screens, profile=v.profile, faults=faults)
        host.adb_connect(rig.host(v.host).adb_port)  # the server the pool will look for them on
        yield [spec(i.serial, i.name, i.control_url) for i in infos]


@contextlib.contextmanager
def farm_pool(
    rig: Rig | str | Path, *, phones: list[PhoneSpec] | None = None, reuse_running: bool = True
) -> Iterator[PhonePool]:
    """A pool for the rig; starts (and stops) its virtual phones unless `phones` are given."""
    if not isinstance(rig, Rig):
        rig = load_rig(rig)
    install_redaction(rig.secret_values())
    with contextlib.ExitStack() as stack:
        if phones is None and rig.is_virtual:
            phones = stack.enter_context(start_virtual_phones(rig, reuse=reuse_running))
        pool = PhonePool(rig, phones)
        stack.callback(pool.close)
        yield pool


@contextlib.contextmanager
def targets_from_rig(
    rig: Rig | str | Path,
    pack: TaskPack,
    target_kind: TargetKind | str,
    *,
    phones: list[PhoneSpec] | None = None,
    clone_server_url: str | None = None,
) -> Iterator[list[FarmTarget]]:
    """One FarmTarget per phone of the rig, for `realbench run --target real|clone-on-phone`."""
    kind = TargetKind(target_kind)
    if kind is TargetKind.CLONE:
        raise ConfigError("--target clone runs headless; a rig is for real and clone-on-phone")
    with contextlib.ExitStack() as stack:
        pool = stack.enter_context(farm_pool(rig, phones=phones))
        phone_specs = [pool.record(s).spec for s in pool.serials]
        missing = pool.rig.missing_login_env(pack.real_app.package, phone_specs)
        if missing and kind is TargetKind.REAL:
            raise ConfigError(
                f"rig {pool.rig.name!r}: the login recipe of {pack.real_app.package} reads environment "
                f"variables that are not set: {', '.join(missing)}",
                hint="export them before running (their values are never written anywhere)",
            )
        server_url = clone_server_url
        phone_url = None
        if kind is TargetKind.CLONE_ON_PHONE:
            if server_url is None:
                from clones.server import CloneServer

                server_url = stack.enter_context(CloneServer()).url
            port = int(server_url.rsplit(":", 1)[-1].split("/")[0])
            phone_url = f"http://127.0.0.1:{port}"
            if not pool.virtual:
                for serial in pool.serials:
                    _adb_reverse(serial, port)
        targets = [
            FarmTarget(pool, serial, pack, kind, clone_server_url=server_url, phone_server_url=phone_url)
            for serial in pool.serials
        ]
        for t in targets:
            stack.callback(t.teardown)
        yield targets
