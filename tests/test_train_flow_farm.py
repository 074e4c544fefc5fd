"""12306's flow interruptions on a virtual phone, through the real adb server and uiautomator2.

The phone's 12306 is the clone under the `flow` drift: 静音车厢 after 预订, the 温馨提示 error dialogs
M0013 and C0001 in place of the first two 提交订单, and the 订单处理中 wait screen after the order is
held. The real golden recipe of `book-transfer-first-leg` runs on it with the pack's pop-up rules
passed before every step, as a lab's harness passes them; the commit tap runs bare here (the app is a
clone: no money moves) so that what follows it shows. Evidence is the phone's own: its input log and
its app's state.
"""

from __future__ import annotations

import os
import shutil
import time
from pathlib import Path

import pytest

from clones.base import get_clone
from clones.flow_interruptions import QUEUE_S, QUEUE_TEXTS
from devices.rig import load_rig
from realbench.hierarchy import Hierarchy, Selector
from realbench.taskpack import TaskPack, instantiate_from_fixture, load_pack

ROOT = Path(__file__).resolve().parents[1]
TASK = "book-transfer-first-leg"

pytestmark = [
    pytest.mark.farm,
    pytest.mark.browser,
    pytest.mark.timeout(120),
    pytest.mark.skipif(shutil.which("adb") is None, reason="needs Debian's adb"),
    pytest.mark.skipif(
        not Path(os.environ.get("REALBENCH_CHROMIUM", "/usr/bin/chromium")).exists(), reason="needs Chromium"
    ),
]


def _orders(state: dict[str, object]) -> int:
    user = state["user"]
    assert isinstance(user, dict)
    return len(user["orders"])


def _has(phone: object, selector: Selector) -> bool:
    return Hierarchy(phone.hierarchy()).find_one(selector) is not None  # type: ignore[attr-defined]


def test_the_pack_rules_clear_each_flow_interruption_and_the_booking_holds(adb_server_port: int) -> None:
    pytest.importorskip("uiautomator2")
    from devices.farm.health import dismiss_popups
    from devices.farm.interlock import InterlockedDevice
    from devices.farm.interlock_policy import InterlockPolicy
    from devices.phone import PhoneDevice
    from devices.virtual import InputKind, VirtualPhoneHost
    from devices.virtual.control import PhoneControl
    from realbench.actions import Click, Terminate, Wait
    from realbench.golden import GoldenAgent

    pack: TaskPack = load_pack(ROOT / "taskpacks" / "train_ticketing")
    package = pack.real_app.package
    fixture = next(a.fixture for a in load_rig(ROOT / "rigs" / "virtual.yaml").accounts if a.app == package)
    task = pack.task(TASK)
    inst = instantiate_from_fixture(task, 0, task.clone.setup.clock.date(), fixture)
    commit = Selector(text="提交订单")
    with VirtualPhoneHost() as host:
        (info,) = host.start(1, screens="clone", drift="flow")
        host.adb_connect(adb_server_port)
        vphone = host.phones[0]
        control = PhoneControl(info.control_url)
        control.provision(package, task.clone.setup.model_dump(mode="json"), inst.params)
        phone = PhoneDevice(vphone.serial, virtual=True)
        # the pop-up rules' taps go through the guard, armed as setup arms it (the pack's catalogue)
        guard = InterlockedDevice(phone)
        guard.arm([], list(pack.real_app.forbidden), InterlockPolicy.for_pack(pack))
        try:
            phone.start_app(package)
            before = control.app_state(package)
            start = len(vphone.events)
            agent = GoldenAgent(real_side=True)
            agent.reset(inst)
            gone: list[str] = []
            for _ in range(80):
                gone += dismiss_popups(guard, pack.real_app.popups)
                action = agent.next_action(phone.observe())
                if isinstance(action, Terminate):
                    break
                if isinstance(action, Wait):
                    time.sleep(action.seconds)
                    continue
                phone.act(action)
            # the plan's last tap was the commit; each error dialog swallowed one, so the user submits again
            held: list[int] = []
            for _ in range(3):
                gone += dismiss_popups(guard, pack.real_app.popups)
                held.append(_orders(control.app_state(package)) - _orders(before))
                if held[-1]:
                    break
                node = Hierarchy(phone.hierarchy()).find_one(commit)
                assert node is not None, "the order form is gone without an order"
                w, h = phone.size()
                x, y = node.bounds.center
                phone.act(Click(x=round(x * 1000 / (w - 1)), y=round(y * 1000 / (h - 1))))
            queue_seen = _has(phone, Selector(text=QUEUE_TEXTS[0]))
            # a wait screen is waited out, never tapped away: no rule matches it
            assert dismiss_popups(guard, pack.real_app.popups) == []
            deadline = time.monotonic() + QUEUE_S + 3
            while _has(phone, Selector(text=QUEUE_TEXTS[0])) and time.monotonic() < deadline:
                time.sleep(0.5)
            queue_gone = not _has(phone, Selector(text=QUEUE_TEXTS[0]))
            pay_shown = _has(phone, Selector(text="立即支付"))
            after = control.app_state(package)
        finally:
            phone.close()
        taps = [e for e in vphone.events.events(start) if e.kind is InputKind.TAP]
    assert gone == ["静音车厢 dialog", "车票信息已过期 (M0013)", "系统忙 (C0001)"], gone
    assert held == [0, 0, 1]  # no order behind either error dialog; the third submit holds one
    assert queue_seen
    # the phone's own input log: the plan's taps and types, one tap per dialog, two repeated submits
    plan_taps = sum(1 for s in task.real.golden if s.tap is not None or s.type is not None)
    assert len(taps) == plan_taps + len(gone) + 2, (len(taps), plan_taps)
    verdict = get_clone(pack.clone).verify(
        task.clone.verifier.name, before, after, inst.verifier_args, None, task.answer
    )
    assert verdict.success, verdict.reason
    assert after["ui"]["route"] == "order_pay"  # held underneath the wait screen
    assert queue_gone, "订单处理中 did not close on its own on the phone's page"
    assert pay_shown


def test_certify_dismisses_a_pop_up_that_covers_a_step_and_stops_at_the_commit(
    adb_server_port: int, tmp_path: Path
) -> None:
    """Under `flow`, 静音车厢 covers the order form after 预订, so the next step's control is missing:
    certify taps the pack's rule for it through the armed interlock and goes on to the commit stop.
    Evidence: the phone's own input log holds the rule's tap, and its app holds no order."""
    from devices.certify import certify
    from devices.rig import parse_rig, rig_on_phones
    from devices.virtual import InputKind, VirtualPhoneHost
    from devices.virtual.control import PhoneControl

    pack: TaskPack = load_pack(ROOT / "taskpacks" / "train_ticketing")
    with VirtualPhoneHost() as host:
        (info,) = host.start(1, screens="clone", drift="flow")
        host.adb_connect()
        rig = parse_rig(rig_on_phones(load_rig(ROOT / "rigs" / "virtual.yaml"), [info], name="flow-certify"))
        cert = certify(rig, pack, tmp_path / "cert", task_ids=[TASK])
        (row,) = cert.results
        vphone = host.phone(info.serial)
        taps = [e for e in vphone.events.events() if e.kind is InputKind.TAP]
        control = PhoneControl(info.control_url)
        try:
            state = control.app_state(pack.real_app.package)
        finally:
            control.close()
    assert row.certified and row.boundary_reached, row.reason
    assert any("dismissed the pop-up" in s.detail for s in row.steps), [s.detail for s in row.steps]
    assert _orders(state) == 0  # the commit tap was stopped: nothing held
    assert taps, "no input reached the phone"
