"""Bank UI events of bill payment and mobile top-up."""

from __future__ import annotations

import re

from clones.bank import queries as q
from clones.bank.handler_kit import arg, clear_form, form, on
from clones.bank.money import parse_yuan, yuan
from clones.bank.orders import bill_due_fen
from clones.bank.transfer_handlers import amount_checks
from clones.bank.world import BILL_KIND_NAMES
from clones.base import State, UIEvent, navigate, require


@on("open_bill")
def _open_bill(state: State, event: UIEvent) -> None:
    kind = arg(event)
    require(kind in state["world"]["billers"], "未知的缴费项目")
    clear_form(state, "bill_account", "bill_amount")
    state["ui"]["pay"] = {"from_acc": q.default_account(state)["id"], "bill_kind": kind, "queried": None}
    navigate(state, "bill_form", kind=kind)


@on("bill_query")
def _bill_query(state: State, event: UIEvent) -> None:
    pay = state["ui"].setdefault("pay", {})
    kind = pay.get("bill_kind") or state["ui"]["args"].get("kind")
    no = form(state, "bill_account")
    require(no.isdigit() and len(no) == 10, "请输入10位缴费户号")
    due = bill_due_fen(state, kind, no)
    require(due is not None, "未查询到该户号，请核对后重新输入")
    pay["queried"] = no
    state["ui"]["form"]["bill_amount"] = yuan(due, grouping=False) if due else ""  # type: ignore[arg-type]


@on("bill_next")
def _bill_next(state: State, event: UIEvent) -> None:
    pay = state["ui"].get("pay") or {}
    kind = str(pay.get("bill_kind") or "")
    require(kind in BILL_KIND_NAMES, "请重新选择缴费项目")
    require(
        bool(pay.get("queried")) and pay.get("queried") == form(state, "bill_account"), "请先查询缴费户号"
    )
    amount = parse_yuan(form(state, "bill_amount"), field="缴费金额")
    require(0 < amount <= 500_000, "缴费金额需在0.01-5000元之间")
    acc = pay.get("from_acc", q.default_account(state)["id"])
    amount_checks(state, acc, amount)
    holder = next(
        a["holder"] for a in state["world"]["billers"][kind]["accounts"] if a["account_no"] == pay["queried"]
    )
    state["ui"]["draft"] = {
        "kind": "bill",
        "bill_kind": kind,
        "label": BILL_KIND_NAMES[kind],
        "company": state["world"]["billers"][kind]["company"],
        "account_no": pay["queried"],
        "holder": holder,
        "amount_fen": amount,
        "from_acc": acc,
    }
    navigate(state, "confirm")


@on("open_topup")
def _open_topup(state: State, event: UIEvent) -> None:
    clear_form(state, "phone")
    state["ui"]["pay"] = {"from_acc": q.default_account(state)["id"], "face": 10_000}
    navigate(state, "topup")


@on("topup_self")
def _topup_self(state: State, event: UIEvent) -> None:
    state["ui"]["form"]["phone"] = state["world"]["owner"]["phone"]


@on("topup_face")
def _topup_face(state: State, event: UIEvent) -> None:
    face = int(arg(event))
    require(face in state["world"]["topup_faces"], "不支持的充值面额")
    state["ui"].setdefault("pay", {})["face"] = face


@on("topup_next")
def _topup_next(state: State, event: UIEvent) -> None:
    pay = state["ui"].get("pay") or {}
    phone = form(state, "phone").replace(" ", "")
    require(bool(re.fullmatch(r"1[3-9]\d{9}", phone)), "请输入正确的11位手机号码")
    face = int(pay.get("face", 10_000))
    acc = pay.get("from_acc", q.default_account(state)["id"])
    amount_checks(state, acc, face)
    state["ui"]["draft"] = {"kind": "topup", "phone": phone, "amount_fen": face, "from_acc": acc}
    navigate(state, "confirm")
