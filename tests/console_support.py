"""Shared pieces of the console tests, benchmark and screenshots: a console serving virtual phones
(the ticket app's static placeholder, and the farm's commit test screen under the bank package),
armed with a money-moving test pack whose safe-screen catalogue names those two test screens,
and a run store with judged phone-side episodes."""

from __future__ import annotations

import contextlib
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import yaml

from devices.farm.pool import PhonePool
from devices.farm.synthetic import synthetic_pack_dict
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


def console_pack(folder: Path) -> Path:
    """A money-moving test pack (labelled synthetic) for the virtual phones' test screens: the
    ticket package's static placeholder and the bank package's commit test screen are its safe
    screens (touches and text), and their commit controls are always forbidden."""
    raw = synthetic_pack_dict(tasks=1, with_boundary=False)
    raw["title"] = "console test pack (synthetic; virtual phone test screens)"
    raw["real_app"]["forbidden"] = [{"text": t} for t in ("提交订单", "立即支付", "快捷支付", "确认付款")] + [
        {"content_desc": "滑动确认支付"}
    ]
    raw["real_app"]["safe_screens"] = [
        {"name": "static placeholder", "when": {"resource_id": "search"}, "allow": ["text"]},
        # its amount field shows no label: default-deny touches it only because the entry lists it
        {
            "name": "commit test screen",
            "when": {"resource_id": "amount"},
            "allow": ["text"],
            "controls": ["amount"],
        },
    ]
    raw["policy"] = {"money_moving": True}
    raw["tasks"][0]["real"] = {"package": BANK}
    folder.mkdir(parents=True, exist_ok=True)
    (folder / "pack.yaml").write_text(
        yaml.safe_dump(raw, allow_unicode=True, sort_keys=False), encoding="utf-8"
    )
    return folder


@contextlib.contextmanager
def running_console(
    tmp: Path, *, phones: int = 2, store: bool = True, scrcpy: bool = True
) -> Iterator[RunningConsole]:
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
                console_app(
                    rig=None,
                    stores=stores,
                    data_dir=tmp / "data",
                    pool=pool,
                    packs=[console_pack(tmp / "pack")],
                    scrcpy=scrcpy,
                ) as app,
                serve_in_thread(app) as url,
            ):
                yield RunningConsole(url, host, serials, pool, tmp / "store", tmp / "data")
        finally:
            pool.close()
