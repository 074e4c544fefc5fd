"""The bank's logged-out home with login on demand (`setup.data.start: logged_out_home`).

The gate must not be bypassable: while logged out no event other than the public ones changes the
account or reaches a service screen, and no rendered page shows an amount of the account.
"""

from __future__ import annotations

import copy
import re
from typing import Any

import pytest

from clones.bank import login_on_demand
from clones.bank.app import Bank
from clones.bank.handler_kit import HANDLERS
from clones.bank.money import yuan
from clones.base import State, UIEvent
from realbench.errors import CloneError
from realbench.taskpack import CloneSetup

BANK = Bank()
PHONE = "13800005721"
GUEST = CloneSetup(data={"start": "logged_out_home"})
GUEST_KNOWN_PHONE = CloneSetup(data={"start": "logged_out_home", "device_authorised": True})


def _guest(setup: CloneSetup = GUEST) -> State:
    return BANK.build_state(setup, {})


def _amounts(state: State) -> list[str]:
    """Every account amount a page could leak: balances, sub-accounts, total, credit figures."""
    u = state["user"]
    fen = [a["balance_fen"] for a in u["accounts"]]
    fen += [s["principal_fen"] for a in u["accounts"] for s in a["subaccounts"]]
    fen += [sum(fen), u["credit"]["bill"]["amount_fen"]]
    return [yuan(f) for f in fen if f]


def _login(state: State, password: str = "test1234", phone: str = PHONE) -> None:
    BANK.handle(state, UIEvent("login", None, {"login_phone": phone, "password": password}))


def test_the_default_start_is_unchanged() -> None:
    home = BANK.build_state(CloneSetup(), {})
    assert home["user"]["logged_in"] and "总资产" in BANK.render(home)
    assert "login_on_demand" not in home["world"]
    login = BANK.build_state(CloneSetup(route="login"), {})
    html = BANK.render(login)
    assert 'name="username"' in html and 'name="login_phone"' not in html


def test_the_logged_out_home_shows_no_account_data_and_a_login_button() -> None:
    state = _guest()
    state["user"]["settings"]["hide_balance"] = False
    html = BANK.render(state)
    assert 'data-route="home"' in html and 'id="btn_home_login"' in html and ">登录<" in html
    # the pack's logged-in probe (总资产) must not match the logged-out home
    assert "总资产" not in html
    leaked = [a for a in _amounts(state) if a in html]
    assert leaked == []
    assert 'id="tabbar"' in html  # 首页 is a tab shown logged in or out


@pytest.mark.parametrize("route", [r for r in BANK.routes() if r not in login_on_demand.PUBLIC_ROUTES])
def test_a_logged_out_state_never_renders_a_private_screen(route: str) -> None:
    state = _guest()
    state["ui"]["route"] = route
    html = BANK.render(state)
    assert 'data-route="login"' in html
    assert [a for a in _amounts(state) if a in html] == []


def test_the_public_screens_show_no_account_amounts() -> None:
    state = _guest()
    for route in sorted(login_on_demand.PUBLIC_ROUTES - {"branch_detail"}):
        state["ui"]["route"] = route
        html = BANK.render(state)
        assert [a for a in _amounts(state) if a in html] == [], route


def _arg_for(name: str) -> str | None:
    """A valid-looking argument for a handler, so a refusal comes from the gate, not the argument."""
    return {
        "open_account": "a1",
        "transfer_to_payee": "p2",
        "pick_payee": "p2",
        "tab": "mine",
        "open_bill": "electricity",
        "open_fund": "f01",
        "set_from": "a1",
    }.get(name, "x")


@pytest.mark.parametrize("name", sorted(set(HANDLERS) - login_on_demand.PUBLIC_EVENTS))
def test_every_private_event_while_logged_out_only_opens_the_login(name: str) -> None:
    state = _guest()
    user = copy.deepcopy(state["user"])
    BANK.handle(state, UIEvent(name, _arg_for(name), {"amount": "100", "sms_code": "123456"}))
    assert state["ui"]["route"] == "login", name
    assert state["user"] == user, name
    assert state["ui"]["after_login"]["event"] == name


def test_a_money_event_posted_by_hand_creates_no_order_while_logged_out() -> None:
    state = _guest()
    state["ui"]["draft"] = {"kind": "transfer", "from_acc": "a1", "amount_fen": 100}  # a forged draft
    for name in ("confirm_submit", "verify_submit", "transfer_next", "send_sms"):
        BANK.handle(state, UIEvent(name, None, {"sms_code": "123456", "tx_password": "123456"}))
        assert state["ui"]["route"] == "login"
    assert len(state["user"]["transfers"]) == len(_guest()["user"]["transfers"])


