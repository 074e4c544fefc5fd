"""Screenshots of the bank clone's main screens, taken in headless Chromium through the clone
server: ``.venv/bin/python benchmarks/bank_screenshots.py [OUT_DIR] [NAME ...]`` (default
docs/screenshots/bank; names such as ``70_guest_home`` retake only those screens).

Each screen is reached by firing the clone's own UI events on the default start state; the state is
then loaded into a server session and the page is captured at 412x915 CSS px.
"""

from __future__ import annotations

import copy
import logging
import sys
from pathlib import Path
from typing import Any

import httpx

from clones.base import State, UIEvent, get_clone
from clones.server import CloneServer
from realbench.taskpack import CloneSetup

log = logging.getLogger("bank_screenshots")
BANK = get_clone("bank")
CHROMIUM = "/usr/bin/chromium"
ARGS = [
    "--no-sandbox",
    "--disable-gpu",
    "--no-first-run",
    "--disable-background-networking",
    "--disable-component-update",
    "--disable-sync",
]
Step = str | tuple[str, str | None] | dict[str, str]


def reach(base: State, *steps: Step) -> State:
    """Fire events (a name, a (name, arg) pair, or a dict of typed form values) on a copy of `base`."""
    state = copy.deepcopy(base)
    for step in steps:
        if isinstance(step, dict):
            BANK.handle(state, UIEvent("__sync__", None, step))
        elif isinstance(step, tuple):
            BANK.handle(state, UIEvent(step[0], step[1]))
        else:
            BANK.handle(state, UIEvent(step))
    state["ui"]["toast"] = None
    return state


def screens() -> dict[str, State]:
    home = BANK.build_state(CloneSetup(), {})
    login = BANK.build_state(CloneSetup(route="login"), {})
    out_rows = BANK._view_history(reach(home, "open_history", ("hist_dir", "out")), {})["rows"]  # type: ignore[attr-defined]
    first = out_rows[0]["id"]
    transfer = (("transfer_to_payee", "p2"), {"amount": "500", "note": "聚餐"})
    return {
        "01_login": login,
        "02_home": home,
        "03_biometric_offer": reach(login, {"username": "13800005721", "password": "test1234"}, "login"),
        "04_accounts": reach(home, "open_accounts"),
        "05_account_detail": reach(home, ("open_account", "a1")),
        "06_history": reach(home, "open_history"),
        "07_history_filter": reach(home, "open_history", "open_history_filter", ("hist_cat", "餐饮")),
        "08_txn_detail": reach(home, "open_history", ("open_txn", first)),
        "09_receipt": reach(home, "open_history", ("open_txn", first), ("open_receipt", first)),
        "10_transfer_home": reach(home, "open_transfer_home"),
        "11_transfer_form": reach(home, *transfer),
        "12_bank_picker": reach(home, "new_transfer", "open_bank_picker"),
        "11b_pay_account_sheet": reach(home, *transfer, ("open_sheet", "pay_account")),
        "11c_transfer_way_sheet": reach(home, *transfer, ("open_sheet", "transfer_way")),
        "13_confirm": reach(home, *transfer, "transfer_next"),
        "13b_account_lookup_error": reach(
            home,
            "new_transfer",
            {"payee_name": "张三", "account_no": "6217000010002000300", "amount": "1"},
            ("open_bank_picker", None),
            ("pick_bank", "ICBC"),
            "transfer_next",
        ),
        "14_secure_verify": reach(home, *transfer, "transfer_next", "confirm_submit"),
        "14b_payment_password": reach(
            home,
            *transfer,
            "transfer_next",
            "confirm_submit",
            {"sms_code": "123456"},
            "verify_submit",
            ("kp", "1"),
            ("kp", "2"),
            ("kp", "3"),
        ),
        "18_success": reach(
            home,
            *transfer,
            "transfer_next",
            "confirm_submit",
            {"sms_code": "123456", "tx_password": "123456"},
            "verify_submit",
        ),
        "19_transfer_records": reach(
            home,
            *transfer,
            "transfer_next",
            "confirm_submit",
            {"sms_code": "123456", "tx_password": "123456"},
            "verify_submit",
            "open_records",
        ),
        "19b_record_detail": reach(
            home,
            *transfer,
            "transfer_next",
            "confirm_submit",
            {"sms_code": "123456", "tx_password": "123456"},
            "verify_submit",
            "open_records",
            ("open_record", "TR0001"),
        ),
        "02b_home_drawer": reach(home, "home_drawer"),
        "15_payees": reach(home, "open_payees"),
        "16_scheduled": reach(home, "open_scheduled"),
        "17_date_picker": reach(home, "new_scheduled", "open_date_picker"),
        "20_credit_home": reach(home, ("tab", "credit")),
        "21_credit_repay": reach(home, ("tab", "credit"), "open_repay"),
        "22_installment": reach(home, ("tab", "credit"), "open_installment"),
        "30_pay_home": reach(home, ("tab", "life")),
        "31_bill_form": reach(
            home, ("tab", "life"), ("open_bill", "electricity"), {"bill_account": "0102345678"}, "bill_query"
        ),
        "32_topup": reach(home, "open_topup", "topup_self"),
        "40_deposit_home": reach(home, "open_deposit_home"),
        "41_wealth": reach(home, ("tab", "wealth")),
        "42_fund_list": reach(home, "open_funds", ("fund_sort", "return")),
        "43_fund_detail": reach(home, "open_funds", ("open_fund", "f03")),
        "44_risk_test": reach(home, "open_risk_test", ("risk_answer", "0:1"), ("risk_answer", "1:2")),
        "50_fx_rates": reach(home, "open_fx"),
        "51_fx_calc": reach(home, ("open_fx_calc", "USD"), {"fx_amount": "1000"}, "fx_calc"),
        "52_branches": reach(home, "open_branches"),
        "53_appointment": reach(
            home,
            "open_branches",
            ("open_branch", "b3"),
            ("appt_start", "b3"),
            ("appt_service", "开卡"),
            ("appt_slot", "10:00-11:00"),
        ),
        "60_mine": reach(home, ("tab", "mine")),
        "61_limits": reach(home, "open_limits"),
        "62_notifications": reach(home, "open_notifications"),
        "63_messages": reach(home, "open_messages"),
        **variant_screens(),
    }


