"""The adversarial suite: every attack commits on an unguarded virtual phone and never behind the
interlock. The verdicts come from the phone — the test screens' own commit records and the phone's
input log — never from the interlock's report (tests/interlock_attacks.py)."""

from __future__ import annotations

from collections.abc import Iterator

import pytest

from realbench.actions import Key, KeyPress, Swipe, Type
from tests.interlock_attacks import (
    BOUNDARY,
    CANCEL,
    FORBIDDEN,
    H5_PAY,
    POLICY,
    Attack,
    AttackRig,
    attack_rig,
    attacks,
    nx,
    ny,
    pay_screen,
    tap,
)
from tests.test_farm_interlock import CASES as EARLIER_CASES

pytestmark = pytest.mark.farm

ATTACKS = attacks()


@pytest.fixture(scope="module")
def rig() -> Iterator[AttackRig]:
    with attack_rig() as r:
        yield r


@pytest.mark.parametrize("attack", ATTACKS, ids=[a.name for a in ATTACKS])
def test_attack_commits_unguarded_and_never_behind_the_interlock(rig: AttackRig, attack: Attack) -> None:
    bare = rig.run(attack, guarded=False)
    assert bare.committed, f"{attack.name}: the test screen did not commit without the interlock"
    guarded = rig.run(attack, guarded=True)
    assert not guarded.committed, f"{attack.name} committed behind the interlock: {guarded.commits}"
    # the action that would have committed never produced an input on the phone
    assert guarded.blocked_inputs == 0


def test_at_least_forty_variants() -> None:
    issue = [a for a in ATTACKS if a.origin == "issue"]
    assert len(issue) == 14
    assert len(ATTACKS) + len(EARLIER_CASES) >= 40
    assert len({a.name for a in ATTACKS}) == len(ATTACKS)


def test_allowed_inputs_still_reach_a_money_moving_app(rig: AttackRig) -> None:
    """The hardening must not wall the app off: cancel, typing an amount, a vertical scroll in an
    H5 page, a tap on a WebView screen the pack marks safe — all reach the phone, none commits."""
    from devices.virtual.commit_screens import Hotspot, ScreenSpec
    from devices.virtual.uitree import UiNode
    from tests.interlock_attacks import BANK, ORDER_TITLE, PAY, TITLE, title, webview

    def TITLE_NODE() -> UiNode:  # noqa: N802 - a catalogued H5 screen's title
        return title("H5 收银台（测试屏）")

    def safe_h5() -> ScreenSpec:
        marker = UiNode(bounds=TITLE, cls="android.widget.TextView", text="帮助", resource_id="h5_help_title")
        return ScreenSpec([marker, webview()], [Hotspot("H5 link", H5_PAY, frozenset())])

    def order_screen(rid: str, label: str) -> ScreenSpec:
        button = UiNode(
            bounds=PAY,
            cls="android.widget.Button",
            text=label,
            resource_id=f"{BANK}:id/{rid}",
            clickable=True,
        )
        return ScreenSpec([title(ORDER_TITLE), button], [Hotspot("opens the cashier", PAY, frozenset())])

    def stated_go_pay() -> ScreenSpec:
        return order_screen("btn_go_pay", "去支付 ¥12.00")

    def amount_focused() -> ScreenSpec:
        spec = pay_screen("确认付款")
        spec.nodes[1].focused = True
        return spec

    cases = [
        Attack("cancel", "control", lambda: pay_screen("确认付款"), [tap(CANCEL)]),
        Attack("amount", "control", amount_focused, [Type(text="100")]),
        Attack("back", "control", lambda: pay_screen("确认付款"), [KeyPress(key=Key.BACK)]),
        Attack("safe_h5_tap", "control", safe_h5, [tap(H5_PAY)]),
        # the control the entry vouches for by its stated label (it opens a cashier: no commit)
        Attack("stated_label_go_pay", "control", stated_go_pay, [tap(PAY)]),
        Attack("listed_id_neutral_label", "control", lambda: order_screen("btn_next", "下一步"), [tap(PAY)]),
        Attack(
            "h5_scroll",
            "control",
            lambda: ScreenSpec([TITLE_NODE(), webview()]),
            [Swipe(x=nx(540), y=ny(1500), x2=nx(540), y2=ny(600))],
        ),
    ]
    for case in cases:
        run = rig.run(case, guarded=True)
        assert not run.blocked, f"{case.name} was blocked"
        assert run.inputs >= 1, f"{case.name} never reached the phone"
        assert not run.committed
    assert POLICY.money_moving and BOUNDARY and FORBIDDEN


def test_same_screen_without_money_moving_policy_lets_enter_through(rig: AttackRig) -> None:
    """A control showing the money-moving rule is what blocks ENTER below the fold: armed without
    it, the same attack commits (so the suite's verdicts depend on the rule, not on the screen)."""
    attack = next(a for a in ATTACKS if a.name == "enter_submit_below_fold")
    rig.run(attack, guarded=False)
    rig._install(attack)
    rig.phone.stop_app("com.MobileTicket")
    rig.phone.start_app("com.chinamworld.main")
    rig.guard.arm(BOUNDARY, FORBIDDEN)  # no policy: the pre-hardening rules only
    rig.guard.observe()
    rig.guard.act(KeyPress(key=Key.ENTER))
    assert [c for s in rig.screens for c in s.commits], (
        "ENTER below the fold should commit without the policy"
    )
