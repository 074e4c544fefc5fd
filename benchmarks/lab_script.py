"""The acceptance measure of the clones: a lab's own uiautomator2 script, run on them.

The script is written the way a lab would write one for the real apps, from the facts that
docs/real-apps.md gives at [script] level only (view ids, texts, classes, activities and the order
of screens; the one [web] fact used is named where it is used). It drives plain uiautomator2 —
`u2.connect(serial)`, `d(resourceId=…)`, `d(text=…).exists`, `d.app_current()`,
`d.wait_activity(…)`, `d.xpath(…)` — nothing of realbench:

- 12306: home → departure and arrival station pickers → date picker → 查询车票 → train list → expand
  a train's seat rows → 预订 → confirm order → passengers → stops BEFORE 提交订单;
- CCB: home → 转账 → transfer home (`grid_function`, first item) → SmartTransferMainAct form → 下一步
  (`btn_right1`) → confirm dialog, stops BEFORE `dlg_right_tv`.

It runs on a virtual phone (behind a private adb server on a free port) whose apps are the clones,
and reports every step as held or failed with why, and totals per app. A step that fails does not
stop the flow: the next step is tried on whatever screen is there, so each step's verdict is its
own (a later step can still hold when an earlier check failed but the screen moved on).

    .venv/bin/python benchmarks/lab_script.py [--json] [--timeout 4] [--drift none]
"""

from __future__ import annotations

import argparse
import json
import os
import re
import socket
import subprocess
import sys
import time
import xml.etree.ElementTree as ET
from collections.abc import Callable
from dataclasses import asdict, dataclass, field
from datetime import date, timedelta
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

TICKET = "com.MobileTicket"
BANK = "com.chinamworld.main"
H5_ACTIVITY = "com.alipay.mobile.nebulacore.ui.H5Activity"
CCB_MAIN = "com.ccb.start.MainActivity"
CCB_LOGIN = "com.ccb.framework.security.login.internal.view.LoginActivity"
CCB_TRANSFER_HOME = (
    "com.ccb.transfer.transferhomenew.view.TransferHomeActNew",
    "com.ccb.transfer.transfer_home.view.TransferHomeAct",
)
CCB_FORM = "com.ccb.transfer.smarttransfer.view.SmartTransferMainAct"

FROM_STATION = "北京"
TO_STATION = "上海"
AMOUNT = "1.00"
# The lab's test account: its password (the clone accepts any 6–20 characters) and the payee it
# transfers to (name, account number, the bank's name as the bank list shows it). A lab sets these
# from its own account; on a virtual phone the payee is read from the clone's world, the way a lab
# reads it off its account (the bank answers an unknown account with 查询账户开户机构不成功).
LAB_PASSWORD_ENV = "REALBENCH_LAB_CCB_PASSWORD"
LAB_PAYEE_ENV = "REALBENCH_LAB_CCB_PAYEE"  # "name,account,bank"

# Controls the script must never tap: the commit points it stops before.
NEVER_TAP_TEXT = ("提交订单", "立即支付", "快速支付", "确认支付")
NEVER_TAP_IDS = ("dlg_right_tv", "btn_confirm")


@dataclass(frozen=True)
class Payee:
    name: str
    account: str
    bank: str


class Failed(Exception):
    """A step did not hold; the message says why."""


@dataclass
class StepResult:
    app: str
    index: int
    name: str
    fact: str  # what of docs/real-apps.md the step relies on
    held: bool
    why: str = ""
    seconds: float = 0.0


@dataclass
class AppTotals:
    app: str
    held: int
    steps: int

    @property
    def share(self) -> float:
        return self.held / self.steps if self.steps else 0.0


