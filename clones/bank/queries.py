"""Pure read-only questions about a bank state, shared by screens, handlers and invariants."""

from __future__ import annotations

from dataclasses import dataclass
from datetime import date, datetime, timedelta
from typing import Any

from clones.bank.world import BANKS
from clones.base import State, clock_of

PERIODS = {
    "week": "近一周",
    "month": "近一月",
    "3months": "近三月",
    "this_month": "本月",
    "last_month": "上月",
}
DIRECTIONS = {"all": "全部", "in": "收入", "out": "支出"}
ARRIVALS = {"realtime": "实时到账", "2h": "2小时内到账", "nextday": "次日到账"}
# The transfer way sheet (tv_transfer_way); only 实时转账 is named by public scripts
TRANSFER_WAYS = {"realtime": "实时转账", "2h": "普通转账", "nextday": "次日转账"}
PAGE_SIZE = 10


def account(state: State, acc_id: str) -> dict[str, Any]:
    return next(a for a in state["user"]["accounts"] if a["id"] == acc_id)


def account_by_tail(state: State, tail: str) -> dict[str, Any] | None:
    return next((a for a in state["user"]["accounts"] if a["card_no"].endswith(str(tail))), None)


def default_account(state: State) -> dict[str, Any]:
    return next((a for a in state["user"]["accounts"] if a.get("default")), state["user"]["accounts"][0])


def bank_label(code: str) -> str:
    return next((b["name"] for b in BANKS if b["code"] == code), code)


def period_range(period: str, today: date) -> tuple[date, date]:
    """Inclusive date range of a preset period, as the real app's 明细查询 chips compute it."""
    if period == "week":
        return today - timedelta(days=6), today
    if period == "month":
        return today - timedelta(days=29), today
    if period == "3months":
        return today - timedelta(days=89), today
    if period == "this_month":
        return today.replace(day=1), today
    if period == "last_month":
        last = today.replace(day=1) - timedelta(days=1)
        return last.replace(day=1), last
    raise KeyError(period)


@dataclass(frozen=True)
class TxnFilter:
    acc: str = "a1"
    start: date | None = None
    end: date | None = None
    direction: str = "all"
    cat: str = ""
    party: str = ""
    min_fen: int | None = None
    max_fen: int | None = None


def filter_from_ui(state: State) -> TxnFilter:
    """The history screen's current filter (kept in ui.args of the history route)."""
    f = state["ui"].get("hist") or {}
    today = clock_of(state).date()
    if f.get("period") == "custom":
        start, end = date.fromisoformat(f["start"]), date.fromisoformat(f["end"])
    else:
        start, end = period_range(f.get("period") or "month", today)
    return TxnFilter(
        acc=f.get("acc", default_account(state)["id"]),
        start=start,
        end=end,
        direction=f.get("direction", "all"),
        cat=f.get("cat", ""),
        party=f.get("party", ""),
        min_fen=f.get("min_fen"),
        max_fen=f.get("max_fen"),
    )


def filter_txns(state: State, flt: TxnFilter) -> list[dict[str, Any]]:
    """Matching transactions, newest first."""
    out = []
    for t in state["user"]["txns"]:
        if t["acc"] != flt.acc:
            continue
        day = datetime.fromisoformat(t["ts"]).date()
        if flt.start and day < flt.start or flt.end and day > flt.end:
            continue
        if flt.direction == "in" and t["amount_fen"] <= 0 or flt.direction == "out" and t["amount_fen"] >= 0:
            continue
        if flt.cat and t["cat"] != flt.cat:
            continue
        if flt.party and flt.party not in t["party"]:
            continue
        amt = abs(t["amount_fen"])
        if flt.min_fen is not None and amt < flt.min_fen or flt.max_fen is not None and amt > flt.max_fen:
            continue
        out.append(t)
    return sorted(out, key=lambda t: t["ts"], reverse=True)


def out_today_fen(state: State) -> int:
    """Money already sent today (transfers awaiting verification count: the bank reserves them)."""
    today = clock_of(state).date().isoformat()
    return sum(
        t["amount_fen"]
        for t in state["user"]["transfers"]
        if t["status"] in ("待验证", "成功") and t["created"][:10] == today and t["when"] == "now"
    )


def transfer_fee_fen(amount_fen: int, bank: str, arrival: str) -> int:
    """本行 is free; other banks: real-time above 5,000 yuan costs 0.02% (1-25 yuan); slower is free."""
    if bank == "SELF" or arrival != "realtime" or amount_fen <= 500_000:
        return 0
    return min(2_500, max(100, amount_fen * 2 // 10_000))


def credit_owed_fen(state: State) -> int:
    c = state["user"]["credit"]
    return max(0, c["bill"]["amount_fen"] - c["repaid_fen"] - installed_fen(state))


def installed_fen(state: State) -> int:
    return sum(i["amount_fen"] for i in state["user"]["installments"] if i["status"] in ("待验证", "成功"))


def credit_min_due_fen(state: State) -> int:
    c = state["user"]["credit"]
    return max(0, min(c["bill"]["min_fen"] - c["repaid_fen"], credit_owed_fen(state)))


def credit_available_fen(state: State) -> int:
    c = state["user"]["credit"]
    return c["limit_fen"] - credit_owed_fen(state) - c["unbilled_fen"] - installed_fen(state)


def fund(state: State, fund_id: str) -> dict[str, Any]:
    return next(f for f in state["world"]["funds"] if f["id"] == fund_id)


def deposit_product(state: State, pid: str) -> dict[str, Any]:
    return next(p for p in state["world"]["deposit_products"] if p["id"] == pid)


def branch(state: State, bid: str) -> dict[str, Any]:
    return next(b for b in state["world"]["branches"] if b["id"] == bid)


def fx_rate(state: State, code: str) -> dict[str, Any]:
    return next(r for r in state["world"]["fx"] if r["code"] == code)


def fx_convert(state: State, code: str, amount_fen: int, direction: str) -> int:
    """'buy': foreign units wanted -> CNY fen paid at 现汇卖出价; 'sell': foreign units sold -> CNY fen received at 现汇买入价."""
    r = fx_rate(state, code)
    price = r["sell_spot"] if direction == "buy" else r["buy_spot"]
    return round(amount_fen * price / 10_000)


def unread_messages(state: State) -> int:
    return sum(1 for m in state["user"]["messages"] if not m["read"])


def total_assets_fen(state: State) -> int:
    u = state["user"]
    cash = sum(a["balance_fen"] for a in u["accounts"])
    fixed = sum(s["principal_fen"] for a in u["accounts"] for s in a["subaccounts"])
    funds = sum(h["amount_fen"] for h in u["holdings"])
    return cash + fixed + funds
