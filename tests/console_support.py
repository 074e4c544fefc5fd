"""Shared pieces of the console tests, benchmark and screenshots: a console serving virtual phones
(the ticket app's static placeholder, and the farm's commit test screen under the bank package),
armed with a money-moving test pack whose safe-screen catalogue names those two test screens,
and a run store with judged phone-side episodes."""

from __future__ import annotations

import contextlib
from collections.abc import Callable, Iterator
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import httpx
import yaml

from devices.farm.pool import PhonePool
from devices.farm.synthetic import synthetic_pack_dict
from devices.rig import PhoneSpec, parse_rig
from devices.virtual import VirtualPhoneHost
from devices.virtual.commit_screens import CommitTestScreen, ScreenSpec
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


@dataclass
class ConsoleBench:
    """A console serving one virtual phone whose bank package shows commit test screens; the
    verdicts come from those screens' own commit records."""

    url: str
    host: Any
    serial: str
    pool: PhonePool
    data: Path
    app: Any = None
    screens: list[CommitTestScreen] = field(default_factory=list)

    @property
    def vphone(self) -> Any:
        return self.host.phone(self.serial)

    def install(self, build: Callable[[], ScreenSpec]) -> None:
        """Show a fresh `build()` screen for the bank package from its next start."""
        self.install_screens({BANK: build})

    def install_screens(self, builds: dict[str, Callable[[], Any]]) -> None:
        """Show fresh screens (`builds[package]()`) for those packages from their next start; every
        other package shows the virtual phone's static screens."""
        from devices.virtual.phone import static_screens

        self.screens.clear()

        def maker(phone: Any, package: str) -> Any:
            build = builds.get(package)
            if build is None:
                return static_screens(phone, package)
            screen = CommitTestScreen(package, build(), dumps_served=lambda: phone.dumps_served)
            self.screens.append(screen)
            return screen

        self.vphone.set_screens(maker)

    def commits(self) -> list[Any]:
        return [c for s in self.screens for c in s.commits]

    def post(self, path: str, body: dict[str, Any]) -> httpx.Response:
        return httpx.post(f"{self.url}/api/phones/{self.serial}{path}", json=body, timeout=120)

    def screen(self) -> httpx.Response:
        return httpx.get(f"{self.url}/api/phones/{self.serial}/screen?width=540", timeout=60)


@contextlib.contextmanager
def console_bench(tmp: Path) -> Iterator[ConsoleBench]:
    """A console on one virtual phone, armed with every pack under taskpacks/ (the bank and ticket
    packs are money-moving), as the lab console runs by default."""
    with virtual_phones(1) as (host, serials):
        spec = PhoneSpec(serial=serials[0], profile="generic-1080x2400", label="bench-0", virtual=True)
        pool = PhonePool(console_rig(), [spec], virtual=True, lease_dir=tmp / "leases")
        try:
            with (
                console_app(rig=None, stores=[], data_dir=tmp / "data", pool=pool) as app,
                serve_in_thread(app) as url,
            ):
                yield ConsoleBench(url, host, serials[0], pool, tmp / "data")
        finally:
            pool.close()
