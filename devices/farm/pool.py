"""The phone pool: leases, health between episodes, per-phone flake rates and quarantine.

A lease gives one holder exclusive use of one phone: a thread lock inside the process and an
advisory file lock across processes (two runs on one host never drive the same phone). A phone
whose episodes end in environment failures K times in a row is quarantined: its worker stops
and the runner hands its episodes to the other phones. Agent failures never count against a phone.
"""

from __future__ import annotations

import contextlib
import fcntl
import json
import logging
import os
import tempfile
import threading
import time
from collections.abc import Callable, Iterator
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from devices.farm.health import HealthPolicy, HealthReport, check_phone
from devices.phone import PhoneDevice
from devices.profile import PhoneProfile
from devices.rig import PhoneSpec, Rig
from realbench.errors import DeviceError
from realbench.outcome import Outcome

log = logging.getLogger(__name__)

LEASE_DIR = Path(tempfile.gettempdir()) / "realbench-leases"
LEASE_POLL_S = 0.05


class LeaseTimeout(DeviceError):
    """No phone became free in time."""


@dataclass
class PhoneRecord:
    """Everything the pool knows about one phone."""

    spec: PhoneSpec
    profile: PhoneProfile
    virtual: bool = False
    phone: PhoneDevice | None = None
    holder: str | None = None
    leased_at: float | None = None
    quarantined: bool = False
    quarantine_reason: str = ""
    consecutive_env_failures: int = 0
    episodes: int = 0
    env_failures: int = 0
    last_health: HealthReport | None = None
    baseline_ime: str | None = None
    lock: threading.Lock = field(default_factory=threading.Lock, repr=False)
    file_lock: Any = field(default=None, repr=False)

    @property
    def serial(self) -> str:
        return self.spec.serial

    @property
    def flake_rate(self) -> float:
        return self.env_failures / self.episodes if self.episodes else 0.0

    def status(self) -> dict[str, Any]:
        return {
            "serial": self.serial,
            "profile": self.profile.name,
            "host": self.spec.host,
            "virtual": self.virtual,
            "leased": self.holder is not None,
            "holder": self.holder,
            "quarantined": self.quarantined,
            "quarantine_reason": self.quarantine_reason,
            "episodes": self.episodes,
            "env_failures": self.env_failures,
            "flake_rate": round(self.flake_rate, 4),
            "health": self.last_health.summary() if self.last_health else "unchecked",
        }


@dataclass
class Lease:
    pool: PhonePool
    record: PhoneRecord
    holder: str

    @property
    def serial(self) -> str:
        return self.record.serial

    @property
    def phone(self) -> PhoneDevice:
        return self.pool.phone(self.serial)

    def release(self) -> None:
        self.pool.release(self)


def _file_name(serial: str) -> str:
    return serial.replace(":", "_").replace("/", "_")


def lease_holder_pid(serial: str, lease_dir: Path = LEASE_DIR) -> int | None:
    """The pid holding a phone's cross-process lease, or None when it is free."""
    path = lease_dir / (_file_name(serial) + ".lock")
    if not path.exists():
        return None
    with open(path, "a+") as fh:
        try:
            fcntl.flock(fh.fileno(), fcntl.LOCK_EX | fcntl.LOCK_NB)
        except OSError:
            fh.seek(0)
            text = fh.read().strip()
            return int(text) if text.isdigit() else -1
        fcntl.flock(fh.fileno(), fcntl.LOCK_UN)
    return None


def persisted_status(serial: str, lease_dir: Path = LEASE_DIR) -> dict[str, Any] | None:
    path = lease_dir / (_file_name(serial) + ".json")
    try:
        data = json.loads(path.read_text(encoding="utf-8"))
    except (OSError, ValueError):
        return None
    return data if isinstance(data, dict) else None


PhoneFactory = Callable[[PhoneSpec, PhoneProfile, bool], PhoneDevice]


