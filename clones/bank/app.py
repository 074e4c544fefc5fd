"""The bank clone (modelled on the China Construction Bank mobile app): state, screens, invariants."""

from __future__ import annotations

import copy
from datetime import date, timedelta
from pathlib import Path
from typing import Any, ClassVar, Literal

from jinja2 import Environment, FileSystemLoader, StrictUndefined, select_autoescape
from pydantic import BaseModel, ConfigDict, StrictBool

from clones.bank import (  # noqa: F401  (importing a section registers its handlers)
    account_handlers,
    bill_handlers,
    branch_handlers,
    credit_handlers,
    fx_handlers,
    history_handlers,
    keypad,
    login_on_demand,
    nav_handlers,
    payee_handlers,
    settings_handlers,
    transfer_handlers,
    wealth_handlers,
)
from clones.bank import orders as od
from clones.bank import queries as q
from clones.bank.handler_kit import HANDLERS, SMS_CODE, masked_phone
from clones.bank.money import masked_card, yuan
from clones.bank.orders import bill_due_fen
from clones.bank.transfer_handlers import on_confirm_page
from clones.bank.world import (
    BILL_KIND_NAMES,
    CUSTOMER_LEVEL_NAMES,
    CUSTOMER_LEVELS,
    INSTALLMENT_FEE_BP,
    RISK_NAMES,
    generate,
)
from clones.base import Clone, State, UIEvent, clock_of, deep_merge, diff, new_state
from realbench.taskpack import CloneSetup

HERE = Path(__file__).parent

ROUTES = [
    "login",
    "device_verify",
    "home",
    "accounts",
    "account_detail",
    "subaccount_detail",
    "history",
    "history_filter",
    "txn_detail",
    "receipt",
    "transfer_home",
    "transfer_form",
    "bank_picker",
    "date_picker",
    "day_picker",
    "confirm",
    "secure_verify",
    "result",
    "transfer_records",
    "record_detail",
    "scheduled_list",
    "payees",
    "payee_detail",
    "payee_edit",
    "credit_home",
    "credit_bill",
    "credit_repay",
    "credit_installment",
    "pay_home",
    "bill_form",
    "topup",
    "pay_records",
    "deposit_home",
    "deposit_product",
    "deposit_open",
    "wealth_home",
    "fund_list",
    "fund_detail",
    "fund_buy",
    "risk_test",
    "risk_result",
    "holdings",
    "fx_rates",
    "fx_calc",
    "branches",
    "branch_detail",
    "appointment",
    "mine",
    "settings",
    "limits",
    "notifications",
    "security",
    "messages",
    "message_detail",
    "all_services",
]
TITLES = {
    "login": "登录",
    "device_verify": "设备验证",
    "home": "首页",
    "accounts": "我的账户",
    "account_detail": "账户详情",
    "subaccount_detail": "子账户详情",
    "history": "明细查询",
    "history_filter": "筛选",
    "txn_detail": "交易详情",
    "receipt": "电子回单",
    "transfer_home": "转账",
    "transfer_form": "转账",
    "bank_picker": "选择银行",
    "date_picker": "选择日期",
    "day_picker": "每月转账日",
    "confirm": "确认信息",
    "secure_verify": "安全验证",
    "result": "交易结果",
    "transfer_records": "转账记录",
    "record_detail": "转账详情",
    "scheduled_list": "预约转账",
    "payees": "收款人名册",
    "payee_detail": "收款人详情",
    "payee_edit": "编辑收款人",
    "credit_home": "信用卡",
    "credit_bill": "信用卡账单",
    "credit_repay": "信用卡还款",
    "credit_installment": "账单分期",
    "pay_home": "生活缴费",
    "bill_form": "缴费",
    "topup": "手机充值",
    "pay_records": "缴费记录",
    "deposit_home": "定期存款",
    "deposit_product": "产品详情",
    "deposit_open": "存入定期",
    "wealth_home": "财富",
    "fund_list": "基金",
    "fund_detail": "基金详情",
    "fund_buy": "基金申购",
    "risk_test": "风险测评",
    "risk_result": "测评结果",
    "holdings": "我的持仓",
    "fx_rates": "外汇牌价",
    "fx_calc": "汇率计算器",
    "branches": "网点查询",
    "branch_detail": "网点详情",
    "appointment": "网点预约",
    "mine": "我的",
    "settings": "设置",
    "limits": "转账限额",
    "notifications": "消息通知",
    "security": "安全中心",
    "messages": "消息中心",
    "message_detail": "消息详情",
    "all_services": "全部功能",
}
# The Android activity each screen reports (dumpsys, uiautomator2's app_current). The transfer
# flow, login, records and accounts follow the public scripts that drive the real app
# (REAL_APPS.md section 2a, [script]); the other screens have no public evidence and report the
# framework's generic titled page (a guess), the tabs the home activity.
MAIN_ACTIVITY = "com.ccb.start.MainActivity"
TITLED_ACTIVITY = "com.ccb.framework.app.TitledActivity"
SMART_TRANSFER_ACTIVITY = "com.ccb.transfer.smarttransfer.view.SmartTransferMainAct"
ACTIVITIES: dict[str, str] = {
    "home": MAIN_ACTIVITY,
    "wealth_home": MAIN_ACTIVITY,
    "credit_home": MAIN_ACTIVITY,
    "pay_home": MAIN_ACTIVITY,
    "mine": MAIN_ACTIVITY,
    "login": "com.ccb.framework.security.login.internal.view.LoginActivity",
    "device_verify": "com.ccb.framework.security.login.internal.view.LoginActivity",
    "transfer_home": "com.ccb.transfer.transferhomenew.view.TransferHomeActNew",
    "transfer_form": SMART_TRANSFER_ACTIVITY,
    "bank_picker": SMART_TRANSFER_ACTIVITY,
    "date_picker": SMART_TRANSFER_ACTIVITY,
    "day_picker": SMART_TRANSFER_ACTIVITY,
    "secure_verify": "com.ccb.framework.security.transecurityverify.TransSecurityVerifyDialogAct",
    "result": "com.ccb.framework.security.base.successpage.CcbSuccessPageAct",
    "transfer_records": "com.ccb.transfer.transferrecord.view.TransferRecordMainActivity",
    "record_detail": "com.ccb.transfer.transferrecord.view.TransferRecordMainActivity",
    "accounts": "com.ccb.myaccount.plusview.activity.MyAccountPlusMainActivity",
}
# Which activities rest on public scripts (the rest of ACTIVITIES and every other screen are guesses)
SCRIPT_ACTIVITY_ROUTES = frozenset(
    {
        "home",
        "login",
        "transfer_home",
        "transfer_form",
        "confirm",
        "secure_verify",
        "result",
        "transfer_records",
        "record_detail",
        "accounts",
        "account_detail",
        "history",
    }
)


