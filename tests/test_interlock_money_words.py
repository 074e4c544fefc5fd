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
STATED = SafeScreen(
    name="order detail",
    when=Selector(resource_id="screen_marker"),
    controls=[Selector(resource_id="continue_pay", text="去支付"), "btn_back"],
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
        "允许并支付",
        "允许支付",
        "授权支付",
    ],
)
def test_money_words_stop_a_control_the_pack_does_not_list(label: str) -> None:
    block = check(lock(OPEN), TAP, screen(marker(), button(label, "btn_pay")))
    assert isinstance(block, Block), f"{label!r} was let through"
    assert block.control is not None and block.control.origin == StopOrigin.MONEY_WORD


@pytest.mark.parametrize(
    "label",
    [
        "取消",
        "Cancel",
        "Payee list",
        "修改金额",
        "下一步",
        "确认删除",
        "帮助",
        "允许",
        "始终允许",
        "授权登录",
    ],
)
def test_other_labels_are_not_money_words(label: str) -> None:
    assert money_reading([match_form(label)]) is None
    assert check(lock(OPEN), TAP, screen(marker(), button(label, "btn_x"))) is None


def test_a_price_inside_a_stop_label_is_read_past() -> None:
    h = screen(marker(), button("提交候 (¥88) 补订单"))
    target = h.nodes[-1]
    assert names_stop(Selector(text="提交候补订单"), target, subtree=True, texts=LabelTexts())


def test_the_catalogue_vouches_for_a_control_only_with_the_label_it_states() -> None:
    guard = lock(STATED)
    assert check(guard, TAP, screen(marker(), button("去支付 ¥12", "continue_pay"))) is None
    # the label split over two views, as the app draws it, still reads as stated
    split = node(
        BUTTON,
        "android.widget.LinearLayout",
        clickable="true",
        resource_id=f"{PKG}:id/continue_pay",
        children=node("[100,1000][500,1150]", text="去") + node("[500,1000][980,1150]", text="支付"),
    )
    assert check(guard, TAP, screen(marker(), split)) is None
    # the same words on a control the entry does not list (no id: only its label speaks for it)
    assert check(guard, TAP, screen(marker(), button("去支付 ¥12"))) is not None
    # the listed id relabelled: the entry vouched for 去支付, not for what the id shows now
    for label in ("确定", "Pay now", "完成转账"):
        assert check(guard, TAP, screen(marker(), button(label, "continue_pay"))) is not None, label
    # the stated label with another money word in its description
    both = node(
        BUTTON,
        "android.widget.Button",
        text="去支付",
        content_desc="确认",
        clickable="true",
        resource_id=f"{PKG}:id/continue_pay",
    )
    assert check(guard, TAP, screen(marker(), both)) is not None
    # a listed control that shows the pack's own stop label stays stopped
    assert check(guard, TAP, screen(marker(), button("确认付款", "continue_pay"))) is not None


@pytest.mark.parametrize("label", ["去支付 ¥12", "确定", "Pay", "确认付款"])
def test_an_id_only_listing_never_vouches_for_money_words(label: str) -> None:
    """A commit control that reuses an id the entry lists (or the listed control relabelled to a
    pay label) is refused: the id says which control, not what it does now."""
    block = check(lock(LISTED), TAP, screen(marker(), button(label, "continue_pay")))
    assert isinstance(block, Block), f"{label!r} on a listed id was let through"


def test_an_id_only_listing_still_lets_a_tap_reach_its_unlabelled_or_neutral_control() -> None:
    assert check(lock(LISTED), TAP, screen(marker(), button("下一步", "continue_pay"))) is None
    icon = button("", "continue_pay", cls="android.widget.ImageButton")
    assert check(lock(LISTED), TAP, screen(marker(), icon)) is None


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
    """The CCB transfer entry: the real item has no known id, so the entry names it by its
    container and the label it expects; its money words are then let through, while other money
    words in the grid, the same words in another container, or an entry naming the item by
    position alone (no label stated) still stop."""
    entry = SafeScreen(
        name="transfer home",
        when=Selector(resource_id="screen_marker"),
        controls=["btn_back", Selector(inside=Selector(resource_id="grid_function"), text="转账汇款")],
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
    by_position = SafeScreen(
        name="transfer home",
        when=Selector(resource_id="screen_marker"),
        controls=[Selector(inside=Selector(resource_id="grid_function"), nth=0)],
    )
    assert isinstance(check(lock(by_position), tap_first, screen(marker(), grid(items))), Block)


def test_a_stated_pattern_vouches_for_the_rows_of_a_list_and_for_no_pay_button_among_them() -> None:
    """A transaction list's rows name their category (`2026-02-26 20:45 · 转账`): the entry states
    the line's shape inside the list, which vouches for every row's line and never for a button
    reading 转账 or 确认转账 in the same list (the written digits and punctuation must match too)."""
    entry = SafeScreen(
        name="history",
        when=Selector(resource_id="screen_marker"),
        controls=[
            "txn_t*",
            Selector(inside=Selector(resource_id="detail_list"), text_pattern="*-*-* *:* · 转账"),
        ],
    )

    def row(i: int, line: str) -> str:
        top = 1000 + 200 * i
        text = node(f"[40,{top + 100}][1040,{top + 180}]", text=line, resource_id=f"{PKG}:id/row_time_{i}")
        return node(
            f"[0,{top}][1080,{top + 190}]",
            "android.widget.LinearLayout",
            clickable="true",
            resource_id=f"{PKG}:id/txn_t{i}",
            children=text,
        )

    def history(*rows: str) -> Hierarchy:
        return screen(
            marker(), node("[0,1000][1080,2200]", resource_id="detail_list", children="".join(rows))
        )

    second_row = Click(x=norm(540, 1340)[0], y=norm(540, 1340)[1])
    rows = row(0, "2026-02-26 20:45 · 转账") + row(1, "2026-02-25 09:10 · 转账")
    assert check(lock(entry), second_row, history(rows)) is None
    for line in ("转账", "确认转账", "2026-02-25 09:10 · 去支付"):
        tampered = row(0, "2026-02-26 20:45 · 转账") + row(1, line)
        assert isinstance(check(lock(entry), second_row, history(tampered)), Block), line
    # the id-only listing of the rows alone vouches for none of them
    id_only = SafeScreen(name="history", when=Selector(resource_id="screen_marker"), controls=["txn_t*"])
    assert isinstance(check(lock(id_only), second_row, history(rows)), Block)
