"""The console's view of the rig's phones: fleet rows, leases, frames, inspection and guarded input.

The console leases a phone from the same `PhonePool` (thread lock + cross-process file lock) that
runs use, so an episode and an operator never drive one phone at once. Every touch, key, text and
app launch goes through the farm's guarded device, armed with every stop control the console's
packs know (the always-forbidden controls and each task's commit boundary) and with the packs'
`InterlockPolicy` (money-moving rules: default-deny outside the packs' safe screens, no ENTER or
typed newline, no taps into text-less WebViews, no PIN digits). A blocked action is sent only
when a named operator confirms the very control the interlock named; each override is logged
with the boundary, the screen and the operator.
"""

from __future__ import annotations

import json
import logging
import os
import threading
import time
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from devices.farm.interlock import InterlockedDevice
from devices.farm.interlock_policy import InterlockPolicy
from devices.farm.pool import Lease, LeaseTimeout, PhonePool, lease_holder_pid, persisted_status
from devices.scrcpy_client import ScrcpyClient
from devices.scrcpy_input import ScrcpyInputPhone
from realbench.actions import Action, OpenApp, action_to_dict
from realbench.console.selectors import choose_selector, describe_node, node_at
from realbench.console.video import LiveVideo, VideoStatus
from realbench.console.video_feed import PacketFeed
from realbench.errors import BoundaryBlocked, ConfigError, DeviceError, RealbenchError
from realbench.hierarchy import Hierarchy, Selector

log = logging.getLogger(__name__)

CONSOLE_HOLDER = "console"
LEASE_WAIT_S = 1.0
IDLE_RELEASE_S = 300.0  # an operator's lease lapses after this long without input
HEALTH_MAX_AGE_S = 60.0
HIERARCHY_MAX_AGE_S = 1.0
OPERATOR_SETTLE_S = 0.1  # the interlock's settle pause between dumps, shorter than an agent's
OPERATOR_MAX = 60
SCREEN_TEXTS = 8  # texts of the screen an override log names


@dataclass
class Blocked:
    """An action the interlock refused: what it would have activated."""

    boundary: str
    reason: str


@dataclass(frozen=True)
class ActTiming:
    """Where one console action's time went: the interlock (its fresh dumps and decisions), writing
    the input, and waiting for its effect (scrcpy: a changed video frame; else the phone's settle)."""

    total_s: float
    guard_s: float
    dumps: int
    send_s: float
    settle_s: float
    path: str

    def to_ms(self) -> dict[str, Any]:
        ms = {k: round(getattr(self, k) * 1000, 1) for k in ("total_s", "guard_s", "send_s", "settle_s")}
        return {**{k.removesuffix("_s"): v for k, v in ms.items()}, "dumps": self.dumps, "path": self.path}


@dataclass
class _PhoneState:
    lease: Lease | None = None
    guarded: InterlockedDevice | None = None
    inputs: ScrcpyInputPhone | None = None
    last_input: float = 0.0
    facts: dict[str, Any] = field(default_factory=dict)
    facts_at: float = 0.0
    hierarchy: tuple[float, str] | None = None


def _stop_selectors(packs: list[Any]) -> tuple[list[Selector], list[Selector]]:
    """(boundary, forbidden) selectors of every pack; parameterised ones ({name}) cannot be armed
    without a task instance and are left to the always-forbidden list."""
    boundary: list[Selector] = []
    forbidden: list[Selector] = []
    for pack in packs:
        forbidden += list(pack.real_app.forbidden)
        for task in pack.tasks:
            for sel in task.real.boundary:
                if "{" not in json.dumps(sel.model_dump(), ensure_ascii=False) and sel not in boundary:
                    boundary.append(sel)
    return boundary, forbidden