@dataclass
class LabReport:
    steps: list[StepResult] = field(default_factory=list)

    def totals(self) -> list[AppTotals]:
        out = []
        for app in dict.fromkeys(s.app for s in self.steps):
            mine = [s for s in self.steps if s.app == app]
            out.append(AppTotals(app, sum(s.held for s in mine), len(mine)))
        return out

    def to_json(self) -> dict[str, Any]:
        totals = self.totals()
        held = sum(t.held for t in totals)
        steps = sum(t.steps for t in totals)
        return {
            "held": held,
            "steps": steps,
            "share": round(held / steps, 4) if steps else 0.0,
            "apps": [{**asdict(t), "share": round(t.share, 4)} for t in totals],
            "steps_detail": [asdict(s) for s in self.steps],
        }


# --- the script's helpers (what a lab's own script would have) ------------------------------------


def rid(package: str, name: str) -> str:
    return f"{package}:id/{name}"


class Lab:
    """Runs named steps against one uiautomator2 device and records each verdict."""

    def __init__(self, d: Any, timeout: float, payee: Callable[[], Payee] | None = None) -> None:
        self.d = d
        self.timeout = timeout
        self.report = LabReport()
        self.memo: dict[str, str] = {}
        self._payee = payee

    def payee(self) -> Payee:
        configured = os.environ.get(LAB_PAYEE_ENV)
        if configured:
            name, account, bank = (p.strip() for p in configured.split(","))
            return Payee(name, account, bank)
        if self._payee is None:
            raise Failed(f"no payee: set {LAB_PAYEE_ENV}=name,account,bank")
        return self._payee()

    def step(self, app: str, name: str, fact: str, fn: Callable[[], None]) -> None:
        t0 = time.perf_counter()
        index = sum(1 for s in self.report.steps if s.app == app) + 1
        try:
            fn()
            result = StepResult(app, index, name, fact, True)
        except Failed as exc:
            result = StepResult(app, index, name, fact, False, f"{exc}; {self.screen()}")
        except Exception as exc:  # a lab's script meets whatever the phone throws
            why = f"{type(exc).__name__}: {exc}"[:300]
            result = StepResult(app, index, name, fact, False, f"{why}; {self.screen()}")
        result.seconds = round(time.perf_counter() - t0, 2)
        self.report.steps.append(result)

    def screen(self) -> str:
        """What was in front when a step failed: the activity and the first texts of the dump."""
        try:
            root = ET.fromstring(self.d.dump_hierarchy())
            texts = [n.get("text", "") or n.get("content-desc", "") for n in root.iter("node")]
            shown = list(dict.fromkeys(t for t in texts if t))[:8]
            return f"screen: {self.activity().rsplit('.', 1)[-1]} showing {' / '.join(t[:24] for t in shown)}"
        except Exception as exc:
            return f"screen unreadable: {type(exc).__name__}"

    # selectors -----------------------------------------------------------------------------

    def need(self, what: str, timeout: float | None = None, **selector: Any) -> Any:
        el = self.d(**selector)
        if not el.wait(timeout=self.timeout if timeout is None else timeout):
            raise Failed(f"no {what} ({', '.join(f'{k}={v!r}' for k, v in selector.items())})")
        return el

    def click(self, what: str, **selector: Any) -> None:
        self._guard(selector)
        self.need(what, **selector).click()

    def activity(self) -> str:
        return str(self.d.app_current().get("activity", ""))

    def need_activity(self, *names: str) -> None:
        deadline = time.monotonic() + self.timeout
        while True:
            current = self.activity()
            if current in names:
                return
            if time.monotonic() >= deadline:
                raise Failed(f"activity {current or '(none)'} in front, not {' or '.join(names)}")
            time.sleep(0.3)

    @staticmethod
    def _guard(selector: dict[str, Any]) -> None:
        """The script stops before the commit points: it refuses to tap them."""
        text = str(selector.get("text", "") or selector.get("textContains", ""))
        ident = str(selector.get("resourceId", "")).rsplit("/", 1)[-1]
        if text in NEVER_TAP_TEXT or ident in NEVER_TAP_IDS:
            raise Failed(f"refused to tap the commit point {text or ident}")


# --- 12306 ----------------------------------------------------------------------------------------


