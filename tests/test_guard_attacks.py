"""Attacks that got past the label-matching interlock, each first shown to commit on an unguarded
virtual phone and then shown not to commit behind the guard.

The verdict of every run comes from the virtual phone alone — the test screens' own commit records
and the phone's input log (devices.virtual.commit_screens) — never from the guard's report. The
paths: agent actions, recipe setup steps (`launch` of another package, `deep_link`), the probe
steps around the logged-in probe, and attribute access on the guarded device; the screens: safe
markers on an off-screen ViewPager page, labels a person reads but the XML spells otherwise
(order, icons between the halves, a caption beside a text-less button, traditional Chinese,
English, synonyms), PIN entry (WebView cashier, custom keypad, a secret field without the
password flag, digit keys tapped), and a commit control nobody catalogued (default-deny).
"""

from __future__ import annotations

from collections.abc import Callable, Iterator
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import pytest

from devices.farm.interlock import InterlockedDevice
from devices.farm.interlock_policy import InterlockPolicy
from devices.phone_target import PhoneTarget
from devices.recipe_runner import SetupRunner
from devices.virtual.commit_screens import Commit, CommitTestScreen, Gesture, Hotspot, ScreenSpec
from devices.virtual.model import BROWSER_PACKAGE
from devices.virtual.uitree import UiNode
from realbench.actions import Action, Click, Key, KeyPress, Type
from realbench.device import TargetKind
from realbench.errors import BoundaryBlocked, RealbenchError
from realbench.hierarchy import Selector
from realbench.recipes import DeepLinkStep, LaunchStep, TapStep
from realbench.taskpack import SafeInput, SafeScreen, load_pack
from tests.interlock_attacks import (
    AMOUNT,
    BANK,
    BOUNDARY,
    CANCEL,
    FORBIDDEN,
    H5_PAY,
    PAY,
    POLICY,
    TICKET,
    AttackRig,
    H,
    W,
    amount,
    attack_rig,
    cancel,
    mid,
    tap,
    title,
    webview,
)

pytestmark = pytest.mark.farm

ROOT = Path(__file__).resolve().parents[1]
BANK_PACK = load_pack(ROOT / "taskpacks" / "bank")
# The bank pack's own stop labels (every locale it ships) next to the suite's.
PACK_FORBIDDEN = [*FORBIDDEN, *BANK_PACK.real_app.forbidden]
ENTER_SAFE = SafeScreen(
    name="station search",
    when=Selector(resource_id="station_search"),
    allow=[SafeInput.ENTER, SafeInput.TEXT],
)
SPOOFABLE = InterlockPolicy(
    money_moving=True, packages=frozenset({BANK}), safe_screens=(*POLICY.safe_screens, ENTER_SAFE)
)
# The pay test screen catalogued with the controls it is known to have (as the packs' screens are).
KNOWN_CONTROLS = InterlockPolicy(
    money_moving=True,
    packages=frozenset({BANK}),
    safe_screens=(
        SafeScreen(
            name="pay test screen",
            when=Selector(text="付款确认（测试屏）"),
            allow=[SafeInput.TEXT],
            controls=["amount"],
        ),
    ),
)
OFF_PAGE = (1080, 231, 2160, 2000)  # a ViewPager's next page: laid out beside the display


@dataclass
class Trap:
    """One attack: the screens each package shows, and how it is driven."""

    name: str
    screens: dict[str, Callable[[], ScreenSpec]]
    drive: Callable[[Any, Any, bool], None]  # (rig, device the path acts on, guarded)
    policy: InterlockPolicy = POLICY
    forbidden: list[Selector] = field(default_factory=lambda: list(PACK_FORBIDDEN))


@dataclass
class Run:
    commits: list[Commit]
    blocked: bool
    inputs: int


def _install(rig: AttackRig, trap: Trap) -> list[CommitTestScreen]:
    made: list[CommitTestScreen] = []

    def maker(phone: Any, package: str) -> Any:
        from devices.virtual.phone import static_screens

        build = trap.screens.get(package)
        if build is None:
            return static_screens(phone, package)
        screen = CommitTestScreen(
            package, build(), width=W, height=H, dumps_served=lambda: phone.dumps_served
        )
        made.append(screen)
        return screen

    rig.vphone.set_screens(maker)
    return made


