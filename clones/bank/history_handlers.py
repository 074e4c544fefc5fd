"""Bank UI events of the transaction history and its filter."""

from __future__ import annotations

import re
from datetime import date
from typing import Any

from clones.bank import queries as q
from clones.bank.handler_kit import arg, clear_form, form, on, toast
from clones.bank.money import parse_yuan
from clones.base import State, UIEvent, back, clock_of, navigate, require


def _hist(state: State) -> dict[str, Any]:
    h = state["ui"].setdefault("hist", {})
    h.setdefault("acc", q.default_account(state)["id"])
    h.setdefault("period", "month")
    h.setdefault("direction", "all")
    h.setdefault("page", 1)
    return h


@on("open_history")
def _open_history(state: State, event: UIEvent) -> None:
    state["ui"]["hist"] = {}
    h = _hist(state)
    if event.arg:
        h["acc"] = event.arg
    navigate(state, "history")


@on("hist_acc")
def _hist_acc(state: State, event: UIEvent) -> None:
    acc = arg(event)
    require(any(a["id"] == acc for a in state["user"]["accounts"]), "账户不存在")
    h = _hist(state)
    h.update(acc=acc, page=1)


@on("hist_period")
def _hist_period(state: State, event: UIEvent) -> None:
    p = arg(event)
    require(p in q.PERIODS, "未知的查询期间")
    _hist(state).update(period=p, page=1)


@on("hist_dir")
def _hist_dir(state: State, event: UIEvent) -> None:
    d = arg(event)
    require(d in q.DIRECTIONS, "未知的收支类型")
    _hist(state).update(direction=d, page=1)


@on("hist_cat")
def _hist_cat(state: State, event: UIEvent) -> None:
    c = event.arg or ""
    require(c == "" or c in state["world"]["categories"], "未知的交易类型")
    _hist(state)["cat_pending"] = c


@on("hist_more")
def _hist_more(state: State, event: UIEvent) -> None:
    h = _hist(state)
    total = len(q.filter_txns(state, q.filter_from_ui(state)))
    require(h["page"] * q.PAGE_SIZE < total, "没有更多记录了")
    h["page"] += 1


_DATE = re.compile(r"^\d{4}-\d{2}-\d{2}$")


@on("hist_apply")
def _hist_apply(state: State, event: UIEvent) -> None:
    h = _hist(state)
    start, end = form(state, "start"), form(state, "end")
    if start or end:
        require(bool(_DATE.match(start)) and bool(_DATE.match(end)), "请输入正确的起止日期，如2026-02-01")
        try:
            d0, d1 = date.fromisoformat(start), date.fromisoformat(end)
        except ValueError:
            raise_bad_date()
        require(d0 <= d1, "起始日期不能晚于结束日期")
        require(d1 <= clock_of(state).date(), "结束日期不能晚于今天")
        require((d1 - d0).days <= 366, "查询期间不能超过一年")
        h.update(period="custom", start=start, end=end)
    lo, hi = form(state, "min_amount"), form(state, "max_amount")
    h["min_fen"] = parse_yuan(lo, field="最低金额") if lo else None
    h["max_fen"] = parse_yuan(hi, field="最高金额") if hi else None
    if h["min_fen"] is not None and h["max_fen"] is not None:
        require(h["min_fen"] <= h["max_fen"], "最低金额不能大于最高金额")
    h["party"] = form(state, "party")
    h["cat"] = h.pop("cat_pending", h.get("cat", ""))
    h["page"] = 1
    back(state)


def raise_bad_date() -> None:
    require(False, "请输入正确的日期")


@on("hist_reset")
def _hist_reset(state: State, event: UIEvent) -> None:
    acc = _hist(state)["acc"]
    state["ui"]["hist"] = {"acc": acc}
    _hist(state)
    clear_form(state, "start", "end", "min_amount", "max_amount", "party")


@on("open_txn")
def _open_txn(state: State, event: UIEvent) -> None:
    tid = arg(event)
    require(any(t["id"] == tid for t in state["user"]["txns"]), "交易不存在")
    navigate(state, "txn_detail", txn=tid)


@on("open_receipt")
def _open_receipt(state: State, event: UIEvent) -> None:
    navigate(state, "receipt", txn=arg(event))


@on("save_receipt")
def _save_receipt(state: State, event: UIEvent) -> None:
    toast(state, "回单已保存到相册")