def ticket_flow(lab: Lab) -> None:
    d = lab.d
    app = "12306"

    def r(name: str) -> str:
        return rid(TICKET, name)

    def s(name: str, fact: str) -> Callable[[Callable[[], None]], None]:
        return lambda fn: lab.step(app, name, fact, fn)

    @s("launch: the app is in front", "1a package com.MobileTicket")
    def _() -> None:
        d.app_start(TICKET, stop=True)
        time.sleep(1.0)
        current = d.app_current().get("package")
        if current != TICKET:
            raise Failed(f"{current} in front")

    @s("home: ticket_home_btn_search shows", "1b [script]")
    def _() -> None:
        lab.need("query button", timeout=lab.timeout * 2, resourceId=r("ticket_home_btn_search"))

    @s("home: the query button reads 查询车票", "1b [script]")
    def _() -> None:
        text = lab.need("query button", resourceId=r("ticket_home_btn_search")).get_text()
        if text != "查询车票" and not d(text="查询车票").exists:
            raise Failed(f"query button reads {text!r}")

    @s("home: home_page_train_dep1 (content-desc 出发站: X) and home_page_train_arr1", "1b [script]")
    def _() -> None:
        desc = lab.need("departure station", resourceId=r("home_page_train_dep1")).info.get(
            "contentDescription"
        )
        if not desc or not str(desc).startswith("出发站"):
            raise Failed(f"content-desc is {desc!r}, not '出发站: X'")
        lab.need("arrival station", resourceId=r("home_page_train_arr1"))

    @s("home: date row content-desc holds M月D日", "1b [script]")
    def _() -> None:
        el = lab.need("date row", resourceId=r("home_page_depart_date_view_container"))
        desc = str(el.info.get("contentDescription") or "")
        m = re.search(r"(\d{1,2})月(\d{1,2})日", desc)
        if m is None:
            raise Failed(f"content-desc is {desc!r}: no M月D日")
        lab.memo["date"] = f"{m.group(1)}月{m.group(2)}日"

    @s("home: bottom bar ids (ticket/order/mine)", "1b [script]")
    def _() -> None:
        for name in (
            "ticket_home_bottom_bar_ticket",
            "ticket_home_bottom_bar_order",
            "ticket_home_bottom_bar_mine",
        ):
            lab.need(name, timeout=1, resourceId=r(name))

    def pick_station(name: str) -> None:
        lab.need("station search box", className="android.widget.EditText").set_text(name)
        time.sleep(0.5)
        lab.click(
            f"station result 火车站 {name}站",
            className="android.widget.Button",
            textContains=f"火车站 {name}站",
        )

    @s("station picker opens: EditText and 取消", "1c [script]")
    def _() -> None:
        lab.click("departure station", resourceId=r("home_page_train_dep1"))
        lab.need("station search box", className="android.widget.EditText")
        lab.need("取消", text="取消")

    @s("station picker: 热门车站 / 最近常用 tags", "1c [script]")
    def _() -> None:
        if not (d(text="热门车站").exists or d(text="最近常用").exists):
            raise Failed("neither 热门车站 nor 最近常用 shows")

    @s(f"station picker: search {FROM_STATION}, tap Button 火车站 {FROM_STATION}站", "1c [script]")
    def _() -> None:
        pick_station(FROM_STATION)

    @s(f"home: departure reads 出发站: {FROM_STATION}", "1b [script]")
    def _() -> None:
        el = lab.need("departure station", resourceId=r("home_page_train_dep1"))
        desc = str(el.info.get("contentDescription") or "")
        if FROM_STATION not in desc:
            raise Failed(f"content-desc is {desc!r}")

    @s(f"arrival picker: search {TO_STATION}, tap its 火车站 Button", "1c [script]")
    def _() -> None:
        lab.click("arrival station", resourceId=r("home_page_train_arr1"))
        pick_station(TO_STATION)

    @s(f"home: arrival is {TO_STATION}", "1b [script]")
    def _() -> None:
        el = lab.need("arrival station", resourceId=r("home_page_train_arr1"))
        desc = str(el.info.get("contentDescription") or "") + el.get_text()
        if TO_STATION not in desc:
            raise Failed(f"arrival shows {desc!r}")

    @s("date picker opens: 选择日期", "1c [script]")
    def _() -> None:
        lab.click("date row", resourceId=r("home_page_depart_date_view_container"))
        lab.need("选择日期", textContains="选择日期")

    @s("date picker: day Button with M月D日 and 农历", "1c [script]")
    def _() -> None:
        days = d(className="android.widget.Button", textContains="农历")
        if not days.wait(timeout=lab.timeout):
            raise Failed("no day Button whose text holds 农历")
        # the day after the one the home shows (the year only matters for the month's length)
        shown = re.fullmatch(r"(\d{1,2})月(\d{1,2})日", lab.memo.get("date", ""))
        if shown is None:
            raise Failed("the home showed no date to start from")
        nxt = date(2026, int(shown.group(1)), int(shown.group(2))) + timedelta(days=1)
        wanted = f"{nxt.month}月{nxt.day}日"
        cell = d(className="android.widget.Button", textContains=wanted)
        if not cell.exists or "农历" not in (cell.get_text() or ""):
            raise Failed(f"no day Button holding {wanted} and 农历")
        cell.click()
        lab.memo["date"] = wanted

    @s("home: date row shows the chosen day", "1b [script]")
    def _() -> None:
        el = lab.need("date row", resourceId=r("home_page_depart_date_view_container"))
        desc = str(el.info.get("contentDescription") or "")
        if lab.memo.get("date", "?") not in desc:
            raise Failed(f"content-desc is {desc!r}, not {lab.memo.get('date')}")

    @s("查询车票 opens the list in H5Activity", "1a wait_activity(H5Activity) [script]")
    def _() -> None:
        lab.click("query button", resourceId=r("ticket_home_btn_search"))
        if not d.wait_activity(H5_ACTIVITY, timeout=lab.timeout):
            raise Failed(f"activity {lab.activity() or '(none)'} in front, not H5Activity")

    @s("list: 直达 tab marks the page", "1d [script]")
    def _() -> None:
        lab.need("直达", textContains="直达")

    @s("list: 中转 tab", "1b [script]")
    def _() -> None:
        lab.need("中转", text="中转")

    @s("list: train row Button with spaced number 'G 1 2 3次列车…'", "1a/1d [script]")
    def _() -> None:
        lab.need(
            "train row",
            className="android.widget.Button",
            textMatches=r"^[GDCZTKYL]( \d)+次列车.*",
        )

    @s("list: row string '…点…分从X出发…点…分到达Y…历时…'", "1d [script]")
    def _() -> None:
        row = lab.need(
            "train row", className="android.widget.Button", textMatches=r"^[GDCZTKYL]( \d)+次列车.*"
        )
        text = row.get_text() or ""
        if not re.search(r"\d+点\d+分从.+出发\d+点\d+分到达.+历时", text):
            raise Failed(f"row reads {text[:60]!r}")

    @s("list: expanding a card shows 预订", "1d v5.6 [script]; 2026 UI: tap 二等 [web]")
    def _() -> None:
        row = lab.need(
            "train row", className="android.widget.Button", textMatches=r"^[GDCZTKYL]( \d)+次列车.*"
        )
        row.click()
        if d(text="预订").wait(timeout=lab.timeout / 2):
            return
        seat = d(textStartsWith="二等")
        if seat.exists:
            seat.click()
        if not d(text="预订").wait(timeout=lab.timeout / 2):
            raise Failed("no 预订 after tapping the row and its 二等 seat row")

    @s("预订 opens 确认订单 (Button 提交订单)", "1d/1e [script] (静音车厢 dialog [web])")
    def _() -> None:
        lab.click("预订", text="预订")
        if d(textContains="静音车厢").wait(timeout=1):
            for label in ("继续", "选择", "确定"):
                if d(text=label).exists:
                    d(text=label).click()
                    break
        lab.need("提交订单", className="android.widget.Button", text="提交订单")

    @s("confirm: train summary '…次列车,HH点MM分从X出发…'", "1e [script]")
    def _() -> None:
        lab.need("train summary", textMatches=r".*次列车,?\d+点\d+分从.+出发.*")

    @s("confirm: seat RadioButton holding 二等/一等/…", "1e [script]")
    def _() -> None:
        lab.need(
            "seat RadioButton",
            className="android.widget.RadioButton",
            textMatches=r".*(二等|一等|商务|硬卧|软卧|硬座|无座).*",
        )

    @s("confirm: page runs in H5Activity", "1a [script]")
    def _() -> None:
        lab.need_activity(H5_ACTIVITY)

    @s("选择乘车人 opens a page whose h5_title is 选择乘车人", "1e [script]")
    def _() -> None:
        lab.click("选择乘车人", text="选择乘车人")
        title = lab.need("h5_title", resourceId=r("h5_title")).get_text()
        if title != "选择乘车人":
            raise Failed(f"h5_title reads {title!r}")

    @s("passengers: CheckBox rows '姓名，成人，…'; tick one", "1e [script]")
    def _() -> None:
        rows = lab.need(
            "passenger CheckBox", className="android.widget.CheckBox", textMatches=r".+，成人，.*"
        )
        rows.click()

    @s("passengers: h5_bt_text confirms, back on the confirm page", "1e [script]")
    def _() -> None:
        lab.click("title-bar button", resourceId=r("h5_bt_text"))
        lab.need("提交订单", className="android.widget.Button", text="提交订单")

    @s("confirm: Button 删除乘车人<name> for the chosen passenger", "1e [script]")
    def _() -> None:
        lab.need("删除乘车人", className="android.widget.Button", textStartsWith="删除乘车人")

    @s("confirm: H5 back h5_tv_nav_back desc 返回; stop before 提交订单", "1a [script]")
    def _() -> None:
        back = lab.need("H5 back", resourceId=r("h5_tv_nav_back"))
        if back.info.get("contentDescription") != "返回":
            raise Failed(f"back's content-desc is {back.info.get('contentDescription')!r}")
        lab.need("提交订单", text="提交订单")  # there, and never tapped


