"""Default-deny on a catalogued screen of a money-moving app: what the catalogue does not vouch for.

The screen of each test is recognised as safe (its marker is shown), so only the rules behind
default-deny stand between the input and a commit: the guard's own money words (any locale,
whatever the pack lists), unlabelled controls, swipes that do not start in a view that scrolls,
and blind WebView input. Each of these inputs went through the guard before those rules existed.
"""

from __future__ import annotations

import pytest

from devices.farm.interlock import Block, Interlock, StopOrigin
from devices.farm.interlock_policy import InterlockPolicy
from devices.farm.stop_labels import LabelTexts, match_form, money_reading, names_stop
from realbench.actions import Click, Swipe
from realbench.hierarchy import Hierarchy, Selector
from realbench.taskpack import SafeInput, SafeScreen
from tests.test_interlock_rules import PKG, check, marker, node, norm, screen

STOP = [Selector(text="确认付款")]  # the pack's own list knows one label only
OPEN = SafeScreen(name="test screen", when=Selector(resource_id="screen_marker"), allow=[SafeInput.TEXT])
LISTED = SafeScreen(
    name="order detail", when=Selector(resource_id="screen_marker"), controls=["continue_pay", "btn_back"]
)
H5 = SafeScreen(name="help", when=Selector(resource_id="help_title"), allow=[SafeInput.WEBVIEW_TAPS])
BUTTON = "[100,1000][980,1150]"
TAP = Click(x=norm(540, 1075)[0], y=norm(540, 1075)[1])


def lock(*screens: SafeScreen) -> Interlock:
    return Interlock(STOP, [], policy=InterlockPolicy(True, frozenset({PKG}), tuple(screens)))


def button(label: str, rid: str = "", cls: str = "android.widget.Button") -> str:
    extra = {"resource_id": f"{PKG}:id/{rid}"} if rid else {}
    return node(BUTTON, cls, text=label, clickable="true", **extra)


@pytest.mark.parametrize(
    "label",
    [
        "Pay",
        "Pay now",
        "PAY ¥100.00",
        "Confirm Transfer",
        "Confirm\u200b payment",
        "去支付",
        "完成转账",
        "确认并付款",
        "马上支付",
        "立即购票",
        "確定",
        "确认（ＯＫ）",
        "提交候 (¥88) 补订单",
    ],
)
def test_money_words_stop_a_control_the_pack_does_not_list(label: str) -> None:
    block = check(lock(OPEN), TAP, screen(marker(), button(label, "btn_pay")))
    assert isinstance(block, Block), f"{label!r} was let through"
    assert block.control is not None and block.control.origin == StopOrigin.MONEY_WORD


@pytest.mark.parametrize("label", ["取消", "Cancel", "Payee list", "修改金额", "下一步", "确认删除", "帮助"])
def test_other_labels_are_not_money_words(label: str) -> None:
    assert money_reading([match_form(label)]) is None
    assert check(lock(OPEN), TAP, screen(marker(), button(label, "btn_x"))) is None


def test_a_price_inside_a_stop_label_is_read_past() -> None:
    h = screen(marker(), button("提交候 (¥88) 补订单"))
    target = h.nodes[-1]
    assert names_stop(Selector(text="提交候补订单"), target, subtree=True, texts=LabelTexts())


def test_the_catalogue_vouches_for_a_listed_control_but_never_over_the_pack() -> None:
    guard = lock(LISTED)
    assert check(guard, TAP, screen(marker(), button("去支付 ¥12", "continue_pay"))) is None
    # the same words on a control the entry does not list (no id: only its label speaks for it)
    assert check(guard, TAP, screen(marker(), button("去支付 ¥12"))) is not None
    # a listed control that shows the pack's own stop label stays stopped
    assert check(guard, TAP, screen(marker(), button("确认付款", "continue_pay"))) is not None


@pytest.mark.parametrize("rid", ["btn_ok", ""])
def test_an_unlabelled_control_is_refused_unless_listed(rid: str) -> None:
    icon = button("", rid, cls="android.widget.ImageButton")
    assert check(lock(OPEN), TAP, screen(marker(), icon)) is not None
    listed = SafeScreen(name="s", when=Selector(resource_id="screen_marker"), controls=["btn_ok"])
    expected_allowed = rid == "btn_ok"
    assert (check(lock(listed), TAP, screen(marker(), icon)) is None) == expected_allowed


