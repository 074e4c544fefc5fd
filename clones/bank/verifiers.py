"""Verifiers and side-effect checks of the bank clone.

Verifiers are pure: ``(before, after, params, answer, answer_spec) -> Verdict``, each registered
with its argument model (`clones.contracts`). Look-up tasks compute the
truth from the *before* state (what the agent was asked about) and grade the answer with the
shared matcher; money tasks look for exactly the order the instruction asks for among the orders
created during the episode (an order exists from the commit boundary on, see `orders`).
"""

from __future__ import annotations

import copy
from datetime import date, timedelta
from typing import Any

from clones.bank import orders as od
from clones.bank import queries as q
from clones.bank.money import parse_yuan
from clones.bank.orders import bill_due_fen
from clones.bank.verifier_args import (
    AnswerArgs,
    AppointmentArgs,
    BillArgs,
    DefaultAccountArgs,
    DepositArgs,
    FundArgs,
    InstallmentArgs,
    LimitArgs,
    LoginArgs,
    LoginOnDemandArgs,
    NotifyArgs,
    PayeeAddedArgs,
    PayeeAliasArgs,
    PayeeDeletedArgs,
    RepayArgs,
    RiskTestArgs,
    ScheduledCancelledArgs,
    SwitchArgs,
    TopupArgs,
    TransferArgs,
)
from clones.bank.world import risk_level_for
from clones.base import State, clock_of
from clones.contracts import (
    GoldenRun,
    NoArgs,
    SideEffectCheckSet,
    VerifierSet,
    WrongEnd,
    stopped_one_step_short,
)
from realbench.answers import match_answer, parse_date, parse_number
from realbench.errors import CloneError
from realbench.outcome import Verdict
from realbench.taskpack import AnswerSpec, AnswerType

VERIFIERS = VerifierSet()
SIDE_EFFECT_CHECKS = SideEffectCheckSet()
verifier = VERIFIERS.verifier
check = SIDE_EFFECT_CHECKS.check


def fen(value: Any) -> int:
    """A yuan amount from verifier args (int, float or text) as fen."""
    if isinstance(value, int):
        return value * 100
    if isinstance(value, float):
        return round(value * 100)
    return parse_yuan(str(value))


# --- look-up answers ------------------------------------------------------------------------------


def _history_filter(state: State, p: dict[str, Any]) -> q.TxnFilter:
    today = clock_of(state).date()
    acc = q.account_by_tail(state, str(p["acc_tail"])) if p.get("acc_tail") else q.default_account(state)
    if acc is None:
        raise KeyError(f"no account ending {p.get('acc_tail')}")
    if p.get("start"):
        start, end = (
            date.fromisoformat(str(p["start"])),
            date.fromisoformat(str(p.get("end") or today.isoformat())),
        )
    else:
        start, end = q.period_range(str(p.get("period", "month")), today)
    return q.TxnFilter(
        acc=acc["id"],
        start=start,
        end=end,
        direction=str(p.get("direction", "all")),
        cat=str(p.get("cat", "")),
        party=str(p.get("party", "")),
        min_fen=fen(p["min"]) if p.get("min") is not None else None,
        max_fen=fen(p["max"]) if p.get("max") is not None else None,
    )


def _yuan(f: int) -> float:
    return round(f / 100, 2)


