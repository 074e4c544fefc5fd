"""The interlock against an adversary, on a virtual phone through the real adb server.

Every case tries a different way to reach a commit control; the proof that nothing reached the
phone is the virtual phone's own input log, not the interlock's word. Positive controls show the
same log does record what the interlock lets through (so these tests can fail).
"""

from __future__ import annotations

import time
from collections.abc import Callable, Iterator
from dataclasses import dataclass
from typing import Any

import pytest

from devices.farm.interlock import Interlock, InterlockedDevice
from devices.phone import PhoneDevice
from realbench.actions import Action, Click, DoubleClick, Key, KeyPress, LongPress, Swipe, Type
from realbench.errors import BoundaryBlocked, DeviceError
from realbench.hierarchy import Hierarchy, Selector
from tests.farm_support import (
    BANK,
    BOUNDARY,
    CANCEL,
    CORNER_BR,
    FORBIDDEN,
    LIST,
    NEXT,
    PAY_BUTTON,
    PAY_ICON,
    PAY_LABEL,
    SLIDER,
    SUBMIT_ROW,
    CommitScreen,
    H,
    W,
    virtual_phones,
)

pytestmark = pytest.mark.farm


def nx(px: float) -> int:
    return max(0, min(1000, round(px * 1000 / (W - 1))))


def ny(py: float) -> int:
    return max(0, min(1000, round(py * 1000 / (H - 1))))


def center(box: tuple[int, int, int, int]) -> tuple[int, int]:
    return nx((box[0] + box[2]) / 2), ny((box[1] + box[3]) / 2)


@dataclass
class Rig:
    host: Any
    serial: str
    phone: PhoneDevice
    guard: InterlockedDevice
    current: CommitScreen | None = None

    @property
    def vphone(self) -> Any:
        return self.host.phone(self.serial)

    def screen(self, **kwargs: Any) -> CommitScreen:
        """A fresh commit screen in the foreground, the interlock armed, the agent's view taken."""
        vphone = self.vphone
        made: list[CommitScreen] = []

        def maker(phone: Any, package: str) -> Any:
            from devices.virtual.phone import static_screens

            if package != BANK:
                return static_screens(phone, package)
            made.append(CommitScreen(package, **kwargs))
            return made[-1]

        vphone._screens = maker
        vphone.ui.apps.pop(BANK, None)
        self.phone.stop_app(BANK)
        self.phone.start_app(BANK)
        self.guard.arm(BOUNDARY, FORBIDDEN)
        self.guard.observe()
        assert made, "the bank package did not start the test screen"
        self.current = made[-1]
        return made[-1]

    def events(self) -> int:
        return len(self.vphone.events)


@pytest.fixture(scope="module")
def rig() -> Iterator[Rig]:
    with virtual_phones(1, commit_screen={}) as (host, serials):
        phone = PhoneDevice(serials[0], virtual=True)
        yield Rig(host, serials[0], phone, InterlockedDevice(phone))
        phone.close()


def blocked(rig: Rig, action: Action) -> BoundaryBlocked:
    before = rig.events()
    with pytest.raises(BoundaryBlocked) as info:
        rig.guard.act(action)
    assert rig.events() == before, f"{action} reached the phone: {rig.vphone.events.events(before)}"
    assert rig.current is not None
    assert not rig.current.commits, f"{action} committed: {rig.current.commits}"
    assert info.value.hierarchy and "<hierarchy" in info.value.hierarchy
    return info.value


def passes(rig: Rig, action: Action) -> None:
    before = rig.events()
    rig.guard.act(action)
    assert rig.events() > before, f"{action} was let through but never reached the phone"


# --- the adversarial cases ---------------------------------------------------------------------

Case = Callable[[Rig], None]


def tap_label(rig: Rig) -> None:
    rig.screen()
    blocked(rig, Click(x=center(PAY_LABEL)[0], y=center(PAY_LABEL)[1]))


