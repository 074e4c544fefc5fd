"""The train clone's login gate, password and SMS steps, and the home / 铁路会员 screens.

Plans run against the rendered HTML (clones/dom_plan.py), so what a test sees is what the screen
shows; the evidence that nothing was booked is the account state itself."""

from __future__ import annotations

import json

import pytest

from clones.base import UIEvent, snapshot
from clones.dom_plan import DomPlanRunner, run_plan
from clones.train_ticketing.home_views import GRID_COLUMNS, GRID_ROWS, grid_pages
from clones.train_ticketing.login import LOGIN_PASSWORD
from realbench.errors import CloneError
from realbench.hierarchy import Selector
from realbench.taskpack import CloneSetup, PlanStep
from tests.tt_support import CLONE, PACK, instances, play, verdict

BOOK = PACK.task("login-then-book")
CHECK = PACK.task("login-then-check-order")


def _steps(raw: list[dict]) -> list[PlanStep]:
    return [PlanStep.model_validate(s) for s in raw]


def _golden(task) -> list[dict]:
    return [s.model_dump(exclude_none=True) for s in task.golden]


def _runner(setup: CloneSetup, task=BOOK) -> DomPlanRunner:
    inst = instances(task)[0]
    return DomPlanRunner(CLONE, CLONE.build_state(setup, inst.params), inst.params, inst.boundary())


def _logged_out_on_login_page() -> DomPlanRunner:
    r = _runner(CloneSetup(data={"logged_in": False, "sms_code": "246810"}))
    r.step(PlanStep.model_validate({"tap": {"resource_id": "ticket_home_bottom_bar_order"}}))
    assert r.state["ui"]["route"] == "login"
    return r


def _shown(r: DomPlanRunner, rid: str) -> bool:
    try:
        r.find(Selector(resource_id=rid))
    except CloneError:
        return False
    return True


def test_default_start_is_logged_in_and_nothing_asks_for_a_login() -> None:
    state = CLONE.build_state(CloneSetup(), {})
    assert state["user"]["logged_in"] is True
    CLONE.handle(state, UIEvent("tab", "orders"))
    assert state["ui"]["route"] == "orders_unfinished"


def test_logged_out_booking_opens_login_and_never_creates_an_order() -> None:
    inst = instances(BOOK)[0]
    # the golden plan with the login steps cut out: 预订 opens the login page instead of the order form
    golden = _golden(BOOK)
    first_login = next(i for i, s in enumerate(golden) if _is_login_step(s))
    assert golden[first_login - 1]["tap"]["resource_id"] == "book_edz"
    start = CLONE.build_state(BOOK.clone.setup, inst.params)
    run = run_plan(CLONE, start, inst, _steps(golden[:first_login]))
    assert run.after["ui"]["route"] == "login"
    assert run.after["user"]["orders"] == [] and run.after["user"]["sold"] == {}
    # submitting straight from a forged event is gated too
    state = snapshot(run.after)
    CLONE.handle(state, UIEvent("submit_order"))
    assert state["ui"]["route"] == "login" and state["user"]["orders"] == []
    v = verdict(inst, start, run.after, None)
    assert not v.success


def _is_login_step(step: dict) -> bool:
    sel = step.get("tap") or (step.get("type") or {}).get("into") or {}
    rid = str(sel.get("resource_id", ""))
    return rid.startswith(("login_", "sms_")) or rid in ("usernameinput", "passwordinput")


def test_login_then_book_returns_to_the_seat_page_and_books() -> None:
    inst = instances(BOOK)[0]
    before, run = play(inst)
    assert run.after["user"]["logged_in"] is True
    assert len(run.after["user"]["orders"]) == 1
    assert verdict(inst, before, run.after, None).success


