"""Bank UI events of deposits, funds and the risk questionnaire."""

from __future__ import annotations

from clones.bank import queries as q
from clones.bank.handler_kit import arg, clear_form, dialog, form, on
from clones.bank.money import parse_yuan, yuan
from clones.bank.transfer_handlers import amount_checks
from clones.bank.world import CUSTOMER_LEVELS, risk_level_for
from clones.base import State, UIEvent, clock_of, navigate, replace_route, require


@on("open_deposit")
def _open_deposit(state: State, event: UIEvent) -> None:
    navigate(state, "deposit_product", id=q.deposit_product(state, arg(event))["id"])


@on("deposit_start")
def _deposit_start(state: State, event: UIEvent) -> None:
    pid = arg(event)
    q.deposit_product(state, pid)
    clear_form(state, "deposit_amount")
    state["ui"]["pay"] = {"from_acc": q.default_account(state)["id"], "rollover": True, "product": pid}
    navigate(state, "deposit_open", id=pid)


@on("toggle_rollover")
def _toggle_rollover(state: State, event: UIEvent) -> None:
    pay = state["ui"].setdefault("pay", {})
    pay["rollover"] = not pay.get("rollover", True)


@on("deposit_next")
def _deposit_next(state: State, event: UIEvent) -> None:
    pay = state["ui"].get("pay") or {}
    p = q.deposit_product(state, pay.get("product") or state["ui"]["args"].get("id"))
    amount = parse_yuan(form(state, "deposit_amount"), field="存入金额")
    require(amount >= p["min_fen"], f"起存金额为{yuan(p['min_fen'])}元")
    acc = pay.get("from_acc", q.default_account(state)["id"])
    amount_checks(state, acc, amount)
    state["ui"]["draft"] = {
        "kind": "deposit",
        "product": p["id"],
        "amount_fen": amount,
        "from_acc": acc,
        "rollover": bool(pay.get("rollover", True)),
    }
    navigate(state, "confirm")


@on("fund_risk")
def _fund_risk(state: State, event: UIEvent) -> None:
    r = event.arg or ""
    require(r in ("", "R1", "R2", "R3", "R4", "R5"), "未知的风险等级")
    state["ui"]["fund_risk"] = r


@on("fund_type")
def _fund_type(state: State, event: UIEvent) -> None:
    state["ui"]["fund_type"] = event.arg or ""


@on("fund_sort")
def _fund_sort(state: State, event: UIEvent) -> None:
    s = arg(event)
    require(s in ("default", "return", "nav"), "未知的排序方式")
    state["ui"]["fund_sort"] = s


@on("open_funds")
def _open_funds(state: State, event: UIEvent) -> None:
    state["ui"]["fund_risk"] = ""
    state["ui"]["fund_type"] = ""
    state["ui"]["fund_sort"] = "default"
    navigate(state, "fund_list")


@on("open_fund")
def _open_fund(state: State, event: UIEvent) -> None:
    navigate(state, "fund_detail", id=q.fund(state, arg(event))["id"])


def _risk_ok(state: State, fund_risk: str) -> bool:
    level = (state["user"].get("risk") or {}).get("level")
    return level is not None and fund_risk <= CUSTOMER_LEVELS[level]


@on("fund_buy_start")
def _fund_buy_start(state: State, event: UIEvent) -> None:
    f = q.fund(state, arg(event))
    if not state["user"]["risk"].get("level"):
        dialog(state, "need_risk_test")
        return
    if not _risk_ok(state, f["risk"]):
        dialog(state, "risk_mismatch", fund=f["id"])
        return
    clear_form(state, "fund_amount")
    state["ui"]["pay"] = {"from_acc": q.default_account(state)["id"], "fund": f["id"]}
    navigate(state, "fund_buy", id=f["id"])


@on("fund_buy_next")
def _fund_buy_next(state: State, event: UIEvent) -> None:
    pay = state["ui"].get("pay") or {}
    f = q.fund(state, pay.get("fund") or state["ui"]["args"].get("id"))
    require(_risk_ok(state, f["risk"]), "您的风险承受能力与该产品不匹配")
    amount = parse_yuan(form(state, "fund_amount"), field="购买金额")
    require(amount >= f["min_fen"], f"起购金额为{yuan(f['min_fen'])}元")
    acc = pay.get("from_acc", q.default_account(state)["id"])
    amount_checks(state, acc, amount)
    state["ui"]["draft"] = {
        "kind": "fund",
        "fund": f["id"],
        "amount_fen": amount,
        "from_acc": acc,
        "fee_fen": amount * f["fee_rate"] // 10_000,
    }
    navigate(state, "confirm")


@on("open_risk_test")
def _open_risk_test(state: State, event: UIEvent) -> None:
    state["ui"]["risk_answers"] = {}
    state["ui"]["dialog"] = None
    navigate(state, "risk_test")


@on("risk_answer")
def _risk_answer(state: State, event: UIEvent) -> None:
    qi, oi = (int(x) for x in arg(event).split(":", 1))
    questions = state["world"]["risk_questions"]
    require(0 <= qi < len(questions) and 0 <= oi < len(questions[qi]["options"]), "无效的选项")
    state["ui"].setdefault("risk_answers", {})[str(qi)] = oi


@on("risk_submit")
def _risk_submit(state: State, event: UIEvent) -> None:
    answers = state["ui"].get("risk_answers") or {}
    require(len(answers) == len(state["world"]["risk_questions"]), "请回答全部题目")
    level = risk_level_for(answers)
    state["user"]["risk"] = {
        "level": level,
        "date": clock_of(state).date().isoformat(),
        "answers": dict(answers),
    }
    replace_route(state, "risk_result")