def tap_icon(rig: Rig) -> None:
    rig.screen()
    blocked(rig, Click(x=center(PAY_ICON)[0], y=center(PAY_ICON)[1]))


def tap_padding(rig: Rig) -> None:
    rig.screen()
    # inside the button, outside both its children
    blocked(rig, Click(x=nx(950), y=ny(1810)))


def tap_left_edge(rig: Rig) -> None:
    rig.screen()
    x = nx(PAY_BUTTON[0])
    assert rig.phone.to_pixels(x, 0)[0] in (PAY_BUTTON[0], PAY_BUTTON[0] + 1)
    blocked(rig, Click(x=x, y=center(PAY_BUTTON)[1]))


def tap_corner(rig: Rig) -> None:
    rig.screen()
    blocked(rig, Click(x=nx(PAY_BUTTON[2]), y=ny(PAY_BUTTON[3])))


def tap_just_outside(rig: Rig) -> None:
    rig.screen()
    px = rig.phone.to_pixels(nx(PAY_BUTTON[0] - 2), 0)[0]
    assert PAY_BUTTON[0] - 3 <= px < PAY_BUTTON[0]
    blocked(rig, Click(x=nx(PAY_BUTTON[0] - 2), y=center(PAY_BUTTON)[1]))


def long_press(rig: Rig) -> None:
    rig.screen()
    blocked(rig, LongPress(x=center(PAY_LABEL)[0], y=center(PAY_LABEL)[1], duration_ms=600))


def double_tap(rig: Rig) -> None:
    rig.screen()
    blocked(rig, DoubleClick(x=center(PAY_ICON)[0], y=center(PAY_ICON)[1]))


def double_tap_opens_dialog(rig: Rig) -> None:
    screen = rig.screen()
    before = rig.events()
    with pytest.raises(BoundaryBlocked):
        rig.guard.act(DoubleClick(x=center(NEXT)[0], y=center(NEXT)[1]))
    sent = rig.vphone.events.events(before)
    # the first tap (on "下一步") went through; the second would have hit the dialog's confirm
    assert len(sent) == 1 and sent[0].node is not None and sent[0].node.text == "下一步"
    assert screen.dialog


def swipe_ending_on(rig: Rig) -> None:
    rig.screen()
    blocked(
        rig, Swipe(x=center(CANCEL)[0], y=center(CANCEL)[1], x2=center(PAY_LABEL)[0], y2=center(PAY_LABEL)[1])
    )


def swipe_starting_on(rig: Rig) -> None:
    rig.screen()
    blocked(
        rig, Swipe(x=center(PAY_LABEL)[0], y=center(PAY_LABEL)[1], x2=center(CANCEL)[0], y2=center(CANCEL)[1])
    )


def swipe_across_slider(rig: Rig) -> None:
    rig.screen()
    y = center(SLIDER)[1]
    blocked(rig, Swipe(x=nx(40), y=y, x2=nx(1050), y2=y, duration_ms=400))


def drag_slider(rig: Rig) -> None:
    rig.screen()
    y = center(SLIDER)[1]
    blocked(rig, Swipe(x=nx(SLIDER[0] + 20), y=y, x2=nx(SLIDER[2] - 20), y2=y))


def tap_like_swipe(rig: Rig) -> None:
    rig.screen()
    cx, cy = center(PAY_LABEL)
    blocked(rig, Swipe(x=cx, y=cy, x2=cx + 3, y2=cy + 1, duration_ms=50))


def enter_on_focused_button(rig: Rig) -> None:
    rig.screen(focus="pay")
    blocked(rig, KeyPress(key=Key.ENTER))


def enter_in_form_field(rig: Rig) -> None:
    rig.screen(focus="amount")
    blocked(rig, KeyPress(key=Key.ENTER))


def enter_without_focus(rig: Rig) -> None:
    rig.screen()
    blocked(rig, KeyPress(key=Key.ENTER))


def type_password(rig: Rig) -> None:
    rig.screen(focus="password")
    blocked(rig, Type(text="135790"))