def test_a_swipe_starts_in_a_view_that_scrolls() -> None:
    up = Swipe(x=500, y=700, x2=500, y2=300)
    flat = screen(marker(), node("[0,300][1080,2200]", text="订单详情"))
    scroll = screen(
        marker(),
        node(
            "[0,300][1080,2200]",
            "android.widget.ScrollView",
            scrollable="true",
            children=node("[0,300][1080,600]", text="订单详情"),
        ),
    )
    assert check(lock(OPEN), up, flat) is not None
    assert check(lock(OPEN), up, scroll) is None


def _h5(*extra: str) -> Hierarchy:
    title = node("[0,63][1080,231]", text="帮助", resource_id="help_title")
    web = node("[0,231][1080,2000]", "android.webkit.WebView", focusable="true")
    return screen(title, web, *extra)


def test_webview_taps_lift_taps_not_drags() -> None:
    guard = lock(H5)
    x, y = norm(540, 1500)
    assert check(guard, Click(x=x, y=y), _h5()) is None
    assert check(guard, Swipe(x=x, y=y, x2=x, y2=norm(540, 600)[1]), _h5()) is None
    sideways = Swipe(x=norm(1000, 1500)[0], y=y, x2=norm(80, 1500)[0], y2=y)
    assert check(guard, sideways, _h5()) is not None


def test_webview_taps_need_every_native_control_accounted_for() -> None:
    x, y = norm(540, 1500)
    cancel = node("[40,2050][500,2150]", "android.widget.Button", text="取消", clickable="true")
    assert check(lock(H5), Click(x=x, y=y), _h5(cancel)) is not None


def test_a_policy_for_several_packs_recognises_a_screen_only_in_its_own_app() -> None:
    from pathlib import Path

    from realbench.taskpack import load_pack

    root = Path(__file__).resolve().parents[1] / "taskpacks"
    policy = InterlockPolicy.for_packs([load_pack(root / "bank"), load_pack(root / "train_ticketing")])

    def shown_in(package: str) -> Hierarchy:
        field = node(
            "[40,300][1040,420]", "android.widget.EditText", pkg=package, resource_id="station_search"
        )
        return Hierarchy(
            "<hierarchy>"
            + node("[0,0][1080,2400]", "android.widget.FrameLayout", pkg=package, children=field)
            + "</hierarchy>"
        )

    assert [s.name for s, _ in policy.recognise(shown_in("com.MobileTicket")).screens] == ["station_picker"]
    assert not policy.recognise(shown_in("com.chinamworld.main")).any


@pytest.mark.parametrize(
    ("note", "refused"),
    [
        ("不填写的项目保持不变。修改限额需完成短信及密码验证。", False),  # mentions a password
        ("请输入支付密码", True),
        ("請輸入支付密碼", True),
        ("交易密码", True),  # a field's label
        ("Enter payment PIN", True),
    ],
)
def test_digits_are_refused_under_a_prompt_not_under_a_sentence_that_mentions_a_secret(
    note: str, refused: bool
) -> None:
    from realbench.actions import Type

    text = node("[40,700][1040,800]", text=note)
    field = node(
        "[40,850][1040,970]",
        "android.widget.EditText",
        resource_id=f"{PKG}:id/single_limit",
        focusable="true",
        focused="true",
    )
    assert (check(lock(OPEN), Type(text="5000"), screen(marker(), text, field)) is not None) == refused


def test_a_catalogue_selector_vouches_for_a_grid_item_without_an_id_and_for_no_other() -> None:
    """The CCB transfer entry: the real item has no known id, so the entry names it by position
    (the grid's first item, as public scripts reach it); its money words are then let through,
    while the same words on the grid's second item, or on a first item elsewhere, still stop."""
    entry = SafeScreen(
        name="transfer home",
        when=Selector(resource_id="screen_marker"),
        controls=["btn_back", Selector(inside=Selector(resource_id="grid_function"), nth=0)],
    )
    first, second = "[0,1000][540,1150]", "[540,1000][1080,1150]"

    def grid(items: str, rid: str = "grid_function") -> str:
        return node("[0,1000][1080,1150]", "android.widget.GridView", resource_id=rid, children=items)

    def item(bounds: str, label: str) -> str:
        text = node(bounds, text=label)
        return node(bounds, "android.widget.LinearLayout", clickable="true", children=text)

    items = item(first, "转账汇款") + item(second, "转账支付")
    (x1, y), (x2, _) = norm(270, 1075), norm(810, 1075)
    tap_first, tap_second = Click(x=x1, y=y), Click(x=x2, y=y)
    guard = lock(entry)
    assert check(guard, tap_first, screen(marker(), grid(items))) is None
    assert isinstance(check(guard, tap_second, screen(marker(), grid(items))), Block)
    assert isinstance(check(guard, tap_first, screen(marker(), grid(items, rid="grid_other"))), Block)
