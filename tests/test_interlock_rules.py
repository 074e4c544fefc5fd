"""The interlock's decisions on hand-written hierarchies (fast; the farm tier attacks a phone)."""

from __future__ import annotations

from pathlib import Path

import pytest

from devices.farm.interlock import Interlock, stop_controls, touch_reach
from devices.farm.interlock_policy import InterlockPolicy
from devices.farm.stop_labels import LabelTexts, names_stop, normalise
from realbench.actions import Click, Key, KeyPress, OpenApp, Swipe, Type
from realbench.errors import PackError
from realbench.hierarchy import Bounds, Hierarchy, Selector
from realbench.taskpack import SafeInput, SafeScreen, load_pack, parse_pack

W, H = 1080, 2400
PKG = "com.example.bank"
STOP = [Selector(text="确认付款")]
# The screens of these tests are catalogued by a marker node (money-moving apps are default-deny).
KNOWN = SafeScreen(name="test screen", when=Selector(resource_id="screen_marker"), allow=[SafeInput.TEXT])
MONEY = InterlockPolicy(money_moving=True, packages=frozenset({PKG}), safe_screens=(KNOWN,))


def px(x: int, y: int) -> tuple[int, int]:
    return round(x * (W - 1) / 1000), round(y * (H - 1) / 1000)


def norm(x: float, y: float) -> tuple[int, int]:
    return round(x * 1000 / (W - 1)), round(y * 1000 / (H - 1))


def node(
    bounds: str, cls: str = "android.widget.TextView", pkg: str = PKG, children: str = "", **attrs: str
) -> str:
    extra = " ".join(f"{k.replace('_', '-')}='{v}'" for k, v in attrs.items())
    return f"<node class='{cls}' package='{pkg}' bounds='{bounds}' {extra}>{children}</node>"


def marker() -> str:
    return node("[0,0][1080,60]", text="测试屏", resource_id="screen_marker")


def screen(*nodes: str) -> Hierarchy:
    return Hierarchy(
        f"<hierarchy>{node('[0,0][1080,2400]', 'android.widget.FrameLayout', children=''.join(nodes))}</hierarchy>"
    )


def check(lock: Interlock, action: object, hierarchy: Hierarchy) -> object:
    return lock.check(action, hierarchy, px, (W, H))  # type: ignore[arg-type]


@pytest.mark.parametrize(
    "spelling",
    [
        "确认付款 ",
        "确认\u00a0付款",
        "确\u200b认付款",
        "确认\u200c\u200d付款",
        "\ufeff确认付款",
        "确认\u3000付款",
        "\u200f确认付款",
        "\u202b确认付款\u202c",
        "确认付\u0301款",
        "确认\u00ad付款",
        " 确认\t付款\n",
    ],
)
def test_invisible_differences_normalise_away(spelling: str) -> None:
    assert normalise(spelling) == normalise("确认付款") == "确认付款"


def test_full_width_and_case() -> None:
    assert normalise("ＣＯＮＦＩＲＭ ＰＡＹ") == normalise("Confirm pay") == "confirmpay"


def test_substrings_subtrees_and_content_desc() -> None:
    h = screen(
        node("[0,100][1080,200]", text="确认付款 ¥100.00"),
        node(
            "[0,300][1080,400]",
            "android.widget.LinearLayout",
            clickable="true",
            children=node("[0,300][500,400]", text="确认") + node("[500,300][1080,400]", text="付款"),
        ),
        node(
            "[0,500][1080,600]", "android.widget.ImageButton", content_desc="确认付款按钮", clickable="true"
        ),
        node("[0,700][1080,800]", text="取消"),
    )
    price, split, desc, other = h.nodes[1], h.nodes[2], h.nodes[5], h.nodes[6]
    assert names_stop(STOP[0], price, subtree=False)
    assert not names_stop(STOP[0], split, subtree=False) and names_stop(STOP[0], split, subtree=True)
    assert names_stop(STOP[0], desc, subtree=False)
    assert not names_stop(STOP[0], other, subtree=True)
    # the root's joined text names it too, but only the innermost nodes are stop controls
    found = {c.node.bounds.top for c in stop_controls(h, STOP, [])}
    assert found == {100, 300, 500}