# --- CCB ------------------------------------------------------------------------------------------


def bank_flow(lab: Lab) -> None:
    d = lab.d
    app = "CCB"

    def r(name: str) -> str:
        return rid(BANK, name)

    def s(name: str, fact: str) -> Callable[[Callable[[], None]], None]:
        return lambda fn: lab.step(app, name, fact, fn)

    @s("launch: the app is in front", "2a package com.chinamworld.main")
    def _() -> None:
        d.app_start(BANK, stop=True)
        time.sleep(1.0)
        current = d.app_current().get("package")
        if current != BANK:
            raise Failed(f"{current} in front")

    @s("home runs in com.ccb.start.MainActivity (pop-ups closed)", "2a/2c [script]")
    def _() -> None:
        for name in ("close", "btn_cancel"):
            if d(resourceId=r(name)).exists:
                d(resourceId=r(name)).click()
        lab.need_activity(CCB_MAIN)

    @s("home: 转账 (main_home_smart_transfer)", "2b [script]")
    def _() -> None:
        lab.need("转账 shortcut", resourceId=r("main_home_smart_transfer"))

    @s("转账 opens TransferHomeAct(New)", "2a/2c [script]")
    def _() -> None:
        if d(resourceId=r("main_home_smart_transfer")).exists:
            d(resourceId=r("main_home_smart_transfer")).click()
        else:
            lab.click("转账", text="转账")
        lab.need_activity(*CCB_TRANSFER_HOME)

    @s("transfer home: grid_function", "2b [script]")
    def _() -> None:
        lab.need("grid_function", resourceId=r("grid_function"))

    @s("grid_function item 1 opens SmartTransferMainAct (login if asked)", "2b/2c [script]")
    def _() -> None:
        item = d.xpath(f'//*[@resource-id="{r("grid_function")}"]/*[1]')
        if not item.wait(timeout=lab.timeout):
            raise Failed("grid_function has no first item")
        item.click()
        time.sleep(0.5)
        if lab.activity() == CCB_LOGIN:
            login(lab)
        lab.need_activity(CCB_FORM)

    @s("form: tv_pay_account shows a card 6217***1234", "2b [script]")
    def _() -> None:
        text = lab.need("payer card", resourceId=r("tv_pay_account")).get_text() or ""
        if not re.search(r"\d{4}\*+\d{4}", text):
            raise Failed(f"tv_pay_account reads {text!r}")

    @s("form: et_cash_name takes the payee", "2b [script]")
    def _() -> None:
        lab.need("payee name", resourceId=r("et_cash_name")).set_text(lab.payee().name)

    @s("form: et_collection_account takes the account", "2b [script]")
    def _() -> None:
        lab.need("payee account", resourceId=r("et_collection_account")).set_text(lab.payee().account)

    @s("form: tv_bank opens the bank list (热门银行)", "2b [script]")
    def _() -> None:
        if d(resourceId=r("tv_bank")).exists:
            d(resourceId=r("tv_bank")).click()
        else:
            lab.click("bank arrow", resourceId=r("iv_bank_arrow"))
        lab.need("热门银行", text="热门银行")

    @s("bank list: the payee's bank, an item with id title", "2b [script]")
    def _() -> None:
        bank = lab.payee().bank
        item = d(resourceId=r("title"), text=bank)
        if not item.exists and d(scrollable=True).exists:
            d(scrollable=True).scroll.to(resourceId=r("title"), text=bank)
        lab.click(f"bank item {bank}", resourceId=r("title"), text=bank)
        lab.need_activity(CCB_FORM)

    @s("form: tv_transfer_way opens bottom_selector_tv 实时转账", "2b [script]")
    def _() -> None:
        lab.click("transfer way", resourceId=r("tv_transfer_way"))
        lab.need("实时转账 option", resourceId=r("bottom_selector_tv"), text="实时转账")

    @s("form: choosing 实时转账", "2b [script]")
    def _() -> None:
        lab.click("实时转账 option", resourceId=r("bottom_selector_tv"), text="实时转账")
        lab.need("transfer way", resourceId=r("tv_transfer_way"))

    @s("form: et_tran_amount takes the amount", "2b [script]")
    def _() -> None:
        lab.need("amount", resourceId=r("et_tran_amount")).set_text(AMOUNT)

    @s("form: rl_tran_mark (附言)", "2b [script]")
    def _() -> None:
        lab.need("remark row", resourceId=r("rl_tran_mark"))

    @s("form: btn_right1 (下一步)", "2b [script]")
    def _() -> None:
        lab.click("next", resourceId=r("btn_right1"))

    @s("confirm dialog: dlg_right_tv shows", "2b/2c [script]")
    def _() -> None:
        lab.need("confirm", resourceId=r("dlg_right_tv"))

    @s("confirm dialog over SmartTransferMainAct; stop before dlg_right_tv", "2a/2c [script]")
    def _() -> None:
        lab.need_activity(CCB_FORM)
        lab.need("confirm", resourceId=r("dlg_right_tv"))  # there, and never tapped


