"""What a real run may start: manual preconditions confirmed, and only certified tasks.

`realbench run --target real` lists the selected tasks' `manual:` preconditions and stops before
the first episode unless `--confirm-manual` is given (a virtual phone provisions them itself).
With `--certified CERT` each phone runs only the tasks certified for that phone (its serial) at the
app version it has now; a phone with none is left out, and a task certified on no phone of the run
is listed as skipped with the reason per phone.
"""

from __future__ import annotations

import logging
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from realbench.errors import ConfigError
from realbench.real_allowed import SkippedTask
from realbench.store import EpisodeKey
from realbench.taskpack import TaskPack

log = logging.getLogger(__name__)


def manual_preconditions(pack: TaskPack, task_ids: list[str]) -> dict[str, list[str]]:
    return {t: pack.task(t).real.manual for t in dict.fromkeys(task_ids) if pack.task(t).real.manual}


def check_manual(pack: TaskPack, task_ids: list[str], *, virtual: bool, confirmed: bool) -> dict[str, Any]:
    """The run's record of manual preconditions; raises before any episode when unconfirmed."""
    manual = manual_preconditions(pack, task_ids)
    if manual and not virtual and not confirmed:
        listing = "; ".join(f"{t}: {' / '.join(lines)}" for t, lines in manual.items())
        raise ConfigError(
            f"{len(manual)} task(s) have manual preconditions that a person must make true first: {listing}",
            hint="set the phones' accounts up as listed, then rerun with --confirm-manual (recorded in the run)",
        )
    how = "confirmed" if confirmed else ("provisioned by virtual phones" if virtual else "none")
    return {"manual": manual, "manual_status": how if manual else "none", "confirm_manual": confirmed}


@dataclass
class CertifiedRun:
    """What a run under a certification file may do: which phones run, and what each may run."""

    targets: list[Any]
    grants: dict[str, set[str]]  # serial -> tasks certified on that phone at its current app version
    task_ids: list[str]  # the selected tasks certified on at least one kept phone, in plan order
    skipped: list[SkippedTask]  # the selected tasks certified on no phone, with why
    record: dict[str, Any]

    def may_run(self, target: Any, key: EpisodeKey) -> bool:
        return key.task in self.grants.get(str(getattr(target, "serial", None)), set())


def apply_certificate(cert_path: Path, targets: list[Any], task_ids: list[str]) -> CertifiedRun:
    """Each phone runs only the tasks certified for it (its serial) at the app version it has now."""
    from devices.certify import load_certificate

    cert = load_certificate(cert_path)
    kept: list[Any] = []
    grants: dict[str, set[str]] = {}
    dropped: dict[str, str] = {}
    why_not: dict[str, dict[str, str]] = {t: {} for t in dict.fromkeys(task_ids)}
    for target in targets:
        serial = str(getattr(target, "serial", None))
        phone = target.pool.phone(serial) if hasattr(target, "pool") else None
        version = phone.app_version(cert.package) if phone is not None else None
        granted = cert.certified_for(serial, version) & set(why_not)
        for task in why_not:
            if task not in granted:
                why_not[task][serial] = cert.why_not_certified(serial, version, task)
        if not granted:
            dropped[serial] = (
                f"none of the selected tasks is certified for this phone at app version {version}"
            )
            continue
        kept.append(target)
        grants[serial] = granted
    if not kept:
        raise ConfigError(
            f"no phone of this rig is certified in {cert_path} for the selected tasks at its current app version",
            hint="run `realbench certify` on these phones (and this app version) first",
        )
    run_ids = [t for t in why_not if any(t in g for g in grants.values())]
    skipped = [
        SkippedTask(t, "certified on no phone of the run: " + "; ".join(f"{s}: {w}" for s, w in why.items()))
        for t, why in why_not.items()
        if t not in run_ids
    ]
    for s in skipped:
        log.info("skipping %s: %s", s.task, s.reason)
    record = {
        "certificate": str(cert_path),
        "phones": {serial: sorted(tasks) for serial, tasks in grants.items()},
        "phones_dropped": dropped,
        "skipped": {s.task: s.reason for s in skipped},
    }
    return CertifiedRun(kept, grants, run_ids, skipped, record)