def variant_screens() -> dict[str, State]:
    """The logged-out home with login on demand, and the transfer with the SMS code on the
    confirmation page (setup.data variants; docs/clones.md)."""
    guest = BANK.build_state(CloneSetup(data={"start": "logged_out_home"}), {})
    login = reach(guest, "open_transfer_home", {"login_phone": "13800005721", "password": "test1234"})
    sms = BANK.build_state(CloneSetup(data={"transfer_flow": "sms_on_confirm"}), {})
    transfer = (("transfer_to_payee", "p2"), {"amount": "500", "note": "聚餐"}, "transfer_next")
    return {
        "70_guest_home": guest,
        "71_login_phone": login,
        "72_device_verify": reach(login, "login"),
        "73_confirm_sms": reach(sms, *transfer),
        "74_payment_password": reach(sms, *transfer, {"confirm_sms_code": "123456"}, "confirm_submit"),
    }


def main(out: Path, names: list[str] | None = None) -> None:
    from playwright.sync_api import sync_playwright

    out.mkdir(parents=True, exist_ok=True)
    shots = {k: v for k, v in screens().items() if not names or k in names}
    with CloneServer() as server, sync_playwright() as pw:
        browser = pw.chromium.launch(executable_path=CHROMIUM, headless=True, args=ARGS)
        try:
            page = browser.new_page(viewport={"width": 412, "height": 915}, device_scale_factor=1)
            for name, state in shots.items():
                resp = httpx.post(server.url + "/api/sessions", json={"clone": "bank", "state": state})
                resp.raise_for_status()
                body: dict[str, Any] = resp.json()
                page.goto(f"{server.url}/s/{body.get('id') or body.get('session')}")
                page.wait_for_timeout(150)
                page.screenshot(path=str(out / f"{name}.png"))
                log.info("wrote %s", name)
        finally:
            browser.close()


if __name__ == "__main__":
    logging.basicConfig(level=logging.INFO)
    main(Path(sys.argv[1]) if len(sys.argv) > 1 else Path("docs/screenshots/bank"), sys.argv[2:])
