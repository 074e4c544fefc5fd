"""`realbench devices --rig R`: the rig's phones, their health, app versions and lease state."""

from __future__ import annotations

import contextlib
import time
from pathlib import Path
from typing import Any

from devices.farm.pool import LEASE_DIR, PhonePool, lease_holder_pid, persisted_status
from devices.farm.rig_targets import farm_pool
from devices.rig import Rig, load_rig
from realbench.errors import DeviceError


def _row(pool: PhonePool, serial: str, *, check: bool) -> dict[str, Any]:
    rec = pool.record(serial)
    row: dict[str, Any] = {
        "serial": serial,
        "label": rec.spec.label,
        "host": rec.spec.host,
        "profile": rec.profile.name,
        "kind": "virtual-phone" if rec.virtual else "phone",
        "model": "",
        "health": "unchecked",
        "health_items": [],
        "apps": {},
        "leased_by_pid": lease_holder_pid(serial, LEASE_DIR),
        "quarantined": False,
        "quarantine_reason": "",
        "flake_rate": None,
        "episodes": None,
    }
    saved = persisted_status(serial, LEASE_DIR)
    if saved:
        # What the last process that used the phone recorded (a new run starts from a clean slate).
        row.update(
            quarantined=bool(saved.get("quarantined")),
            quarantine_reason=saved.get("quarantine_reason", ""),
            flake_rate=saved.get("flake_rate"),
            episodes=saved.get("episodes"),
            recorded_by_pid=saved.get("pid"),
            recorded_at=saved.get("updated"),
        )
    if not check:
        return row
    if row["leased_by_pid"] is not None:
        row["health"] = "leased (not checked: an episode is running)"
        return row
    try:
        phone = pool.phone(serial)
        row["model"] = phone.describe().get("model", "")
        for app in pool.rig.apps:
            row["apps"][app.package] = phone.app_version(app.package)
    except DeviceError as exc:
        row["health"] = f"unreachable: {exc.message}"
        return row
    with pool.lease(serial, holder="realbench devices", timeout=2):
        report = pool.check(serial)
    row["health"] = report.summary()
    row["health_items"] = [
        {"name": i.name, "status": str(i.status), "detail": i.detail} for i in report.items
    ]
    return row


def device_rows(rig: Rig | str | Path, *, check: bool = True) -> list[dict[str, Any]]:
    """One row per phone of the rig. Virtual rigs use the phones `vphone up` runs, else start them
    for the duration of the listing."""
    if not isinstance(rig, Rig):
        rig = load_rig(rig)
    rows = []
    with farm_pool(rig) as pool:
        for serial in pool.serials:
            with contextlib.suppress(DeviceError):
                rows.append(_row(pool, serial, check=check))
    return rows


def render_table(rig_name: str, rows: list[dict[str, Any]]) -> Any:
    from rich.table import Table

    table = Table(title=f"rig {rig_name}")
    for col in (
        "serial",
        "host",
        "model",
        "profile",
        "health",
        "app versions",
        "leased",
        "quarantined",
        "flake rate",
    ):
        table.add_column(col)
    for r in rows:
        apps = ", ".join(f"{p.rsplit('.', 1)[-1]} {v or 'missing'}" for p, v in r["apps"].items())
        leased = f"pid {r['leased_by_pid']}" if r["leased_by_pid"] is not None else "free"
        when = time.strftime("%m-%d %H:%M", time.localtime(r["recorded_at"])) if r.get("recorded_at") else ""
        quarantined = f"yes ({when}): {r['quarantine_reason']}" if r["quarantined"] else "no"
        flake = f"{r['flake_rate']:.1%} of {r['episodes']}" if r["flake_rate"] is not None else "-"
        table.add_row(
            r["serial"],
            r["host"],
            r["model"] or r["kind"],
            r["profile"],
            r["health"],
            apps,
            leased,
            quarantined,
            flake,
        )
    return table