class ConsolePhones:
    def __init__(
        self,
        pool: PhonePool,
        packs: list[Any],
        *,
        confirmations: Path,
        secrets: list[str],
        scrcpy: bool = True,
    ) -> None:
        self.pool = pool
        self.boundary, self.forbidden = _stop_selectors(packs)
        # One policy for every pack the console knows: money-moving if any of them is.
        self.policy = InterlockPolicy.for_packs(packs)
        self.confirmations = confirmations
        self._secrets = [s for s in secrets if s]
        self._states: dict[str, _PhoneState] = {s: _PhoneState() for s in pool.serials}
        self._saved: dict[str, dict[str, Any]] = {}
        self._guard = threading.RLock()
        self.video = LiveVideo(pool, enabled=scrcpy)

    # --- helpers ------------------------------------------------------------------------------

    def _state(self, serial: str) -> _PhoneState:
        self.pool.record(serial)  # raises DeviceError naming the rig's phones
        return self._states.setdefault(serial, _PhoneState())

    def redact(self, text: str) -> str:
        for secret in self._secrets:
            text = text.replace(secret, "•" * 6)
        return text

    # --- leases -------------------------------------------------------------------------------

    def lease(self, serial: str, operator: str = "") -> Lease:
        with self._guard:
            st = self._state(serial)
            if st.lease is not None:
                return st.lease
            try:
                st.lease = self.pool.acquire(
                    serial,
                    holder=f"{CONSOLE_HOLDER}:{operator}" if operator else CONSOLE_HOLDER,
                    timeout=LEASE_WAIT_S,
                )
            except LeaseTimeout as exc:
                pid = lease_holder_pid(serial, self.pool._lease_dir)
                holder = self.pool.record(serial).holder
                raise LeaseTimeout(
                    f"phone {serial} is leased by {holder or f'process {pid}'}; the console cannot drive it now",
                    hint=exc.hint,
                ) from None
            # Touches and keys leave over scrcpy's control socket while its video is live: still
            # only after the interlock has passed them.
            inputs = ScrcpyInputPhone(self.pool.phone(serial), lambda: self.video.live(serial))
            st.inputs = inputs
            st.guarded = InterlockedDevice(inputs, settle_s=OPERATOR_SETTLE_S)
            st.guarded.arm(self.boundary, self.forbidden, self.policy)
            st.last_input = time.monotonic()
            return st.lease

    def release(self, serial: str) -> None:
        with self._guard:
            st = self._state(serial)
            lease, st.lease, st.guarded, st.inputs = st.lease, None, None, None
            if lease is not None:
                lease.release()

    def release_idle(self, now: float | None = None) -> None:
        now = time.monotonic() if now is None else now
        for serial, st in list(self._states.items()):
            if st.lease is not None and now - st.last_input > IDLE_RELEASE_S:
                log.info("console lease of %s lapsed after %.0f s idle", serial, IDLE_RELEASE_S)
                self.release(serial)

    def close(self) -> None:
        for serial in list(self._states):
            self.release(serial)
        self.video.close()

    # --- reading ------------------------------------------------------------------------------

    def frame(self, serial: str, width: int | None = None, quality: int = 70) -> bytes:
        phone = self.pool.phone(serial)
        w, _ = phone.size()
        scale = 1.0 if not width or width >= w else width / w
        return phone.screenshot_frame(scale=scale, quality=quality)

    def live_frame(
        self, serial: str, width: int | None = None, quality: int = 70
    ) -> tuple[bytes, VideoStatus]:
        """The live view's next frame: scrcpy's video, else a screenshot; and which it is."""
        self._state(serial)
        data = self.video.frame(serial, width, quality)
        if data is None:
            data = self.frame(serial, width, quality)
        return data, self.video.status(serial)

    def live_packets(self, serial: str) -> tuple[ScrcpyClient, PacketFeed] | None:
        """scrcpy's session and its H.264 packets for a page that decodes them (None: no video)."""
        self._state(serial)
        return self.video.packets(serial)

    def hierarchy(self, serial: str, *, max_age_s: float = 0.0) -> str:
        st = self._state(serial)
        if st.hierarchy is not None and time.monotonic() - st.hierarchy[0] <= max_age_s:
            return st.hierarchy[1]
        xml = self.redact(self.pool.phone(serial).hierarchy())
        st.hierarchy = (time.monotonic(), xml)
        return xml

    def inspect(self, serial: str, x: int, y: int) -> dict[str, Any]:
        """The node under normalised point (x, y) and the selector realbench would use for it."""
        phone = self.pool.phone(serial)
        tree = Hierarchy(self.hierarchy(serial, max_age_s=HIERARCHY_MAX_AGE_S))
        px, py = phone.to_pixels(x, y)
        node = node_at(tree, px, py)
        if node is None:
            return {"node": None, "pixel": [px, py]}
        choice = choose_selector(tree, node)
        return {"node": describe_node(node), "pixel": [px, py], **choice.to_dict()}

    def facts(self, serial: str, *, refresh: bool = False) -> dict[str, Any]:
        """Model, app versions and health (cached; health needs a short lease of its own)."""
        st = self._state(serial)
        if not refresh and st.facts and time.monotonic() - st.facts_at < HEALTH_MAX_AGE_S:
            return st.facts
        facts: dict[str, Any] = {"model": "", "apps": {}, "health": "unchecked", "health_items": []}
        try:
            phone = self.pool.phone(serial)
            facts["model"] = phone.describe().get("model", "")
            for app in self.pool.rig.apps:
                facts["apps"][app.package] = phone.app_version(app.package)
        except DeviceError as exc:
            facts["health"] = f"unreachable: {exc.message}"
        else:
            rec = self.pool.record(serial)
            if st.lease is not None:
                # The health check repairs (wakes the screen, restores the IME): never under an operator.
                last = st.facts.get("health", "unchecked")
                facts["health"] = last if last.startswith("ok") else "in use by the console (not checked)"
                facts["health_items"] = st.facts.get("health_items", [])
            elif rec.holder is None and lease_holder_pid(serial, self.pool._lease_dir) is None:
                try:
                    with self.pool.lease(serial, holder=f"{CONSOLE_HOLDER}:health", timeout=0.2):
                        report = self.pool.check(serial)
                except LeaseTimeout:
                    facts["health"] = "leased (not checked)"
                else:
                    facts["health"] = report.summary()
                    facts["health_items"] = [
                        {"name": i.name, "status": str(i.status), "detail": i.detail} for i in report.items
                    ]
            else:
                facts["health"] = "leased (not checked: in use)"
        return self._keep(st, facts)

    def _keep(self, st: _PhoneState, facts: dict[str, Any]) -> dict[str, Any]:
        st.facts, st.facts_at = facts, time.monotonic()
        return facts

    def fleet(self, *, check: bool = True) -> list[dict[str, Any]]:
        rows = []
        for serial in self.pool.serials:
            rec = self.pool.record(serial)
            st = self._state(serial)
            pid = lease_holder_pid(serial, self.pool._lease_dir)
            holder = rec.holder or (f"process {pid}" if pid is not None else None)
            facts = self.facts(serial) if check else st.facts
            pins = {a.package: a.version for a in self.pool.rig.apps}
            apps = {
                pkg: {
                    "version": facts.get("apps", {}).get(pkg),
                    "pin": pin,
                    "ok": pin is None or facts.get("apps", {}).get(pkg) == pin,
                }
                for pkg, pin in pins.items()
            }
            rows.append(
                {
                    "serial": serial,
                    "label": rec.spec.label,
                    "host": rec.spec.host,
                    "profile": rec.profile.name,
                    "kind": "virtual-phone" if rec.virtual else "phone",
                    "model": facts.get("model", ""),
                    "health": facts.get("health", "unchecked"),
                    "apps": apps,
                    "leased_by": holder,
                    **self._counters(rec),
                }
            )
        return rows

    def _counters(self, rec: Any) -> dict[str, Any]:
        """Quarantine and flake rate: this process's counts, else what the last process that ran
        episodes on the phone recorded (a run in another process persists them)."""
        own = {
            "quarantined": rec.quarantined,
            "quarantine_reason": rec.quarantine_reason,
            "flake_rate": rec.flake_rate,
            "episodes": rec.episodes,
        }
        latest = persisted_status(rec.serial, self.pool._lease_dir)
        if latest and latest.get("pid") != os.getpid():
            # Only another process's record: this one's own health checks persist zeros too.
            self._saved[rec.serial] = latest
        saved = self._saved.get(rec.serial)
        if rec.episodes or not saved:
            return own
        return {
            "quarantined": bool(saved.get("quarantined")),
            "quarantine_reason": str(saved.get("quarantine_reason") or ""),
            "flake_rate": float(saved.get("flake_rate") or 0.0),
            "episodes": int(saved.get("episodes") or 0),
        }

    # --- input --------------------------------------------------------------------------------

    def _guarded(self, serial: str, operator: str) -> InterlockedDevice:
        self.lease(serial, operator)
        st = self._state(serial)
        if st.guarded is None:
            raise DeviceError(f"phone {serial} was released while the console used it", hint="try again")
        st.last_input = time.monotonic()
        st.hierarchy = None
        return st.guarded

    def act(
        self, serial: str, action: Action, *, confirm: str | None = None, operator: str = ""
    ) -> ActTiming | None:
        """Send an action through the guarded device. Raises `BoundaryBlocked` (with `.control`)
        when it is refused, unless `confirm` names exactly that control and `operator` names the
        person sending it anyway (there is no default operator). Returns where its time went
        (None when the phone's input path does not say)."""
        operator = check_operator(operator, required=bool(confirm))
        if isinstance(action, OpenApp) and action.app not in {a.package for a in self.pool.rig.apps}:
            # Another app could be anything (a payment app, settings): only the rig's apps open.
            raise ConfigError(
                f"{action.app} is not an app of rig {self.pool.rig.name!r}", hint="open one of the rig's apps"
            )
        guarded = self._guarded(serial, operator)
        inputs = self._state(serial).inputs
        start, dumps = time.perf_counter(), guarded.dumps
        if inputs is not None:
            inputs.last = None
        try:
            guarded.act(action)
        except BoundaryBlocked as exc:
            if not confirm or confirm != exc.control:
                raise
            # Still refused, for the same control the operator confirmed: send it, and log it.
            screen = self._screen_summary(exc.hierarchy)
            self._log_confirmation(serial, action, exc.control, str(exc.message), operator, screen)
            guarded.override(
                action, operator=operator, reason=f"console confirmation of {exc.control} (screen: {screen})"
            )
        total = time.perf_counter() - start
        sent = inputs.last if inputs is not None else None
        if sent is None:
            return None
        return ActTiming(
            total,
            total - sent.send_s - sent.settle_s,
            guarded.dumps - dumps,
            sent.send_s,
            sent.settle_s,
            sent.path,
        )

    def _screen_summary(self, xml: str | None) -> str:
        """The first texts of the screen the interlock refused on (redacted), to name it in the log."""
        if not xml:
            return "(screen not read)"
        try:
            nodes = Hierarchy(xml).nodes
        except RealbenchError:
            return "(unreadable screen)"
        texts: list[str] = []
        for node in nodes:
            label = (node.text or node.content_desc or "").strip()
            if label and label not in texts:
                texts.append(label)
            if len(texts) >= SCREEN_TEXTS:
                break
        return self.redact(" | ".join(texts)) or "(no text on screen)"

    def _log_confirmation(
        self, serial: str, action: Action, control: str, reason: str, operator: str, screen: str
    ) -> None:
        entry = {
            "time": time.time(),
            "serial": serial,
            "operator": operator,
            "action": action_to_dict(action),
            "boundary": control,
            "screen": screen,
            "interlock": reason,
        }
        log.warning(
            "operator %s overrode the interlock on %s: %s (screen: %s)", operator, serial, control, screen
        )
        self.confirmations.parent.mkdir(parents=True, exist_ok=True)
        with open(self.confirmations, "a", encoding="utf-8") as fh:
            fh.write(json.dumps(entry, ensure_ascii=False) + "\n")

    def start_app(self, serial: str, package: str, operator: str = "") -> None:
        if package not in {a.package for a in self.pool.rig.apps}:
            raise ConfigError(f"{package} is not an app of rig {self.pool.rig.name!r}")
        # Through the guard too: it opens only the packs' own packages.
        self._guarded(serial, check_operator(operator, required=False)).start_app(package)


def check_operator(name: str, *, required: bool) -> str:
    """The operator's name, trimmed; ConfigError when an override has none (never a default)."""
    name = (name or "").strip()
    if len(name) > OPERATOR_MAX:
        raise ConfigError(f"an operator name has at most {OPERATOR_MAX} characters")
    if required and not name:
        raise ConfigError(
            "sending a blocked action needs the operator's name",
            hint="type your name in the confirmation dialog; every override is logged under it",
        )
    return name
