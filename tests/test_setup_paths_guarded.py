"""The setup paths of a real-app target (cold start, launch pop-ups, the rig account's login) go
through the interlock: each attack is first shown to commit on an unguarded virtual phone, by the
code those paths ran before (kept below as `legacy_*`, straight to the phone), then shown not to
commit through `PhoneTarget`'s own setup. The verdict comes from the virtual phone alone: the test
screens' commit records, what they were typed, and the phone's input log.

The legitimate paths still work: the packs' launch pop-ups are dismissed through the guard on a
virtual phone showing them, a ROM pop-up through the guard's door, and the login recipe logs a
(fake) app in through the login door without its password reaching a log.
"""

from __future__ import annotations

import logging
import time
from collections.abc import Callable
from datetime import date
from pathlib import Path
from typing import Any

import pytest

from devices.farm.health import CheckStatus, HealthPolicy, PopupRefused, check_phone, dismiss_popups
from devices.farm.interlock import InterlockedDevice
from devices.farm.interlock_policy import InterlockPolicy
from devices.phone_target import PhoneTarget
from devices.profile import load_profile
from devices.rig import Account, LoginStep
from devices.virtual.commit_screens import Commit, CommitTestScreen, Gesture, Hotspot, ScreenSpec
from devices.virtual.model import InputKind
from devices.virtual.uitree import UiNode
from realbench.actions import Click, Type
from realbench.device import TargetKind
from realbench.episode import run_episode
from realbench.errors import BoundaryBlocked
from realbench.golden import GoldenAgent
from realbench.hierarchy import Hierarchy, Node, Selector
from realbench.outcome import EndReason, Outcome
from realbench.taskpack import Popup, SafeScreen, TaskPack, load_pack
from tests.interlock_attacks import BANK, FORBIDDEN, PAY, TICKET, TITLE, AttackRig, H, W, attack_rig

pytestmark = pytest.mark.farm

ROOT = Path(__file__).resolve().parents[1]
BANK_PACK = load_pack(ROOT / "taskpacks" / "bank")
SYSTEM = "com.android.permissioncontroller"
USER, PASSWORD = "rb-test-user", "s3cret-Pw-771"
USER_FIELD = (40, 300, 1040, 420)
PASSWORD_FIELD = (40, 460, 1040, 580)
LOGIN_BUTTON = (100, 700, 980, 820)
PROMPT = (40, 1100, 1040, 1200)
SHEET_FIELD = (40, 1260, 1040, 1380)

PROMO = Popup(name="promo", when=Selector(resource_id="promo_title"), tap=Selector(resource_id="promo_close"))
PERMISSION = Popup(
    name="runtime permission prompt",
    when=Selector(resource_id=f"{SYSTEM}:id/permission_message"),
    tap=Selector(resource_id=f"{SYSTEM}:id/permission_allow_button"),
)
# The test app's catalogue: its login screen (the login door's), the logged-in home, the promo
# pop-up with the one control its rule taps, and a pay-PIN prompt whose field a tap may focus.
LOGIN = SafeScreen(
    name="login", when=Selector(resource_id="et_password"), controls=["username", "et_password", "btn_login"]
)
HOME = SafeScreen(name="home", when=Selector(text_contains="总资产"))
PROMO_SCREEN = SafeScreen(name="promo", when=Selector(resource_id="promo_title"), controls=["promo_close"])
PIN_SCREEN = SafeScreen(name="pay pin", when=Selector(text="支付（测试屏）"), controls=["pay_pwd"])


def pack() -> TaskPack:
    """The bank pack with the test app's catalogue, pop-up rule and login screen."""
    real_app = BANK_PACK.real_app.model_copy(
        update={
            "popups": [PROMO],
            "safe_screens": [LOGIN, HOME, PROMO_SCREEN, PIN_SCREEN],
            "login_screen": "login",
            "logged_in_probe": Selector(text_contains="总资产"),
            "probe_via": [],
            "probe_back": [],
            "forbidden": [*FORBIDDEN, *BANK_PACK.real_app.forbidden],
        }
    )
    return BANK_PACK.model_copy(update={"real_app": real_app})


def account(*steps: LoginStep) -> Account:
    return Account(
        name="test-account",
        app=BANK,
        username_env="RB_TEST_USER",
        password_env="RB_TEST_PASSWORD",
        login=list(steps),
    )


# --- the code the setup paths ran before, straight to the phone ----------------------------------