def login(lab: Lab) -> None:
    """LoginActivity: et_password opens the bank's keypad; keys are nodes with text=<char>."""
    d = lab.d
    password = os.environ.get(LAB_PASSWORD_ENV, "246810")
    lab.need("password", resourceId=rid(BANK, "et_password")).click()
    for ch in password:
        lab.need(f"keypad key {ch}", timeout=2, text=ch).click()
    d(resourceId=rid(BANK, "btn_confirm")).click()


# --- running it on a virtual phone ---------------------------------------------------------------


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


def run(
    *, timeout: float = 4.0, drift: str = "none", adb_port: int | None = None
) -> tuple[LabReport, list[dict[str, Any]]]:
    """Both flows on one virtual phone showing the clones; the report and the phone's input log.
    Without `adb_port` a private adb server is started on a free port (and stopped after)."""
    import adbutils
    import uiautomator2 as u2

    from devices.virtual import VirtualPhoneHost

    own_server = adb_port is None
    if adb_port is None:
        adb_port = free_port()
        os.environ["ANDROID_ADB_SERVER_PORT"] = str(adb_port)
        adbutils.adb = adbutils.AdbClient(port=adb_port)
        subprocess.run(["adb", "start-server"], check=True, capture_output=True, timeout=30)
    try:
        with VirtualPhoneHost() as host:
            info = host.start(1, screens="clone", drift=drift)[0]
            host.adb_connect(adb_port)
            d = u2.connect(info.serial)
            phone = host.phone(info.serial)
            lab = Lab(d, timeout, payee=lambda: clone_payee(phone))
            ticket_flow(lab)
            bank_flow(lab)
            events = [e.model_dump(mode="json") for e in host.phone(info.serial).events.events()]
            return lab.report, events
    finally:
        if own_server:
            subprocess.run(["adb", "kill-server"], capture_output=True, timeout=30)


