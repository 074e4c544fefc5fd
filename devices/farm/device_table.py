"""`realbench devices --rig R`: the rig's phones, their health, app versions and lease state."""

from __future__ import annotations

import contextlib
import os
import time
from pathlib import Path
from typing import Any

from devices.farm.pool import LEASE_DIR, PhonePool, lease_holder_pid, persisted_status
from devices.farm.rig_targets import farm_pool
from devices.preflight import NOT_LISTED_HINT, STATE_HINTS, AdbListing, adb_listing, is_this_host
from devices.rig import Rig, load_rig
from realbench.errors import DeviceError, PreflightError, UnhealthyDevicesError


def _pid_alive(pid: Any) -> bool:
    if not isinstance(pid, int) or pid <= 0:
        return False
    if pid == os.getpid():
        return True
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    except PermissionError:
        return True
    return True


def _link_problem(pool: PhonePool, serial: str, listings: dict[str, AdbListing | str]) -> str | None:
    """Why a physical phone cannot be reached, found from `adb devices` in a second (None: listed)."""
    rec = pool.record(serial)
    if rec.virtual:
        return None
    host = pool.rig.host(rec.spec.host)
    if not is_this_host(host):
        return f"on host {host.name} ({host.address}): not checked from this host"
    if host.name not in listings:
        try:
            listings[host.name] = adb_listing(host)
        except PreflightError as exc:
            listings[host.name] = exc.message
    listing = listings[host.name]
    if isinstance(listing, str):
        return listing
    state = listing.states.get(serial)
    if state is None and ":" not in serial:
        return f"not listed by `adb devices` on this host — {NOT_LISTED_HINT}"
    if state is not None and state != "device":
        return f"adb state {state!r} — {STATE_HINTS.get(state, NOT_LISTED_HINT)}"
    return None


def _row(
    pool: PhonePool, serial: str, *, check: bool, listings: dict[str, AdbListing | str] | None = None
) -> dict[str, Any]:
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
        # What the last process that used the phone recorded. A mark left by a process that has
        # ended is history: a new run starts every phone from a clean slate.
        live = _pid_alive(saved.get("pid"))
        row.update(
            quarantined=bool(saved.get("quarantined")) and live,
            quarantine_stale=bool(saved.get("quarantined")) and not live,
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
    problem = _link_problem(pool, serial, {} if listings is None else listings)
    if problem is not None:
        row["health"] = f"unreachable: {problem}" if "not checked" not in problem else problem
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
    listings: dict[str, AdbListing | str] = {}
    with farm_pool(rig) as pool:
        for serial in pool.serials:
            with contextlib.suppress(DeviceError):
                rows.append(_row(pool, serial, check=check, listings=listings))
    return rows


def row_ready(row: dict[str, Any]) -> bool:
    """Whether a checked phone is ready for an episode (healthy, or busy in a run, not quarantined)."""
    if row.get("quarantined"):
        return False
    health = str(row.get("health", ""))
    return health.startswith("ok") or health.startswith("leased") or health == "unchecked"


def raise_if_unhealthy(rows: list[dict[str, Any]], expected: int) -> None:
    """`realbench devices` exits non-zero unless every phone of the rig is ready (scriptable
    "wait until all ok")."""
    bad = [r for r in rows if not row_ready(r)]
    missing = expected - len(rows)
    if bad or missing > 0:
        names = ", ".join(
            f"{r['serial']} ({r['health'] if not r.get('quarantined') else 'quarantined'})" for r in bad
        )
        raise UnhealthyDevicesError(
            f"{len(bad) + max(0, missing)} of {expected} phone(s) not ready"
            + (f": {names}" if names else "")
            + (f"; {missing} could not be listed" if missing > 0 else ""),
            hint="fix them and rerun `realbench devices` (exit 0 when every phone is ok)",
        )


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
        if r["quarantined"]:
            quarantined = f"yes ({when}): {r['quarantine_reason']}"
        elif r.get("quarantine_stale"):
            quarantined = (
                f"no (earlier run, pid {r.get('recorded_by_pid')} at {when}: {r['quarantine_reason']})"
            )
        else:
            quarantined = "no"
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