def test_login_returns_to_the_screen_it_interrupted() -> None:
    r = _runner(CloneSetup(data={"logged_in": False, "sms_code": "246810"}))
    r.step(PlanStep.model_validate({"tap": {"text": "查询车票"}}))
    r.step(PlanStep.model_validate({"tap": {"resource_id": "train_row"}}))
    origin = {"route": r.state["ui"]["route"], "args": dict(r.state["ui"]["args"])}
    stack = json.dumps(r.state["ui"]["stack"], sort_keys=True)
    # the card's seats unfold inside the list; the list's args name the opened train
    assert origin["route"] == "train_list" and origin["args"].get("train")
    r.step(PlanStep.model_validate({"scroll_to": {"selector": {"resource_id": "book_edz"}}}))
    r.step(PlanStep.model_validate({"tap": {"resource_id": "book_edz"}}))
    assert r.state["ui"]["route"] == "login"
    for raw in (
        {
            "type": {"text": "13812346612", "into": {"resource_id": "usernameinput"}}
        },  # the phone number works too
        {"type": {"text": LOGIN_PASSWORD, "into": {"resource_id": "passwordinput"}}},
        {"tap": {"resource_id": "login_submit"}},
        {"tap": {"resource_id": "sms_send"}},
        {"type": {"text": "246810", "into": {"resource_id": "sms_code"}}},
        {"tap": {"resource_id": "sms_submit"}},
    ):
        r.step(PlanStep.model_validate(raw))
    assert r.state["user"]["logged_in"] is True
    assert {"route": r.state["ui"]["route"], "args": r.state["ui"]["args"]} == origin
    assert json.dumps(r.state["ui"]["stack"], sort_keys=True) == stack
    assert r.state["ui"]["login"] is None


@pytest.mark.parametrize(("account", "password"), [("liming88", "wrong-pass"), ("someone", LOGIN_PASSWORD)])
def test_a_wrong_account_or_password_is_refused_and_not_kept(account: str, password: str) -> None:
    r = _logged_out_on_login_page()
    for raw in (
        {"type": {"text": account, "into": {"resource_id": "usernameinput"}}},
        {"type": {"text": password, "into": {"resource_id": "passwordinput"}}},
        {"tap": {"resource_id": "login_submit"}},
    ):
        r.step(PlanStep.model_validate(raw))
    assert r.state["ui"]["route"] == "login"
    assert r.state["user"]["logged_in"] is False
    assert r.find(Selector(resource_id="toast")).node.text == "用户名或密码错误，请重新输入"
    # the typed password is gone from the state (and so from any saved snapshot)
    assert password not in json.dumps(r.state, ensure_ascii=False)


def test_a_wrong_or_missing_sms_code_is_refused() -> None:
    r = _logged_out_on_login_page()
    for raw in (
        {"type": {"text": "liming88", "into": {"resource_id": "usernameinput"}}},
        {"type": {"text": LOGIN_PASSWORD, "into": {"resource_id": "passwordinput"}}},
        {"tap": {"resource_id": "login_submit"}},
    ):
        r.step(PlanStep.model_validate(raw))
    assert r.state["ui"]["route"] == "login_sms"
    assert LOGIN_PASSWORD not in json.dumps(r.state)
    # confirming before a code was sent is refused
    r.step(PlanStep.model_validate({"tap": {"resource_id": "sms_submit"}}))
    assert r.run.refusals == ["请先获取验证码"]
    r.step(PlanStep.model_validate({"tap": {"resource_id": "sms_send"}}))
    assert "246810" in r.find(Selector(resource_id="toast")).node.text
    assert "246810" in r.find(Selector(resource_id="sms_notice")).node.text
    r.step(PlanStep.model_validate({"type": {"text": "135790", "into": {"resource_id": "sms_code"}}}))
    r.step(PlanStep.model_validate({"tap": {"resource_id": "sms_submit"}}))
    assert r.state["user"]["logged_in"] is False
    assert r.state["ui"]["route"] == "login_sms"
    assert r.find(Selector(resource_id="toast")).node.text == "验证码错误，请重新输入"


