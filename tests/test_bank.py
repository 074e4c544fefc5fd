"""Fast tests of the bank clone and its task pack (no browser)."""

from __future__ import annotations

import copy
from datetime import datetime
from pathlib import Path
from typing import Any

import pytest

from clones.bank import orders as od
from clones.bank.app import Bank
from clones.bank.world import generate
from clones.base import UIEvent
from clones.contracts import contract_problems
from clones.dom_plan import initial_state, instantiate, plan_verdict, run_plan
from realbench.errors import CloneError, PackError
from realbench.taskpack import CloneSetup, PlanStep, Task, check_pack, load_pack, parse_pack

PACK_PATH = Path(__file__).resolve().parents[1] / "taskpacks" / "bank"
PACK = load_pack(PACK_PATH)
TASK_IDS = [t.id for t in PACK.tasks]
BANK = Bank()  # not the registry: a half-edited sibling clone must not break these tests


def _check(pack: Any) -> list[Any]:
    return check_pack(
        pack,
        has_clone=lambda n: n == Bank.name,
        has_verifier=lambda c, n: n in BANK.verifiers,
        has_side_effect_check=lambda c, n: n in BANK.side_effect_checks,
        check_task=lambda p, t: contract_problems(BANK, p, t),
    )


# --- the pack -----------------------------------------------------------------------------------


def test_pack_loads_and_passes_check_pack() -> None:
    assert PACK.clone == "bank" and PACK.real_app.package == "com.chinamworld.main"
    assert len(PACK.tasks) >= 60
    assert {t.difficulty for t in PACK.tasks} == {1, 2, 3, 4}
    assert PACK.policy.money_moving and set(PACK.policy.require_boundary_tags) >= {"money"}
    assert _check(PACK) == []


def test_every_money_task_declares_a_boundary_and_real_side() -> None:
    for t in PACK.tasks:
        assert t.judge.rubric and t.golden and t.real.setup, t.id
        if "money" in t.tags or "account_change" in t.tags:
            assert t.real.boundary, t.id
            assert t.real.checks, t.id


# --- every task: the golden end state passes, a plausible wrong end state fails ------------------


def _run(task: Task, seed: int = 0, steps: list[PlanStep] | None = None) -> tuple[Any, Any, Any]:
    inst = instantiate(task, seed)
    state = initial_state(BANK, inst)
    run = run_plan(BANK, state, inst, steps)
    return inst, state, run


@pytest.mark.parametrize("task_id", TASK_IDS)
def test_golden_end_state_is_accepted(task_id: str) -> None:
    task = PACK.task(task_id)
    for seed in (0, 1):
        inst, _, run = _run(task, seed)
        v, effects = plan_verdict(BANK, inst, run)
        assert v.success, (task_id, seed, v.reason)
        assert v.progress == 1.0
        assert effects == [], (task_id, effects)
        assert BANK.invariants(run.after) == []
        assert run.boundary == bool(task.real.boundary), task_id


def test_every_bank_verifier_registers_wrong_end_states() -> None:
    """Each task's wrong end states are registered beside its verifier (clones/bank/verifiers.py)
    and checked for every task in tests/test_verifier_contracts.py."""
    used = {t.clone.verifier.name for t in PACK.tasks}
    missing = sorted(n for n in used if BANK.verifiers[n].wrong_end_states is None)
    assert missing == []


# --- check_pack refuses unsafe bank plans -----------------------------------------------------------


def _pack_with(task_patch: dict[str, Any], base_id: str = "transfer_saved_payee") -> Any:
    raw = PACK.model_dump(mode="json", exclude_none=True)
    task = next(t for t in raw["tasks"] if t["id"] == base_id)
    task.update(copy.deepcopy(task_patch))
    raw["tasks"] = [task]
    return parse_pack(raw)


def _golden(base_id: str = "transfer_saved_payee") -> list[dict[str, Any]]:
    return PACK.task(base_id).model_dump(mode="json", exclude_none=True)["golden"]


def _problems(patch: dict[str, Any]) -> list[str]:
    return [p.field + ": " + p.message for p in _check(_pack_with(patch))]


def test_check_pack_refuses_typing_a_password_after_the_boundary() -> None:
    plan = _golden() + [{"type": {"text": "123456", "into": {"resource_id": "et_code"}}}]
    problems = _problems({"golden": plan})
    assert any("past a commit boundary" in p for p in problems)