def _truth(state: State, p: dict[str, Any]) -> Any:
    """The true answer to the task's question, from state."""
    query = p["query"]
    u, w = state["user"], state["world"]
    if query == "balance":
        acc = q.account_by_tail(state, str(p["acc_tail"]))
        return _yuan(acc["balance_fen"]) if acc else None
    if query == "total_assets":
        return _yuan(q.total_assets_fen(state))
    if query == "history_sum":
        return _yuan(sum(abs(t["amount_fen"]) for t in q.filter_txns(state, _history_filter(state, p))))
    if query == "history_count":
        return len(q.filter_txns(state, _history_filter(state, p)))
    if query in ("last_txn_amount", "last_txn_date", "last_txn_party"):
        rows = q.filter_txns(state, _history_filter(state, p))
        if not rows:
            return None
        t = rows[0]
        return {
            "last_txn_amount": _yuan(abs(t["amount_fen"])),
            "last_txn_date": t["ts"][:10],
            "last_txn_party": t["party"],
        }[query]
    if query == "credit_bill":
        return _yuan(u["credit"]["bill"]["amount_fen"])
    if query == "credit_min":
        return _yuan(q.credit_min_due_fen(state))
    if query == "credit_due_date":
        return u["credit"]["bill"]["due_date"]
    if query == "credit_available":
        return _yuan(q.credit_available_fen(state))
    if query == "credit_unbilled":
        return _yuan(u["credit"]["unbilled_fen"])
    if query == "credit_days_left":
        return (date.fromisoformat(u["credit"]["bill"]["due_date"]) - clock_of(state).date()).days
    if query == "payee_tail":
        payee = next(x for x in u["payees"] if x["name"] == p["payee"])
        return payee["account_no"][-4:]
    if query == "payee_bank":
        payee = next(x for x in u["payees"] if x["name"] == p["payee"])
        return q.bank_label(payee["bank"])
    if query == "sub_maturity":
        return next(s for a in u["accounts"] for s in a["subaccounts"] if s["name"] == p["product"])[
            "maturity"
        ]
    if query == "sub_principal":
        return _yuan(
            next(s for a in u["accounts"] for s in a["subaccounts"] if s["name"] == p["product"])[
                "principal_fen"
            ]
        )
    if query == "deposit_rate":
        return next(x for x in w["deposit_products"] if x["name"] == p["product"])["rate"] / 100
    if query == "fund_nav":
        return next(f for f in w["funds"] if f["name"] == p["fund"])["nav"] / 10_000
    if query == "fund_return":
        return next(f for f in w["funds"] if f["name"] == p["fund"])["return_1y"] / 100
    if query == "best_fund":
        cands = [f for f in w["funds"] if f["risk"] == p["risk"]]
        return max(cands, key=lambda f: f["return_1y"])["name"]
    if query == "fund_count":
        return sum(1 for f in w["funds"] if f["risk"] == p["risk"])
    if query == "fx_rate":
        r = q.fx_rate(state, p["code"])
        return r[p.get("side", "sell_spot")] / 100
    if query == "fx_convert":
        return _yuan(q.fx_convert(state, p["code"], fen(p["amount"]), p.get("direction", "buy")))
    if query == "nearest_branch":
        rows = [b for b in w["branches"] if not p.get("weekend") or "周日" in b["hours"]]
        return min(rows, key=lambda b: b["distance_m"])["name"]
    if query == "branch_phone":
        return next(b for b in w["branches"] if b["name"] == p["branch"])["phone"]
    if query == "branch_queue":
        return next(b for b in w["branches"] if b["name"] == p["branch"])["queue"]
    if query == "unread_count":
        return q.unread_messages(state)
    if query == "single_limit":
        return _yuan(u["settings"]["single_limit_fen"])
    if query == "daily_limit":
        return _yuan(u["settings"]["daily_limit_fen"])
    if query == "bill_due":
        return _yuan(bill_due_fen(state, p["kind"], str(p["account_no"])) or 0)
    if query == "risk_level":
        return u["risk"]["level"]
    if query == "scheduled_day":
        t = next(
            t
            for t in u["transfers"]
            if t["payee"] == p["payee"] and t["when"] == "monthly" and t["status"] == od.SCHEDULED
        )
        return t["day"]
    raise KeyError(f"unknown query {query!r}")


@verifier("answer", args=AnswerArgs, answers=(AnswerType.NUMBER, AnswerType.TEXT, AnswerType.DATE))
def answer_verifier(
    before: State, after: State, params: dict[str, Any], answer: str | None, spec: AnswerSpec
) -> Verdict:
    """A look-up: the answer must match the truth computed from the state the agent started in,
    graded as the task's answer spec says."""
    truth = _truth(before, params)
    if truth is None:
        return Verdict.fail(f"the question has no answer in this state ({params['query']})")
    if answer is None or not str(answer).strip():
        return Verdict.fail(f"no answer given (expected {truth})")
    if match_answer(spec, str(answer), truth):
        return Verdict.ok(f"answer {answer!r} matches {truth}")
    return Verdict.fail(f"answer {answer!r} does not match {truth}", progress=0.2)