def activity_of(state: State) -> str:
    """The activity the screen of this state reports. The transfer's confirmation is a dialog over
    the transfer form, so it reports the form's activity; the other flows' confirmation page is a
    titled page."""
    ui = state["ui"]
    route = ui.get("route", "home")
    if not state["user"].get("logged_in") and route != "login":
        route = login_on_demand.logged_out_route(state, route)
    if route == "confirm":
        d = ui.get("draft") or {}
        return SMART_TRANSFER_ACTIVITY if d.get("kind") == "transfer" else TITLED_ACTIVITY
    return ACTIVITIES.get(route, TITLED_ACTIVITY)


TAB_ROUTES = {
    "home": "home",
    "wealth_home": "wealth",
    "credit_home": "credit",
    "pay_home": "life",
    "mine": "mine",
}
KIND_TITLES = {
    "transfer": "转账",
    "repay": "信用卡还款",
    "installment": "账单分期",
    "bill": "生活缴费",
    "topup": "手机充值",
    "deposit": "定期存款",
    "fund": "基金申购",
    "limit": "修改转账限额",
    "appointment": "网点预约",
}


def _env() -> Environment:
    env = Environment(
        loader=FileSystemLoader(str(HERE / "templates")),
        autoescape=select_autoescape(["html", "j2"]),
        undefined=StrictUndefined,
        trim_blocks=True,
        lstrip_blocks=True,
    )
    env.filters["yuan"] = yuan
    env.filters["syuan"] = lambda f: yuan(f, sign=True)
    env.filters["card"] = masked_card
    env.filters["tail"] = lambda n: str(n)[-4:]
    env.filters["pct"] = lambda bp: f"{bp / 100:.2f}%"
    env.filters["nav"] = lambda n: f"{n / 10_000:.4f}"
    env.filters["rate"] = lambda r: f"{r / 100:.2f}"
    env.filters["bank"] = q.bank_label
    env.filters["md"] = lambda iso: f"{int(iso[5:7])}月{int(iso[8:10])}日"
    return env