def test_check_pack_refuses_tapping_the_password_step() -> None:
    plan = _golden()[:-1] + [
        {"tap": {"resource_id": "dlg_right_tv"}},
        {"tap": {"resource_id": "btn_confirm"}},
    ]
    problems = _problems({"golden": plan})
    assert any("always-forbidden" in p for p in problems)
    assert any("past a commit boundary" in p for p in problems)


def test_check_pack_refuses_typing_into_the_password_field() -> None:
    plan = _golden()[:-1] + [
        {"type": {"text": "123456", "into": {"resource_id": "et_code"}}},
        {"tap": {"resource_id": "dlg_right_tv"}},
    ]
    assert any("always-forbidden" in p for p in _problems({"golden": plan}))


def test_check_pack_refuses_a_loose_selector_that_overlaps_the_boundary() -> None:
    plan = _golden()[:-1] + [{"tap": {"text_contains": "确认"}}, {"tap": {"resource_id": "btn_done"}}]
    problems = _problems({"golden": plan})
    assert any("past a commit boundary" in p for p in problems)


def test_check_pack_refuses_a_money_task_without_boundary() -> None:
    problems = _problems({"real": {"manual": ["已登录"], "boundary": []}})
    assert any("must declare a commit boundary" in p for p in problems)


def test_check_pack_refuses_a_money_plan_that_stops_short_of_its_boundary() -> None:
    plan = _golden()[:-1] + [{"terminate": "success"}]
    assert any("must end by tapping" in p for p in _problems({"golden": plan}))


def test_check_pack_refuses_setup_that_taps_the_boundary() -> None:
    real = PACK.task("transfer_saved_payee").real.model_dump(mode="json", exclude_none=True)
    real["setup"] = [{"do": "tap", "selector": {"text": "确认"}}]
    assert any("real.setup" in p for p in _problems({"real": real}))


def test_setup_prose_is_refused() -> None:
    real = PACK.task("transfer_saved_payee").real.model_dump(mode="json", exclude_none=True)
    real["setup"] = ["先点确认"]
    with pytest.raises(PackError, match=r"real\.setup\.0"):
        _problems({"real": real})


def test_the_loose_overlap_rule_applies_only_to_money_moving_packs() -> None:
    pack = _pack_with(
        {
            "golden": _golden()[:-1]
            + [{"tap": {"text_contains": "确认"}}, {"tap": {"resource_id": "btn_done"}}]
        }
    )
    relaxed = pack.model_copy(update={"policy": pack.policy.model_copy(update={"money_moving": False})})
    assert not any("past a commit boundary" in p.message for p in _check(relaxed))


# --- the world ---------------------------------------------------------------------------------------


def test_world_is_deterministic_per_seed() -> None:
    clock = datetime(2026, 3, 2, 9, 0)
    assert generate(7, clock) == generate(7, clock)
    w0, u0 = generate(0, clock)
    w1, u1 = generate(1, clock)
    assert u0["txns"] != u1["txns"]
    assert [p["name"] for p in u0["payees"]] == [p["name"] for p in u1["payees"]]  # tasks name them
    _, drifted = generate(0, clock, data_seed=5)
    assert drifted["accounts"][0]["balance_fen"] != u0["accounts"][0]["balance_fen"]


def test_initial_states_hold_the_invariants() -> None:
    for seed in range(5):
        state = BANK.build_state(CloneSetup(seed=seed), {})
        assert BANK.invariants(state) == []


def test_invariants_catch_a_tampered_balance() -> None:
    state = BANK.build_state(CloneSetup(), {})
    state["user"]["accounts"][0]["balance_fen"] += 1
    assert any("reconcile" in p for p in BANK.invariants(state))


# --- flows through handlers ---------------------------------------------------------------------------


def _fill_transfer(state: dict[str, Any], amount: str, payee: str = "p2") -> None:
    BANK.handle(state, UIEvent("transfer_to_payee", payee))
    BANK.handle(state, UIEvent("__sync__", None, {"amount": amount}))