@pytest.mark.parametrize(
    ("event", "arg", "landed", "stack"),
    [
        ("open_transfer_home", None, "transfer_home", ["home"]),
        ("open_accounts", None, "accounts", ["home"]),
        ("tab", "credit", "credit_home", []),
        ("open_messages", None, "messages", ["home"]),
    ],
)
def test_after_login_the_user_lands_on_the_service_asked_for(
    event: str, arg: str | None, landed: str, stack: list[str]
) -> None:
    state = _guest(GUEST_KNOWN_PHONE)
    BANK.handle(state, UIEvent(event, arg))
    assert state["ui"]["route"] == "login" and not state["user"]["logged_in"]
    _login(state)
    assert state["user"]["logged_in"]
    assert state["ui"]["route"] == landed
    assert [s["route"] for s in state["ui"]["stack"]] == stack
    assert "after_login" not in state["ui"]


def test_a_request_from_a_public_screen_comes_back_to_it() -> None:
    state = _guest(GUEST_KNOWN_PHONE)
    BANK.handle(state, UIEvent("open_branches"))
    BANK.handle(state, UIEvent("open_branch", "b1"))
    assert state["ui"]["route"] == "branch_detail"  # public information needs no login
    BANK.handle(state, UIEvent("appt_start", "b1"))
    assert state["ui"]["route"] == "login"
    _login(state)
    assert state["ui"]["route"] == "appointment"
    assert [s["route"] for s in state["ui"]["stack"]] == ["home", "branches", "branch_detail"]


def test_a_new_phone_needs_the_sms_code_before_the_session_opens() -> None:
    state = _guest()
    BANK.handle(state, UIEvent("open_accounts"))
    _login(state)
    assert state["ui"]["route"] == "device_verify"
    assert not state["user"]["logged_in"] and not state["user"]["device_authorised"]
    html = BANK.render(state)
    assert "【模拟短信】" in html and "123456" in html  # the clone's stand-in for the SMS
    for code in ("", "000000"):
        with pytest.raises(CloneError):
            BANK.handle(state, UIEvent("device_verify", None, {"device_code": code}))
        assert not state["user"]["logged_in"]
    BANK.handle(state, UIEvent("__back__"))  # leaving the step leaves the user logged out
    assert state["ui"]["route"] == "login" and not state["user"]["logged_in"]
    _login(state)
    BANK.handle(state, UIEvent("device_verify", None, {"device_code": "123456"}))
    assert state["user"]["logged_in"] and state["user"]["device_authorised"]
    assert state["ui"]["route"] == "accounts"
    # logged out again on the same phone: the next login needs no code
    BANK.handle(state, UIEvent("logout"))
    assert state["ui"]["route"] == "home" and not state["user"]["logged_in"]
    BANK.handle(state, UIEvent("open_login"))
    _login(state)
    assert state["user"]["logged_in"] and state["ui"]["route"] == "home"


def test_the_device_step_cannot_be_entered_without_the_password() -> None:
    state = _guest()
    with pytest.raises(CloneError, match="手机号和登录密码"):
        BANK.handle(state, UIEvent("device_verify", None, {"device_code": "123456"}))
    assert not state["user"]["logged_in"] and not state["user"]["device_authorised"]
    # nor from a screen reached after leaving the step
    BANK.handle(state, UIEvent("open_login"))
    _login(state)
    BANK.handle(state, UIEvent("__home__"))
    with pytest.raises(CloneError, match="手机号和登录密码"):
        BANK.handle(state, UIEvent("device_verify", None, {"device_code": "123456"}))
    assert not state["user"]["logged_in"] and not state["user"]["device_authorised"]


@pytest.mark.parametrize(
    ("phone", "password", "message"),
    [
        ("13800005720", "test1234", "手机号或登录密码错误"),
        ("1380000", "test1234", "11位"),
        (PHONE, "12", "6-20位"),
    ],
)
def test_a_wrong_phone_or_short_password_is_refused(phone: str, password: str, message: str) -> None:
    state = _guest(GUEST_KNOWN_PHONE)
    BANK.handle(state, UIEvent("open_login"))
    with pytest.raises(CloneError, match=message):
        _login(state, password, phone)
    assert not state["user"]["logged_in"]


def test_the_login_page_asks_for_the_phone_number() -> None:
    state = _guest()
    BANK.handle(state, UIEvent("open_login"))
    html = BANK.render(state)
    assert 'name="login_phone"' in html and 'name="username"' not in html
    assert re.search(r'id="btn_back"', html)  # back to the logged-out home without logging in
    BANK.handle(state, UIEvent("__back__"))
    assert state["ui"]["route"] == "home"


def test_logging_in_is_an_expected_change_only_for_a_task_that_starts_logged_out() -> None:
    start = _guest(GUEST_KNOWN_PHONE)
    after = copy.deepcopy(start)
    BANK.handle(after, UIEvent("open_accounts"))
    _login(after)
    assert BANK.unexpected_changes("answer", start, after) == []
    logged_in: dict[str, Any] = BANK.build_state(CloneSetup(), {})
    logged_out = copy.deepcopy(logged_in)
    BANK.handle(logged_out, UIEvent("logout"))
    assert BANK.unexpected_changes("answer", logged_in, logged_out) == [
        "unexpected change: replace /user/logged_in"
    ]
