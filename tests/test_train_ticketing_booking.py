"""Booking closer to the real 12306 app: the later seat classes, sleepers priced by berth with a
berth choice, the payment platform page after 立即支付, and the `submit_check` variant."""

from __future__ import annotations

import copy
from typing import Any

import pytest
from pydantic import ValidationError

from clones.base import UIEvent, navigate
from clones.train_ticketing import booking
from clones.train_ticketing.app import TrainTicketingSetupData
from clones.train_ticketing.timetable import (
    BERTHS,
    SEAT_LABELS,
    _base_seats,
    build_world,
    find_train,
    leg_for,
)
from clones.train_ticketing.verifier_args import OrderSubmittedArgs
from clones.train_ticketing.views import money
from realbench.errors import CloneError
from realbench.taskpack import AnswerSpec, CloneSetup
from tests.tt_support import CLONE

# the seven classes of the clone before the later four were added: their codes must not change
LEGACY = ("swz", "ydz", "edz", "rw", "yw", "yz", "wz")


def _at_seats(state: dict[str, Any], train_no: str, day: str, frm: str, to: str) -> None:
    navigate(state, "train_seats", train=train_no, date=day, **{"from": frm, "to": to})


def _sleeper_state(**data: Any) -> tuple[dict[str, Any], Any]:
    """A state on the seat page of Z19 (北京西 → 西安, which always carries 硬卧) with seats left."""
    day = "2026-03-13"
    state = CLONE.build_state(
        CloneSetup(
            data=data,
            patch={"world": {"inventory_overrides": {f"Z19|{day}": {"yw": 30, "rw": 30}}}},
        ),
        {},
    )
    leg = leg_for(state["world"], "Z19", "北京西", "西安", day)
    assert leg is not None
    _at_seats(state, "Z19", day, "北京西", "西安")
    return state, leg


# --- seat classes ---------------------------------------------------------------------------------


def test_the_later_classes_appear_on_some_trains_in_the_real_apps_order():
    world = build_world(7)
    classes = {(t["type"], c) for t in world["trains"] for c in t["classes"]}
    assert ("G", "yxydz") in classes and ("D", "dw") in classes
    assert ("Z", "gjrw") in classes or ("T", "gjrw") in classes
    assert ("K", "rz") in classes or ("T", "rz") in classes
    g_with = [t for t in world["trains"] if t["type"] == "G" and "yxydz" in t["classes"]]
    g_without = [t for t in world["trains"] if t["type"] == "G" and "yxydz" not in t["classes"]]
    assert g_with and g_without  # some trains, not all
    order = list(SEAT_LABELS)
    for t in world["trains"]:
        assert t["classes"] == sorted(t["classes"], key=order.index)
    assert build_world(7)["trains"] == world["trains"]  # deterministic from the seed
    assert list(SEAT_LABELS)[:1] == ["swz"] and all(c in SEAT_LABELS for c in LEGACY)


def test_adding_a_class_leaves_the_seats_left_in_the_others_unchanged():
    world = build_world(7)
    train = next(t for t in world["trains"] if "yxydz" in t["classes"])
    legacy = tuple(c for c in train["classes"] if c in LEGACY)
    with_extra = dict(_base_seats(7, train["no"], "2026-03-05", tuple(train["classes"])))
    without = dict(_base_seats(7, train["no"], "2026-03-05", legacy))
    assert {c: with_extra[c] for c in legacy} == without


def test_sleeper_berths_cost_more_lower_down_and_the_listed_fare_is_the_upper_berth():
    world = build_world(7)
    for train in world["trains"]:
        for cls in train["classes"]:
            leg = leg_for(
                world, train["no"], train["stops"][0]["station"], train["stops"][-1]["station"], "x"
            )
            assert leg is not None
            if cls not in BERTHS:
                with pytest.raises(ValueError):
                    leg.berth_price(cls, "下铺")
                continue
            prices = [leg.berth_price(cls, b) for b in BERTHS[cls]]
            assert prices[0] == leg.price(cls)
            assert prices == sorted(prices) and prices[0] < prices[-1]
    assert BERTHS["yw"] == ("上铺", "中铺", "下铺") and "中铺" not in BERTHS["rw"]


# --- berth choice and prices --------------------------------------------------------------------