def clone_payee(phone: Any) -> Payee:
    """The virtual phone's stand-in for the lab's account fixture: a payee of another bank from the
    bank clone's world (its name, account number and the bank's displayed name)."""
    state = phone.ui.source(BANK).app_state()
    world = state["world"]
    names = {b["code"]: b["name"] for b in world["banks"]}
    entry = next(e for e in world["directory"] if e["bank"] in names and e["bank"] != "SELF")
    return Payee(entry["name"], entry["account_no"], names[entry["bank"]])


def print_text(report: LabReport) -> None:
    for s in report.steps:
        mark = "held  " if s.held else "FAILED"
        line = f"{s.app:<6} {s.index:>2} {mark} {s.name}  [{s.fact}]"
        print(line + (f"\n            why: {s.why}" if s.why else ""))
    for t in report.totals():
        print(f"{t.app}: {t.held}/{t.steps} steps held ({t.share:.0%})")
    data = report.to_json()
    print(f"total: {data['held']}/{data['steps']} ({data['share']:.0%})")


def markdown(report: LabReport) -> str:
    """The per-step list as a Markdown table (for the clones' status notes)."""
    data = report.to_json()
    totals = "; ".join(f"{a['app']} {a['held']}/{a['steps']}" for a in data["apps"])
    lines = [
        f"Total {data['held']}/{data['steps']} steps held ({totals}).",
        "",
        "| app | # | step | fact | verdict | why |",
        "|---|---|---|---|---|---|",
    ]
    for s in report.steps:
        why = s.why.replace("|", "\\|").replace("\n", " ")
        verdict = "held" if s.held else "**failed**"
        lines.append(f"| {s.app} | {s.index} | {s.name} | {s.fact} | {verdict} | {why} |")
    return "\n".join(lines) + "\n"


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--json", action="store_true", help="print one JSON object")
    parser.add_argument("--timeout", type=float, default=4.0, help="seconds a step waits for a control")
    parser.add_argument("--drift", default="none", help="drift profile of the clones on the phone")
    parser.add_argument("--markdown", type=Path, default=None, help="also write the per-step table here")
    args = parser.parse_args(argv)
    report, _events = run(timeout=args.timeout, drift=args.drift)
    if args.markdown is not None:
        args.markdown.write_text(markdown(report), encoding="utf-8")
    if args.json:
        print(json.dumps(report.to_json(), ensure_ascii=False))
    else:
        print_text(report)
    return 0


if __name__ == "__main__":
    sys.exit(main())
