"""UI event handlers of the bank clone: each mutates the state in place or refuses with CloneError."""

from __future__ import annotations

import re
from collections.abc import Callable
from datetime import date, timedelta
from typing import Any

from clones.bank import orders as od
from clones.bank import queries as q
from clones.bank.money import parse_yuan, yuan
from clones.bank.world import BILL_KIND_NAMES, CUSTOMER_LEVELS
from clones.base import Handler, State, UIEvent, back, clock_of, navigate, replace_route, require

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


def go_home(state: State) -> None:
    state["ui"]["stack"] = []
    replace_route(state, "home")


# --- navigation: plain screen openers -------------------------------------------------------------

SIMPLE_SCREENS = {
    "open_accounts": "accounts",
    "open_transfer_home": "transfer_home",
    "open_records": "transfer_records",
    "open_scheduled": "scheduled_list",
    "open_payees": "payees",
    "open_credit_bill": "credit_bill",
    "open_pay_records": "pay_records",
    "open_deposit_home": "deposit_home",
    "open_holdings": "holdings",
    "open_fx": "fx_rates",
    "open_branches": "branches",
    "open_settings": "settings",
    "open_limits": "limits",
    "open_notifications": "notifications",
    "open_security": "security",
    "open_messages": "messages",
    "open_all": "all_services",
    "open_history_filter": "history_filter",
}


def _opener(route: str) -> Handler:
    def handler(state: State, event: UIEvent) -> None:
        navigate(state, route)

    return handler


for _ev, _route in SIMPLE_SCREENS.items():
    HANDLERS[_ev] = _opener(_route)

TABS = {"home": "home", "wealth": "wealth_home", "credit": "credit_home", "life": "pay_home", "mine": "mine"}


@on("tab")
def _tab(state: State, event: UIEvent) -> None:
    route = TABS.get(arg(event))
    require(route is not None, "未知的页面")
    state["ui"]["stack"] = []
    replace_route(state, route)  # type: ignore[arg-type]


@on("done")
def _done(state: State, event: UIEvent) -> None:
    go_home(state)


@on("dismiss")
def _dismiss(state: State, event: UIEvent) -> None:
    state["ui"]["dialog"] = None


@on("toast")
def _toast(state: State, event: UIEvent) -> None:
    """Entries the clone shows but does not implement (the real app opens a web page)."""
    toast(state, f"{event.arg or '该功能'}暂未开放，敬请期待")


# --- login -------------------------------------------------------------------------------------


@on("login")
def _login(state: State, event: UIEvent) -> None:
    require(len(form(state, "username")) >= 6, "请输入手机号或用户名")
    require(len(form(state, "password")) >= 6, "请输入6-20位登录密码")
    state["user"]["logged_in"] = True
    clear_form(state, "password")
    go_home(state)
    dialog(state, "biometric")


@on("login_alt")
def _login_alt(state: State, event: UIEvent) -> None:
    method = "手势" if arg(event) == "gesture" else "刷脸"
    toast(state, f"您尚未开通{method}登录，请使用密码登录")


@on("decline_biometric")
def _decline_biometric(state: State, event: UIEvent) -> None:
    state["ui"]["dialog"] = None


@on("enable_biometric")
def _enable_biometric(state: State, event: UIEvent) -> None:
    state["user"]["settings"]["face_login"] = True
    state["ui"]["dialog"] = None
    toast(state, "刷脸登录已开通")


@on("logout")
def _logout(state: State, event: UIEvent) -> None:
    state["user"]["logged_in"] = False
    state["ui"]["stack"] = []
    replace_route(state, "login")


# --- home and accounts -------------------------------------------------------------------------


@on("toggle_balance")
def _toggle_balance(state: State, event: UIEvent) -> None:
    s = state["user"]["settings"]
    s["hide_balance"] = not s["hide_balance"]


@on("open_account")
def _open_account(state: State, event: UIEvent) -> None:
    acc = arg(event)
    require(any(a["id"] == acc for a in state["user"]["accounts"]), "账户不存在")
    navigate(state, "account_detail", acc=acc)


@on("open_subaccount")
def _open_subaccount(state: State, event: UIEvent) -> None:
    acc_id, sub_id = arg(event).split(":", 1)
    acc = q.account(state, acc_id)
    require(any(s["id"] == sub_id for s in acc["subaccounts"]), "子账户不存在")
    navigate(state, "subaccount_detail", acc=acc_id, sub=sub_id)