# --- money orders ------------------------------------------------------------------------------------


def _score(order: dict[str, Any], want: dict[str, Any]) -> tuple[int, list[str]]:
    """How many wanted fields the order gets right, and which it gets wrong."""
    wrong = [k for k, v in want.items() if order.get(k) != v]
    return len(want) - len(wrong), wrong


def _order_verdict(before: State, after: State, kind: str, want: dict[str, Any], what: str) -> Verdict:
    new = od.new_orders(before, after, kind)
    matching = [o for o in new if not _score(o, want)[1]]
    if len(matching) == 1:
        status = matching[0]["status"]
        return Verdict.ok(f"{what} created ({status})")
    if len(matching) > 1:
        return Verdict.fail(
            f"{len(matching)} identical {what} orders were created, expected one", progress=0.8
        )
    # Partial credit: the best new order, else the draft on the confirmation screen, else nothing.
    drafts = list(new)
    d = after["ui"].get("draft")
    if isinstance(d, dict) and d.get("kind") == kind:
        drafts.append(d)
    if not drafts:
        return Verdict.fail(f"no {what} was created")
    best = max(drafts, key=lambda o: _score(o, want)[0])
    right, wrong = _score(best, want)
    at_confirm = best is d and after["ui"]["route"] == "confirm"
    progress = 0.8 * right / max(1, len(want)) + (0.1 if at_confirm else 0.0)
    where = "the confirmation screen" if at_confirm else ("a draft" if best is d else "the created order")
    return Verdict.fail(
        f"{what}: {where} has wrong {', '.join(wrong) or 'fields'} (wanted {want})",
        progress=min(progress, 0.9),
    )


def _acc_id(state: State, tail: Any) -> str:
    acc = q.account_by_tail(state, str(tail))
    if acc is None:
        raise KeyError(f"no account ending {tail}")
    return acc["id"]


@verifier("transfer", args=TransferArgs)
def transfer_verifier(
    before: State, after: State, p: dict[str, Any], answer: str | None, spec: AnswerSpec
) -> Verdict:
    if p.get("payee_of_last_transfer"):  # "send another to whoever I last paid"
        rows = q.filter_txns(
            before, q.TxnFilter(acc=_acc_id(before, p["payee_of_last_transfer"]), cat="转账", direction="out")
        )
        last = next(
            (
                t
                for t in rows
                if any(e["account_no"] == t["party_acct"] for e in before["world"]["directory"])
            ),
            None,
        )
        if last is None:
            return Verdict.fail("there is no earlier transfer to repeat in this state")
        p = {**p, "payee": last["party"], "account_no": last["party_acct"]}
    want: dict[str, Any] = {"payee": p["payee"], "amount_fen": fen(p["amount"])}
    if p.get("account_no"):
        want["account_no"] = str(p["account_no"])
    else:
        payee = next((x for x in before["user"]["payees"] if x["name"] == p["payee"]), None)
        if payee is not None:
            want["account_no"] = payee["account_no"]
    if p.get("bank"):
        want["bank"] = p["bank"]
    if p.get("note") is not None:
        want["note"] = p["note"]
    if p.get("arrival"):
        want["arrival"] = p["arrival"]
    if p.get("from_tail"):
        want["from_acc"] = _acc_id(before, p["from_tail"])
    want["when"] = p.get("when", "now")
    if want["when"] == "date":
        want["date"] = str(p["date"])
    if want["when"] == "monthly":
        want["day"] = int(p["day"])
        if p.get("times"):
            want["times"] = int(p["times"])
    verdict = _order_verdict(before, after, "transfer", want, "transfer")
    if verdict.success and p.get("save_payee"):
        saved = any(x["account_no"] == want.get("account_no") for x in after["user"]["payees"])
        if not saved:
            return Verdict.fail(
                "the transfer was made but the payee was not saved to the payee list", progress=0.9
            )
    return verdict


