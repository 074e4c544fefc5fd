"""The bank's logged-out home with login on demand (`setup.data.start: logged_out_home`).

Public evidence says the real app is logged into from the main screen by phone number, with a
device authorisation the first time it is used on a phone, and that 首页 is shown logged in or out.
In this variant the clone opens on the home tab logged out: account data is hidden, and any
service that needs the account opens the login page (phone number + password) and, once logged
in, the service that was asked for. On a phone not yet authorised, an SMS code step follows the
password (its look is a guess). The gate sits in front of every handler (`needs_login`), so an
event posted by hand cannot reach a service while logged out.
"""

from __future__ import annotations

import copy
from typing import Any

from clones.bank.handler_kit import HANDLERS, SMS_CODE, clear_form, form, go_home, masked_phone, on, toast
from clones.base import State, UIEvent, navigate, replace_route, require
from realbench.errors import CloneError

# Screens a logged-out user may see: the home tab, the login steps, and public information.
PUBLIC_ROUTES = frozenset(
    {"home", "login", "device_verify", "fx_rates", "fx_calc", "branches", "branch_detail", "all_services"}
)
# Events that need no login; `tab` is public only for 首页. Everything else asks for the login.
PUBLIC_EVENTS = frozenset(
    {
        "__back__",
        "__home__",
        "__sync__",
        "dismiss",
        "toast",
        "open_login",
        "login",
        "login_alt",
        "device_resend_sms",
        "device_verify",
        "open_fx",
        "open_fx_calc",
        "fx_ccy",
        "fx_dir",
        "fx_calc",
        "open_branches",
        "branch_search",
        "branch_filter",
        "open_branch",
        "open_all",
        "home_drawer",
        "kp",
        "kp_delete",
        "kp_shift",
    }
)
# What logging in changes in the account part of the state: allowed for a task that starts logged out.
SESSION_PATHS = ("/user/logged_in", "/user/device_authorised")


def active(state: State) -> bool:
    return bool(state["world"].get("login_on_demand"))


def started_logged_out(state: State) -> bool:
    return active(state) and not state["user"]["logged_in"]


def needs_login(state: State, event: UIEvent) -> bool:
    """Whether this event must wait for a login (always False outside the variant)."""
    if not active(state) or state["user"]["logged_in"]:
        return False
    if event.name == "tab":
        return event.arg != "home"
    # an unknown event is refused by the framework as it would be logged in
    return event.name not in PUBLIC_EVENTS and event.name in HANDLERS


def ask_login(state: State, event: UIEvent) -> None:
    """Remember what was asked for, where, and open the login page instead."""
    ui = state["ui"]
    ui["form"].update(event.form)
    ui["after_login"] = {
        "event": event.name,
        "arg": event.arg,
        "route": ui["route"],
        "args": copy.deepcopy(ui.get("args") or {}),
        "stack": copy.deepcopy(ui["stack"]),
    }
    ui.pop("device_step", None)
    navigate(state, "login")
    toast(state, "请先登录")


@on("open_login")
def _open_login(state: State, event: UIEvent) -> None:
    state["ui"].pop("after_login", None)
    state["ui"].pop("device_step", None)
    navigate(state, "login")


def password_login(state: State) -> None:
    """The login page's 登录 in this variant: phone number and password."""
    phone = form(state, "login_phone").replace(" ", "")
    require(phone.isdigit() and len(phone) == 11, "请输入11位手机号")
    require(len(form(state, "password")) >= 6, "请输入6-20位登录密码")
    require(phone == state["world"]["owner"]["phone"], "手机号或登录密码错误")
    clear_form(state, "password")
    if not state["user"].get("device_authorised", True):
        state["ui"]["device_step"] = True
        navigate(state, "device_verify")
        _send_device_code(state)
        return
    _finish(state)


def _send_device_code(state: State) -> None:
    toast(state, f"验证码已发送至{masked_phone(state)}")


@on("device_resend_sms")
def _device_resend_sms(state: State, event: UIEvent) -> None:
    require(bool(state["ui"].get("device_step")), "请先输入手机号和登录密码")
    _send_device_code(state)


@on("device_verify")
def _device_verify(state: State, event: UIEvent) -> None:
    """First use on this phone: the SMS code authorises the device, then the login completes."""
    # only from the step's own page, right after the password: never from a screen left earlier
    on_step = state["ui"]["route"] == "device_verify" and bool(state["ui"].get("device_step"))
    require(on_step, "请先输入手机号和登录密码")
    code = form(state, "device_code")
    require(bool(code), "请输入短信验证码")
    require(code == SMS_CODE, "短信验证码错误")
    clear_form(state, "device_code")
    state["user"]["device_authorised"] = True
    _finish(state)


def _finish(state: State) -> None:
    """Logged in: open the service that was asked for, from where it was asked for."""
    ui = state["ui"]
    state["user"]["logged_in"] = True
    ui.pop("device_step", None)
    request: dict[str, Any] | None = ui.pop("after_login", None)
    if request is None:
        go_home(state)
        return
    ui["stack"] = request["stack"]
    replace_route(state, request["route"], **request["args"])
    name, arg = request["event"], request["arg"]
    try:
        HANDLERS[name](state, UIEvent(name, arg))
    except CloneError as exc:
        toast(state, exc.message)  # logged in all the same; the service itself refused


def logged_out_route(state: State, route: str) -> str:
    """The screen a logged-out state shows for `route`."""
    if active(state):
        return route if route in PUBLIC_ROUTES else "login"
    return "login"