def test_shared_label_texts_keep_each_node_apart() -> None:
    """One hierarchy's normalised texts are computed once and shared by every selector: two
    containers with the same own text but different children must still be told apart, in either
    order, and every node must get the answer it gets with texts of its own."""
    h = screen(
        node(
            "[0,100][1080,200]",
            "android.widget.LinearLayout",
            clickable="true",
            children=node("[0,100][500,200]", text="确认") + node("[500,100][1080,200]", text="付款"),
        ),
        node(
            "[0,300][1080,400]",
            "android.widget.LinearLayout",
            clickable="true",
            children=node("[0,300][500,400]", text="确认") + node("[500,300][1080,400]", text="取消"),
        ),
    )
    commit, cancel = h.nodes[1], h.nodes[4]
    assert commit.text == cancel.text == ""
    for order in ((commit, cancel), (cancel, commit)):
        texts = LabelTexts()
        answers = {id(n): names_stop(STOP[0], n, subtree=True, texts=texts) for n in order}
        assert answers == {id(commit): True, id(cancel): False}
    texts = LabelTexts()
    for sel in (*STOP, Selector(text_contains="取消"), Selector(content_desc="确认付款")):
        for n in h.nodes:
            assert names_stop(sel, n, subtree=True, texts=texts) == names_stop(sel, n, subtree=True), (sel, n)


def test_a_zero_size_label_names_its_clickable_parent() -> None:
    h = screen(
        node(
            "[580,2100][980,2220]",
            "android.widget.FrameLayout",
            clickable="true",
            children=node("[0,0][0,0]", text="确认付款"),
        )
    )
    (control,) = stop_controls(h, STOP, [])
    assert control.regions == (Bounds(580, 2100, 980, 2220),)
    assert check(Interlock(STOP, []), Click(x=norm(780, 2160)[0], y=norm(780, 2160)[1]), h) is not None


def test_small_controls_are_widened_like_touch_delegates() -> None:
    dp = 1080 / 360
    small = touch_reach(Bounds(900, 1500, 940, 1540), 3, dp)
    assert small.left <= 900 - (144 - 40) / 2 - 24 and small.right >= 940 + 52 + 24
    big = touch_reach(Bounds(100, 1800, 980, 1960), 3, dp)
    assert big == Bounds(97, 1797, 983, 1963)


def test_overlay_and_target_overlap() -> None:
    pay = node("[580,2100][980,2220]", "android.widget.Button", text="确认付款", clickable="true")
    overlay = node("[560,1960][1000,2240]", "android.view.View", clickable="true")
    lock = Interlock(STOP, [])
    x, y = norm(995, 1990)
    assert check(lock, Click(x=x, y=y), screen(pay, overlay)) is not None
    # the same point with no overlay: nothing there
    assert check(lock, Click(x=x, y=y), screen(pay)) is None
    # a cancel button beside the pay button is still usable
    cancel = node("[100,2100][500,2220]", "android.widget.Button", text="取消", clickable="true")
    cx, cy = norm(300, 2160)
    assert check(lock, Click(x=cx, y=cy), screen(pay, cancel)) is None


def test_money_moving_rules() -> None:
    field = node(
        "[40,300][1040,420]", "android.widget.EditText", focusable="true", focused="true", clickable="true"
    )
    form = screen(marker(), field)
    plain, money = Interlock(STOP, []), Interlock(STOP, [], policy=MONEY)
    assert check(plain, KeyPress(key=Key.ENTER), form) is None
    assert check(money, KeyPress(key=Key.ENTER), form) is not None
    assert check(money, Type(text="100\n"), form) is not None
    assert check(money, Type(text="100"), form) is None
    assert check(money, OpenApp(app="com.other.pay"), form) is not None
    assert check(plain, OpenApp(app=PKG), form) is None
    web = screen(marker(), node("[0,231][1080,2000]", "android.webkit.WebView"))
    wx, wy = norm(540, 1775)
    assert check(money, Click(x=wx, y=wy), web) is not None
    assert check(plain, Click(x=wx, y=wy), web) is None
    assert check(money, Swipe(x=wx, y=norm(540, 1500)[1], x2=wx, y2=norm(540, 600)[1]), web) is None
    assert check(money, Swipe(x=norm(120, 0)[0], y=wy, x2=norm(960, 0)[0], y2=wy), web) is not None
    foreign = Hierarchy(
        f"<hierarchy>{node('[0,0][1080,2400]', 'android.widget.FrameLayout', pkg='com.other.pay')}</hierarchy>"
    )
    assert check(money, Click(x=500, y=500), foreign) is not None


def test_safe_screens_lift_only_what_they_allow() -> None:
    marker = node("[0,63][1080,231]", text="帮助", resource_id="help_title")
    web = node("[0,231][1080,2000]", "android.webkit.WebView", focusable="true", focused="true")
    h = screen(marker, web)
    safe = SafeScreen(name="help", when=Selector(resource_id="help_title"), allow=[SafeInput.WEBVIEW_TAPS])
    lock = Interlock(
        STOP, [], policy=InterlockPolicy(money_moving=True, packages=frozenset({PKG}), safe_screens=(safe,))
    )
    wx, wy = norm(540, 1775)
    assert check(lock, Click(x=wx, y=wy), h) is None
    assert check(lock, KeyPress(key=Key.ENTER), h) is not None