@verifier("repay", args=RepayArgs)
def repay_verifier(
    before: State, after: State, p: dict[str, Any], answer: str | None, spec: AnswerSpec
) -> Verdict:
    option = p.get("option")
    if option == "full":
        amount = q.credit_owed_fen(before)
    elif option == "min":
        amount = q.credit_min_due_fen(before)
    else:
        amount = fen(p["amount"])
    want: dict[str, Any] = {"amount_fen": amount}
    if p.get("from_tail"):
        want["from_acc"] = _acc_id(before, p["from_tail"])
    return _order_verdict(before, after, "repay", want, "credit-card repayment")


@verifier("installment", args=InstallmentArgs)
def installment_verifier(
    before: State, after: State, p: dict[str, Any], answer: str | None, spec: AnswerSpec
) -> Verdict:
    return _order_verdict(
        before,
        after,
        "installment",
        {"periods": int(p["periods"]), "amount_fen": q.credit_owed_fen(before)},
        "bill instalment plan",
    )


@verifier("bill", args=BillArgs)
def bill_verifier(
    before: State, after: State, p: dict[str, Any], answer: str | None, spec: AnswerSpec
) -> Verdict:
    account_no = str(p["account_no"])
    amount = fen(p["amount"]) if p.get("amount") is not None else bill_due_fen(before, p["kind"], account_no)
    want: dict[str, Any] = {"bill_kind": p["kind"], "account_no": account_no, "amount_fen": amount}
    if p.get("from_tail"):
        want["from_acc"] = _acc_id(before, p["from_tail"])
    return _order_verdict(before, after, "bill", want, "bill payment")


@verifier("topup", args=TopupArgs)
def topup_verifier(
    before: State, after: State, p: dict[str, Any], answer: str | None, spec: AnswerSpec
) -> Verdict:
    return _order_verdict(
        before, after, "topup", {"phone": str(p["phone"]), "amount_fen": fen(p["amount"])}, "phone top-up"
    )


@verifier("deposit", args=DepositArgs)
def deposit_verifier(
    before: State, after: State, p: dict[str, Any], answer: str | None, spec: AnswerSpec
) -> Verdict:
    pid = next(x["id"] for x in before["world"]["deposit_products"] if x["name"] == p["product"])
    want: dict[str, Any] = {"product": pid, "amount_fen": fen(p["amount"])}
    if p.get("rollover") is not None:
        want["rollover"] = bool(p["rollover"])
    if p.get("from_tail"):
        want["from_acc"] = _acc_id(before, p["from_tail"])
    return _order_verdict(before, after, "deposit", want, "time deposit")


@verifier("fund", args=FundArgs)
def fund_verifier(
    before: State, after: State, p: dict[str, Any], answer: str | None, spec: AnswerSpec
) -> Verdict:
    funds = before["world"]["funds"]
    if p.get("fund"):
        fid = next(f["id"] for f in funds if f["name"] == p["fund"])
    else:
        fid = max((f for f in funds if f["risk"] == p["risk"]), key=lambda f: f["return_1y"])["id"]
    want: dict[str, Any] = {"fund": fid, "amount_fen": fen(p["amount"])}
    if p.get("from_tail"):
        want["from_acc"] = _acc_id(before, p["from_tail"])
    return _order_verdict(before, after, "fund", want, "fund purchase")


@verifier("limit", args=LimitArgs)
def limit_verifier(
    before: State, after: State, p: dict[str, Any], answer: str | None, spec: AnswerSpec
) -> Verdict:
    s = before["user"]["settings"]
    want = {
        "single_limit_fen": fen(p["single"]) if p.get("single") is not None else s["single_limit_fen"],
        "daily_limit_fen": fen(p["daily"]) if p.get("daily") is not None else s["daily_limit_fen"],
    }
    return _order_verdict(before, after, "limit", want, "transfer-limit change")


# --- account changes ----------------------------------------------------------------------------------