class BankSetupData(BaseModel):
    """What a task's `clone.setup.data` may say to the bank clone."""

    model_config = ConfigDict(extra="forbid")

    data_seed: int | None = None  # the drifted-data seed (set by the clone server for drift profiles)
    logged_in: StrictBool | None = None
    # False: inter-bank transfers are free, as the real app's are believed to be (unverified); the
    # default keeps the clone's invented 0.02 % real-time fee, which existing tasks were written with
    interbank_fee: StrictBool | None = None
    # logged_out_home: open on the home tab logged out and ask for the login (phone number and
    # password) only when a service needs it [web]; the default keeps the logged-in start
    start: Literal["logged_out_home"] | None = None
    # With logged_out_home: whether this phone is already authorised. False (the default there):
    # the first login adds an SMS code step (device authorisation [web]; its look is a guess)
    device_authorised: StrictBool | None = None
    # sms_on_confirm: the transfer's SMS code field sits on the confirmation page and the password
    # page follows its 确定 [web, secondary]; the default keeps SMS code and password on one page
    transfer_flow: Literal["sms_after_confirm", "sms_on_confirm"] | None = None


class Bank(Clone):
    name: ClassVar[str] = "bank"
    # What each verifier's tasks may change (money flows include settling past the boundary on the
    # clone); anything else is an unanticipated side effect.
    expected_changes: ClassVar[dict[str, tuple[str, ...]] | None] = {
        "transfer": ("/user/transfers/**", "/user/payees/**", "/user/accounts/**", "/user/txns/**"),
        "repay": ("/user/repayments/**", "/user/credit/**", "/user/accounts/**", "/user/txns/**"),
        "installment": ("/user/installments/**", "/user/credit/**", "/user/txns/**"),
        "bill": ("/user/bill_payments/**", "/user/accounts/**", "/user/txns/**"),
        "topup": ("/user/topups/**", "/user/accounts/**", "/user/txns/**"),
        "deposit": ("/user/deposit_orders/**", "/user/accounts/**", "/user/txns/**"),
        "fund": ("/user/fund_orders/**", "/user/holdings/**", "/user/accounts/**", "/user/txns/**"),
        "limit": (
            "/user/limit_changes/**",
            "/user/settings/single_limit_fen",
            "/user/settings/daily_limit_fen",
        ),
        "payee_added": ("/user/payees/**",),
        "payee_deleted": ("/user/payees/**",),
        "payee_alias": ("/user/payees/*/alias",),
        "scheduled_cancelled": ("/user/transfers/*/status",),
        "risk_test": ("/user/risk/**",),
        "appointment": ("/user/appointments/**",),
        "notify": ("/user/settings/notify/**",),
        "hide_balance": ("/user/settings/hide_balance",),
        "login": ("/user/logged_in",),
        "login_on_demand": login_on_demand.SESSION_PATHS,
        "default_account": ("/user/accounts/*/default",),
        "messages_read": ("/user/messages/*/read",),
    }
    package: ClassVar[str] = "com.chinamworld.main"
    title: ClassVar[str] = "手机银行"
    home_route: ClassVar[str] = "home"
    setup_data: ClassVar[type[BaseModel] | None] = BankSetupData
    # Labels the drift framework may swap for synonyms the real app has used across versions. No
    # commit-boundary label (确认, 保存, 提交, 确认删除, 确认撤销, 提交预约, 登录) is ever relabelled.
    # (转账汇款 is not relabelled: the real home reads 转账 and the transfer home's first item 转账汇款.)
    drift_relabels: ClassVar[dict[str, str]] = {
        "明细查询": "交易明细",
        "下一步": "继续",
        "收款人名册": "常用收款人",
        "生活缴费": "缴费",
        "定期存款": "存款",
        "外汇牌价": "汇率",
        "网点查询": "网点服务",
        "我的账户": "账户",
        "全部功能": "更多",
        "信用卡还款": "还信用卡",
    }

    def __init__(self) -> None:
        super().__init__()
        self.handlers.update(HANDLERS)
        from clones.bank.verifiers import SIDE_EFFECT_CHECKS, VERIFIERS

        self.verifiers.update(VERIFIERS)
        self.side_effect_checks.update(SIDE_EFFECT_CHECKS)
        self._env = _env()
        self.stylesheet = (HERE / "static" / "bank.css").read_text(encoding="utf-8")

    # --- state -------------------------------------------------------------------------------

    def build_state(self, setup: CloneSetup, params: dict[str, Any]) -> State:
        data_seed = setup.data.get("data_seed")
        world, user = generate(setup.seed, setup.clock, int(data_seed) if data_seed is not None else None)
        guest = setup.data.get("start") == "logged_out_home"
        logged_in = setup.data.get("logged_in", setup.route != "login" and not guest)
        user["logged_in"] = bool(logged_in)
        route = setup.route or ("home" if logged_in or guest else "login")
        state = new_state(world, user, route, setup.clock)
        if setup.data.get("interbank_fee") is False:
            state["world"]["interbank_fee_free"] = True
        if guest:
            state["world"]["login_on_demand"] = True
            user["device_authorised"] = bool(setup.data.get("device_authorised", False))
        if setup.data.get("transfer_flow") == "sms_on_confirm":
            state["world"]["sms_on_confirm"] = True
        if setup.patch:
            deep_merge(state, copy.deepcopy(setup.patch))
        if route != "home" and route != "login":
            state["ui"]["stack"] = [{"route": "home", "args": {}}]
        return state

    def routes(self) -> list[str]:
        return list(ROUTES)

    def activity(self, state: State) -> str:
        """The Android activity the current screen reports (see ACTIVITIES)."""
        return activity_of(state)

    def handle(self, state: State, event: UIEvent) -> None:
        """Logged out on the home tab (login on demand), a service opens the login page first."""
        if login_on_demand.needs_login(state, event):
            state["ui"]["toast"] = None
            login_on_demand.ask_login(state, event)
            return
        super().handle(state, event)

    def unexpected_changes(self, verifier: str, before: State, after: State) -> list[str]:
        """A task that starts logged out must log in: that change is expected whatever it asks."""
        if not login_on_demand.started_logged_out(before):
            return super().unexpected_changes(verifier, before, after)
        from clones.expected_changes import unexpected_changes

        allowed = (*(self.expected_changes or {}).get(verifier, ()), *login_on_demand.SESSION_PATHS)
        return unexpected_changes(diff(before, after), allowed, self.device_local_state)

    # --- rendering -----------------------------------------------------------------------------

    def render(self, state: State) -> str:
        ui = state["ui"]
        route = ui["route"]
        if route not in ROUTES:
            route = "home"
        guest = not state["user"].get("logged_in")
        if guest and route != "login":
            route = login_on_demand.logged_out_route(state, route)
        ctx = self._context(state, route)
        # the logged-out home shows no account data at all (not even hidden amounts)
        template = "home_guest" if guest and route == "home" else route
        return self._env.get_template(f"{template}.html").render(**ctx)

    def _context(self, state: State, route: str) -> dict[str, Any]:
        u, w, ui = state["user"], state["world"], state["ui"]
        today = clock_of(state).date()
        ctx: dict[str, Any] = {
            "s": state,
            "u": u,
            "w": w,
            "ui": ui,
            "form": ui.get("form", {}),
            "args": ui.get("args") or {},
            "route": route,
            "title": TITLES[route],
            "tab": TAB_ROUTES.get(route),
            "today": today,
            "q": q,
            "clock": clock_of(state),
            "hide": u["settings"]["hide_balance"],
            "toast": ui.get("toast"),
            "dialog": ui.get("dialog"),
            "can_back": bool(ui.get("stack")),
            "kind_titles": KIND_TITLES,
            "risk_names": RISK_NAMES,
            "level_names": CUSTOMER_LEVEL_NAMES,
            "level_max": CUSTOMER_LEVELS,
            "bill_names": BILL_KIND_NAMES,
            "arrivals": q.ARRIVALS,
            "ways": q.TRANSFER_WAYS,
            "periods": q.PERIODS,
            "directions": q.DIRECTIONS,
            "unread": q.unread_messages(state),
            "default_acc": q.default_account(state),
            "on_demand": login_on_demand.active(state),
            "sms_on_confirm": bool(w.get("sms_on_confirm")),
            "activity": activity_of(state),
            "sheet": ui.get("sheet"),
            "drawer": bool(ui.get("drawer")),
            "kp_upper": bool(ui.get("kp_upper")),
        }
        if route == "home" and not u.get("logged_in"):
            return ctx
        view = getattr(self, f"_view_{route}", None)
        if view is not None:
            ctx.update(view(state, ctx))
        return ctx

    def _view_home(self, state: State, ctx: dict[str, Any]) -> dict[str, Any]:
        return {
            "total": q.total_assets_fen(state),
            "recent": q.filter_txns(state, q.TxnFilter(acc=q.default_account(state)["id"]))[:3],
        }

    def _view_account_detail(self, state: State, ctx: dict[str, Any]) -> dict[str, Any]:
        return {"acc": q.account(state, ctx["args"]["acc"])}

    def _view_subaccount_detail(self, state: State, ctx: dict[str, Any]) -> dict[str, Any]:
        acc = q.account(state, ctx["args"]["acc"])
        return {"acc": acc, "sub": next(s for s in acc["subaccounts"] if s["id"] == ctx["args"]["sub"])}

    def _view_history(self, state: State, ctx: dict[str, Any]) -> dict[str, Any]:
        state["ui"].setdefault("hist", {})
        h = {
            "acc": q.default_account(state)["id"],
            "period": "month",
            "direction": "all",
            "page": 1,
            **state["ui"]["hist"],
        }
        flt = q.filter_from_ui(state)
        rows = q.filter_txns(state, flt)
        income = sum(t["amount_fen"] for t in rows if t["amount_fen"] > 0)
        expense = -sum(t["amount_fen"] for t in rows if t["amount_fen"] < 0)
        shown = rows[: h["page"] * q.PAGE_SIZE]
        return {
            "h": h,
            "flt": flt,
            "rows": shown,
            "count": len(rows),
            "income": income,
            "expense": expense,
            "more": len(rows) > len(shown),
            "acc": q.account(state, flt.acc),
        }

    def _view_history_filter(self, state: State, ctx: dict[str, Any]) -> dict[str, Any]:
        h = state["ui"].get("hist") or {}
        return {"cat_sel": h.get("cat_pending", h.get("cat", ""))}

    def _txn(self, state: State, tid: str) -> dict[str, Any]:
        return next(t for t in state["user"]["txns"] if t["id"] == tid)

    def _view_txn_detail(self, state: State, ctx: dict[str, Any]) -> dict[str, Any]:
        t = self._txn(state, ctx["args"]["txn"])
        return {"t": t, "acc": q.account(state, t["acc"])}

    _view_receipt = _view_txn_detail

    def _view_transfer_home(self, state: State, ctx: dict[str, Any]) -> dict[str, Any]:
        return {"recent_payees": state["user"]["payees"][:4]}

    def _view_transfer_form(self, state: State, ctx: dict[str, Any]) -> dict[str, Any]:
        tf = state["ui"].get("tf") or {
            "from_acc": q.default_account(state)["id"],
            "bank": "",
            "arrival": "realtime",
            "mode": "now",
            "date": None,
            "day": None,
            "save_payee": False,
        }
        acc = q.account(state, tf["from_acc"])
        s = state["user"]["settings"]
        return {
            "tf": tf,
            "acc": acc,
            "left_today": max(0, s["daily_limit_fen"] - q.out_today_fen(state)),
            "fee_free": bool(state["world"].get("interbank_fee_free")),
        }

    def _view_bank_picker(self, state: State, ctx: dict[str, Any]) -> dict[str, Any]:
        query = state["ui"].get("bank_query") or ""
        banks = [b for b in state["world"]["banks"] if query in b["name"]]
        return {"banks": banks, "query": query}

    def _view_date_picker(self, state: State, ctx: dict[str, Any]) -> dict[str, Any]:
        today = ctx["today"]
        appt = ctx["args"].get("target") == "appointment"
        horizon = 14 if appt else 60
        days = [today + timedelta(days=i) for i in range(1, horizon + 1)]
        weekend_ok = True
        if appt:
            b = q.branch(state, (state["ui"].get("appt") or {}).get("branch") or "b1")
            weekend_ok = "周日" in b["hours"]
        first = days[0]
        pad = first.weekday()
        return {"days": days, "pad": pad, "weekend_ok": weekend_ok, "appt": appt}

    def _view_confirm(self, state: State, ctx: dict[str, Any]) -> dict[str, Any]:
        d = state["ui"].get("draft") or {}
        extra: dict[str, Any] = {"d": d, "sms_here": on_confirm_page(state, d), "sms_code": SMS_CODE}
        if d.get("from_acc"):
            extra["acc"] = q.account(state, d["from_acc"])
        if d.get("kind") == "fund":
            extra["fund"] = q.fund(state, d["fund"])
        if d.get("kind") == "deposit":
            extra["product"] = q.deposit_product(state, d["product"])
        return extra

    def _view_secure_verify(self, state: State, ctx: dict[str, Any]) -> dict[str, Any]:
        p = state["ui"].get("pending")
        if not p:
            return {"order": None, "kind": None, "sms_done": False}
        # under sms_on_confirm the code was checked on the confirmation page: only the password is left
        return {
            "order": od.find(state, p["kind"], p["id"]),
            "kind": p["kind"],
            "sms_done": bool(p.get("sms_verified")),
        }

    def _view_device_verify(self, state: State, ctx: dict[str, Any]) -> dict[str, Any]:
        return {"masked_phone": masked_phone(state), "sms_code": SMS_CODE}

    def _view_result(self, state: State, ctx: dict[str, Any]) -> dict[str, Any]:
        kind, oid = ctx["args"].get("kind"), ctx["args"].get("id")
        if kind == "appointment":
            rec = next(a for a in state["user"]["appointments"] if a["id"] == oid)
            return {"kind": kind, "order": rec, "branch": q.branch(state, rec["branch"])}
        if kind in od.ORDER_LISTS:
            return {"kind": kind, "order": od.find(state, kind, oid)}
        return {"kind": None, "order": None}

    def _view_transfer_records(self, state: State, ctx: dict[str, Any]) -> dict[str, Any]:
        recs = [t for t in state["user"]["transfers"] if t["when"] == "now"]
        past = q.filter_txns(
            state,
            q.TxnFilter(
                acc=q.default_account(state)["id"],
                cat="转账",
                direction="out",
                start=ctx["today"] - timedelta(days=89),
            ),
        )
        return {"records": sorted(recs, key=lambda t: t["created"], reverse=True), "past": past[:10]}

    def _view_record_detail(self, state: State, ctx: dict[str, Any]) -> dict[str, Any]:
        return {"t": next(t for t in state["user"]["transfers"] if t["id"] == ctx["args"]["id"])}

    def _view_scheduled_list(self, state: State, ctx: dict[str, Any]) -> dict[str, Any]:
        return {"records": [t for t in state["user"]["transfers"] if t["when"] != "now"]}

    def _view_payees(self, state: State, ctx: dict[str, Any]) -> dict[str, Any]:
        query = state["ui"].get("payee_query") or ""
        rows = [
            p
            for p in state["user"]["payees"]
            if query in p["name"] or query in p["alias"] or query in p["account_no"]
        ]
        return {"payees": rows, "query": query, "pick": bool(ctx["args"].get("pick"))}

    def _view_payee_detail(self, state: State, ctx: dict[str, Any]) -> dict[str, Any]:
        return {"p": next(p for p in state["user"]["payees"] if p["id"] == ctx["args"]["id"])}

    def _view_payee_edit(self, state: State, ctx: dict[str, Any]) -> dict[str, Any]:
        return {"pe": state["ui"].get("pe") or {"id": None, "bank": ""}}

    def _credit_ctx(self, state: State) -> dict[str, Any]:
        return {
            "c": state["user"]["credit"],
            "owed": q.credit_owed_fen(state),
            "min_due": q.credit_min_due_fen(state),
            "available": q.credit_available_fen(state),
        }

    def _view_credit_home(self, state: State, ctx: dict[str, Any]) -> dict[str, Any]:
        due = date.fromisoformat(state["user"]["credit"]["bill"]["due_date"])
        return {**self._credit_ctx(state), "days_left": (due - ctx["today"]).days}

    def _view_credit_bill(self, state: State, ctx: dict[str, Any]) -> dict[str, Any]:
        tab = state["ui"].get("bill_tab") or "billed"
        c = state["user"]["credit"]
        rows = [t for t in reversed(c["txns"]) if t["billed"] == (tab == "billed")]
        return {**self._credit_ctx(state), "bill_tab": tab, "rows": rows}

    def _view_credit_repay(self, state: State, ctx: dict[str, Any]) -> dict[str, Any]:
        pay = state["ui"].get("pay") or {"from_acc": q.default_account(state)["id"], "option": "full"}
        return {**self._credit_ctx(state), "pay": pay, "acc": q.account(state, pay.get("from_acc") or "a1")}

    def _view_credit_installment(self, state: State, ctx: dict[str, Any]) -> dict[str, Any]:
        inst = state["ui"].get("inst") or {"periods": 6}
        owed = q.credit_owed_fen(state)
        plans = [
            {"n": n, "fee": owed * bp // 10_000, "each": (owed + owed * bp // 10_000) // n}
            for n, bp in INSTALLMENT_FEE_BP.items()
        ]
        return {**self._credit_ctx(state), "inst": inst, "plans": plans}

    def _view_bill_form(self, state: State, ctx: dict[str, Any]) -> dict[str, Any]:
        pay = state["ui"].get("pay") or {
            "from_acc": "a1",
            "bill_kind": ctx["args"].get("kind", "electricity"),
            "queried": None,
        }
        kind = pay.get("bill_kind") or ctx["args"].get("kind", "electricity")
        queried = pay.get("queried")
        holder = None
        due = None
        if queried:
            holder = next(
                a["holder"] for a in state["world"]["billers"][kind]["accounts"] if a["account_no"] == queried
            )
            due = bill_due_fen(state, kind, queried)
        return {
            "pay": pay,
            "kind": kind,
            "biller": state["world"]["billers"][kind],
            "holder": holder,
            "due": due,
            "acc": q.account(state, pay.get("from_acc") or "a1"),
        }

    def _view_topup(self, state: State, ctx: dict[str, Any]) -> dict[str, Any]:
        pay = state["ui"].get("pay") or {"from_acc": "a1", "face": 10_000}
        return {"pay": pay, "acc": q.account(state, pay.get("from_acc") or "a1")}

    def _view_pay_records(self, state: State, ctx: dict[str, Any]) -> dict[str, Any]:
        rows = [{**b, "title": f"{b['label']} {b['account_no']}"} for b in state["user"]["bill_payments"]]
        rows += [{**t, "title": f"话费充值 {t['phone']}"} for t in state["user"]["topups"]]
        past = q.filter_txns(
            state,
            q.TxnFilter(
                acc=q.default_account(state)["id"], cat="缴费", start=ctx["today"] - timedelta(days=179)
            ),
        )
        return {"rows": sorted(rows, key=lambda r: r["created"], reverse=True), "past": past}

    def _view_deposit_product(self, state: State, ctx: dict[str, Any]) -> dict[str, Any]:
        return {"p": q.deposit_product(state, ctx["args"]["id"])}

    def _view_deposit_open(self, state: State, ctx: dict[str, Any]) -> dict[str, Any]:
        pay = state["ui"].get("pay") or {"from_acc": "a1", "rollover": True}
        return {
            "p": q.deposit_product(state, ctx["args"]["id"]),
            "pay": pay,
            "acc": q.account(state, pay.get("from_acc") or "a1"),
        }

    def _view_wealth_home(self, state: State, ctx: dict[str, Any]) -> dict[str, Any]:
        funds = sorted(state["world"]["funds"], key=lambda f: -f["return_1y"])[:3]
        return {"held": sum(h["amount_fen"] for h in state["user"]["holdings"]), "featured": funds}

    def _view_fund_list(self, state: State, ctx: dict[str, Any]) -> dict[str, Any]:
        risk, kind, sort = (
            state["ui"].get("fund_risk") or "",
            state["ui"].get("fund_type") or "",
            state["ui"].get("fund_sort") or "default",
        )
        rows = [
            f
            for f in state["world"]["funds"]
            if (not risk or f["risk"] == risk) and (not kind or f["type"] == kind)
        ]
        if sort == "return":
            rows.sort(key=lambda f: -f["return_1y"])
        elif sort == "nav":
            rows.sort(key=lambda f: -f["nav"])
        types = sorted({f["type"] for f in state["world"]["funds"]})
        return {"funds": rows, "risk": risk, "ftype": kind, "sort": sort, "types": types}

    def _view_fund_detail(self, state: State, ctx: dict[str, Any]) -> dict[str, Any]:
        return {"f": q.fund(state, ctx["args"]["id"])}

    def _view_fund_buy(self, state: State, ctx: dict[str, Any]) -> dict[str, Any]:
        pay = state["ui"].get("pay") or {"from_acc": "a1"}
        return {
            "f": q.fund(state, ctx["args"]["id"]),
            "pay": pay,
            "acc": q.account(state, pay.get("from_acc") or "a1"),
        }

    def _view_risk_test(self, state: State, ctx: dict[str, Any]) -> dict[str, Any]:
        return {"answers": state["ui"].get("risk_answers") or {}}

    def _view_holdings(self, state: State, ctx: dict[str, Any]) -> dict[str, Any]:
        return {"rows": [{**h, "f": q.fund(state, h["fund"])} for h in state["user"]["holdings"]]}

    def _view_fx_calc(self, state: State, ctx: dict[str, Any]) -> dict[str, Any]:
        fx = state["ui"].get("fx") or {"code": "USD", "dir": "buy", "result": None}
        return {"fx": fx, "rate": q.fx_rate(state, fx["code"])}

    def _view_branches(self, state: State, ctx: dict[str, Any]) -> dict[str, Any]:
        query = state["ui"].get("branch_query") or ""
        flt = state["ui"].get("branch_filter") or "all"
        rows = [
            b
            for b in state["world"]["branches"]
            if (query in b["name"] or query in b["address"]) and (flt == "all" or "周日" in b["hours"])
        ]
        return {"branches": sorted(rows, key=lambda b: b["distance_m"]), "query": query, "bfilter": flt}

    def _view_branch_detail(self, state: State, ctx: dict[str, Any]) -> dict[str, Any]:
        return {"b": q.branch(state, ctx["args"]["id"])}

    def _view_appointment(self, state: State, ctx: dict[str, Any]) -> dict[str, Any]:
        appt = state["ui"].get("appt") or {
            "branch": ctx["args"].get("id", "b1"),
            "service": None,
            "date": None,
            "slot": None,
        }
        return {"appt": appt, "b": q.branch(state, appt["branch"])}

    def _view_message_detail(self, state: State, ctx: dict[str, Any]) -> dict[str, Any]:
        return {"msg": next(m for m in state["user"]["messages"] if m["id"] == ctx["args"]["id"])}

    def _view_messages(self, state: State, ctx: dict[str, Any]) -> dict[str, Any]:
        return {"msgs": sorted(state["user"]["messages"], key=lambda m: m["ts"], reverse=True)}

    # --- invariants --------------------------------------------------------------------------

    def invariants(self, state: State) -> list[str]:
        out: list[str] = []
        u = state["user"]
        for acc in u["accounts"]:
            own = [t for t in u["txns"] if t["acc"] == acc["id"]]
            total = acc["opening_fen"] + sum(t["amount_fen"] for t in own)
            if total != acc["balance_fen"]:
                out.append(
                    f"account {acc['id']}: balance {acc['balance_fen']} does not reconcile with history ({total})"
                )
            if acc["balance_fen"] < 0:
                out.append(f"account {acc['id']}: negative balance {acc['balance_fen']}")
            if own and own[-1]["balance_fen"] != acc["balance_fen"]:
                out.append(
                    f"account {acc['id']}: last history balance {own[-1]['balance_fen']} != {acc['balance_fen']}"
                )
            for sub in acc["subaccounts"]:
                if sub["principal_fen"] <= 0:
                    out.append(f"sub-account {sub['id']}: non-positive principal")
        s = u["settings"]
        if not 0 < s["single_limit_fen"] <= s["daily_limit_fen"]:
            out.append(f"limits: single {s['single_limit_fen']} / daily {s['daily_limit_fen']} out of order")
        per_day: dict[str, int] = {}
        for t in u["transfers"]:
            if t["amount_fen"] <= 0:
                out.append(f"transfer {t['id']}: non-positive amount")
            if t["amount_fen"] > t["single_limit_at"]:
                out.append(f"transfer {t['id']}: exceeds the single-transfer limit in force")
            if t["when"] == "now" and t["status"] in (od.PENDING, od.DONE):
                day = t["created"][:10]
                per_day[day] = per_day.get(day, 0) + t["amount_fen"]
                if per_day[day] > t["daily_limit_at"]:
                    out.append(f"transfers on {day}: exceed the daily limit in force")
        c = u["credit"]
        if c["repaid_fen"] < 0 or c["repaid_fen"] > c["bill"]["amount_fen"]:
            out.append("credit card: repaid more than the bill")
        if q.credit_available_fen(state) < 0:
            out.append("credit card: negative available credit")
        if any(h["amount_fen"] < 0 for h in u["holdings"]):
            out.append("holdings: negative amount")
        return out

    # --- crawl seeds for clone-stats ------------------------------------------------------------

    def stats_states(self) -> list[State]:
        """States from which a crawler reaches every screen by firing the events it finds."""
        from clones.bank.stats_seeds import seed_states

        return seed_states(self)


def default_setup(route: str | None = None, **kw: Any) -> CloneSetup:
    return CloneSetup(route=route, **kw)


def iso(d: date) -> str:
    return d.isoformat()