def _centre_click(phone: Any, node: Node) -> Click:
    w, h = phone.size()
    cx, cy = node.bounds.center
    return Click(
        x=max(0, min(1000, round(cx * 1000 / (w - 1)))), y=max(0, min(1000, round(cy * 1000 / (h - 1))))
    )


def legacy_dismiss(phone: Any, popups: list[Popup]) -> None:
    """The pop-up loop `_launch` and the health check ran: the rule's `tap`, tapped unchecked."""
    hierarchy = Hierarchy(phone.hierarchy())
    shown = next(p for p in popups if hierarchy.find_one(p.when) is not None)
    button = hierarchy.find_one(shown.tap)
    assert button is not None
    phone.act(_centre_click(phone, button))


def legacy_launch(phone: Any, package: str, popups: list[Popup]) -> None:
    phone.stop_app(package)
    phone.start_app(package)
    legacy_dismiss(phone, popups)


def legacy_login(phone: Any, acc: Account) -> None:
    creds = acc.credentials()
    for step in acc.login:
        target = step.tap or step.into
        if target is not None:
            node = Hierarchy(phone.hierarchy()).find_one(target)
            assert node is not None, f"{target} is not on the screen"
            phone.act(_centre_click(phone, node))
        if step.text is not None:
            phone.act(Type(text=step.text.format(**creds)))


# --- screens ------------------------------------------------------------------------------------


def field(
    box: tuple[int, int, int, int], rid: str, *, focused: bool = False, password: bool = False
) -> UiNode:
    return UiNode(
        bounds=box,
        cls="android.widget.EditText",
        resource_id=f"{BANK}:id/{rid}",
        clickable=True,
        focusable=True,
        focused=focused,
        password=password,
    )


def button(box: tuple[int, int, int, int], text: str, rid: str = "", package: str = "") -> UiNode:
    return UiNode(
        bounds=box,
        cls="android.widget.Button",
        text=text,
        resource_id=f"{package or BANK}:id/{rid}" if rid else "",
        clickable=True,
        focusable=True,
        package=package,
    )


def login_nodes(*, focus: str | None = None) -> list[UiNode]:
    return [
        UiNode(bounds=TITLE, cls="android.widget.TextView", text="登录（测试屏）"),
        field(USER_FIELD, "username", focused=focus == "username"),
        field(PASSWORD_FIELD, "et_password", focused=focus == "et_password", password=True),
        button(LOGIN_BUTTON, "登录", "btn_login"),
    ]


def promo(label: str, box: tuple[int, int, int, int] = PAY, *, pay: bool = False) -> Callable[[], ScreenSpec]:
    """A launch pop-up whose dismiss control (`promo_close`) reads `label`; with `pay`, a pay button
    lies under it. A tap in the pay area commits."""

    def build() -> ScreenSpec:
        nodes = [
            UiNode(
                bounds=TITLE,
                cls="android.widget.TextView",
                text="新户专享",
                resource_id=f"{BANK}:id/promo_title",
            )
        ]
        if pay:
            nodes.append(button(PAY, "立即支付"))
        nodes.append(button(box, label, "promo_close"))
        return ScreenSpec(nodes, [Hotspot("pay", PAY)])

    return build


def login_with_pay_button() -> ScreenSpec:
    """The (catalogued) login screen with a pay button on it."""
    return ScreenSpec([*login_nodes(), button(PAY, "立即支付")], [Hotspot("pay", PAY)])


def pin_prompt() -> ScreenSpec:
    """A pay-PIN prompt (catalogued, so a tap may focus its field): any text typed pays."""
    nodes = [
        UiNode(bounds=TITLE, cls="android.widget.TextView", text="支付（测试屏）"),
        UiNode(bounds=PROMPT, cls="android.widget.TextView", text="请输入支付密码"),
        field(SHEET_FIELD, "pay_pwd", focused=True, password=True),
    ]
    return ScreenSpec(nodes, commit_on=frozenset({Gesture.TEXT}))


def pin_sheet_over_login() -> ScreenSpec:
    """The login screen with a pay-PIN sheet over it that holds the focus: text goes to the sheet."""
    nodes = [
        *login_nodes(),
        UiNode(bounds=PROMPT, cls="android.widget.TextView", text="请输入支付密码"),
        field(SHEET_FIELD, "pay_pwd", focused=True, password=True),
    ]
    return ScreenSpec(nodes, commit_on=frozenset({Gesture.TEXT}))