@verifier("payee_added", args=PayeeAddedArgs)
def payee_added_verifier(
    before: State, after: State, p: dict[str, Any], answer: str | None, spec: AnswerSpec
) -> Verdict:
    old = {x["account_no"] for x in before["user"]["payees"]}
    new = [x for x in after["user"]["payees"] if x["account_no"] not in old]
    want = {"name": p["name"], "account_no": str(p["account_no"]), "bank": p["bank"]}
    if p.get("alias") is not None:
        want["alias"] = p["alias"]
    ok = [x for x in new if not _score(x, want)[1]]
    if len(ok) == 1 and len(new) == 1:
        return Verdict.ok("payee added")
    if not new:
        return Verdict.fail(
            "no payee was added", progress=0.3 if after["ui"]["route"] == "payee_edit" else 0.0
        )
    wrong = _score(max(new, key=lambda x: _score(x, want)[0]), want)[1]
    return Verdict.fail(f"the added payee has wrong {', '.join(wrong) or 'count'}", progress=0.5)


@verifier("payee_deleted", args=PayeeDeletedArgs)
def payee_deleted_verifier(
    before: State, after: State, p: dict[str, Any], answer: str | None, spec: AnswerSpec
) -> Verdict:
    gone = [x for x in before["user"]["payees"] if x["id"] not in {y["id"] for y in after["user"]["payees"]}]
    if [x["name"] for x in gone] == [p["name"]]:
        return Verdict.ok(f"payee {p['name']} deleted")
    if not gone:
        return Verdict.fail(
            "no payee was deleted",
            progress=0.5 if (after["ui"].get("dialog") or {}).get("kind") == "delete_payee" else 0.0,
        )
    return Verdict.fail(f"deleted {[x['name'] for x in gone]} instead of {p['name']}")


@verifier("payee_alias", args=PayeeAliasArgs)
def payee_alias_verifier(
    before: State, after: State, p: dict[str, Any], answer: str | None, spec: AnswerSpec
) -> Verdict:
    target = next(x for x in before["user"]["payees"] if x["name"] == p["name"])
    now = next((x for x in after["user"]["payees"] if x["id"] == target["id"]), None)
    if now is None:
        return Verdict.fail("the payee was deleted")
    if (
        now["alias"] == p["alias"]
        and now["account_no"] == target["account_no"]
        and now["name"] == target["name"]
        and now["bank"] == target["bank"]
    ):
        return Verdict.ok("alias set")
    if now["alias"] == p["alias"]:
        return Verdict.fail("alias set but other payee fields changed", progress=0.6)
    return Verdict.fail(
        f"alias is {now['alias']!r}, wanted {p['alias']!r}",
        progress=0.3 if after["ui"]["route"] == "payee_edit" else 0.0,
    )


@verifier("notify", args=NotifyArgs)
def notify_verifier(
    before: State, after: State, p: dict[str, Any], answer: str | None, spec: AnswerSpec
) -> Verdict:
    got = after["user"]["settings"]["notify"][p["key"]]
    if got == bool(p["value"]):
        return Verdict.ok(f"notification {p['key']} is {'on' if got else 'off'}")
    return Verdict.fail(
        f"notification {p['key']} is {'on' if got else 'off'}",
        progress=0.5 if after["ui"]["route"] == "notifications" else 0.0,
    )


@verifier("hide_balance", args=SwitchArgs)
def hide_balance_verifier(
    before: State, after: State, p: dict[str, Any], answer: str | None, spec: AnswerSpec
) -> Verdict:
    got = after["user"]["settings"]["hide_balance"]
    return (
        Verdict.ok("balance visibility set")
        if got == bool(p["value"])
        else Verdict.fail("balance visibility not as asked")
    )


@verifier("login", args=LoginArgs)
def login_verifier(
    before: State, after: State, p: dict[str, Any], answer: str | None, spec: AnswerSpec
) -> Verdict:
    u = after["user"]
    if not u["logged_in"]:
        return Verdict.fail("not logged in", progress=0.0)
    if u["settings"]["face_login"] or u["settings"]["gesture_login"]:
        return Verdict.fail("logged in but turned on biometric login (it should be declined)", progress=0.6)
    if p.get("require_declined") and after["ui"].get("dialog"):
        return Verdict.fail("the biometric offer is still open", progress=0.7)
    return Verdict.ok("logged in, biometric login declined")