def default_phone_factory(spec: PhoneSpec, profile: PhoneProfile, virtual: bool) -> PhoneDevice:
    return PhoneDevice(spec.serial, profile=profile, virtual=virtual)


class PhonePool:
    """The phones of one rig (physical phones, or virtual phones already started)."""

    def __init__(
        self,
        rig: Rig,
        phones: list[PhoneSpec] | None = None,
        *,
        virtual: bool | None = None,
        phone_factory: PhoneFactory = default_phone_factory,
        lease_dir: Path = LEASE_DIR,
    ) -> None:
        self.rig = rig
        self.virtual = rig.is_virtual if virtual is None else virtual
        self.quarantine_after = rig.concurrency.quarantine_after
        self._factory = phone_factory
        self._lease_dir = lease_dir
        self._guard = threading.Lock()
        self._free = threading.Condition(self._guard)
        specs = phones if phones is not None else rig.phones
        self.records: dict[str, PhoneRecord] = {
            s.serial: PhoneRecord(spec=s, profile=rig.profile(s.profile), virtual=self.virtual or s.virtual)
            for s in specs
        }

    @property
    def serials(self) -> list[str]:
        return list(self.records)

    def record(self, serial: str) -> PhoneRecord:
        try:
            return self.records[serial]
        except KeyError:
            raise DeviceError(
                f"phone {serial} is not in rig {self.rig.name!r}", hint="realbench devices --rig … lists them"
            ) from None

    def phone(self, serial: str) -> PhoneDevice:
        """The connected driver of a phone (connects on first use)."""
        rec = self.record(serial)
        if rec.phone is None:
            rec.phone = self._factory(rec.spec, rec.profile, rec.virtual)
            if rec.baseline_ime is None:
                with contextlib.suppress(DeviceError):
                    rec.baseline_ime = rec.phone.current_ime()
        return rec.phone

    # --- leases -----------------------------------------------------------------------------

    def acquire(self, serial: str | None = None, *, holder: str = "", timeout: float | None = None) -> Lease:
        """Lease `serial`, or any free non-quarantined phone. Raises LeaseTimeout."""
        deadline = time.monotonic() + (
            timeout if timeout is not None else self.rig.concurrency.lease_timeout_s
        )
        holder = holder or f"{os.getpid()}:{threading.current_thread().name}"
        with self._free:
            while True:
                candidates = [self.record(serial)] if serial else list(self.records.values())
                for rec in candidates:
                    if rec.holder is None and not rec.quarantined and self._lock_file(rec):
                        rec.holder, rec.leased_at = holder, time.time()
                        return Lease(self, rec, holder)
                if serial and self.record(serial).quarantined:
                    raise LeaseTimeout(
                        f"phone {serial} is quarantined: {self.record(serial).quarantine_reason}"
                    )
                left = deadline - time.monotonic()
                if left <= 0:
                    raise LeaseTimeout(
                        f"no free phone{' ' + serial if serial else ''} within the lease timeout",
                        hint="raise concurrency.lease_timeout_s, or check for another run holding the phones",
                    )
                self._free.wait(min(left, LEASE_POLL_S * 4))

    def release(self, lease: Lease) -> None:
        with self._free:
            rec = lease.record
            if rec.holder != lease.holder:
                return
            rec.holder, rec.leased_at = None, None
            self._unlock_file(rec)
            self._free.notify_all()

    @contextlib.contextmanager
    def lease(
        self, serial: str | None = None, *, holder: str = "", timeout: float | None = None
    ) -> Iterator[Lease]:
        lease = self.acquire(serial, holder=holder, timeout=timeout)
        try:
            yield lease
        finally:
            lease.release()

    def _lock_file(self, rec: PhoneRecord) -> bool:
        """Cross-process exclusivity: an advisory lock on a file named after the serial."""
        self._lease_dir.mkdir(parents=True, exist_ok=True)
        path = self._lease_dir / (_file_name(rec.serial) + ".lock")
        fh = open(path, "a+")  # noqa: SIM115 - held open for the lease's lifetime
        try:
            fcntl.flock(fh.fileno(), fcntl.LOCK_EX | fcntl.LOCK_NB)
        except OSError:
            fh.close()
            return False
        fh.seek(0)
        fh.truncate()
        fh.write(f"{os.getpid()}\n")
        fh.flush()
        rec.file_lock = fh
        return True

    def _unlock_file(self, rec: PhoneRecord) -> None:
        fh, rec.file_lock = rec.file_lock, None
        if fh is not None:
            with contextlib.suppress(OSError):
                fcntl.flock(fh.fileno(), fcntl.LOCK_UN)
            fh.close()

    # --- health and quarantine --------------------------------------------------------------

    def health_policy(self, serial: str) -> HealthPolicy:
        rec = self.record(serial)
        phone = self.phone(serial)
        expected = rec.profile.ime
        with contextlib.suppress(DeviceError):
            if expected not in phone.ime_list():
                expected = rec.baseline_ime or ""
        return HealthPolicy(
            profile=rec.profile,
            pins={a.package: a.version for a in self.rig.apps},
            expected_ime=expected or None,
        )

    def check(self, serial: str) -> HealthReport:
        """Health-check (and repair) a phone; connection failures become a failed report."""
        rec = self.record(serial)
        try:
            phone = self.phone(serial)
        except DeviceError as exc:
            from devices.farm.health import CheckStatus, HealthItem

            report = HealthReport(serial, [HealthItem("link", CheckStatus.FAIL, exc.message)])
        else:
            report = check_phone(phone, self.health_policy(serial))
        rec.last_health = report
        self._persist(rec)
        return report

    def record_outcome(self, serial: str, outcome: Outcome, *, reason: str = "") -> None:
        """Count an episode; quarantine after K consecutive environment failures."""
        with self._guard:
            rec = self.record(serial)
            rec.episodes += 1
            if outcome is Outcome.ENV_INVALID:
                rec.env_failures += 1
                rec.consecutive_env_failures += 1
                if rec.consecutive_env_failures >= self.quarantine_after and not rec.quarantined:
                    rec.quarantined = True
                    rec.quarantine_reason = (
                        f"{rec.consecutive_env_failures} environment failures in a row"
                        + (f"; last: {reason}" if reason else "")
                    )
                    log.warning("phone %s quarantined: %s", serial, rec.quarantine_reason)
            else:
                rec.consecutive_env_failures = 0
            self._persist(rec)
            self._free.notify_all()

    def quarantine(self, serial: str, reason: str) -> None:
        with self._guard:
            rec = self.record(serial)
            rec.quarantined, rec.quarantine_reason = True, reason
            self._persist(rec)
            self._free.notify_all()

    def unquarantine(self, serial: str) -> None:
        with self._guard:
            rec = self.record(serial)
            rec.quarantined, rec.quarantine_reason, rec.consecutive_env_failures = False, "", 0
            self._persist(rec)

    def status(self) -> list[dict[str, Any]]:
        return [rec.status() for rec in self.records.values()]

    def _persist(self, rec: PhoneRecord) -> None:
        """Leave the phone's counters where `realbench devices` (another process) can read them."""
        try:
            self._lease_dir.mkdir(parents=True, exist_ok=True)
            path = self._lease_dir / (_file_name(rec.serial) + ".json")
            tmp = path.with_suffix(".tmp")
            tmp.write_text(
                json.dumps({**rec.status(), "pid": os.getpid(), "updated": time.time()}), encoding="utf-8"
            )
            os.replace(tmp, path)
        except OSError as exc:
            log.debug("could not persist status of %s: %s", rec.serial, exc)

    def close(self) -> None:
        for rec in self.records.values():
            if rec.phone is not None:
                rec.phone.close()
                rec.phone = None
            self._unlock_file(rec)
