"""Login: the gate in front of account screens and booking, the password page and the SMS step.

12306 sells tickets only to a logged-in account ([web] in docs/clones.md). The clone starts logged in
unless a task's ``setup.data`` says ``logged_in: false``; logged out, an event that needs the account
opens the login page, and a completed login returns to the screen the user was on. The SMS code is
the clone's stand-in for a text message: 获取验证码 shows it in a toast the agent can read. The login
password is a fixed, invented value (not a secret); it is compared here and never stored in state.
"""

from __future__ import annotations

import hashlib
from typing import Any

from clones.base import State, UIEvent, navigate, require
from clones.train_ticketing.ui import LOGIN_GATED_LINKS, LOGIN_GATED_TABS

# The clone's test account password: an invented value the task instructions state openly.
LOGIN_PASSWORD = "Rail2026"
# UI events that act on the account (booking, paying, orders, passengers, reminders, waitlists).
LOGIN_GATED_EVENTS = frozenset(
    {
        "book_seat",
        "waitlist_seat",
        "book_leg",
        "submit_order",
        "submit_waitlist",
        "pay_order",
        "continue_pay",
        "open_order",
        "orders_tab",
        "add_passenger",
        "edit_passenger",
        "add_reminder",
        "open_waitlist",
        "open_message",
    }
)


def logged_in(state: State) -> bool:
    return bool(state["user"].get("logged_in", True))


def needs_login(state: State, event: UIEvent) -> bool:
    """Whether `event` must wait for a login (always False once logged in)."""
    if logged_in(state):
        return False
    if event.name == "tab":
        return event.arg in LOGIN_GATED_TABS
    if event.name == "go":
        return event.arg in LOGIN_GATED_LINKS
    return event.name in LOGIN_GATED_EVENTS


def sms_code_for(state: State) -> str:
    """The code the clone 'texts' this login: the task's `sms_code`, else six digits derived from
    the account and the clock (deterministic, so replays see the same code)."""
    fixed = state["world"].get("sms_code")
    if fixed:
        return str(fixed)
    digest = hashlib.sha256(f"{state['user']['profile']['phone']}|{state['clock']}".encode()).hexdigest()
    return f"{int(digest[:8], 16) % 1_000_000:06d}"


def masked_phone(phone: str) -> str:
    return f"{phone[:3]}****{phone[-4:]}" if len(phone) >= 7 else phone


def open_login(state: State) -> None:
    """Open the login page over the current screen; a completed login comes back to it."""
    ui = state["ui"]
    ui["login"] = {"return_depth": len(ui["stack"]), "account": "", "sent": False}
    for key in ("login_account", "login_password", "sms_code"):
        ui["form"][key] = ""
    navigate(state, "login")


def _account_matches(profile: dict[str, Any], account: str) -> bool:
    return account in (profile["username"], profile["phone"], profile["email"])


class LoginHandlers:
    """Handlers mixed into `TrainTicketing`; each mutates the state in place or raises CloneError."""

    def _open_login(self, state: State, ev: UIEvent) -> None:
        require(not logged_in(state), "您已登录")
        open_login(state)

    def _login_submit(self, state: State, ev: UIEvent) -> None:
        form = state["ui"]["form"]
        account = str(form.get("login_account", "")).strip()
        password = str(form.get("login_password", ""))
        require(bool(account), "请输入用户名/邮箱/手机号")
        require(bool(password), "请输入密码")
        form["login_password"] = ""  # the typed password never outlives the attempt
        if not _account_matches(state["user"]["profile"], account) or password != LOGIN_PASSWORD:
            state["ui"]["toast"] = "用户名或密码错误，请重新输入"
            return
        # a task that starts on the login page has no screen to return to: it returns home
        login = state["ui"].get("login") or {"return_depth": -1}
        state["ui"]["login"] = login
        login.update(account=account, sent=False)
        form["sms_code"] = ""
        navigate(state, "login_sms")

    def _sms_send(self, state: State, ev: UIEvent) -> None:
        login = state["ui"].get("login")
        require(login is not None, "请先输入账号和密码")
        assert login is not None
        login["sent"] = True
        login["code"] = sms_code_for(state)
        phone = masked_phone(state["user"]["profile"]["phone"])
        # the clone's stand-in for the text message the real app sends to the account's phone
        state["ui"]["toast"] = f"【仿真短信】验证码 {login['code']} 已发送至{phone}，5分钟内有效"

    def _sms_submit(self, state: State, ev: UIEvent) -> None:
        ui = state["ui"]
        login = ui.get("login")
        require(login is not None and login.get("sent"), "请先获取验证码")
        assert login is not None
        code = str(ui["form"].get("sms_code", "")).strip()
        require(bool(code), "请输入验证码")
        ui["form"]["sms_code"] = ""
        if code != login.get("code"):
            ui["toast"] = "验证码错误，请重新输入"
            return
        state["user"]["logged_in"] = True
        depth = int(login.get("return_depth", -1))
        home = {"route": "home", "args": {}}
        origin = ui["stack"][depth] if 0 <= depth < len(ui["stack"]) else home
        ui["stack"] = ui["stack"][: max(depth, 0)]
        ui["route"] = origin["route"]
        ui["args"] = origin.get("args", {})
        ui["dialog"] = None
        ui["login"] = None
        ui["toast"] = "登录成功"

    def _logout(self, state: State, ev: UIEvent) -> None:
        require(logged_in(state), "您尚未登录")
        state["user"]["logged_in"] = False
        state["ui"]["stack"] = []
        state["ui"]["route"] = "mine"
        state["ui"]["args"] = {}
        state["ui"]["toast"] = "已退出登录"