@on("set_default")
def _set_default(state: State, event: UIEvent) -> None:
    acc = arg(event)
    for a in state["user"]["accounts"]:
        a["default"] = a["id"] == acc
    toast(state, "已设为默认账户")


@on("copy_card")
def _copy_card(state: State, event: UIEvent) -> None:
    toast(state, "卡号已复制")


# --- transaction history ------------------------------------------------------------------------


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


# --- transfers ------------------------------------------------------------------------------------

TRANSFER_FIELDS = ("payee_name", "account_no", "amount", "note", "times")


def _start_transfer(state: State, mode: str = "now", **prefill: Any) -> None:
    clear_form(state, *TRANSFER_FIELDS)
    state["ui"]["tf"] = {
        "from_acc": q.default_account(state)["id"],
        "bank": "",
        "arrival": "realtime",
        "mode": mode,
        "date": None,
        "day": None,
        "save_payee": False,
    }
    if "payee" in prefill:
        p = prefill["payee"]
        state["ui"]["form"].update(payee_name=p["name"], account_no=p["account_no"])
        state["ui"]["tf"]["bank"] = p["bank"]
    navigate(state, "transfer_form")


def _tf(state: State) -> dict[str, Any]:
    tf = state["ui"].get("tf")
    require(isinstance(tf, dict), "请重新进入转账页面")
    return tf  # type: ignore[return-value]


@on("new_transfer")
def _new_transfer(state: State, event: UIEvent) -> None:
    _start_transfer(state)


@on("new_scheduled")
def _new_scheduled(state: State, event: UIEvent) -> None:
    _start_transfer(state, mode="date")


def _payee(state: State, pid: str) -> dict[str, Any]:
    p = next((p for p in state["user"]["payees"] if p["id"] == pid), None)
    require(p is not None, "收款人不存在")
    return p  # type: ignore[return-value]


@on("pick_payee")
def _pick_payee(state: State, event: UIEvent) -> None:
    """From a payee list: fill the transfer form being edited, or start a new one."""
    p = _payee(state, arg(event))
    if state["ui"]["route"] == "payees" and state["ui"].get("args", {}).get("pick"):
        back(state)
        state["ui"]["form"].update(payee_name=p["name"], account_no=p["account_no"])
        _tf(state)["bank"] = p["bank"]
        return
    _start_transfer(state, payee=p)


@on("transfer_to_payee")
def _transfer_to_payee(state: State, event: UIEvent) -> None:
    _start_transfer(state, payee=_payee(state, arg(event)))


@on("transfer_from")
def _transfer_from(state: State, event: UIEvent) -> None:
    acc = arg(event)
    _start_transfer(state)
    _tf(state)["from_acc"] = acc


@on("open_payee_picker")
def _open_payee_picker(state: State, event: UIEvent) -> None:
    _tf(state)
    navigate(state, "payees", pick=True)


@on("set_from")
def _set_from(state: State, event: UIEvent) -> None:
    acc = arg(event)
    require(any(a["id"] == acc for a in state["user"]["accounts"]), "账户不存在")
    key = "tf" if state["ui"]["route"] == "transfer_form" else "pay"
    state["ui"].setdefault(key, {})["from_acc"] = acc


@on("set_arrival")
def _set_arrival(state: State, event: UIEvent) -> None:
    a = arg(event)
    require(a in q.ARRIVALS, "未知的到账方式")
    _tf(state)["arrival"] = a


@on("set_mode")
def _set_mode(state: State, event: UIEvent) -> None:
    m = arg(event)
    require(m in ("now", "date", "monthly"), "未知的转账方式")
    _tf(state)["mode"] = m


@on("toggle_save_payee")
def _toggle_save_payee(state: State, event: UIEvent) -> None:
    tf = _tf(state)
    tf["save_payee"] = not tf["save_payee"]


@on("open_bank_picker")
def _open_bank_picker(state: State, event: UIEvent) -> None:
    clear_form(state, "bank_query")
    navigate(state, "bank_picker", target=state["ui"]["route"])


@on("bank_search")
def _bank_search(state: State, event: UIEvent) -> None:
    state["ui"]["bank_query"] = form(state, "bank_query")


