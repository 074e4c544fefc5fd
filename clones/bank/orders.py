"""Money-moving and account-changing orders: created at the commit boundary, settled after the
password/SMS step.

Every flow (transfer, repayment, instalments, bill, top-up, deposit, fund purchase, limit change)
builds a *draft* in ``ui.draft``; the confirmation screen's 确认 button creates the order with status
``待验证`` (this is the commit boundary: on a real phone the interlock never lets that tap through),
and 确定 on the password/SMS screen settles it: money moves and history is written.
"""

from __future__ import annotations

from datetime import date, datetime
from typing import Any

from clones.bank import queries as q
from clones.base import State, clock_of, require

PENDING = "待验证"
DONE = "成功"
SCHEDULED = "已预约"
CANCELLED = "已取消"
LIVE = (PENDING, DONE, SCHEDULED)

ORDER_LISTS = {
    "transfer": "transfers",
    "repay": "repayments",
    "installment": "installments",
    "bill": "bill_payments",
    "topup": "topups",
    "deposit": "deposit_orders",
    "fund": "fund_orders",
    "limit": "limit_changes",
}
MONEY_KINDS = ("transfer", "repay", "bill", "topup", "deposit", "fund")


def next_id(state: State, prefix: str) -> str:
    state["user"]["seq"] += 1
    return f"{prefix}{state['user']['seq']:04d}"


def now_iso(state: State) -> str:
    return clock_of(state).isoformat(timespec="seconds")


def orders(user: dict[str, Any], kind: str) -> list[dict[str, Any]]:
    return user[ORDER_LISTS[kind]]


def create(state: State, draft: dict[str, Any]) -> dict[str, Any]:
    """The commit boundary: record the order the draft describes, awaiting verification."""
    kind = draft["kind"]
    record = {k: v for k, v in draft.items() if k != "kind"}
    record.update(id=next_id(state, kind[:2].upper()), status=PENDING, created=now_iso(state))
    if kind == "transfer":
        s = state["user"]["settings"]
        record["single_limit_at"] = s["single_limit_fen"]
        record["daily_limit_at"] = s["daily_limit_fen"]
        if draft.get("save_payee"):
            _save_payee(state, draft)
    orders(state["user"], kind).append(record)
    return record


def _save_payee(state: State, draft: dict[str, Any]) -> None:
    payees = state["user"]["payees"]
    if any(p["account_no"] == draft["account_no"] for p in payees):
        return
    payees.append(
        {
            "id": next_id(state, "p"),
            "name": draft["payee"],
            "bank": draft["bank"],
            "account_no": draft["account_no"],
            "alias": "",
        }
    )


def find(state: State, kind: str, order_id: str) -> dict[str, Any]:
    return next(o for o in orders(state["user"], kind) if o["id"] == order_id)


def _debit(
    state: State, acc_id: str, amount_fen: int, cat: str, party: str, summary: str, **extra: Any
) -> None:
    acc = q.account(state, acc_id)
    require(amount_fen <= acc["balance_fen"], "账户可用余额不足")
    acc["balance_fen"] -= amount_fen
    state["user"]["txns"].append(
        {
            "id": next_id(state, "t"),
            "acc": acc_id,
            "ts": now_iso(state),
            "amount_fen": -amount_fen,
            "cat": cat,
            "party": party,
            "party_acct": extra.get("party_acct", ""),
            "party_bank": extra.get("party_bank", ""),
            "summary": summary,
            "note": extra.get("note", ""),
            "balance_fen": acc["balance_fen"],
        }
    )


def settle(state: State, kind: str, order: dict[str, Any]) -> None:
    """After the password/SMS step: move the money, write history, apply the change."""
    require(order["status"] == PENDING, "该交易已处理")
    u = state["user"]
    if kind == "transfer":
        if order["when"] != "now":
            order["status"] = SCHEDULED
            return
        _debit(
            state,
            order["from_acc"],
            order["amount_fen"],
            "转账",
            order["payee"],
            "转账",
            party_acct=order["account_no"],
            party_bank=q.bank_label(order["bank"]),
            note=order.get("note", ""),
        )
        if order["fee_fen"]:
            _debit(state, order["from_acc"], order["fee_fen"], "其他", "手续费", "跨行汇款手续费")
    elif kind == "repay":
        require(order["amount_fen"] <= q.credit_owed_fen(state), "还款金额超过本期应还金额")
        _debit(
            state,
            order["from_acc"],
            order["amount_fen"],
            "还款",
            "信用卡还款",
            "信用卡还款",
            party_acct=u["credit"]["card_no"],
            party_bank="本行",
        )
        u["credit"]["repaid_fen"] += order["amount_fen"]
    elif kind == "bill":
        _debit(
            state,
            order["from_acc"],
            order["amount_fen"],
            "缴费",
            order["company"],
            order["label"],
            party_acct=order["account_no"],
        )
    elif kind == "topup":
        _debit(
            state,
            order["from_acc"],
            order["amount_fen"],
            "通讯",
            "手机充值",
            "话费充值",
            party_acct=order["phone"],
        )
    elif kind == "deposit":
        _debit(state, order["from_acc"], order["amount_fen"], "理财", "定期存款", "活期转定期")
        p = q.deposit_product(state, order["product"])
        start = clock_of(state).date()
        months = p["term_months"]
        y, m = divmod(start.month - 1 + months, 12)
        maturity = date(start.year + y, m + 1, min(start.day, 28)) if months else start
        q.account(state, order["from_acc"])["subaccounts"].append(
            {
                "id": next_id(state, "s"),
                "kind": "定期" if months else "通知存款",
                "product": p["id"],
                "name": p["name"],
                "principal_fen": order["amount_fen"],
                "rate": p["rate"],
                "start": start.isoformat(),
                "maturity": maturity.isoformat(),
                "rollover": order.get("rollover", True),
            }
        )
    elif kind == "fund":
        _debit(
            state,
            order["from_acc"],
            order["amount_fen"],
            "理财",
            q.fund(state, order["fund"])["name"],
            "基金申购",
        )
        held = next((h for h in u["holdings"] if h["fund"] == order["fund"]), None)
        if held is None:
            u["holdings"].append({"fund": order["fund"], "amount_fen": order["amount_fen"]})
        else:
            held["amount_fen"] += order["amount_fen"]
    elif kind == "limit":
        u["settings"]["single_limit_fen"] = order["single_limit_fen"]
        u["settings"]["daily_limit_fen"] = order["daily_limit_fen"]
    order["status"] = DONE
    order["settled"] = now_iso(state)


def new_orders(before: State, after: State, kind: str) -> list[dict[str, Any]]:
    """Orders of `kind` in `after` that were not in `before` (and were not cancelled)."""
    old = {o["id"] for o in orders(before["user"], kind)}
    return [o for o in orders(after["user"], kind) if o["id"] not in old and o["status"] in LIVE]


def parse_day(text: str) -> date:
    return datetime.fromisoformat(text).date()


def bill_due_fen(state: State, kind: str, account_no: str) -> int | None:
    acc = next(
        (a for a in state["world"]["billers"][kind]["accounts"] if a["account_no"] == account_no), None
    )
    if acc is None:
        return None
    paid = sum(
        b["amount_fen"]
        for b in state["user"]["bill_payments"]
        if b["bill_kind"] == kind and b["account_no"] == account_no and b["status"] in LIVE
    )
    return max(0, acc["due_fen"] - paid)
