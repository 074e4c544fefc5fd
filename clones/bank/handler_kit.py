"""Shared helpers of the bank clone's UI event handlers and the table they register into."""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

from clones.base import Handler, State, UIEvent, replace_route, require

HANDLERS: dict[str, Handler] = {}
SMS_CODE = "123456"  # the clone's test account receives this code (shown in the toast)
MAX_SINGLE_LIMIT_FEN = 50_000_000
MAX_DAILY_LIMIT_FEN = 100_000_000


def on(name: str) -> Callable[[Handler], Handler]:
    def deco(fn: Handler) -> Handler:
        HANDLERS[name] = fn
        return fn

    return deco


def form(state: State, key: str, default: str = "") -> str:
    return str(state["ui"]["form"].get(key, default) or "").strip()


def clear_form(state: State, *keys: str) -> None:
    for k in keys:
        state["ui"]["form"].pop(k, None)


def toast(state: State, text: str) -> None:
    state["ui"]["toast"] = text


def dialog(state: State, kind: str, **data: Any) -> None:
    state["ui"]["dialog"] = {"kind": kind, **data}


def arg(event: UIEvent) -> str:
    require(event.arg is not None and event.arg != "", "操作缺少参数")
    return str(event.arg)


def draft(state: State) -> dict[str, Any]:
    d = state["ui"].get("draft")
    require(isinstance(d, dict), "请重新填写交易信息")
    return d  # type: ignore[return-value]


def masked_phone(state: State) -> str:
    """The owner's phone as SMS notices show it (138****5721)."""
    phone = str(state["world"]["owner"]["phone"])
    return f"{phone[:3]}****{phone[-4:]}"


def go_home(state: State) -> None:
    state["ui"]["stack"] = []
    replace_route(state, "home")