@on("pick_bank")
def _pick_bank(state: State, event: UIEvent) -> None:
    code = arg(event)
    require(any(b["code"] == code for b in state["world"]["banks"]), "未知的银行")
    target = state["ui"].get("args", {}).get("target", "transfer_form")
    back(state)
    state["ui"]["bank_query"] = ""
    state["ui"].setdefault("pe" if target == "payee_edit" else "tf", {})["bank"] = code


@on("open_date_picker")
def _open_date_picker(state: State, event: UIEvent) -> None:
    navigate(state, "date_picker", target=state["ui"]["route"])


@on("pick_date")
def _pick_date(state: State, event: UIEvent) -> None:
    day = date.fromisoformat(arg(event))
    today = clock_of(state).date()
    target = state["ui"].get("args", {}).get("target", "transfer_form")
    if target == "appointment":
        require(
            today < day <= today + timedelta(days=14)
            and day.weekday() < 5
            or _weekend_branch(state, day, today),
            "该日期不可预约",
        )
        back(state)
        state["ui"].setdefault("appt", {})["date"] = day.isoformat()
        return
    require(today < day <= today + timedelta(days=60), "预约日期需在明天至60天内")
    back(state)
    _tf(state)["date"] = day.isoformat()


def _weekend_branch(state: State, day: date, today: date) -> bool:
    appt = state["ui"].get("appt") or {}
    b = q.branch(state, appt["branch"]) if appt.get("branch") else None
    return b is not None and "周日" in b["hours"] and today < day <= today + timedelta(days=14)


@on("open_day_picker")
def _open_day_picker(state: State, event: UIEvent) -> None:
    navigate(state, "day_picker")


@on("pick_day")
def _pick_day(state: State, event: UIEvent) -> None:
    day = int(arg(event))
    require(1 <= day <= 28, "请选择1-28日")
    back(state)
    _tf(state)["day"] = day


def _amount_checks(state: State, acc_id: str, total_fen: int) -> None:
    acc = q.account(state, acc_id)
    require(total_fen <= acc["balance_fen"], f"账户可用余额不足（可用{yuan(acc['balance_fen'])}元）")


@on("transfer_next")
def _transfer_next(state: State, event: UIEvent) -> None:
    tf = _tf(state)
    name, acct = form(state, "payee_name"), form(state, "account_no").replace(" ", "")
    require(bool(name), "请输入收款户名")
    require(acct.isdigit() and 16 <= len(acct) <= 19, "请输入正确的收款账号（16-19位数字）")
    require(bool(tf["bank"]), "请选择收款银行")
    known = next((e for e in state["world"]["directory"] if e["account_no"] == acct), None)
    require(known is not None, "收款账号不存在，请核对后重新输入")
    require(known["name"] == name, "户名与账号不符，请核对收款人信息")  # type: ignore[index]
    require(known["bank"] == tf["bank"], "收款银行与账号不符，请重新选择")  # type: ignore[index]
    require(acct != q.account(state, tf["from_acc"])["card_no"], "收款账号不能与付款账号相同")
    amount = parse_yuan(form(state, "amount"), field="转账金额")
    require(amount > 0, "转账金额需大于0")
    s = state["user"]["settings"]
    require(
        amount <= s["single_limit_fen"],
        f"超过单笔转账限额{yuan(s['single_limit_fen'])}元，可在“转账限额”中调整",
    )
    note = form(state, "note")
    require(len(note) <= 20, "附言不能超过20个字")
    mode = tf["mode"]
    fee = q.transfer_fee_fen(amount, tf["bank"], tf["arrival"])
    if mode == "now":
        require(
            q.out_today_fen(state) + amount <= s["daily_limit_fen"],
            f"超过日累计转账限额{yuan(s['daily_limit_fen'])}元",
        )
        _amount_checks(state, tf["from_acc"], amount + fee)
    elif mode == "date":
        require(bool(tf["date"]), "请选择预约转账日期")
    else:
        require(bool(tf["day"]), "请选择每月转账日")
    times = form(state, "times") or "12"
    require(times.isdigit() and 1 <= int(times) <= 60, "执行次数为1-60次")
    state["ui"]["draft"] = {
        "kind": "transfer",
        "from_acc": tf["from_acc"],
        "payee": name,
        "account_no": acct,
        "bank": tf["bank"],
        "amount_fen": amount,
        "fee_fen": fee,
        "note": note,
        "arrival": tf["arrival"],
        "when": mode,
        "date": tf["date"] if mode == "date" else None,
        "day": tf["day"] if mode == "monthly" else None,
        "times": int(times) if mode == "monthly" else None,
        "save_payee": bool(tf["save_payee"]),
    }
    navigate(state, "confirm")