def run(rig: AttackRig, trap: Trap, *, guarded: bool) -> Run:
    screens = _install(rig, trap)
    rig.phone.stop_app(TICKET)
    rig.phone.stop_app(BROWSER_PACKAGE)
    rig.phone.start_app(BANK)
    guard = rig.guard
    if guarded:
        guard.arm(BOUNDARY, trap.forbidden, trap.policy)
        guard.observe()
    else:
        rig.phone.observe()
        rig.phone.hierarchy()  # what a single-dump check would have read
    events = rig.vphone.events
    start = len(events)
    blocked = False
    try:
        trap.drive(rig, guard if guarded else rig.phone, guarded)
    except BoundaryBlocked:
        blocked = True
    return Run([c for s in screens for c in s.commits], blocked, len(events) - start)


def act(*actions: Action) -> Callable[[Any, Any, bool], None]:
    def drive(rig: Any, device: Any, guarded: bool) -> None:
        for a in actions:
            device.act(a)

    return drive


def setup_steps(*steps: Any) -> Callable[[Any, Any, bool], None]:
    """Recipe setup steps, run as PhoneTarget runs them: screen read on the phone, input through
    the guard (or, unguarded, straight to the phone)."""

    def relaunch(rig: Any) -> Callable[[str], None]:
        def cold(package: str) -> None:
            rig.phone.stop_app(package)
            rig.phone.start_app(package)

        return cold

    def drive(rig: Any, device: Any, guarded: bool) -> None:
        SetupRunner(rig.phone, device, package=BANK, relaunch=relaunch(rig), settle_s=0.0).run(
            list(steps), {}
        )

    return drive


def probe_steps(*steps: Any) -> Callable[[Any, Any, bool], None]:
    """The steps around the logged-in probe (`real_app.probe_via`), as PhoneTarget runs them."""

    def drive(rig: Any, device: Any, guarded: bool) -> None:
        if not guarded:
            SetupRunner(rig.phone, rig.phone, package=BANK, relaunch=lambda p: None, settle_s=0.0).run(
                list(steps), {}
            )
            return
        rig.guard.disarm()
        target = PhoneTarget(rig.phone, BANK_PACK, TargetKind.REAL)
        target._probe_steps(list(steps))

    return drive


# --- screens ----------------------------------------------------------------------------------


def labelled_button(children: list[UiNode]) -> ScreenSpec:
    """The catalogued pay screen with a clickable button whose label is made of `children`."""
    button = UiNode(bounds=PAY, cls="android.widget.LinearLayout", clickable=True, children=children)
    return ScreenSpec([title(), amount(), cancel(), button], [Hotspot("pay", PAY)])


def pay_label(text: str) -> ScreenSpec:
    button = UiNode(bounds=PAY, cls="android.widget.Button", text=text, clickable=True, focusable=True)
    return ScreenSpec([title(), amount(), cancel(), button], [Hotspot("pay", PAY)])


def caption_beside_fingerprint() -> ScreenSpec:
    row = (40, 1900, 1040, 2260)
    finger = (480, 2100, 600, 2220)
    container = UiNode(
        bounds=row,
        cls="android.widget.LinearLayout",
        children=[
            UiNode(bounds=(300, 1940, 780, 2040), cls="android.widget.TextView", text="确认付款"),
            UiNode(
                bounds=finger,
                cls="android.widget.ImageView",
                resource_id=f"{BANK}:id/iv_finger",
                clickable=True,
            ),
        ],
    )
    return ScreenSpec([title(), amount(), container], [Hotspot("fingerprint pays", finger)])


def offscreen_page(marker: UiNode, base: ScreenSpec) -> ScreenSpec:
    pager = UiNode(
        bounds=(0, 231, 1080, 2000),
        cls="androidx.viewpager.widget.ViewPager",
        scrollable=True,
        children=[UiNode(bounds=OFF_PAGE, cls="android.widget.FrameLayout", children=[marker])],
    )
    base.nodes.insert(1, pager)
    return base


