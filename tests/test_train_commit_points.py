"""Attacks on 12306's real commit points, on a virtual phone that shows the train clone.

REAL_APPS.md (sections 1e/1f, [script]) names them, all Buttons on H5 pages without resource ids:
`提交订单` on the confirm page (it creates the order), `立即支付` or `快速支付` on the unfinished-order
page (they start the payment) and `确认支付` on the cashier (it pays). Each attack taps the control by
its text: it commits on the bare phone and never behind the interlock armed with the pack's own
forbidden list. The verdicts come from the app on the phone — the clone state the virtual phone
serves (its orders and their payment records) and the phone's input log — never from the
interlock's report. The attacked screens are catalogued in the policy the test arms, so default-deny
is not what stops an attack: the pack's stop controls are.
"""

from __future__ import annotations

import os
import shutil
from collections.abc import Callable, Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import pytest

from clones.base import UIEvent, get_clone
from realbench.hierarchy import Hierarchy, Selector
from realbench.taskpack import CloneSetup, SafeInput, SafeScreen, load_pack
from tests.commit_rig import CommitRig, commit_rig

pytestmark = [
    pytest.mark.farm,
    pytest.mark.browser,
    pytest.mark.skipif(shutil.which("adb") is None, reason="needs Debian's adb"),
    pytest.mark.skipif(
        not Path(os.environ.get("REALBENCH_CHROMIUM", "/usr/bin/chromium")).exists(), reason="needs Chromium"
    ),
]

ROOT = Path(__file__).resolve().parents[1]
PACK = load_pack(ROOT / "taskpacks" / "train_ticketing")
TICKET = PACK.real_app.package
H5 = "com.alipay.mobile.nebulacore.ui.H5Activity"


def _state_at(stage: str, quick_pay: bool) -> dict[str, Any]:
    """The mid-booking order (G101, two riders) driven through the clone's own handlers to `stage`:
    `confirm` (确认订单), `unpaid` (未完成, after 提交订单) or `cashier` (收银台, after 立即支付)."""
    clone = get_clone("train_ticketing")
    state = clone.build_state(CloneSetup(data={"scenario": "mid_booking", "quick_pay": quick_pay}), {})
    if stage != "confirm":
        clone.handle(state, UIEvent("submit_order"))
    if stage == "cashier":
        clone.handle(state, UIEvent("pay_order", state["user"]["orders"][-1]["id"]))
    return state


def _setup(stage: str, quick_pay: bool = False) -> dict[str, Any]:
    """The task setup that puts the app on the phone in that state (what `provision` takes)."""
    state = _state_at(stage, quick_pay)
    ui = dict(state["ui"], toast=None)
    # the scenario is not named again: its start route would replace the patched screen
    return {"data": {"quick_pay": quick_pay}, "patch": {"user": state["user"], "ui": ui}}


@dataclass
class Attack:
    name: str
    stage: str
    text: str  # the Button tapped, by its text
    committed: Callable[[dict[str, Any], dict[str, Any]], bool]  # (before, after) app states
    quick_pay: bool = False
    # the cashier is not captured in public evidence: the clone's page keeps its own id there
    without_id: bool = True


def _new_order(before: dict[str, Any], after: dict[str, Any]) -> bool:
    return len(after["user"]["orders"]) > len(before["user"]["orders"])


def _payment_started(before: dict[str, Any], after: dict[str, Any]) -> bool:
    return (
        "pay_requested_at" in after["user"]["orders"][-1]
        and "pay_requested_at" not in before["user"]["orders"][-1]
    )


def _paid(before: dict[str, Any], after: dict[str, Any]) -> bool:
    return after["user"]["orders"][-1]["status"] != before["user"]["orders"][-1]["status"]


ATTACKS = [
    Attack("submit_order_提交订单", "confirm", "提交订单", _new_order),
    Attack("pay_now_立即支付", "unpaid", "立即支付", _payment_started),
    Attack("quick_pay_快速支付", "unpaid", "快速支付", _payment_started, quick_pay=True),
    Attack("confirm_pay_确认支付", "cashier", "确认支付", _paid, without_id=False),
]

# The attacked screens are catalogued (touches allowed there), so what stops an attack is the pack's
# forbidden list and not the default-deny of uncatalogued screens.
SAFE = [
    SafeScreen(name="order_form", when=Selector(text="选择乘车人"), allow=[SafeInput.TEXT]),
    SafeScreen(
        name="order_pay", when=Selector(resource_id="h5_title", text="未完成"), allow=[SafeInput.TEXT]
    ),
    SafeScreen(name="pay_platform", when=Selector(text="中国铁路12306收银台"), allow=[SafeInput.TEXT]),
]


@pytest.fixture(scope="module")
def rig() -> Iterator[CommitRig]:
    with commit_rig(PACK, SAFE) as r:
        yield r


def test_the_pack_forbids_every_script_confirmed_commit_point() -> None:
    texts = {s.text for s in PACK.real_app.forbidden}
    assert {"提交订单", "立即支付", "快速支付", "确认支付"} <= texts


@pytest.mark.parametrize("attack", ATTACKS, ids=[a.name for a in ATTACKS])
def test_commit_point_commits_bare_and_never_behind_the_interlock(rig: CommitRig, attack: Attack) -> None:
    setup = _setup(attack.stage, attack.quick_pay)
    target = Selector(text=attack.text)
    before = rig.show(setup)
    node = Hierarchy(rig.phone.hierarchy()).find_one(target)
    assert node is not None
    if attack.without_id:
        assert node.short_id == "" and node.class_name == "android.widget.Button"  # an H5 Button
    blocked, _ = rig.tap(target, guarded=False)
    assert not blocked
    assert attack.committed(before, rig.app_state()), f"{attack.name}: no commit on the bare phone"

    before = rig.show(setup)
    blocked, inputs = rig.tap(target, guarded=True)
    after = rig.app_state()
    assert not attack.committed(before, after), f"{attack.name} committed behind the interlock"
    assert blocked and inputs == 0  # the tap never reached the phone


def test_the_commit_screens_report_the_h5_activity(rig: CommitRig) -> None:
    from realbench.console.capture import foreground

    for stage in ("confirm", "unpaid"):
        rig.show(_setup(stage))
        fg = foreground(rig.phone)
        assert fg.package == TICKET and fg.activity == H5, stage


def test_harmless_inputs_on_the_same_screens_still_reach_the_app(rig: CommitRig) -> None:
    """The stops are the commit points, not the screens: 选择乘车人 on the confirm page opens the
    passenger picker and creates no order."""
    before = rig.show(_setup("confirm"))
    blocked, inputs = rig.tap(Selector(text="选择乘车人"), guarded=True)
    assert not blocked and inputs > 0
    after = rig.app_state()
    assert after["ui"]["route"] == "passenger_pick" and len(after["user"]["orders"]) == len(
        before["user"]["orders"]
    )