def test_a_chosen_berth_is_kept_on_every_ticket_and_priced_as_that_berth():
    state, leg = _sleeper_state()
    CLONE.handle(state, UIEvent("book_seat", "yw"))
    for pid in ("p1", "p2"):
        CLONE.handle(state, UIEvent("toggle_rider", pid))
    CLONE.handle(state, UIEvent("set_berth", "下铺"))
    html = CLONE.render(state)
    assert 'id="berth_lower"' in html and 'id="berth_middle"' in html
    lower = leg.berth_price("yw", "下铺")
    assert lower > leg.price("yw")
    assert f'id="order_total">{money(lower * 2)}<' in html
    CLONE.handle(state, UIEvent("submit_order"))
    order = state["user"]["orders"][-1]
    assert [t["berth"] for t in order["tickets"]] == ["下铺", "下铺"]
    assert all(t["seat"].endswith("下铺") and t["price"] == lower for t in order["tickets"])
    assert order["total"] == lower * 2
    assert CLONE.invariants(state) == []


def test_without_a_choice_berths_rotate_and_each_ticket_costs_its_berth():
    state, leg = _sleeper_state()
    CLONE.handle(state, UIEvent("book_seat", "yw"))
    for pid in ("p1", "p2", "p3"):
        CLONE.handle(state, UIEvent("toggle_rider", pid))
    CLONE.handle(state, UIEvent("submit_order"))
    order = state["user"]["orders"][-1]
    berths = [t["berth"] for t in order["tickets"]]
    assert sorted(berths) == sorted(BERTHS["yw"])
    for t in order["tickets"]:
        assert t["price"] == booking.rider_price(state, leg, "yw", t["ticket_type"], t["berth"])
    assert order["total"] == sum(t["price"] for t in order["tickets"])
    assert CLONE.invariants(state) == []


def test_berth_choices_are_refused_where_the_class_has_no_such_berth():
    state, _ = _sleeper_state()
    CLONE.handle(state, UIEvent("book_seat", "rw"))
    with pytest.raises(CloneError):
        CLONE.handle(state, UIEvent("set_berth", "中铺"))
    assert 'id="berth_middle"' not in CLONE.render(state)
    CLONE.handle(state, UIEvent("set_class", "yz"))
    with pytest.raises(CloneError):
        CLONE.handle(state, UIEvent("set_berth", "下铺"))
    assert 'id="berth_any"' not in CLONE.render(state)


def test_invariants_catch_a_ticket_not_priced_as_its_berth_or_a_berth_its_seat_does_not_name():
    state, _ = _sleeper_state()
    CLONE.handle(state, UIEvent("book_seat", "yw"))
    CLONE.handle(state, UIEvent("toggle_rider", "p1"))
    CLONE.handle(state, UIEvent("set_berth", "上铺"))
    CLONE.handle(state, UIEvent("submit_order"))
    ticket = state["user"]["orders"][-1]["tickets"][0]
    ticket["berth"] = "下铺"  # the seat still says 上铺 and the price is the upper berth's
    problems = CLONE.invariants(state)
    assert any("does not name its berth" in p for p in problems)
    assert any("but its fare is" in p for p in problems)


def test_the_verifier_wants_the_berth_and_its_fare():
    state, _ = _sleeper_state()
    before = {**state, "user": {**state["user"], "orders": list(state["user"]["orders"])}}
    CLONE.handle(state, UIEvent("book_seat", "yw"))
    CLONE.handle(state, UIEvent("toggle_rider", "p2"))
    CLONE.handle(state, UIEvent("set_berth", "中铺"))
    CLONE.handle(state, UIEvent("submit_order"))
    params = {
        "from": "北京",
        "to": "西安",
        "date": "2026-03-13",
        "train": "Z19",
        "seat": "yw",
        "passengers": ["王芳"],
    }
    assert CLONE.verify(
        "order_submitted", before, state, {**params, "berth": "中铺"}, None, AnswerSpec()
    ).success
    assert not CLONE.verify(
        "order_submitted", before, state, {**params, "berth": "下铺"}, None, AnswerSpec()
    ).success
    with pytest.raises(ValidationError):
        OrderSubmittedArgs.model_validate({**params, "seat": "edz", "berth": "下铺"})
    with pytest.raises(ValidationError):
        OrderSubmittedArgs.model_validate({**params, "seat": "rw", "berth": "中铺"})


# --- payment platform -----------------------------------------------------------------------------


def test_pay_now_opens_the_cashier_and_only_its_confirmation_pays():
    state = CLONE.build_state(CloneSetup(data={"scenario": "with_orders"}), {})
    unpaid = next(o for o in state["user"]["orders"] if o["status"] == "unpaid")
    CLONE.handle(state, UIEvent("continue_pay", unpaid["id"]))
    CLONE.handle(state, UIEvent("pay_order", unpaid["id"]))
    assert state["ui"]["route"] == "pay_platform"
    assert unpaid["status"] == "unpaid" and unpaid["pay_requested_at"]
    html = CLONE.render(state)
    assert "收银台" in html and "微信支付" in html and 'id="confirm_pay"' in html
    with pytest.raises(CloneError):
        CLONE.handle(state, UIEvent("pick_pay_channel", "bitcoin"))
    CLONE.handle(state, UIEvent("pick_pay_channel", "wechat"))
    CLONE.handle(state, UIEvent("confirm_pay"))
    assert state["ui"]["route"] == "pay_success"
    assert unpaid["status"] == "paid" and unpaid["pay_channel"] == "wechat"
    assert "微信支付" in CLONE.render(state)
    assert CLONE.invariants(state) == []
    with pytest.raises(CloneError):
        CLONE.handle(state, UIEvent("pay_order", unpaid["id"]))


