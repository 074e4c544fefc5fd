"""Attacks through the lab console: its HTTP API drives a virtual phone whose bank package shows a
commit test screen (devices.virtual.commit_screens). Each attack is first sent straight to the
phone, where it must commit (the screen is a working trap), then through the console, where it
must not. The verdict comes from the virtual phone alone — the screen's own commit records and
the phone's input log — never from the console's reply.

The console arms its guarded device with the packs' `InterlockPolicy` (money-moving rules); an
operator may still send a blocked action, but only by naming the control and themselves, and
every override is logged with the boundary, the screen and the operator.
"""

from __future__ import annotations

import json
import re
import shutil
from collections.abc import Callable, Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import pytest

from devices.virtual.commit_screens import Gesture, ScreenSpec
from devices.virtual.uitree import UiNode
from realbench.actions import Action, Key, KeyPress, Type, action_to_dict
from tests.console_support import ConsoleBench, console_bench
from tests.interlock_attacks import BANK, PAY, attacks, title

ROOT = Path(__file__).resolve().parents[1]
farm = pytest.mark.skipif(shutil.which("adb") is None, reason="needs Debian's adb")
pytestmark = [farm, pytest.mark.farm]


def _named(name: str) -> Callable[[], ScreenSpec]:
    return next(a.screen for a in attacks() if a.name == name)


def _focused_pay_icon() -> ScreenSpec:
    """A pay button that is only an icon (no text, no description), focused: ENTER presses it."""
    icon = UiNode(
        bounds=PAY,
        cls="android.widget.ImageButton",
        resource_id=f"{BANK}:id/iv_go",
        clickable=True,
        focusable=True,
        focused=True,
    )
    return ScreenSpec([title(), icon], commit_on=frozenset({Gesture.ENTER}))


def _webview_cashier_pin() -> ScreenSpec:
    """An H5 cashier with its (undumped) PIN pad focused: the sixth digit pays."""
    web = UiNode(bounds=(0, 231, 1080, 2000), cls="android.webkit.WebView", focusable=True, focused=True)
    return ScreenSpec([title("H5 收银台（测试屏）"), web], commit_on=frozenset({Gesture.TEXT}))


def _h5_tap() -> Action:
    return next(a.actions[0] for a in attacks() if a.name == "webview_without_nodes")


@dataclass(frozen=True)
class ConsoleAttack:
    name: str
    screen: Callable[[], ScreenSpec]
    action: Action


CONSOLE_ATTACKS = [
    ConsoleAttack("h5_pay_tap_without_a_node", _named("webview_without_nodes"), _h5_tap()),
    ConsoleAttack("enter_submit_below_the_fold", _named("enter_submit_below_fold"), KeyPress(key=Key.ENTER)),
    ConsoleAttack(
        "typed_newline_submit_below_the_fold", _named("type_newline_submit_below_fold"), Type(text="100\n")
    ),
    ConsoleAttack("typed_payment_pin", _named("payment_keypad_without_stop_label"), Type(text="135790")),
    ConsoleAttack("enter_on_a_focused_textless_pay_icon", _focused_pay_icon, KeyPress(key=Key.ENTER)),
    ConsoleAttack("pin_into_a_focused_webview_cashier", _webview_cashier_pin, Type(text="246810")),
]


Bench = ConsoleBench


@pytest.fixture(scope="module")
def bench(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Bench]:
    with console_bench(tmp_path_factory.mktemp("console-interlock")) as b:
        yield b


def _straight_to_the_phone(bench: Bench, attack: ConsoleAttack) -> list[Any]:
    """The attack on the unguarded phone: the screen must commit (it is a working trap)."""
    bench.install(attack.screen)
    phone = bench.pool.phone(bench.serial)
    phone.stop_app(BANK)
    phone.start_app(BANK)
    phone.hierarchy()
    phone.act(attack.action)
    return bench.commits()


@pytest.mark.parametrize("attack", CONSOLE_ATTACKS, ids=[a.name for a in CONSOLE_ATTACKS])
def test_console_attack_does_not_commit(bench: Bench, attack: ConsoleAttack) -> None:
    assert _straight_to_the_phone(bench, attack), f"{attack.name}: the trap did not commit unguarded"
    bench.install(attack.screen)
    assert bench.post("/start", {"package": BANK}).status_code == 200
    events = bench.vphone.events
    before = len(events)
    r = bench.post("/act", {"action": action_to_dict(attack.action)})
    sent = len(events) - before
    # the verdict: the phone's own records
    assert not bench.commits(), f"{attack.name} committed through the console: {bench.commits()}"
    assert sent == 0, f"{attack.name}: {sent} input events reached the phone"
    assert r.status_code == 409, r.text  # and the console says why
    bench.post("/release", {})


def test_an_override_needs_an_operator_and_is_logged_with_boundary_and_screen(bench: Bench) -> None:
    attack = CONSOLE_ATTACKS[1]  # ENTER on a form that submits below the fold
    bench.install(attack.screen)
    assert bench.post("/start", {"package": BANK}).status_code == 200
    action = action_to_dict(attack.action)
    blocked = bench.post("/act", {"action": action})
    assert blocked.status_code == 409
    boundary = blocked.json()["boundary"]
    events = bench.vphone.events
    before = len(events)
    for anonymous in ({}, {"operator": ""}, {"operator": "   "}):
        r = bench.post("/act", {"action": action, "confirm": boundary, **anonymous})
        assert r.status_code == 400 and "operator" in r.json()["error"], r.text
    assert not bench.commits() and len(events) == before  # nothing reached the phone
    ok = bench.post("/act", {"action": action, "confirm": boundary, "operator": "Li Lei"})
    assert ok.status_code == 200, ok.text
    assert bench.commits() and len(events) > before  # the operator's override did reach it
    entry = json.loads((bench.data / "confirmations.jsonl").read_text(encoding="utf-8").splitlines()[-1])
    assert entry["operator"] == "Li Lei" and entry["boundary"] == boundary and entry["serial"] == bench.serial
    assert "转账" in entry["screen"]  # the screen it was sent on, named by its texts
    assert entry["action"] == action
    bench.post("/release", {})


def test_every_console_input_goes_through_the_guarded_device() -> None:
    """No console module sends input to a raw phone: no `.inner`, no raw door, and the pool's
    phone object is used only for reading (frames, hierarchy, pixels, captures)."""
    sends = re.compile(
        r"pool\.phone\([^)]*\)\.(act|start_app|stop_app|shell|type_text|press|click|swipe|launch)\b"
    )
    for path in (ROOT / "realbench" / "console").glob("*.py"):
        text = path.read_text(encoding="utf-8")
        assert ".inner" not in text, path
        assert "raw_phone_for_tests" not in text, path
        assert not sends.search(text), (path, sends.search(text))


def test_back_still_reaches_the_phone(bench: Bench) -> None:
    """The guard is not a wall: BACK always passes on a money-moving screen."""
    bench.install(_named("enter_submit_below_fold"))
    assert bench.post("/start", {"package": BANK}).status_code == 200
    events = bench.vphone.events
    before = len(events)
    assert bench.post("/act", {"type": "key", "key": "back"}).status_code == 200
    assert len(events) > before and not bench.commits()
    bench.post("/release", {})
