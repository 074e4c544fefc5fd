"""The transfer variant with the SMS code on the confirmation page (`transfer_flow: sms_on_confirm`).

No transfer order exists without the right code, money moves only after the payment password, and
the commit boundary of the variant's task stays before any account change (safety by effect).
"""

from __future__ import annotations

from pathlib import Path

import pytest

from clones.bank import orders as od
from clones.bank.app import Bank
from clones.base import State, UIEvent
from clones.effects import effect_problems, task_effect
from realbench.errors import CloneError
from realbench.taskpack import CloneSetup, RealSide, load_pack

BANK = Bank()
PACK = load_pack(Path(__file__).resolve().parents[1] / "taskpacks" / "bank")
SMS = CloneSetup(data={"transfer_flow": "sms_on_confirm"})


def _at_confirm(setup: CloneSetup = SMS, amount: str = "300") -> State:
    state = BANK.build_state(setup, {})
    BANK.handle(state, UIEvent("transfer_to_payee", "p2"))
    BANK.handle(state, UIEvent("transfer_next", None, {"amount": amount}))
    assert state["ui"]["route"] == "confirm"
    return state


def _money(state: State) -> list[int]:
    return [a["balance_fen"] for a in state["user"]["accounts"]]


def test_the_confirmation_page_carries_the_code_field_and_the_clones_stand_in_message() -> None:
    state = _at_confirm()
    html = BANK.render(state)
    assert 'name="confirm_sms_code"' in html and ">确定</button>" in html and ">确认</button>" not in html
    assert "【模拟短信】" in html and "123456" in html and "300.00" in html
    assert state["ui"]["toast"] == "验证码已发送至138****5721"


@pytest.mark.parametrize("code", ["", "654321", "12345"])
def test_without_the_right_code_no_order_is_created(code: str) -> None:
    state = _at_confirm()
    transfers, money = list(state["user"]["transfers"]), _money(state)
    with pytest.raises(CloneError, match="验证码"):
        BANK.handle(state, UIEvent("confirm_submit", None, {"confirm_sms_code": code}))
    assert state["user"]["transfers"] == transfers and _money(state) == money
    assert state["ui"]["route"] == "confirm"


def test_the_code_opens_the_password_page_and_only_the_password_moves_money() -> None:
    state = _at_confirm()
    money = _money(state)
    BANK.handle(state, UIEvent("confirm_submit", None, {"confirm_sms_code": "123456"}))
    order = state["user"]["transfers"][-1]
    assert order["status"] == od.PENDING and _money(state) == money
    assert state["ui"]["route"] == "secure_verify"
    html = BANK.render(state)
    assert 'name="sms_code"' not in html and 'name="tx_password"' in html and "输入支付密码" in html
    with pytest.raises(CloneError, match="交易密码"):
        BANK.handle(state, UIEvent("verify_submit", None, {"tx_password": ""}))
    assert order["status"] == od.PENDING and _money(state) == money
    BANK.handle(state, UIEvent("verify_submit", None, {"tx_password": "123456"}))
    assert order["status"] == od.DONE and _money(state)[0] == money[0] - 30_000
    assert BANK.invariants(state) == []


def test_the_password_step_cannot_be_reached_from_the_confirmation_page_by_hand() -> None:
    state = _at_confirm()
    with pytest.raises(CloneError, match="没有待验证的交易"):
        BANK.handle(state, UIEvent("verify_submit", None, {"sms_code": "123456", "tx_password": "123456"}))
    assert state["user"]["transfers"][-1]["status"] != od.PENDING


def test_the_default_flow_keeps_the_code_on_the_password_page() -> None:
    state = _at_confirm(CloneSetup())
    html = BANK.render(state)
    assert 'name="confirm_sms_code"' not in html and ">确认</button>" in html
    BANK.handle(state, UIEvent("confirm_submit"))  # the order exists from 确认 on, as before
    assert state["user"]["transfers"][-1]["status"] == od.PENDING
    assert 'name="sms_code"' in BANK.render(state)
    with pytest.raises(CloneError, match="请输入短信验证码"):
        BANK.handle(state, UIEvent("verify_submit", None, {"tx_password": "123456"}))


def test_other_money_flows_keep_the_code_on_the_password_page_under_the_variant() -> None:
    state = BANK.build_state(SMS, {})
    BANK.handle(state, UIEvent("open_topup"))
    BANK.handle(state, UIEvent("topup_next", None, {"phone": "13800005721"}))
    assert state["ui"]["route"] == "confirm"
    assert 'name="confirm_sms_code"' not in BANK.render(state)
    BANK.handle(state, UIEvent("confirm_submit"))
    assert 'name="sms_code"' in BANK.render(state)


def test_the_variant_task_commits_only_at_its_boundary() -> None:
    task = PACK.task("transfer_sms_on_confirm")
    effect = task_effect(BANK, task)
    assert effect.error is None and effect.changes and not effect.unguarded
    assert effect.boundary_step == len(task.golden)  # the page's 确定, after the typed code
    assert {c.step for c in effect.changes} == {len(task.golden)}
    # without its boundary the same plan would change the account unguarded: check-pack refuses it
    bare = task.model_copy(
        update={"real": RealSide.model_validate({**task.real.model_dump(), "boundary": []})}
    )
    problems = [str(p) for p in effect_problems(BANK, bare)]
    assert len(problems) == 1 and f"at step {len(task.golden)} with no commit boundary" in problems[0]


def test_on_a_phone_no_code_is_requested_or_typed() -> None:
    task = PACK.task("transfer_sms_on_confirm")
    forbidden = {s.text for s in PACK.real_app.forbidden} | {s.resource_id for s in PACK.real_app.forbidden}
    # the verification page's code field, its resend and confirm (real ids, REAL_APPS.md 2b)
    assert {"获取验证码", "re_send", "et_code", "btn_confirm"} <= forbidden
    real_plan = task.real.golden
    assert all(s.type is None or "123456" not in str(s.type) for s in real_plan)
    last = real_plan[-1]
    assert last.tap is not None and last.tap.text == "确定"
    assert any(b.text == "确定" for b in task.real.boundary)