def test_order_paid_accepts_the_hand_off_at_the_boundary_but_not_doing_nothing():
    before = CLONE.build_state(CloneSetup(data={"scenario": "with_orders"}), {})
    state = copy.deepcopy(before)
    unpaid = next(o for o in state["user"]["orders"] if o["status"] == "unpaid")
    params = {"order_to": unpaid["to"]}
    assert not CLONE.verify("order_paid", before, state, params, None, AnswerSpec()).success
    CLONE.handle(state, UIEvent("continue_pay", unpaid["id"]))
    CLONE.handle(state, UIEvent("pay_order", unpaid["id"]))
    assert CLONE.verify("order_paid", before, state, params, None, AnswerSpec()).success


# --- the submit_check variant ---------------------------------------------------------------------


def _g_form(**data: Any) -> dict[str, Any]:
    state = CLONE.build_state(CloneSetup(data={"scenario": "mid_booking", **data}), {})
    return state


def test_by_default_submitting_creates_the_order_at_once():
    state = _g_form()
    n = len(state["user"]["orders"])
    CLONE.handle(state, UIEvent("submit_order"))
    assert len(state["user"]["orders"]) == n + 1 and state["ui"]["route"] == "order_pay"


def test_the_check_variant_shows_the_riders_first_and_creates_the_order_on_confirm():
    state = _g_form(submit_check=True)
    n = len(state["user"]["orders"])
    html = CLONE.render(state)
    assert 'id="seat_A"' not in html  # seat choice moves into the check dialog
    CLONE.handle(state, UIEvent("submit_order"))
    assert len(state["user"]["orders"]) == n and state["ui"]["route"] == "order_form"
    html = CLONE.render(state)
    assert "请核对以下信息" in html and 'id="check_ok"' in html and 'id="seat_A"' in html
    assert html.count('id="check_rider"') == 2
    CLONE.handle(state, UIEvent("seat_pos", "A"))
    CLONE.handle(state, UIEvent("close_dialog"))  # 返回修改
    assert len(state["user"]["orders"]) == n and state["ui"]["dialog"] is None
    with pytest.raises(CloneError):
        CLONE.handle(state, UIEvent("confirm_submit"))
    CLONE.handle(state, UIEvent("submit_order"))
    CLONE.handle(state, UIEvent("confirm_submit"))
    assert len(state["user"]["orders"]) == n + 1 and state["ui"]["route"] == "order_pay"
    assert state["user"]["orders"][-1]["tickets"][0]["seat_letter"] == "A"
    assert CLONE.invariants(state) == []


def test_the_check_variant_refuses_an_empty_order_before_the_dialog():
    state = _g_form(submit_check=True)
    state["ui"]["booking"]["passengers"] = []
    with pytest.raises(CloneError):
        CLONE.handle(state, UIEvent("submit_order"))
    assert state["ui"]["dialog"] is None


def test_the_setup_schema_validates_the_variant_option():
    assert TrainTicketingSetupData.model_validate({"submit_check": True}).submit_check is True
    assert TrainTicketingSetupData.model_validate({}).submit_check is False
    with pytest.raises(ValidationError):
        TrainTicketingSetupData.model_validate({"submit_check": [1]})
    with pytest.raises(ValidationError):
        TrainTicketingSetupData.model_validate({"submit_checks": True})


def test_the_listing_shows_berth_prices_on_the_seat_page():
    state, leg = _sleeper_state()
    html = CLONE.render(state)
    assert 'id="berth_prices_yw"' in html
    for berth in BERTHS["yw"]:
        assert berth in html
    assert find_train(state["world"], "Z19") is not None


def test_no_payment_flags_a_hand_off_to_the_payment_platform():
    before = CLONE.build_state(CloneSetup(data={"scenario": "mid_booking"}), {})
    state = copy.deepcopy(before)
    CLONE.handle(state, UIEvent("submit_order"))
    assert CLONE.side_effect_checks["no_payment"](before, state, {}) == []
    CLONE.handle(state, UIEvent("pay_order", state["user"]["orders"][-1]["id"]))
    assert CLONE.side_effect_checks["no_payment"](before, state, {}) != []