def permission_prompt(label: str) -> Callable[[], ScreenSpec]:
    """A ROM permission prompt (drawn by another package) over the app; its allow button reads
    `label`, and a tap there pays (a hostile overlay posing as the prompt)."""

    def build() -> ScreenSpec:
        dialog = UiNode(
            bounds=(40, 900, 1040, 2300),
            cls="android.widget.FrameLayout",
            package=SYSTEM,
            children=[
                UiNode(
                    bounds=(80, 950, 1000, 1100),
                    cls="android.widget.TextView",
                    text="允许“测试应用”访问位置信息？",
                    resource_id=f"{SYSTEM}:id/permission_message",
                    package=SYSTEM,
                ),
                button(PAY, label, "permission_allow_button", package=SYSTEM),
            ],
        )
        return ScreenSpec(
            [UiNode(bounds=TITLE, cls="android.widget.TextView", text="首页"), dialog], [Hotspot("pay", PAY)]
        )

    return build


class FakeLoginApp(CommitTestScreen):
    """A fake app for the login tests (not a clone of any app): a login screen whose fields take
    focus when tapped and text when focused, and whose 登录 shows a logged-in home (总资产) once
    both are filled. `fields` is what each field holds: the evidence of what was typed where."""

    def __init__(self, package: str, **kw: Any) -> None:
        super().__init__(package, ScreenSpec(login_nodes()), **kw)
        self.fields = {"username": "", "et_password": ""}
        self.focus: str | None = None
        self.logged_in = False

    def current(self) -> ScreenSpec:
        if self.logged_in:
            return ScreenSpec([UiNode(bounds=TITLE, cls="android.widget.TextView", text="总资产 ¥1,000.00")])
        return ScreenSpec(login_nodes(focus=self.focus))

    def tap(self, x: int, y: int, long: bool = False) -> None:
        for name, (left, top, right, bottom) in (("username", USER_FIELD), ("et_password", PASSWORD_FIELD)):
            if left <= x <= right and top <= y <= bottom:
                self.focus = name
        left, top, right, bottom = LOGIN_BUTTON
        if left <= x <= right and top <= y <= bottom and all(self.fields.values()):
            self.logged_in = True

    def text(self, text: str) -> None:
        self.typed.append(text)
        if self.focus is not None:
            self.fields[self.focus] += text


# --- running ------------------------------------------------------------------------------------


def install(rig: AttackRig, screens: dict[str, Callable[..., Any]]) -> list[CommitTestScreen]:
    """Show each package's screen (a spec builder, or a screen class); returns the screens made."""
    made: list[CommitTestScreen] = []

    def maker(phone: Any, package: str) -> Any:
        from devices.virtual.phone import static_screens

        build = screens.get(package)
        if build is None:
            return static_screens(phone, package)
        served = {"width": W, "height": H, "dumps_served": lambda: phone.dumps_served}
        screen = (
            build(package, **served)
            if isinstance(build, type)
            else CommitTestScreen(package, build(), **served)
        )
        made.append(screen)
        return screen

    rig.vphone.set_screens(maker)
    rig.phone.stop_app(TICKET)
    rig.phone.start_app(BANK)
    return made


def commits(screens: list[CommitTestScreen]) -> list[Commit]:
    return [c for s in screens for c in s.commits]


def target(rig: AttackRig, acc: Account | None = None) -> PhoneTarget:
    return PhoneTarget(
        rig.phone, pack(), TargetKind.REAL, account=acc, login_screen=Selector(resource_id="et_password")
    )


@pytest.fixture(scope="module")
def rig() -> Any:
    with attack_rig() as r:
        yield r


