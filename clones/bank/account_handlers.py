"""Bank UI events of login and the accounts screens."""

from __future__ import annotations

from clones.bank import login_on_demand
from clones.bank import queries as q
from clones.bank.handler_kit import arg, clear_form, dialog, form, go_home, on, toast
from clones.base import State, UIEvent, navigate, replace_route, require


@on("login")
def _login(state: State, event: UIEvent) -> None:
    if login_on_demand.active(state):
        login_on_demand.password_login(state)
        return
    require(len(form(state, "username")) >= 6, "请输入手机号或用户名")
    require(len(form(state, "password")) >= 6, "请输入6-20位登录密码")
    state["user"]["logged_in"] = True
    clear_form(state, "password")
    go_home(state)
    dialog(state, "biometric")


@on("login_alt")
def _login_alt(state: State, event: UIEvent) -> None:
    method = "手势" if arg(event) == "gesture" else "刷脸"
    toast(state, f"您尚未开通{method}登录，请使用密码登录")


@on("decline_biometric")
def _decline_biometric(state: State, event: UIEvent) -> None:
    state["ui"]["dialog"] = None


@on("enable_biometric")
def _enable_biometric(state: State, event: UIEvent) -> None:
    state["user"]["settings"]["face_login"] = True
    state["ui"]["dialog"] = None
    toast(state, "刷脸登录已开通")


@on("logout")
def _logout(state: State, event: UIEvent) -> None:
    state["user"]["logged_in"] = False
    state["ui"]["stack"] = []
    replace_route(state, "home" if login_on_demand.active(state) else "login")


@on("toggle_balance")
def _toggle_balance(state: State, event: UIEvent) -> None:
    s = state["user"]["settings"]
    s["hide_balance"] = not s["hide_balance"]


@on("open_account")
def _open_account(state: State, event: UIEvent) -> None:
    acc = arg(event)
    require(any(a["id"] == acc for a in state["user"]["accounts"]), "账户不存在")
    navigate(state, "account_detail", acc=acc)


@on("open_subaccount")
def _open_subaccount(state: State, event: UIEvent) -> None:
    acc_id, sub_id = arg(event).split(":", 1)
    acc = q.account(state, acc_id)
    require(any(s["id"] == sub_id for s in acc["subaccounts"]), "子账户不存在")
    navigate(state, "subaccount_detail", acc=acc_id, sub=sub_id)


@on("set_default")
def _set_default(state: State, event: UIEvent) -> None:
    acc = arg(event)
    for a in state["user"]["accounts"]:
        a["default"] = a["id"] == acc
    toast(state, "已设为默认账户")


@on("copy_card")
def _copy_card(state: State, event: UIEvent) -> None:
    toast(state, "卡号已复制")