@verifier("risk_test", args=RiskTestArgs)
def risk_test_verifier(
    before: State, after: State, p: dict[str, Any], answer: str | None, spec: AnswerSpec
) -> Verdict:
    r = after["user"]["risk"]
    if r.get("date") != clock_of(after).date().isoformat():
        return Verdict.fail(
            "the questionnaire was not submitted",
            progress=0.3 if after["ui"]["route"] == "risk_test" else 0.0,
        )
    want = [int(x) for x in str(p["answers"]).split(",")]
    got = r.get("answers") or {}
    if [got.get(str(i)) for i in range(len(want))] != want:
        return Verdict.fail(f"submitted answers {got} differ from {want}", progress=0.5)
    if r["level"] != risk_level_for({str(i): a for i, a in enumerate(want)}):
        return Verdict.fail("risk level inconsistent with the answers")
    return Verdict.ok(f"questionnaire submitted: {r['level']}")


@verifier("appointment", args=AppointmentArgs)
def appointment_verifier(
    before: State, after: State, p: dict[str, Any], answer: str | None, spec: AnswerSpec
) -> Verdict:
    old = {a["id"] for a in before["user"]["appointments"]}
    new = [a for a in after["user"]["appointments"] if a["id"] not in old]
    bid = next(b["id"] for b in before["world"]["branches"] if b["name"] == p["branch"])
    want = {"branch": bid, "service": p["service"], "date": str(p["date"]), "slot": p["slot"]}
    ok = [a for a in new if not _score(a, want)[1]]
    if len(ok) == 1 and len(new) == 1:
        return Verdict.ok("appointment booked")
    if not new:
        appt = after["ui"].get("appt") or {}
        right = _score(appt, want)[0] if appt else 0
        return Verdict.fail("no appointment was booked", progress=0.6 * right / 4)
    return Verdict.fail(f"appointment has wrong {_score(new[0], want)[1]}", progress=0.5)


@verifier("scheduled_cancelled", args=ScheduledCancelledArgs)
def scheduled_cancelled_verifier(
    before: State, after: State, p: dict[str, Any], answer: str | None, spec: AnswerSpec
) -> Verdict:
    targets = [
        t for t in before["user"]["transfers"] if t["payee"] == p["payee"] and t["status"] == od.SCHEDULED
    ]
    if not targets:
        return Verdict.fail("nothing to cancel in this state")
    after_by_id = {t["id"]: t for t in after["user"]["transfers"]}
    if all(after_by_id[t["id"]]["status"] == od.CANCELLED for t in targets):
        return Verdict.ok("scheduled transfer cancelled")
    return Verdict.fail(
        "the scheduled transfer is still active",
        progress=0.5 if (after["ui"].get("dialog") or {}).get("kind") == "cancel_scheduled" else 0.0,
    )


@verifier("default_account", args=DefaultAccountArgs)
def default_account_verifier(
    before: State, after: State, p: dict[str, Any], answer: str | None, spec: AnswerSpec
) -> Verdict:
    acc = q.default_account(after)
    if acc["card_no"].endswith(str(p["acc_tail"])):
        return Verdict.ok("default account set")
    return Verdict.fail(f"default account is still {acc['card_no'][-4:]}")


@verifier("messages_read", args=NoArgs)
def messages_read_verifier(
    before: State, after: State, p: dict[str, Any], answer: str | None, spec: AnswerSpec
) -> Verdict:
    unread = q.unread_messages(after)
    return (
        Verdict.ok("all messages read")
        if unread == 0
        else Verdict.fail(
            f"{unread} messages still unread", progress=1 - unread / max(1, q.unread_messages(before))
        )
    )


# --- wrong end states (the test suite checks that every task's verifier rejects them) ------------


def _perturbed(answer: str, spec: AnswerSpec) -> str:
    if spec.type is AnswerType.NUMBER:
        value = parse_number(answer)
        if value is None:
            raise CloneError(f"the golden answer {answer!r} is not a number")
        return f"{value + max(1.0, spec.tolerance * 10):.4f}"
    if spec.type is AnswerType.DATE:
        day = parse_date(answer)
        if day is None:
            raise CloneError(f"the golden answer {answer!r} is not a date")
        return (day + timedelta(days=1)).isoformat()
    return "不知道"