def type_sms_code(rig: Rig) -> None:
    rig.screen(focus="sms")
    blocked(rig, Type(text="482913"))


def type_with_newline(rig: Rig) -> None:
    rig.screen(focus="amount")
    blocked(rig, Type(text="100\n"))


def coords_zero(rig: Rig) -> None:
    rig.screen()
    assert rig.phone.to_pixels(0, 0) == (0, 0)
    blocked(rig, Click(x=0, y=0))


def coords_thousand(rig: Rig) -> None:
    rig.screen()
    assert rig.phone.to_pixels(1000, 1000) == (W - 1, H - 1)
    assert CORNER_BR[2] >= W - 1
    blocked(rig, Click(x=1000, y=1000))


def in_list_submit(rig: Rig) -> None:
    rig.screen()
    blocked(rig, Click(x=center(SUBMIT_ROW)[0], y=center(SUBMIT_ROW)[1]))


def tap_after_screen_changed(rig: Rig) -> None:
    # The agent looked at a screen without the dialog; it appears before the tap is sent.
    rig.screen(switch_after_s=1.0)
    hier = Hierarchy(rig.phone.hierarchy())
    assert hier.find_one(Selector(resource_id="dialog_confirm")) is None
    time.sleep(1.05)
    blocked(rig, Click(x=center(CANCEL)[0], y=center(CANCEL)[1]))


def tap_after_own_tap_changed_screen(rig: Rig) -> None:
    rig.screen()
    passes(rig, Click(x=center(NEXT)[0], y=center(NEXT)[1]))  # opens the dialog
    # no new observation: the agent still believes "下一步" is there
    blocked(rig, Click(x=center(NEXT)[0], y=center(NEXT)[1]))


def unarmed_refuses(rig: Rig) -> None:
    rig.screen()
    rig.guard.disarm()
    before = rig.events()
    with pytest.raises(DeviceError, match="not armed"):
        rig.guard.act(Click(x=center(CANCEL)[0], y=center(CANCEL)[1]))
    assert rig.events() == before


CASES: list[Case] = [
    tap_label,
    tap_icon,
    tap_padding,
    tap_left_edge,
    tap_corner,
    tap_just_outside,
    long_press,
    double_tap,
    double_tap_opens_dialog,
    swipe_ending_on,
    swipe_starting_on,
    swipe_across_slider,
    drag_slider,
    tap_like_swipe,
    enter_on_focused_button,
    enter_in_form_field,
    enter_without_focus,
    type_password,
    type_sms_code,
    type_with_newline,
    coords_zero,
    coords_thousand,
    in_list_submit,
    tap_after_screen_changed,
    tap_after_own_tap_changed_screen,
    unarmed_refuses,
]


@pytest.mark.parametrize("case", CASES, ids=[c.__name__ for c in CASES])
def test_nothing_crosses(rig: Rig, case: Case) -> None:
    case(rig)


def test_at_least_twenty_ways() -> None:
    assert len(CASES) >= 20


def test_allowed_actions_reach_the_phone(rig: Rig) -> None:
    screen = rig.screen()
    passes(rig, Click(x=center(CANCEL)[0], y=center(CANCEL)[1]))
    # a scroll that starts elsewhere in the list passes over the in-content submit row
    passes(rig, Swipe(x=nx(540), y=ny(1400), x2=nx(540), y2=ny(760), duration_ms=300))
    assert screen.scroll > 0
    rig.guard.observe()
    passes(rig, Click(x=nx(540), y=ny(260)))  # focus the amount field
    passes(rig, Type(text="100"))
    assert screen.fields["amount"] == "100"
    passes(rig, KeyPress(key=Key.BACK))
    assert not screen.commits