def test_policy_from_the_packs() -> None:
    root = Path(__file__).resolve().parents[1] / "taskpacks"
    bank = InterlockPolicy.for_pack(load_pack(root / "bank"))
    assert bank.money_moving and "com.chinamworld.main" in bank.packages
    assert not bank.foreign("com.chinamworld.main") and bank.foreign("com.android.launcher3")


def test_safe_screens_are_typed_in_the_pack() -> None:
    raw = load_pack(Path(__file__).resolve().parents[1] / "taskpacks" / "bank").model_dump(
        mode="json", exclude_none=True
    )
    raw["real_app"]["safe_screens"] = [
        {"name": "help", "when": {"text": "帮助中心"}, "allow": ["webview_taps"]}
    ]
    pack = parse_pack(raw)
    assert pack.real_app.safe_screens[0].allow == [SafeInput.WEBVIEW_TAPS]
    raw["real_app"]["safe_screens"] = [
        {"name": "help", "when": {"text": "帮助中心"}, "allow": ["everything"]}
    ]
    with pytest.raises(PackError):
        parse_pack(raw)


class ScriptedPhone:
    """A fake phone for the re-read loop: serves the given dumps in turn (the last one repeats)
    and records what was sent. The farm tier does the same on a virtual phone."""

    kind = "virtual-phone"
    serial = "fake"

    def __init__(self, dumps: list[str]) -> None:
        self.dumps = dumps
        self.served = 0
        self.sent: list[object] = []

    def hierarchy(self) -> str:
        xml = self.dumps[min(self.served, len(self.dumps) - 1)]
        self.served += 1
        return xml

    def screenshot(self) -> bytes:
        return b""

    def to_pixels(self, x: int, y: int) -> tuple[int, int]:
        return px(x, y)

    def size(self) -> tuple[int, int]:
        return (W, H)

    def act(self, action: object) -> None:
        self.sent.append(action)


def _xml(*nodes: str) -> str:
    return f"<hierarchy>{node('[0,0][1080,2400]', 'android.widget.FrameLayout', children=''.join(nodes))}</hierarchy>"


NEXT = node("[580,2100][980,2220]", "android.widget.Button", text="下一步", clickable="true")
DIALOG = node("[60,2060][1020,2260]", "android.widget.Button", text="确认付款", clickable="true")


def test_the_screen_is_read_again_right_before_the_input() -> None:
    from devices.farm.interlock import InterlockedDevice
    from realbench.errors import BoundaryBlocked

    x, y = norm(780, 2160)
    calm = ScriptedPhone([_xml(NEXT)])
    guard = InterlockedDevice(calm, settle_s=0)  # type: ignore[arg-type]
    guard.arm(STOP, [])
    guard.act(Click(x=x, y=y))
    assert calm.served == 2 and len(calm.sent) == 1  # looked, looked again, sent

    sudden = ScriptedPhone([_xml(NEXT), _xml(NEXT, DIALOG)])  # the dialog comes after the first look
    guard = InterlockedDevice(sudden, settle_s=0)  # type: ignore[arg-type]
    guard.arm(STOP, [])
    with pytest.raises(BoundaryBlocked):
        guard.act(Click(x=x, y=y))
    assert sudden.sent == []

    flicker = ScriptedPhone([_xml(NEXT), _xml(NEXT, node("[0,0][10,10]")), _xml(NEXT), _xml(NEXT, DIALOG)])
    guard = InterlockedDevice(flicker, settle_s=0)  # type: ignore[arg-type]
    guard.arm(STOP, [])
    with pytest.raises(BoundaryBlocked):
        guard.act(Click(x=x, y=y))  # every dump is decided, so the fourth one's dialog counts
    assert flicker.sent == []


def test_a_tap_in_an_accessible_h5_page_is_judged_on_the_element_under_it() -> None:
    page = node(
        "[0,231][1080,2000]",
        "android.webkit.WebView",
        clickable="true",
        children=node("[100,300][980,400]", "android.view.View", text="订单信息")
        + node("[100,1700][980,1850]", "android.view.View", text="提交订单 ¥100.00"),
    )
    # (an exact "提交订单" here would also stop the episode loop's own rule, which takes a clickable
    # WebView as one target; the interlock adds nothing to that)
    lock = Interlock([Selector(text="提交订单")], [], policy=MONEY)
    h = screen(marker(), page)
    tx, ty = norm(540, 350)
    assert check(lock, Click(x=tx, y=ty), h) is None  # the text element, not the whole page
    sx, sy = norm(540, 1775)
    assert check(lock, Click(x=sx, y=sy), h) is not None
    bx, by = norm(540, 1000)  # nothing of the page there: unknown, refused in a money-moving app
    assert check(lock, Click(x=bx, y=by), h) is not None