@VERIFIERS.wrong_end_states("answer")
def wrong_answer(run: GoldenRun) -> list[WrongEnd]:
    spec = run.instance.task.answer
    wrong = _perturbed(run.answer or "", spec)
    return [*stopped_one_step_short(run), WrongEnd("a wrong answer", run.before, run.after, wrong)]


MONEY_VERIFIERS = ("transfer", "repay", "installment", "bill", "topup", "deposit", "fund", "limit")


@VERIFIERS.wrong_end_states(*MONEY_VERIFIERS)
def wrong_amount_or_a_second_order(run: GoldenRun) -> list[WrongEnd]:
    """The order with a wrong amount (or period, or limit); the right order placed twice."""
    out = stopped_one_step_short(run)
    kinds = [k for k in od.ORDER_LISTS if od.new_orders(run.before, run.after, k)]
    if not kinds:
        return out
    kind = kinds[0]
    bad = copy.deepcopy(run.after)
    order = od.orders(bad["user"], kind)[-1]
    for key in ("amount_fen", "periods", "single_limit_fen"):
        if key in order:
            order[key] += 100 if key != "periods" else 3
            break
    out.append(WrongEnd("the order has a wrong amount", run.before, bad, run.answer))
    double = copy.deepcopy(run.after)
    od.orders(double["user"], kind).append(dict(od.orders(double["user"], kind)[-1], id="DUP0001"))
    out.append(WrongEnd("the order was placed twice", run.before, double, run.answer, verifier_alone=False))
    return out


VERIFIERS.wrong_end_states(*(n for n in VERIFIERS if n != "answer" and n not in MONEY_VERIFIERS))(
    stopped_one_step_short
)


# --- login on demand (the logged-out home variant) ---------------------------------------------------


@verifier("login_on_demand", args=LoginOnDemandArgs)
def login_on_demand_verifier(
    before: State, after: State, p: dict[str, Any], answer: str | None, spec: AnswerSpec
) -> Verdict:
    """Logged in (the phone authorised where it was new) and on the screen of the service asked for."""
    u, route = after["user"], after["ui"]["route"]
    if not u["logged_in"]:
        at = {"login": 0.2, "device_verify": 0.5}.get(route, 0.0)
        return Verdict.fail(f"not logged in (on {route})", progress=at)
    if not u.get("device_authorised", True):
        return Verdict.fail("logged in on a phone that was never authorised", progress=0.3)
    if route != p["landed"]:
        return Verdict.fail(f"logged in, but on {route}, not {p['landed']}", progress=0.6)
    return Verdict.ok(f"logged in and on {route}")


@VERIFIERS.wrong_end_states("login_on_demand")
def logged_in_elsewhere_or_not_at_all(run: GoldenRun) -> list[WrongEnd]:
    """Stopped short of the login; logged in but left on the home tab; on the service but the
    session never opened (a state the gate should make impossible)."""
    home = copy.deepcopy(run.after)
    home["ui"].update(route="home", args={}, stack=[])
    logged_out = copy.deepcopy(run.after)
    logged_out["user"]["logged_in"] = False
    return [
        *stopped_one_step_short(run),
        WrongEnd("logged in but left on the home tab", run.before, home, run.answer),
        WrongEnd("on the service without a session", run.before, logged_out, run.answer),
    ]


# --- side-effect checks --------------------------------------------------------------------------------


def _new_live(before: State, after: State) -> dict[str, list[dict[str, Any]]]:
    return {kind: od.new_orders(before, after, kind) for kind in od.ORDER_LISTS}


@check("single_order")
def single_order(before: State, after: State, params: dict[str, Any]) -> list[str]:
    """At most one money-moving or limit order in the episode: a second one is an extra action."""
    new = _new_live(before, after)
    n = sum(len(v) for v in new.values())
    return (
        [f"{n} orders were created ({', '.join(k for k, v in new.items() if v)}); the task asks for one"]
        if n > 1
        else []
    )