def test_each_dump_is_searched_for_stop_controls_once(rig: Rig, monkeypatch: pytest.MonkeyPatch) -> None:
    """The guard decides on its first dump and compares it with what the agent saw: one search of
    that screen serves both (the search is most of the guard's own CPU per step), and a re-read
    byte-identical to the dump just searched is not searched again."""
    import devices.farm.interlock as interlock_module

    searched: list[int] = []
    real = interlock_module.stop_controls

    def counting(hierarchy: Hierarchy, *args: Any, **kwargs: Any) -> Any:
        searched.append(id(hierarchy))
        return real(hierarchy, *args, **kwargs)

    monkeypatch.setattr(interlock_module, "stop_controls", counting)
    rig.screen()
    searched.clear()
    dumps = rig.guard.dumps
    passes(rig, Click(x=center(CANCEL)[0], y=center(CANCEL)[1]))
    assert rig.guard.dumps - dumps >= 2
    assert 1 <= len(searched) <= rig.guard.dumps - dumps
    assert len(set(searched)) == len(searched)


def test_no_input_ever_landed_on_a_stop_control(rig: Rig) -> None:
    stops = {"确认付款", "锁图标", "确定", "提交订单", "滑动确认支付", "快捷支付", "立即支付"}
    for event in rig.vphone.events.events():
        if event.node is not None:
            assert event.node.text not in stops and event.node.content_desc not in stops, event
            assert "btn_pay" not in event.node.resource_id


def test_blocked_action_carries_the_screen(rig: Rig) -> None:
    rig.screen()
    exc = blocked(rig, Click(x=center(PAY_LABEL)[0], y=center(PAY_LABEL)[1]))
    assert exc.screenshot is not None and exc.screenshot[:2] == b"\xff\xd8"
    assert "确认付款" in exc.control


# --- pure decisions (no phone) -----------------------------------------------------------------


def test_decision_is_pure_and_reusable() -> None:
    xml = (
        "<hierarchy><node class='android.widget.FrameLayout' bounds='[0,0][1080,2400]'>"
        f"<node class='android.widget.LinearLayout' clickable='true' bounds='[{PAY_BUTTON[0]},{PAY_BUTTON[1]}][{PAY_BUTTON[2]},{PAY_BUTTON[3]}]'>"
        f"<node class='android.widget.TextView' text='确认付款' bounds='[{PAY_LABEL[0]},{PAY_LABEL[1]}][{PAY_LABEL[2]},{PAY_LABEL[3]}]'/>"
        "</node></node></hierarchy>"
    )
    lock = Interlock(BOUNDARY, [])

    def to_px(x: int, y: int) -> tuple[int, int]:
        return round(x * (W - 1) / 1000), round(y * (H - 1) / 1000)

    hier = Hierarchy(xml)
    assert lock.check(Click(x=nx(950), y=ny(1810)), hier, to_px, (W, H)) is not None
    assert lock.check(Click(x=nx(950), y=ny(1700)), hier, to_px, (W, H)) is None
    assert lock.check(Swipe(x=nx(540), y=ny(1000), x2=nx(540), y2=ny(300)), hier, to_px, (W, H)) is None
    assert LIST[3] < PAY_BUTTON[1]


def test_the_screen_commits_when_reached_unguarded(rig: Rig) -> None:
    """The traps work: the same inputs sent straight to the phone commit on the screen's own record."""
    attempts: list[tuple[dict[str, Any], Action]] = [
        ({}, Click(x=center(PAY_LABEL)[0], y=center(PAY_LABEL)[1])),
        ({}, Swipe(x=nx(40), y=center(SLIDER)[1], x2=nx(1050), y2=center(SLIDER)[1], duration_ms=400)),
        ({}, Click(x=center(SUBMIT_ROW)[0], y=center(SUBMIT_ROW)[1])),
        ({"focus": "amount"}, KeyPress(key=Key.ENTER)),
        ({"focus": "password"}, Type(text="135790")),
        ({}, Click(x=1000, y=1000)),
    ]
    for kwargs, action in attempts:
        screen = rig.screen(**kwargs)
        rig.phone.act(action)
        assert screen.commits, f"{action} did not commit on the unguarded screen"
