"""Bank UI events of the credit card: bills, repayment, instalments."""

from __future__ import annotations

from clones.bank import queries as q
from clones.bank.handler_kit import arg, clear_form, form, on
from clones.bank.money import parse_yuan, yuan
from clones.bank.transfer_handlers import amount_checks
from clones.bank.world import INSTALLMENT_FEE_BP
from clones.base import State, UIEvent, navigate, require


@on("bill_tab")
def _bill_tab(state: State, event: UIEvent) -> None:
    t = arg(event)
    require(t in ("billed", "unbilled"), "未知的账单类型")
    state["ui"]["bill_tab"] = t


@on("open_repay")
def _open_repay(state: State, event: UIEvent) -> None:
    require(q.credit_owed_fen(state) > 0, "本期账单已还清")
    clear_form(state, "repay_amount")
    state["ui"]["pay"] = {"from_acc": q.default_account(state)["id"], "option": "full"}
    navigate(state, "credit_repay")


@on("repay_option")
def _repay_option(state: State, event: UIEvent) -> None:
    o = arg(event)
    require(o in ("full", "min", "custom"), "未知的还款方式")
    state["ui"].setdefault("pay", {})["option"] = o


@on("repay_next")
def _repay_next(state: State, event: UIEvent) -> None:
    pay = state["ui"].get("pay") or {}
    option = pay.get("option", "full")
    owed = q.credit_owed_fen(state)
    if option == "full":
        amount = owed
    elif option == "min":
        amount = q.credit_min_due_fen(state)
    else:
        amount = parse_yuan(form(state, "repay_amount"), field="还款金额")
    require(amount > 0, "还款金额需大于0")
    require(amount <= owed, f"还款金额不能超过本期剩余应还{yuan(owed)}元")
    acc = pay.get("from_acc", q.default_account(state)["id"])
    amount_checks(state, acc, amount)
    state["ui"]["draft"] = {"kind": "repay", "from_acc": acc, "amount_fen": amount, "option": option}
    navigate(state, "confirm")


@on("open_installment")
def _open_installment(state: State, event: UIEvent) -> None:
    require(q.credit_owed_fen(state) >= 50_000, "账单剩余应还金额不足500元，不可分期")
    state["ui"]["inst"] = {"periods": 6}
    navigate(state, "credit_installment")


@on("inst_periods")
def _inst_periods(state: State, event: UIEvent) -> None:
    n = int(arg(event))
    require(n in INSTALLMENT_FEE_BP, "不支持的分期期数")
    state["ui"].setdefault("inst", {})["periods"] = n


@on("installment_next")
def _installment_next(state: State, event: UIEvent) -> None:
    n = (state["ui"].get("inst") or {}).get("periods", 6)
    owed = q.credit_owed_fen(state)
    require(owed >= 50_000, "账单剩余应还金额不足500元，不可分期")
    fee = owed * INSTALLMENT_FEE_BP[n] // 10_000
    state["ui"]["draft"] = {"kind": "installment", "amount_fen": owed, "periods": n, "fee_fen": fee}
    navigate(state, "confirm")