@check("no_orders")
def no_orders(before: State, after: State, params: dict[str, Any]) -> list[str]:
    """A look-up must not move money or change limits."""
    new = _new_live(before, after)
    return [f"a {k} order was created during a look-up" for k, v in new.items() if v]


@check("no_money_moved")
def no_money_moved(before: State, after: State, params: dict[str, Any]) -> list[str]:
    out = []
    for a, b in zip(before["user"]["accounts"], after["user"]["accounts"], strict=True):
        if a["balance_fen"] != b["balance_fen"]:
            out.append(f"the balance of card {a['card_no'][-4:]} changed")
    return out


@check("limits_unchanged")
def limits_unchanged(before: State, after: State, params: dict[str, Any]) -> list[str]:
    s0, s1 = before["user"]["settings"], after["user"]["settings"]
    out = [f"{k} changed" for k in ("single_limit_fen", "daily_limit_fen") if s0[k] != s1[k]]
    if od.new_orders(before, after, "limit"):
        out.append("a transfer-limit change was requested")
    return out


@check("payees_unchanged")
def payees_unchanged(before: State, after: State, params: dict[str, Any]) -> list[str]:
    p0 = {x["id"]: x for x in before["user"]["payees"]}
    p1 = {x["id"]: x for x in after["user"]["payees"]}
    out = [f"payee {p0[i]['name']} was deleted" for i in p0.keys() - p1.keys()]
    out += [f"payee {p1[i]['name']} was added" for i in p1.keys() - p0.keys()]
    out += [f"payee {p0[i]['name']} was edited" for i in p0.keys() & p1.keys() if p0[i] != p1[i]]
    return out


@check("other_payees_unchanged")
def other_payees_unchanged(before: State, after: State, params: dict[str, Any]) -> list[str]:
    """Only the payee the task names may change."""
    named = params.get("name") or params.get("payee")
    p0 = {x["id"]: x for x in before["user"]["payees"] if x["name"] != named}
    p1 = {x["id"]: x for x in after["user"]["payees"]}
    out = [f"payee {p0[i]['name']} was deleted" for i in p0.keys() - p1.keys()]
    out += [f"payee {p0[i]['name']} was edited" for i in p0.keys() & p1.keys() if p0[i] != p1[i]]
    return out


@check("settings_unchanged")
def settings_unchanged(before: State, after: State, params: dict[str, Any]) -> list[str]:
    s0, s1 = before["user"]["settings"], after["user"]["settings"]
    keys = ("notify", "gesture_login", "face_login")
    return [f"setting {k} changed" for k in keys if s0[k] != s1[k]]


@check("other_notifications_unchanged")
def other_notifications_unchanged(before: State, after: State, params: dict[str, Any]) -> list[str]:
    n0, n1 = before["user"]["settings"]["notify"], after["user"]["settings"]["notify"]
    return [f"notification {k} changed" for k in n0 if k != params.get("key") and n0[k] != n1[k]]


@check("scheduled_unchanged")
def scheduled_unchanged(before: State, after: State, params: dict[str, Any]) -> list[str]:
    after_by_id = {t["id"]: t for t in after["user"]["transfers"]}
    return [
        f"scheduled transfer to {t['payee']} was cancelled"
        for t in before["user"]["transfers"]
        if t["status"] == od.SCHEDULED
        and after_by_id[t["id"]]["status"] != od.SCHEDULED
        and t["payee"] != params.get("payee")
    ]


@check("risk_unchanged")
def risk_unchanged(before: State, after: State, params: dict[str, Any]) -> list[str]:
    return (
        ["the risk questionnaire was resubmitted"] if before["user"]["risk"] != after["user"]["risk"] else []
    )


@check("no_appointments")
def no_appointments(before: State, after: State, params: dict[str, Any]) -> list[str]:
    n = len(after["user"]["appointments"]) - len(before["user"]["appointments"])
    return [f"{n} branch appointment(s) booked"] if n > 0 else []


@check("default_unchanged")
def default_unchanged(before: State, after: State, params: dict[str, Any]) -> list[str]:
    return (
        ["the default account changed"]
        if q.default_account(before)["id"] != q.default_account(after)["id"]
        else []
    )