def test_without_a_task_code_the_sms_code_is_deterministic() -> None:
    codes = []
    for _ in range(2):
        state = CLONE.build_state(CloneSetup(data={"logged_in": False}), {})
        CLONE.handle(state, UIEvent("open_login"))
        CLONE.handle(
            state,
            UIEvent("login_submit", form={"login_account": "liming88", "login_password": LOGIN_PASSWORD}),
        )
        CLONE.handle(state, UIEvent("sms_send"))
        codes.append(state["ui"]["login"]["code"])
    assert codes[0] == codes[1] and len(codes[0]) == 6 and codes[0].isdigit()


def test_logged_out_mine_and_member_offer_a_login_and_hide_account_facts() -> None:
    r = _runner(CloneSetup(data={"logged_in": False, "scenario": "with_orders"}))
    assert not _shown(r, "home_trip")  # the next trip is an account fact
    r.step(PlanStep.model_validate({"tap": {"text": "我的"}}))
    assert r.find(Selector(resource_id="mine_login")).node.text == "未登录,点击去登录"
    assert not _shown(r, "profile_card") and not _shown(r, "mine_upcoming")
    r.step(PlanStep.model_validate({"tap": {"resource_id": "tab_member"}}))
    assert not _shown(r, "member_points")
    r.step(PlanStep.model_validate({"tap": {"resource_id": "member_login"}}))
    assert r.state["ui"]["route"] == "login"


def test_logout_then_login_again() -> None:
    r = _runner(CloneSetup())
    r.step(PlanStep.model_validate({"tap": {"text": "我的"}}))
    r.step(PlanStep.model_validate({"tap": {"resource_id": "menu_logout"}}))
    assert r.state["user"]["logged_in"] is False and _shown(r, "mine_login")


def test_member_tab_shows_the_points_the_verifier_grades() -> None:
    task = PACK.task("lookup-member-points-tab")
    inst = instances(task)[0]
    before, run = play(inst)
    assert run.answer == str(before["user"]["profile"]["points"])
    assert verdict(inst, before, run.after, run.answer).success
    assert not verdict(inst, before, run.after, str(before["user"]["profile"]["points"] + 1)).success


def test_home_has_the_query_button_product_tabs_and_a_paged_5x3_grid() -> None:
    r = _runner(CloneSetup())
    for rid in (
        "ticket_home_btn_search",
        "home_search",
        "home_scan",
        "home_messages",
        "home_banner",
        "home_news",
    ):
        assert _shown(r, rid), rid
    pages = grid_pages()
    assert len(pages) >= 2 and all(len(p) <= GRID_COLUMNS * GRID_ROWS for p in pages)
    assert len(pages[0]) == GRID_COLUMNS * GRID_ROWS
    grid = r.find(Selector(resource_id="service_grid")).node
    assert grid.scrollable
    r.step(PlanStep.model_validate({"tap": {"resource_id": "home_tab_flight"}}))
    assert r.state["ui"]["route"] == "elsewhere"
    assert "合作平台" in r.find(Selector(resource_id="elsewhere_text")).node.text


def test_unknown_setup_keys_and_bad_codes_are_refused_by_the_setup_model() -> None:
    from pydantic import ValidationError

    from clones.train_ticketing.app import TrainTicketingSetupData

    with pytest.raises(ValidationError):
        TrainTicketingSetupData.model_validate({"logged_in": "no"})
    with pytest.raises(ValidationError):
        TrainTicketingSetupData.model_validate({"sms_code": "12ab"})
    assert TrainTicketingSetupData.model_validate({"logged_in": False}).logged_in is False


def test_check_order_after_login_passes_without_unexpected_changes() -> None:
    inst = instances(CHECK)[0]
    before, run = play(inst)
    assert CLONE.unexpected_changes(CHECK.clone.verifier.name, before, run.after) == []
    assert before["user"]["logged_in"] is False and run.after["user"]["logged_in"] is True