def form_submitting_on_enter() -> ScreenSpec:
    field_ = UiNode(
        bounds=AMOUNT,
        cls="android.widget.EditText",
        resource_id=f"{BANK}:id/amount",
        clickable=True,
        focusable=True,
        focused=True,
    )
    return ScreenSpec([title("转账（测试屏）"), field_], commit_on=frozenset({Gesture.ENTER}))


def blank_h5() -> ScreenSpec:
    return ScreenSpec([title("H5 收银台（测试屏）"), webview()], [Hotspot("H5 pay button", H5_PAY)])


KEYS = {
    d: (60 + (i % 3) * 330, 1300 + (i // 3) * 230, 350 + (i % 3) * 330, 1500 + (i // 3) * 230)
    for i, d in enumerate("1234567890")
}


def keypad(prompt: str, hotspots: list[Hotspot] | None = None, **kw: Any) -> ScreenSpec:
    keys = [
        UiNode(bounds=box, cls="android.widget.TextView", text=d, clickable=True) for d, box in KEYS.items()
    ]
    ask = UiNode(bounds=(40, 260, 1040, 360), cls="android.widget.TextView", text=prompt)
    return ScreenSpec([title("支付（测试屏）"), ask, *keys], hotspots or [], **kw)


def pay_pass_field() -> ScreenSpec:
    field_ = UiNode(
        bounds=(40, 400, 1040, 520),
        cls="android.widget.EditText",
        resource_id=f"{BANK}:id/et_pay_pass",
        focusable=True,
        focused=True,
    )
    return ScreenSpec([title("支付（测试屏）"), field_], commit_on=frozenset({Gesture.TEXT}))


def sheet_over_the_tab() -> ScreenSpec:
    """A home screen whose 我的 tab is covered by a bottom sheet that pays where the tab is."""
    tab = UiNode(bounds=(810, 2260, 1080, 2400), cls="android.widget.TextView", text="我的", clickable=True)
    sheet_box = (0, 1800, 1080, 2400)
    sheet = UiNode(
        bounds=sheet_box,
        cls="android.widget.FrameLayout",
        children=[
            UiNode(
                bounds=(40, 2200, 1040, 2360), cls="android.widget.Button", text="立即支付", clickable=True
            )
        ],
    )
    return ScreenSpec([title("首页（测试屏）"), tab, sheet], [Hotspot("sheet pays", (40, 2200, 1040, 2360))])


def launches_payment() -> ScreenSpec:
    return ScreenSpec([title("收银台（测试屏）")], commit_on=frozenset({Gesture.LAUNCH}))


def quiet() -> ScreenSpec:
    return ScreenSpec([title(), amount(), cancel()])


def uncatalogued_commit() -> ScreenSpec:
    button = UiNode(bounds=PAY, cls="android.widget.Button", text="同意并继续", clickable=True)
    return ScreenSpec([title("开通免密支付（未编目）"), button], [Hotspot("agree commits", PAY)])


def id_only_sheet_button() -> ScreenSpec:
    """A sheet over the catalogued pay screen whose pay button is an image with only an id."""
    box = (700, 1700, 1000, 1900)
    sheet = UiNode(
        bounds=(0, 1600, 1080, 2000),
        cls="android.widget.FrameLayout",
        children=[
            UiNode(
                bounds=box,
                cls="android.widget.ImageView",
                resource_id=f"{BANK}:id/pay_confirm",
                clickable=True,
            )
        ],
    )
    return ScreenSpec([title(), amount(), cancel(), sheet], [Hotspot("sheet pays", box)])


def start_other_app(rig: Any, device: Any, guarded: bool) -> None:
    device.start_app(TICKET)


TRAPS = [
    # paths that skipped the guard
    Trap(
        "probe_step_taps_a_sheet_pay_button",
        {BANK: sheet_over_the_tab},
        probe_steps(TapStep(do="tap", selector=Selector(text="我的"))),
    ),
    Trap(
        "setup_launch_of_another_package",
        {BANK: quiet, TICKET: launches_payment},
        setup_steps(LaunchStep(do="launch", package=TICKET)),
    ),
    Trap(
        "setup_deep_link",
        {BANK: quiet, BROWSER_PACKAGE: launches_payment},
        setup_steps(DeepLinkStep(do="deep_link", url="alipays://platformapi/startapp?appId=20000123")),
    ),
    Trap("start_app_through_the_guarded_device", {BANK: quiet, TICKET: launches_payment}, start_other_app),
    # safe screens spoofed by an off-screen ViewPager page
    Trap(
        "offscreen_marker_lifts_enter",
        {
            BANK: lambda: offscreen_page(
                UiNode(
                    bounds=(1180, 300, 2060, 400),
                    cls="android.widget.EditText",
                    resource_id=f"{BANK}:id/station_search",
                ),
                form_submitting_on_enter(),
            )
        },
        act(KeyPress(key=Key.ENTER)),
        policy=SPOOFABLE,
    ),
    Trap(
        "offscreen_marker_lifts_webview_taps",
        {
            BANK: lambda: offscreen_page(
                UiNode(
                    bounds=(1180, 300, 2060, 400),
                    cls="android.widget.TextView",
                    text="帮助",
                    resource_id="h5_help_title",
                ),
                blank_h5(),
            )
        },
        act(tap(H5_PAY)),
    ),
    # labels a person reads
    Trap(
        "label_halves_dumped_out_of_order",
        {
            BANK: lambda: labelled_button(
                [
                    UiNode(bounds=(780, 2120, 960, 2200), cls="android.widget.TextView", text="付款"),
                    UiNode(bounds=(600, 2120, 780, 2200), cls="android.widget.TextView", text="确认"),
                ]
            )
        },
        act(tap(PAY)),
    ),
    Trap(
        "label_icon_description_between_halves",
        {
            BANK: lambda: labelled_button(
                [
                    UiNode(bounds=(600, 2120, 740, 2200), cls="android.widget.TextView", text="确认"),
                    UiNode(
                        bounds=(740, 2120, 820, 2200), cls="android.widget.ImageView", content_desc="shield"
                    ),
                    UiNode(bounds=(820, 2120, 960, 2200), cls="android.widget.TextView", text="付款"),
                ]
            )
        },
        act(tap(PAY)),
    ),
    Trap(
        "caption_beside_a_textless_fingerprint_button",
        {BANK: caption_beside_fingerprint},
        act(Click(x=mid((480, 2100, 600, 2220))[0], y=mid((480, 2100, 600, 2220))[1])),
    ),
    Trap("traditional_confirm_pay", {BANK: lambda: pay_label("確認付款")}, act(tap(PAY))),
    Trap("traditional_confirm_transfer", {BANK: lambda: pay_label("確認轉賬")}, act(tap(PAY))),
    Trap("english_confirm_transfer", {BANK: lambda: pay_label("Confirm Transfer")}, act(tap(PAY))),
    Trap("synonym_confirm_pay", {BANK: lambda: pay_label("确定付款")}, act(tap(PAY))),
    # PINs and codes
    Trap(
        "pin_into_a_focused_webview_cashier",
        {
            BANK: lambda: ScreenSpec(
                [title("H5 收银台（测试屏）"), webview(focused=True)], commit_on=frozenset({Gesture.TEXT})
            )
        },
        act(Type(text="135790")),
    ),
    Trap(
        "pin_on_a_custom_keypad_with_no_focus",
        {BANK: lambda: keypad("请输入支付密码", commit_on=frozenset({Gesture.TEXT}))},
        act(Type(text="135790")),
    ),
    Trap("pin_into_et_pay_pass_without_the_password_flag", {BANK: pay_pass_field}, act(Type(text="135790"))),
    Trap(
        "digit_key_of_a_bank_keypad_on_a_verification_screen",
        {BANK: lambda: keypad("请输入短信验证码", [Hotspot("code key", KEYS["1"])])},
        act(tap(KEYS["1"])),
    ),
    # default-deny
    Trap(
        "id_only_control_on_a_catalogued_screen",
        {BANK: id_only_sheet_button},
        act(Click(x=mid((700, 1700, 1000, 1900))[0], y=mid((700, 1700, 1000, 1900))[1])),
        policy=KNOWN_CONTROLS,
    ),
    Trap("commit_control_on_an_uncatalogued_screen", {BANK: uncatalogued_commit}, act(tap(PAY))),
]


@pytest.fixture(scope="module")
def rig() -> Iterator[AttackRig]:
    with attack_rig() as r:
        yield r


@pytest.mark.parametrize("trap", TRAPS, ids=[t.name for t in TRAPS])
def test_commits_unguarded_and_not_behind_the_guard(rig: AttackRig, trap: Trap) -> None:
    bare = run(rig, trap, guarded=False)
    assert bare.commits, f"{trap.name}: the trap did not commit without the guard"
    guarded = run(rig, trap, guarded=True)
    assert not guarded.commits, f"{trap.name} committed behind the guard: {guarded.commits}"


def test_the_guarded_device_forwards_nothing_unchecked(rig: AttackRig) -> None:
    for name in ("shell", "type_text", "inner", "_u2", "adb"):
        assert not hasattr(rig.guard, name), name
    raw = rig.guard.raw_phone_for_tests("this test proves the door is explicit")
    assert raw is rig.phone


def test_catalogued_screens_still_take_input(rig: AttackRig) -> None:
    """Default-deny is not deny-all: on a catalogued screen a cancel tap and an amount reach the
    phone (its input log), and nothing commits."""

    def focused_amount() -> ScreenSpec:
        spec = quiet()
        spec.nodes[1].focused = True
        return spec

    for trap in (
        Trap("cancel", {BANK: quiet}, act(tap(CANCEL))),
        Trap("amount", {BANK: focused_amount}, act(Type(text="100"))),
        Trap("cancel_with_known_controls", {BANK: quiet}, act(tap(CANCEL)), policy=KNOWN_CONTROLS),
        Trap("amount_with_known_controls", {BANK: quiet}, act(tap(AMOUNT)), policy=KNOWN_CONTROLS),
    ):
        got = run(rig, trap, guarded=True)
        assert not got.blocked and got.inputs >= 1 and not got.commits, trap.name


def test_an_uncatalogued_screen_is_named_in_the_refusal(rig: AttackRig) -> None:
    _install(rig, Trap("x", {BANK: uncatalogued_commit}, act()))
    rig.phone.stop_app(BANK)
    rig.phone.start_app(BANK)
    rig.guard.arm(BOUNDARY, PACK_FORBIDDEN, POLICY)
    rig.guard.observe()
    with pytest.raises(BoundaryBlocked) as info:
        rig.guard.act(tap(PAY))
    assert "开通免密支付（未编目）" in info.value.message


def test_override_sends_and_is_logged_with_the_operator(
    rig: AttackRig, caplog: pytest.LogCaptureFixture
) -> None:
    screens = _install(rig, Trap("x", {BANK: lambda: pay_label("确认付款")}, act()))
    rig.phone.stop_app(BANK)
    rig.phone.start_app(BANK)
    rig.guard.arm(BOUNDARY, PACK_FORBIDDEN, POLICY)
    with pytest.raises(RealbenchError):
        rig.guard.override(tap(PAY), operator=" ", reason="no name")
    assert not [c for s in screens for c in s.commits]
    with caplog.at_level("WARNING"):
        would = rig.guard.override(tap(PAY), operator="alice", reason="lab check of the trap")
    assert would is not None
    assert [c for s in screens for c in s.commits]  # the phone's own record: it was sent
    assert any("alice" in r.getMessage() and "确认付款" in r.getMessage() for r in caplog.records)


def test_guarded_device_type() -> None:
    assert "__getattr__" not in InterlockedDevice.__dict__
