"""Bank UI events of settings, limits, security and messages."""

from __future__ import annotations

from clones.bank.handler_kit import MAX_DAILY_LIMIT_FEN, MAX_SINGLE_LIMIT_FEN, arg, form, on, toast
from clones.bank.money import parse_yuan, yuan
from clones.base import State, UIEvent, navigate, require


@on("limit_next")
def _limit_next(state: State, event: UIEvent) -> None:
    s = state["user"]["settings"]
    single_txt, daily_txt = form(state, "single_limit"), form(state, "daily_limit")
    single = parse_yuan(single_txt, field="单笔限额") if single_txt else s["single_limit_fen"]
    daily = parse_yuan(daily_txt, field="日累计限额") if daily_txt else s["daily_limit_fen"]
    require(0 < single <= MAX_SINGLE_LIMIT_FEN, f"单笔限额最高{yuan(MAX_SINGLE_LIMIT_FEN)}元")
    require(0 < daily <= MAX_DAILY_LIMIT_FEN, f"日累计限额最高{yuan(MAX_DAILY_LIMIT_FEN)}元")
    require(single <= daily, "单笔限额不能大于日累计限额")
    require((single, daily) != (s["single_limit_fen"], s["daily_limit_fen"]), "限额未修改")
    state["ui"]["draft"] = {
        "kind": "limit",
        "single_limit_fen": single,
        "daily_limit_fen": daily,
        "old_single_fen": s["single_limit_fen"],
        "old_daily_fen": s["daily_limit_fen"],
    }
    navigate(state, "confirm")


@on("toggle_notify")
def _toggle_notify(state: State, event: UIEvent) -> None:
    key = arg(event)
    n = state["user"]["settings"]["notify"]
    require(key in n, "未知的通知类型")
    n[key] = not n[key]


@on("toggle_security")
def _toggle_security(state: State, event: UIEvent) -> None:
    key = arg(event)
    s = state["user"]["settings"]
    require(key in ("gesture_login", "face_login"), "未知的安全设置")
    s[key] = not s[key]
    toast(state, "设置成功")


@on("open_message")
def _open_message(state: State, event: UIEvent) -> None:
    m = next((m for m in state["user"]["messages"] if m["id"] == arg(event)), None)
    require(m is not None, "消息不存在")
    m["read"] = True  # type: ignore[index]
    navigate(state, "message_detail", id=m["id"])  # type: ignore[index]


@on("read_all")
def _read_all(state: State, event: UIEvent) -> None:
    for m in state["user"]["messages"]:
        m["read"] = True
    toast(state, "已全部标记为已读")
