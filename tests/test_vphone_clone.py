"""Virtual phone showing the clones (Chromium pages) under the real apps' package names, driven by
uiautomator2 through the real adb server: drifted app on the app's package, undrifted clone in the
browser (clone-on-phone), inputs reaching the page and the event log."""

from __future__ import annotations

import os
import shutil
import time
from collections.abc import Iterator
from pathlib import Path

import httpx
import pytest

from devices.virtual import InputKind, VirtualPhoneHost
from devices.virtual.phone import VirtualPhone
from realbench.hierarchy import Hierarchy, Node, Selector

pytestmark = [
    pytest.mark.farm,
    pytest.mark.browser,
    pytest.mark.skipif(shutil.which("adb") is None, reason="needs Debian's adb"),
    pytest.mark.skipif(
        not Path(os.environ.get("REALBENCH_CHROMIUM", "/usr/bin/chromium")).exists(), reason="needs Chromium"
    ),
]

adbutils = pytest.importorskip("adbutils")
u2 = pytest.importorskip("uiautomator2")


@pytest.fixture(scope="module")
def phone(adb_server_port: int) -> Iterator[VirtualPhone]:
    with VirtualPhoneHost() as host:
        host.start(1, screens="clone", drift="mild")
        host.adb_connect(adb_server_port)
        yield host.phones[0]


def test_drifted_clone_under_the_real_package(phone: VirtualPhone) -> None:
    d = u2.connect(phone.serial)
    d.app_start("com.MobileTicket")
    assert d.app_current()["package"] == "com.MobileTicket"
    tree = Hierarchy(d.dump_hierarchy())
    assert {n.package for n in tree.nodes} == {"com.MobileTicket"}
    # mild drift: a launch ad with a 3 s countdown (the first dump comes well before it ends)
    overlays = [n.short_id for n in tree.nodes if n.short_id.startswith("rb_")]
    assert overlays, "mild drift shows a launch ad"
    assert d.screenshot().size == (1080, 2400)

    def in_overlay(node: Node) -> bool:
        return any(n.short_id.startswith("rb_") for n in (node, *node.ancestors()))

    start = len(phone.events)
    tapped = []
    for _ in range(4):  # dismiss whatever pop-ups are up, through uiautomator2 taps
        tree = Hierarchy(d.dump_hierarchy())
        button = next((n for n in tree.nodes if n.clickable and in_overlay(n)), None)
        if button is None:
            break
        tapped.append(str(button.bounds))  # the ad's label counts down; its place does not
        d.click(*button.bounds.center)
    tree = Hierarchy(d.dump_hierarchy())
    assert not [n for n in tree.nodes if n.short_id.startswith("rb_")]
    taps = [e for e in phone.events.events(start) if e.kind is InputKind.TAP]
    assert [e.node.bounds if e.node else None for e in taps] == tapped and tapped

    search = tree.find_one(Selector(resource_id="ticket_home_btn_search"))
    assert search is not None
    d.click(*search.bounds.center)
    assert (
        Hierarchy(d.dump_hierarchy()).find_one(Selector(resource_id="ticket_home_btn_search")) is None
    )  # a new screen
    d.press("back")  # back inside the app
    assert d.app_current()["package"] == "com.MobileTicket"
    assert Hierarchy(d.dump_hierarchy()).find_one(Selector(resource_id="ticket_home_btn_search")) is not None
    d.press("back")  # back at the app's root leaves it
    assert d.app_current()["package"] == "com.android.launcher3"


def test_browser_shows_undrifted_clone_session(phone: VirtualPhone) -> None:
    from devices.virtual.clone_screen import CloneBackend

    server = CloneBackend.get().server.url
    sid = httpx.post(f"{server}/api/sessions", json={"clone": "bank"}, timeout=30).json()["session"]
    d = u2.connect(phone.serial)
    d.shell(["am", "start", "-a", "android.intent.action.VIEW", "-d", f"{server}/s/{sid}"])
    assert d.app_current()["package"] == "com.android.chrome"
    deadline = time.time() + 10
    while time.time() < deadline:
        tree = Hierarchy(d.dump_hierarchy())
        if len(tree.nodes) > 5:
            break
        time.sleep(0.2)
    assert not [n for n in tree.nodes if n.short_id.startswith("rb_")]
    assert any(n.clickable for n in tree.nodes)
