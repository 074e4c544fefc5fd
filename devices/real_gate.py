"""What a real run may start: manual preconditions confirmed, and only certified tasks.

`realbench run --target real` lists the selected tasks' `manual:` preconditions and stops before
the first episode unless `--confirm-manual` is given (a virtual phone provisions them itself).
With `--certified CERT` each phone is kept only if its app version is the certified one, and only
tasks certified on every kept phone run; the rest are listed as skipped with the reason.
"""

from __future__ import annotations

import logging
from pathlib import Path
from typing import Any

from realbench.errors import ConfigError
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


def apply_certificate(
    cert_path: Path, targets: list[Any], task_ids: list[str]
) -> tuple[list[Any], list[str], dict[str, Any]]:
    """(targets kept, task ids kept, record) under a certification file."""
    from devices.certify import load_certificate

    cert = load_certificate(cert_path)
    kept: list[Any] = []
    allowed: set[str] | None = None
    dropped: dict[str, str] = {}
    for target in targets:
        serial = getattr(target, "serial", None)
        phone = target.pool.phone(serial) if serial is not None and hasattr(target, "pool") else None
        version = phone.app_version(cert.package) if phone is not None else None
        ok = cert.certified_for(str(serial), version)
        if not ok:
            dropped[str(serial)] = f"nothing certified for this phone at app version {version}"
            continue
        kept.append(target)
        allowed = ok if allowed is None else allowed & ok
    if not kept:
        raise ConfigError(
            f"no phone of this rig is certified in {cert_path} for its current app version",
            hint="run `realbench certify` on these phones (and this app version) first",
        )
    run_ids = [t for t in task_ids if allowed is not None and t in allowed]
    skipped = {
        t: "not certified on every phone of the run" for t in dict.fromkeys(task_ids) if t not in run_ids
    }
    record = {"certificate": str(cert_path), "phones_dropped": dropped, "skipped": skipped}
    for t, why in skipped.items():
        log.info("skipping %s: %s", t, why)
    return kept, run_ids, record