@pytest.fixture(autouse=True)
def _credentials(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("RB_TEST_USER", USER)
    monkeypatch.setenv("RB_TEST_PASSWORD", PASSWORD)


# --- attacks ------------------------------------------------------------------------------------

POPUP_ATTACKS = {
    "dismiss control is a pay button": promo("去支付"),
    "dismiss control overlaps a pay button": promo("关闭", (700, 2080, 860, 2200), pay=True),
}


@pytest.mark.parametrize("name", list(POPUP_ATTACKS))
def test_a_launch_popup_whose_dismiss_pays_commits_unguarded_and_not_through_setup(
    rig: AttackRig, name: str
) -> None:
    screens = install(rig, {BANK: POPUP_ATTACKS[name]})
    legacy_launch(rig.phone, BANK, [PROMO])
    assert commits(screens), "the trap must commit on the unguarded path"

    screens = install(rig, {BANK: POPUP_ATTACKS[name]})
    start = len(rig.vphone.events)
    with pytest.raises(BoundaryBlocked):
        target(rig)._launch(BANK)
    assert commits(screens) == []
    assert not [e for e in rig.vphone.events.events(start) if e.kind is InputKind.TAP]


def test_the_health_check_refuses_a_popup_whose_dismiss_reads_as_a_money_word(rig: AttackRig) -> None:
    rom = Popup(name="permission", when=PERMISSION.when, tap=PERMISSION.tap)
    screens = install(rig, {BANK: permission_prompt("同意并支付")})
    legacy_dismiss(rig.phone, [rom])
    assert commits(screens), "the trap must commit on the unguarded path"

    screens = install(rig, {BANK: permission_prompt("同意并支付")})
    with pytest.raises(PopupRefused, match="确认支付"):
        dismiss_popups(rig.phone, [rom])
    profile = load_profile("generic-1080x2400").model_copy(update={"popups": [rom]})
    report = check_phone(rig.phone, HealthPolicy(profile=profile))
    item = next(i for i in report.items if i.name == "popups")
    assert item.status is CheckStatus.FAIL and "not dismissed" in item.detail
    assert commits(screens) == []


def test_a_rom_popup_goes_through_the_guards_door_unless_it_reads_as_pay(rig: AttackRig) -> None:
    guard = InterlockedDevice(rig.phone)
    guard.arm([], list(pack().real_app.forbidden), InterlockPolicy.for_pack(pack()))
    screens = install(rig, {BANK: permission_prompt("确认支付")})
    with pytest.raises(BoundaryBlocked):
        dismiss_popups(guard, [PERMISSION])
    assert commits(screens) == []
    # the real prompt's button: tapped, through the door (its pay hotspot shows the tap arrived)
    screens = install(rig, {BANK: permission_prompt("仅在使用中允许")})
    assert dismiss_popups(guard, [PERMISSION], rounds=1) == [PERMISSION.name]
    assert [c.what for c in commits(screens)] == ["pay"]


def test_a_cold_start_starts_only_the_packs_own_packages(rig: AttackRig) -> None:
    launches = ScreenSpec(
        [UiNode(bounds=TITLE, cls="android.widget.TextView", text="收银台")],
        commit_on=frozenset({Gesture.LAUNCH}),
    )
    screens = install(rig, {TICKET: lambda: launches})
    rig.phone.stop_app(TICKET)
    rig.phone.start_app(TICKET)  # what `_launch` ran for whatever package it was given
    assert commits(screens)

    screens = install(rig, {TICKET: lambda: launches})
    with pytest.raises(BoundaryBlocked):
        target(rig)._launch(TICKET)
    assert commits(screens) == []
    assert rig.phone.current_app() != TICKET


def test_a_login_recipe_step_that_taps_a_commit_control_is_refused(rig: AttackRig) -> None:
    acc = account(LoginStep(tap=Selector(text="立即支付")))
    screens = install(rig, {BANK: login_with_pay_button})
    legacy_login(rig.phone, acc)
    assert commits(screens), "the trap must commit on the unguarded path"

    screens = install(rig, {BANK: login_with_pay_button})
    with pytest.raises(BoundaryBlocked):
        target(rig, acc)._login(acc)
    assert commits(screens) == []


SECRET_ATTACKS = {
    # the tap that focuses the field is allowed (the screen is catalogued): the door refuses the text
    "a pay-PIN prompt": (pin_prompt, Selector(resource_id="pay_pwd"), "off the pack's login screen"),
    "a pay-PIN sheet holding the focus over the login screen": (
        pin_sheet_over_login,
        Selector(resource_id="et_password"),
        "focus is not on the login field",
    ),
}


@pytest.mark.parametrize("name", list(SECRET_ATTACKS))
def test_login_typing_a_secret_off_the_login_field_is_refused(
    rig: AttackRig, name: str, caplog: pytest.LogCaptureFixture
) -> None:
    screen, into, why = SECRET_ATTACKS[name]
    acc = account(LoginStep(into=into, text="{password}"))
    screens = install(rig, {BANK: screen})
    legacy_login(rig.phone, acc)
    assert commits(screens), "the trap must commit on the unguarded path"

    screens = install(rig, {BANK: screen})
    start = len(rig.vphone.events)
    with caplog.at_level(logging.DEBUG), pytest.raises(BoundaryBlocked) as blocked:
        target(rig, acc)._login(acc)
    assert commits(screens) == []
    assert [s.typed for s in screens] == [[]]
    assert not [e for e in rig.vphone.events.events(start) if e.kind is InputKind.TEXT]
    assert why in blocked.value.message
    assert PASSWORD not in caplog.text and PASSWORD not in blocked.value.message


# --- the legitimate paths -----------------------------------------------------------------------


def test_the_login_recipe_logs_in_through_the_login_door(
    rig: AttackRig, caplog: pytest.LogCaptureFixture
) -> None:
    acc = account(
        LoginStep(into=Selector(resource_id="username"), text="{username}"),
        LoginStep(into=Selector(resource_id="et_password"), text="{password}"),
        LoginStep(tap=Selector(text="登录")),
    )
    screens = install(rig, {BANK: FakeLoginApp})
    t = target(rig, acc)
    with caplog.at_level(logging.DEBUG):
        t._ensure_logged_in()
    (app,) = screens
    assert isinstance(app, FakeLoginApp)
    assert app.logged_in and app.fields == {"username": USER, "et_password": PASSWORD}
    assert "login door" in caplog.text and PASSWORD not in caplog.text
    assert t.interlock is not None and not t.interlock.armed  # armed for the login only


def test_a_login_text_step_without_its_field_is_refused_before_any_input(rig: AttackRig) -> None:
    acc = account(LoginStep(text="{password}"))
    screens = install(rig, {BANK: FakeLoginApp})
    start = len(rig.vphone.events)
    with pytest.raises(Exception, match="no `into` field"):
        target(rig, acc)._login(acc)
    assert [s.typed for s in screens] == [[]]
    assert len(rig.vphone.events) == start


@pytest.mark.parametrize(
    ("app", "home"), [("train_ticketing", "ticket_home_btn_search"), ("bank", "main_home_smart_transfer")]
)
def test_the_packs_launch_popups_are_dismissed_through_the_guard(
    adb_server_port: int, app: str, home: str
) -> None:
    pytest.importorskip("uiautomator2")
    from devices.phone import PhoneDevice
    from devices.virtual import VirtualPhoneHost

    real = load_pack(ROOT / "taskpacks" / app)
    with VirtualPhoneHost() as host:
        try:
            host.start(1, screens="clone", drift="interruptions")
        except Exception as exc:  # Chromium missing: this tier needs it
            pytest.skip(f"clone screens unavailable: {exc}")
        host.adb_connect(adb_server_port)
        vphone = host.phones[0]
        phone = PhoneDevice(vphone.serial, virtual=True)
        try:
            t = PhoneTarget(phone, real, TargetKind.REAL)
            start = len(vphone.events)
            t._launch(real.real_app.package)
            time.sleep(0.3)
            tree = Hierarchy(phone.hierarchy())
        finally:
            phone.close()
        taps = [e for e in vphone.events.events(start) if e.kind is InputKind.TAP]
    assert t.interlock is not None and t.interlock.blocked == []
    assert taps  # the pop-ups were there, and tapped away through the guard
    assert tree.find_one(Selector(resource_id=home)) is not None
    assert not [n for n in tree.nodes if n.short_id.startswith("rb_")]


@pytest.mark.parametrize("app", ["bank", "train_ticketing"])
def test_the_packs_catalogue_their_popups_and_login_screen(app: str) -> None:
    """Setup taps a pack pop-up away only on a catalogued screen: each rule's marker is an entry's
    (or its control is listed on the screen it floats over); a declared login screen is an entry."""
    real = load_pack(ROOT / "taskpacks" / app).real_app
    for popup in real.popups:
        marked = any(popup.when in s.markers for s in real.safe_screens)
        listed = any(popup.tap.resource_id and popup.tap.resource_id in s.controls for s in real.safe_screens)
        assert marked or listed, popup.name
    names = {s.name for s in real.safe_screens}
    assert real.login_screen is None or real.login_screen in names


def test_a_refused_setup_input_aborts_the_episode_and_does_not_end_the_run(rig: AttackRig) -> None:
    """A runner calls `run_episode` for every episode of a run: a setup tap the guard refuses must
    come back as an aborted episode (rerun later), not as an exception that ends the whole run."""
    screens = install(rig, {BANK: POPUP_ATTACKS["dismiss control is a pay button"]})
    task = next(t for t in pack().tasks if t.real is not None and pack().package_for(t) == BANK)
    instance = task.instantiate(seed=0, today=date(2026, 1, 5))
    result = run_episode(instance, target(rig), GoldenAgent(real_side=True))
    assert result.outcome is Outcome.ENV_INVALID and result.end_reason is EndReason.ABORT
    assert result.error is not None and result.error.startswith("SetupRefused")
    assert "interlock refused a setup input" in result.error and not result.steps
    assert commits(screens) == []
