"""Shared pieces of the console tests, benchmark and screenshots: a console serving virtual phones
(the ticket app's static placeholder, and the farm's commit test screen under the bank package)
and a run store with judged phone-side episodes."""

from __future__ import annotations

import contextlib
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from devices.farm.pool import PhonePool
from devices.rig import PhoneSpec, parse_rig
from devices.virtual import VirtualPhoneHost
from realbench.console.command import console_app
from realbench.console.server import serve_in_thread
from tests.analysis_fixtures import write_store
from tests.farm_support import BANK, TICKET, virtual_phones

CHROMIUM = "/usr/bin/chromium"
CHROMIUM_ARGS = [
    "--no-sandbox",
    "--disable-gpu",
    "--no-first-run",
    "--disable-background-networking",
    "--disable-component-update",
    "--disable-sync",
]


@dataclass
class RunningConsole:
    url: str
    host: VirtualPhoneHost
    serials: list[str]
    pool: PhonePool
    store: Path
    data: Path


def console_rig() -> Any:
    return parse_rig(
        {
            "name": "console-test",
            "virtual": {"count": 2, "screens": "static", "drift": "none"},
            "apps": [{"package": TICKET, "version": "5.8.0.8"}, {"package": BANK, "version": "6.3.2"}],
            "concurrency": {"lease_timeout_s": 5},
        }
    )


@contextlib.contextmanager
def running_console(tmp: Path, *, phones: int = 2, store: bool = True) -> Iterator[RunningConsole]:
    with virtual_phones(phones, commit_screen={}) as (host, serials):
        specs = [
            PhoneSpec(serial=s, profile="generic-1080x2400", label=f"bench-{i}", virtual=True)
            for i, s in enumerate(serials)
        ]
        pool = PhonePool(console_rig(), specs, virtual=True, lease_dir=tmp / "leases")
        stores = []
        if store:
            # store 0: judged phone-side episodes to label; store 1: both sides, for the runs pages
            stores.append(write_store(tmp / "store", env="real", n_tasks=3, repeats=2))
            write_store(tmp / "both", env="clone", n_tasks=3, repeats=2)
            stores.append(write_store(tmp / "both", env="real", n_tasks=3, repeats=2))
        try:
            with (
                console_app(rig=None, stores=stores, data_dir=tmp / "data", pool=pool) as app,
                serve_in_thread(app) as url,
            ):
                yield RunningConsole(url, host, serials, pool, tmp / "store", tmp / "data")
        finally:
            pool.close()