@on("confirm_submit")
def _confirm_submit(state: State, event: UIEvent) -> None:
    """The commit boundary of every money flow: the order exists from here on."""
    d = draft(state)
    record = od.create(state, d)
    state["ui"]["pending"] = {"kind": d["kind"], "id": record["id"]}
    state["ui"]["draft"] = None
    state["ui"]["sms_sent"] = False
    clear_form(state, "sms_code", "tx_password")
    navigate(state, "secure_verify")


def _pending(state: State) -> tuple[str, dict[str, Any]]:
    p = state["ui"].get("pending")
    require(isinstance(p, dict), "没有待验证的交易")
    return p["kind"], od.find(state, p["kind"], p["id"])  # type: ignore[index]


@on("send_sms")
def _send_sms(state: State, event: UIEvent) -> None:
    _pending(state)
    state["ui"]["sms_sent"] = True
    toast(
        state,
        f"验证码已发送至{state['world']['owner']['phone'][:3]}****{state['world']['owner']['phone'][-4:]}（测试环境验证码{SMS_CODE}）",
    )


@on("verify_submit")
def _verify_submit(state: State, event: UIEvent) -> None:
    kind, order = _pending(state)
    require(bool(state["ui"].get("sms_sent")), "请先获取短信验证码")
    require(form(state, "sms_code") == SMS_CODE, "短信验证码错误")
    pw = form(state, "tx_password")
    require(pw.isdigit() and len(pw) == 6, "请输入6位交易密码")
    od.settle(state, kind, order)
    state["ui"]["pending"] = None
    clear_form(state, "sms_code", "tx_password")
    state["ui"]["stack"] = [{"route": "home", "args": {}}]
    replace_route(state, "result", kind=kind, id=order["id"])


@on("verify_cancel")
def _verify_cancel(state: State, event: UIEvent) -> None:
    _, order = _pending(state)
    order["status"] = od.CANCELLED
    state["ui"]["pending"] = None
    go_home(state)
    toast(state, "交易已取消")


@on("transfer_again")
def _transfer_again(state: State, event: UIEvent) -> None:
    t = next((t for t in state["user"]["txns"] if t["id"] == arg(event)), None)
    require(t is not None and t["cat"] == "转账" and bool(t["party_acct"]), "该交易不支持再转一笔")
    entry = next((e for e in state["world"]["directory"] if e["account_no"] == t["party_acct"]), None)  # type: ignore[index]
    require(entry is not None, "该交易不支持再转一笔")
    _start_transfer(state, payee=entry)


@on("open_record")
def _open_record(state: State, event: UIEvent) -> None:
    rid = arg(event)
    require(any(t["id"] == rid for t in state["user"]["transfers"]), "记录不存在")
    navigate(state, "record_detail", id=rid)


@on("cancel_scheduled")
def _cancel_scheduled(state: State, event: UIEvent) -> None:
    rid = arg(event)
    t = next((t for t in state["user"]["transfers"] if t["id"] == rid), None)
    require(t is not None and t["status"] == od.SCHEDULED, "该预约不可撤销")
    dialog(state, "cancel_scheduled", id=rid)


@on("cancel_scheduled_confirm")
def _cancel_scheduled_confirm(state: State, event: UIEvent) -> None:
    rid = arg(event)
    t = next((t for t in state["user"]["transfers"] if t["id"] == rid), None)
    require(t is not None and t["status"] == od.SCHEDULED, "该预约不可撤销")
    t["status"] = od.CANCELLED  # type: ignore[index]
    state["ui"]["dialog"] = None
    back(state)
    toast(state, "预约转账已撤销")


# --- payees --------------------------------------------------------------------------------------


@on("payee_search")
def _payee_search(state: State, event: UIEvent) -> None:
    state["ui"]["payee_query"] = form(state, "payee_query")


@on("open_payee")
def _open_payee(state: State, event: UIEvent) -> None:
    navigate(state, "payee_detail", id=_payee(state, arg(event))["id"])


