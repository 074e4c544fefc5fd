"""Bank UI events of transfers: the form, pickers, confirmation, SMS verification, records."""

from __future__ import annotations

from datetime import date, timedelta
from typing import Any

from clones.bank import orders as od
from clones.bank import queries as q
from clones.bank.handler_kit import (
    SMS_CODE,
    arg,
    clear_form,
    dialog,
    draft,
    form,
    go_home,
    masked_phone,
    on,
    toast,
)
from clones.bank.money import parse_yuan, yuan
from clones.base import State, UIEvent, back, clock_of, navigate, replace_route, require

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
    state["ui"]["sheet"] = None
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


def payee_by_id(state: State, pid: str) -> dict[str, Any]:
    p = next((p for p in state["user"]["payees"] if p["id"] == pid), None)
    require(p is not None, "收款人不存在")
    return p  # type: ignore[return-value]


@on("pick_payee")
def _pick_payee(state: State, event: UIEvent) -> None:
    """From a payee list: fill the transfer form being edited, or start a new one."""
    p = payee_by_id(state, arg(event))
    if state["ui"]["route"] == "payees" and state["ui"].get("args", {}).get("pick"):
        back(state)
        state["ui"]["form"].update(payee_name=p["name"], account_no=p["account_no"])
        _tf(state)["bank"] = p["bank"]
        return
    _start_transfer(state, payee=p)


@on("transfer_to_payee")
def _transfer_to_payee(state: State, event: UIEvent) -> None:
    _start_transfer(state, payee=payee_by_id(state, arg(event)))


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
    state["ui"]["sheet"] = None


# Bottom sheets of the transfer form: the payer card (`tv_pay_account`) and the transfer way
# (`tv_transfer_way` → `bottom_selector_tv` 实时转账), as the public scripts open them.
SHEETS = ("pay_account", "transfer_way")


@on("open_sheet")
def _open_sheet(state: State, event: UIEvent) -> None:
    sheet = arg(event)
    require(sheet in SHEETS, "未知的选项")
    _tf(state)
    state["ui"]["sheet"] = sheet


@on("set_way")
def _set_way(state: State, event: UIEvent) -> None:
    a = arg(event)
    require(a in q.ARRIVALS, "未知的转账方式")
    _tf(state)["arrival"] = a
    state["ui"]["sheet"] = None


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


def amount_checks(state: State, acc_id: str, total_fen: int) -> None:
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
    if known is None:
        # the real app looks up the account's bank and says so in a dialog (tv_dlg_content, [script])
        dialog(state, "tran_error", message="查询账户开户机构不成功。")
        return
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
    fee = (
        0
        if state["world"].get("interbank_fee_free")
        else q.transfer_fee_fen(amount, tf["bank"], tf["arrival"])
    )
    if mode == "now":
        require(
            q.out_today_fen(state) + amount <= s["daily_limit_fen"],
            f"超过日累计转账限额{yuan(s['daily_limit_fen'])}元",
        )
        amount_checks(state, tf["from_acc"], amount + fee)
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
    clear_form(state, "confirm_sms_code")
    navigate(state, "confirm")
    if on_confirm_page(state, state["ui"]["draft"]):
        toast(state, f"验证码已发送至{masked_phone(state)}")


def on_confirm_page(state: State, draft: dict[str, Any]) -> bool:
    """Whether this draft's SMS code is asked for on the confirmation page (`sms_on_confirm`:
    transfers only; the other money flows keep the code on the password page)."""
    return bool(state["world"].get("sms_on_confirm")) and draft.get("kind") == "transfer"


@on("confirm_resend_sms")
def _confirm_resend_sms(state: State, event: UIEvent) -> None:
    require(on_confirm_page(state, draft(state)), "当前交易无需短信验证码")
    toast(state, f"验证码已重新发送至{masked_phone(state)}")


@on("confirm_submit")
def _confirm_submit(state: State, event: UIEvent) -> None:
    """The commit boundary of every money flow: the order exists from here on."""
    d = draft(state)
    sms_here = on_confirm_page(state, d)
    if sms_here:  # no order exists until the code on this page is right
        code = form(state, "confirm_sms_code")
        require(bool(code), "请输入短信验证码")
        require(code == SMS_CODE, "短信验证码错误")
        clear_form(state, "confirm_sms_code")
    record = od.create(state, d)
    state["ui"]["pending"] = {"kind": d["kind"], "id": record["id"], "sms_verified": sms_here}
    state["ui"]["draft"] = None
    state["ui"]["kp_upper"] = False
    clear_form(state, "sms_code", "tx_password")
    navigate(state, "secure_verify")
    # the verification page sends the code as it opens (its button reads 重新发送)
    state["ui"]["sms_sent"] = not sms_here
    if not sms_here:
        toast(state, f"验证码已发送至{masked_phone(state)}（测试环境验证码{SMS_CODE}）")


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
    """`btn_confirm` on the verification page: the SMS code, then the payment password in the same
    field (`et_code`), as the public scripts' second step shows; both at once settle too."""
    kind, order = _pending(state)
    pending = state["ui"]["pending"]
    if not pending.get("sms_verified"):
        code = form(state, "sms_code")
        require(bool(code), "请输入短信验证码")
        require(code == SMS_CODE, "短信验证码错误")
        pending["sms_verified"] = True
        clear_form(state, "sms_code")
        if not form(state, "tx_password"):
            toast(state, "请输入6位支付密码")
            return
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