def test_transfer_settles_after_sms_and_password_and_history_reconciles() -> None:
    state = BANK.build_state(CloneSetup(), {})
    before = state["user"]["accounts"][0]["balance_fen"]
    _fill_transfer(state, "250.5")
    BANK.handle(state, UIEvent("transfer_next"))
    assert state["ui"]["route"] == "confirm"
    BANK.handle(state, UIEvent("confirm_submit"))
    assert state["ui"]["route"] == "secure_verify"
    assert state["user"]["transfers"][-1]["status"] == od.PENDING
    assert state["user"]["accounts"][0]["balance_fen"] == before  # nothing moves before verification
    with pytest.raises(CloneError):  # a wrong SMS code
        BANK.handle(state, UIEvent("verify_submit", None, {"sms_code": "654321"}))
    BANK.handle(state, UIEvent("send_sms"))  # re_send
    # the code first; the payment password follows in the same field, typed on the bank's keypad
    BANK.handle(state, UIEvent("verify_submit", None, {"sms_code": "123456"}))
    assert state["user"]["transfers"][-1]["status"] == od.PENDING
    assert 'name="tx_password"' in BANK.render(state)
    for ch in "6543210":
        BANK.handle(state, UIEvent("kp", ch))
    BANK.handle(state, UIEvent("kp_delete"))
    BANK.handle(state, UIEvent("verify_submit"))
    assert state["user"]["transfers"][-1]["status"] == od.DONE
    assert state["user"]["accounts"][0]["balance_fen"] == before - 25_050
    assert state["ui"]["route"] == "result"
    assert BANK.invariants(state) == []


@pytest.mark.parametrize(
    ("amount", "payee_name", "message"),
    [
        ("60000", None, "单笔转账限额"),
        ("100", "王五", "户名与账号不符"),
        ("0", None, "大于0"),
        ("1.234", None, "正确的"),
    ],
)
def test_transfer_refusals(amount: str, payee_name: str | None, message: str) -> None:
    state = BANK.build_state(CloneSetup(), {})
    _fill_transfer(state, amount)
    if payee_name:
        BANK.handle(state, UIEvent("__sync__", None, {"payee_name": payee_name}))
    with pytest.raises(CloneError, match=message):
        BANK.handle(state, UIEvent("transfer_next"))


def test_transfer_beyond_the_balance_is_refused() -> None:
    state = BANK.build_state(CloneSetup(), {})
    state["user"]["settings"]["single_limit_fen"] = 50_000_000
    state["user"]["settings"]["daily_limit_fen"] = 50_000_000
    _fill_transfer(state, "400000")
    with pytest.raises(CloneError, match="余额不足"):
        BANK.handle(state, UIEvent("transfer_next"))


def test_cancelling_the_password_step_cancels_the_order() -> None:
    state = BANK.build_state(CloneSetup(), {})
    _fill_transfer(state, "10")
    BANK.handle(state, UIEvent("transfer_next"))
    BANK.handle(state, UIEvent("confirm_submit"))
    BANK.handle(state, UIEvent("verify_cancel"))
    assert state["user"]["transfers"][-1]["status"] == od.CANCELLED
    assert state["ui"]["route"] == "home"


def test_every_route_renders() -> None:
    for seed_state in BANK.stats_states():
        html = BANK.render(seed_state)
        assert 'data-route="' in html
    assert len(BANK.routes()) >= 37


def test_drift_relabels_never_touch_a_boundary_label() -> None:
    labels = {b.text or b.text_contains for t in PACK.tasks for b in t.real.boundary} | {
        b.text for b in PACK.real_app.forbidden
    }
    assert not (labels - {None}) & set(Bank.drift_relabels)
    assert all(k and v and k != v for k, v in Bank.drift_relabels.items())


def test_state_is_plain_json() -> None:
    import json

    for state in BANK.stats_states()[:3]:
        assert json.loads(json.dumps(state, ensure_ascii=False)) == state


def test_drift_data_seed_keeps_every_golden_plan_valid() -> None:
    """Data drift changes amounts and history, never what the tasks name."""
    for task in PACK.tasks:
        inst = instantiate(task, 3)
        setup = task.clone.setup.model_copy(update={"data": {**task.clone.setup.data, "data_seed": 3}})
        run = run_plan(BANK, BANK.build_state(setup, inst.params), inst)
        v, effects = plan_verdict(BANK, inst, run)
        assert v.success and not effects, (task.id, v.reason, effects)