@on("add_payee")
def _add_payee(state: State, event: UIEvent) -> None:
    clear_form(state, "pe_name", "pe_account", "pe_alias")
    state["ui"]["pe"] = {"id": None, "bank": ""}
    navigate(state, "payee_edit")


@on("edit_payee")
def _edit_payee(state: State, event: UIEvent) -> None:
    p = _payee(state, arg(event))
    state["ui"]["form"].update(pe_name=p["name"], pe_account=p["account_no"], pe_alias=p["alias"])
    state["ui"]["pe"] = {"id": p["id"], "bank": p["bank"]}
    navigate(state, "payee_edit")


@on("save_payee")
def _save_payee(state: State, event: UIEvent) -> None:
    pe = state["ui"].get("pe") or {}
    name, acct, alias = (
        form(state, "pe_name"),
        form(state, "pe_account").replace(" ", ""),
        form(state, "pe_alias"),
    )
    require(bool(name), "请输入收款人户名")
    require(acct.isdigit() and 16 <= len(acct) <= 19, "请输入正确的收款账号（16-19位数字）")
    require(bool(pe.get("bank")), "请选择收款银行")
    require(len(alias) <= 10, "备注名不能超过10个字")
    payees = state["user"]["payees"]
    require(not any(p["account_no"] == acct and p["id"] != pe.get("id") for p in payees), "该收款人已存在")
    if pe.get("id"):
        p = _payee(state, pe["id"])
        p.update(name=name, account_no=acct, bank=pe["bank"], alias=alias)
    else:
        payees.append(
            {
                "id": od.next_id(state, "p"),
                "name": name,
                "bank": pe["bank"],
                "account_no": acct,
                "alias": alias,
            }
        )
    state["ui"]["pe"] = None
    back(state)
    toast(state, "收款人已保存")


@on("delete_payee")
def _delete_payee(state: State, event: UIEvent) -> None:
    dialog(state, "delete_payee", id=_payee(state, arg(event))["id"])


@on("delete_payee_confirm")
def _delete_payee_confirm(state: State, event: UIEvent) -> None:
    pid = _payee(state, arg(event))["id"]
    state["user"]["payees"] = [p for p in state["user"]["payees"] if p["id"] != pid]
    state["ui"]["dialog"] = None
    back(state)
    toast(state, "收款人已删除")


# --- credit card -----------------------------------------------------------------------------------


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
    _amount_checks(state, acc, amount)
    state["ui"]["draft"] = {"kind": "repay", "from_acc": acc, "amount_fen": amount, "option": option}
    navigate(state, "confirm")


@on("open_installment")
def _open_installment(state: State, event: UIEvent) -> None:
    require(q.credit_owed_fen(state) >= 50_000, "账单剩余应还金额不足500元，不可分期")
    state["ui"]["inst"] = {"periods": 6}
    navigate(state, "credit_installment")


INSTALLMENT_FEE_BP = {3: 195, 6: 360, 12: 720, 24: 1440}  # total fee, 0.01% units of the principal


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


# --- bills and top-up ---------------------------------------------------------------------------------


@on("open_bill")
def _open_bill(state: State, event: UIEvent) -> None:
    kind = arg(event)
    require(kind in state["world"]["billers"], "未知的缴费项目")
    clear_form(state, "bill_account", "bill_amount")
    state["ui"]["pay"] = {"from_acc": q.default_account(state)["id"], "bill_kind": kind, "queried": None}
    navigate(state, "bill_form", kind=kind)


def bill_due_fen(state: State, kind: str, account_no: str) -> int | None:
    acc = next(
        (a for a in state["world"]["billers"][kind]["accounts"] if a["account_no"] == account_no), None
    )
    if acc is None:
        return None
    paid = sum(
        b["amount_fen"]
        for b in state["user"]["bill_payments"]
        if b["bill_kind"] == kind and b["account_no"] == account_no and b["status"] in od.LIVE
    )
    return max(0, acc["due_fen"] - paid)


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
    _amount_checks(state, acc, amount)
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
    _amount_checks(state, acc, face)
    state["ui"]["draft"] = {"kind": "topup", "phone": phone, "amount_fen": face, "from_acc": acc}
    navigate(state, "confirm")


# --- deposits and funds ----------------------------------------------------------------------------------


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
    _amount_checks(state, acc, amount)
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
    _amount_checks(state, acc, amount)
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


