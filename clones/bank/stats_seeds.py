"""Seed states for `realbench clone-stats`: one per flow, with forms filled the way a user would,
so a crawler that fires every control also gets past each flow's validation."""

from __future__ import annotations

import copy
from typing import TYPE_CHECKING, Any

from clones.base import State, navigate
from realbench.taskpack import CloneSetup

if TYPE_CHECKING:
    from clones.bank.app import Bank


def _at(base: State, route: str, *, form: dict[str, str] | None = None, **ui: Any) -> State:
    s = copy.deepcopy(base)
    navigate(s, route, **ui.pop("args", {}))
    s["ui"]["form"].update(form or {})
    s["ui"].update(ui)
    return s


def seed_states(clone: Bank) -> list[State]:
    home = clone.build_state(CloneSetup(), {})
    login = clone.build_state(CloneSetup(route="login"), {})
    login["ui"]["form"].update(username="13800005721", password="test1234")
    tf = {
        "from_acc": "a1",
        "bank": "ICBC",
        "arrival": "realtime",
        "mode": "now",
        "date": None,
        "day": None,
        "save_payee": False,
    }
    transfer_form = {
        "payee_name": "陈静",
        "account_no": "6222020200112233445",
        "amount": "200",
        "note": "还款",
    }
    draft = {
        "kind": "transfer",
        "from_acc": "a1",
        "payee": "陈静",
        "account_no": "6222020200112233445",
        "bank": "ICBC",
        "amount_fen": 20_000,
        "fee_fen": 0,
        "note": "",
        "arrival": "realtime",
        "when": "now",
        "date": None,
        "day": None,
        "times": None,
        "save_payee": False,
    }
    seeds = [
        login,
        home,
        _at(home, "transfer_form", form=transfer_form, tf=dict(tf)),
        _at(home, "transfer_form", form=transfer_form, tf={**tf, "mode": "date", "date": "2026-03-09"}),
        _at(
            home,
            "transfer_form",
            form={**transfer_form, "times": "6"},
            tf={**tf, "mode": "monthly", "day": 8},
        ),
        _at(home, "confirm", draft=draft),
        _at(home, "credit_repay", pay={"from_acc": "a1", "option": "full"}),
        _at(home, "credit_installment", inst={"periods": 6}),
        _at(
            home,
            "bill_form",
            form={"bill_account": "0102345678", "bill_amount": "88"},
            pay={"from_acc": "a1", "bill_kind": "electricity", "queried": "0102345678"},
            args={"kind": "electricity"},
        ),
        _at(
            home,
            "deposit_open",
            form={"deposit_amount": "10000"},
            pay={"from_acc": "a1", "rollover": True, "product": "d1y"},
            args={"id": "d1y"},
        ),
        _at(
            home,
            "fund_buy",
            form={"fund_amount": "1000"},
            pay={"from_acc": "a1", "fund": "f03"},
            args={"id": "f03"},
        ),
        _at(home, "limits", form={"single_limit": "20000", "daily_limit": "50000"}),
        _at(
            home,
            "history_filter",
            form={
                "start": "2026-02-01",
                "end": "2026-02-28",
                "min_amount": "10",
                "max_amount": "500",
                "party": "",
            },
        ),
        _at(
            home,
            "payee_edit",
            form={"pe_name": "张伟", "pe_account": "6222600110022334455", "pe_alias": "朋友"},
            pe={"id": None, "bank": "BOCOM"},
        ),
        _at(home, "fx_calc", form={"fx_amount": "100"}, fx={"code": "USD", "dir": "buy", "result": None}),
        _at(
            home,
            "appointment",
            appt={"branch": "b1", "service": "开卡", "date": "2026-03-04", "slot": "09:00-10:00"},
            args={"id": "b1"},
        ),
        _at(home, "risk_test", risk_answers={str(i): 1 for i in range(5)}),
    ]
    # the password/SMS step with the code already received, so the crawler can settle an order
    verify = _at(home, "confirm", draft=draft)
    clone.handle(verify, _event("confirm_submit"))
    clone.handle(verify, _event("send_sms"))
    verify["ui"]["form"].update(sms_code="123456")
    seeds.append(verify)
    seeds += _variant_seeds(clone, transfer_form)
    return seeds


def _variant_seeds(clone: Bank, transfer_form: dict[str, str]) -> list[State]:
    """The logged-out home with login on demand (a new phone, so the device step shows) and the
    transfer with the SMS code on the confirmation page, filled so the crawler gets through."""
    guest = clone.build_state(CloneSetup(data={"start": "logged_out_home"}), {})
    guest["ui"]["form"].update(login_phone="13800005721", password="test1234", device_code="123456")
    sms = clone.build_state(CloneSetup(data={"transfer_flow": "sms_on_confirm"}), {})
    clone.handle(sms, _event("transfer_to_payee", "p2"))
    sms["ui"]["form"].update(amount="200", note="还款", confirm_sms_code="123456", tx_password="123456")
    clone.handle(sms, _event("transfer_next"))
    return [guest, sms]


def _event(name: str, arg: str | None = None) -> Any:
    from clones.base import UIEvent

    return UIEvent(name, arg)