def risk_level_for(answers: dict[str, int]) -> str:
    score = sum(answers.values())  # each answer 0-3, five questions: 0-15
    return (
        "C1" if score <= 2 else "C2" if score <= 5 else "C3" if score <= 8 else "C4" if score <= 11 else "C5"
    )


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


# --- FX -----------------------------------------------------------------------------------------------


@on("open_fx_calc")
def _open_fx_calc(state: State, event: UIEvent) -> None:
    code = event.arg or "USD"
    q.fx_rate(state, code)
    state["ui"]["fx"] = {"code": code, "dir": "buy", "result": None}
    clear_form(state, "fx_amount")
    navigate(state, "fx_calc")


@on("fx_ccy")
def _fx_ccy(state: State, event: UIEvent) -> None:
    code = arg(event)
    require(any(r["code"] == code for r in state["world"]["fx"]), "不支持的币种")
    state["ui"].setdefault("fx", {}).update(code=code, result=None)


@on("fx_dir")
def _fx_dir(state: State, event: UIEvent) -> None:
    d = arg(event)
    require(d in ("buy", "sell"), "未知的兑换方向")
    state["ui"].setdefault("fx", {}).update(dir=d, result=None)


@on("fx_calc")
def _fx_calc(state: State, event: UIEvent) -> None:
    fx = state["ui"].setdefault("fx", {"code": "USD", "dir": "buy"})
    amount = parse_yuan(form(state, "fx_amount"), field="外币金额")
    require(amount > 0, "请输入外币金额")
    fx["result"] = q.fx_convert(state, fx["code"], amount, fx["dir"])
    fx["amount_fen"] = amount


# --- branches and appointments -------------------------------------------------------------------------


@on("branch_search")
def _branch_search(state: State, event: UIEvent) -> None:
    state["ui"]["branch_query"] = form(state, "branch_query")


@on("branch_filter")
def _branch_filter(state: State, event: UIEvent) -> None:
    f = arg(event)
    require(f in ("all", "weekend"), "未知的筛选条件")
    state["ui"]["branch_filter"] = f


@on("open_branch")
def _open_branch(state: State, event: UIEvent) -> None:
    navigate(state, "branch_detail", id=q.branch(state, arg(event))["id"])


@on("appt_start")
def _appt_start(state: State, event: UIEvent) -> None:
    b = q.branch(state, arg(event))
    state["ui"]["appt"] = {"branch": b["id"], "service": None, "date": None, "slot": None}
    navigate(state, "appointment", id=b["id"])


@on("appt_service")
def _appt_service(state: State, event: UIEvent) -> None:
    appt = state["ui"].get("appt") or {}
    s = arg(event)
    require(
        bool(appt.get("branch")) and s in q.branch(state, appt["branch"])["services"], "该网点不办理此业务"
    )
    appt["service"] = s


@on("appt_slot")
def _appt_slot(state: State, event: UIEvent) -> None:
    s = arg(event)
    require(s in state["world"]["appointment_slots"], "无效的时段")
    state["ui"].setdefault("appt", {})["slot"] = s


@on("appt_submit")
def _appt_submit(state: State, event: UIEvent) -> None:
    appt = state["ui"].get("appt") or {}
    require(bool(appt.get("service")), "请选择预约业务")
    require(bool(appt.get("date")), "请选择预约日期")
    require(bool(appt.get("slot")), "请选择预约时段")
    require(
        not any(a["date"] == appt["date"] and a["status"] == "已预约" for a in state["user"]["appointments"]),
        "您当天已有预约",
    )
    rec = {
        "id": od.next_id(state, "AP"),
        "branch": appt["branch"],
        "service": appt["service"],
        "date": appt["date"],
        "slot": appt["slot"],
        "status": "已预约",
        "created": od.now_iso(state),
    }
    state["user"]["appointments"].append(rec)
    state["ui"]["stack"] = [{"route": "home", "args": {}}]
    replace_route(state, "result", kind="appointment", id=rec["id"])


# --- settings ---------------------------------------------------------------------------------------------


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


@on("open_credit")
def _open_credit(state: State, event: UIEvent) -> None:
    navigate(state, "credit_home")


@on("open_pay_home")
def _open_pay_home(state: State, event: UIEvent) -> None:
    navigate(state, "pay_home")


@on("open_wealth")
def _open_wealth(state: State, event: UIEvent) -> None:
    navigate(state, "wealth_home")
