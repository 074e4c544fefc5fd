"""The train-ticketing clone and its task pack (fast tier: no browser).

Every task's golden plan is run against the rendered HTML for every parameter value and must
satisfy its verifier with no side effects; every verifier must also reject plausible wrong end
states produced by the clone's own handlers.
"""

from __future__ import annotations

from datetime import date, datetime, timedelta

import pytest

from clones.base import UIEvent
from clones.train_ticketing import DRIFT_RELABELS, booking
from clones.train_ticketing.answers import matches
from clones.train_ticketing.idcard import check_char, id_problem, is_valid, make_id
from clones.train_ticketing.timetable import available, build_world, city_of, legs_between
from realbench.errors import CloneError
from realbench.taskpack import CloneSetup, PlanStep, check_pack
from tests.tt_support import CLONE, PACK, instances, play, verdict

TASK_IDS = [t.id for t in PACK.tasks]


# --- the pack ----------------------------------------------------------------------------------


def test_pack_passes_check_pack_with_the_clones_names():
    problems = check_pack(
        PACK,
        has_clone=lambda n: n == "train_ticketing",
        has_verifier=lambda c, n: n in CLONE.verifiers,
        has_side_effect_check=lambda c, n: n in CLONE.side_effect_checks,
    )
    assert problems == []
    assert len(PACK.tasks) >= 60
    assert {t.difficulty for t in PACK.tasks} == {1, 2, 3, 4}
    assert PACK.real_app.package == CLONE.package == "com.MobileTicket"
    forbidden = {s.text for s in PACK.real_app.forbidden}
    assert {"提交订单", "立即支付"} <= forbidden
    assert {"booking", "payment"} <= set(PACK.policy.require_boundary_tags)


def test_check_pack_catches_an_unknown_verifier():
    broken = PACK.model_copy(deep=True)
    broken.tasks[0].clone.verifier.name = "no_such_verifier"
    problems = check_pack(broken, has_verifier=lambda c, n: n in CLONE.verifiers)
    assert [p.field for p in problems] == ["clone.verifier.name"]


def test_drift_relabels_leave_commit_boundaries_intact():
    from clones.drift import relabel_html

    state = CLONE.build_state(CloneSetup(data={"scenario": "mid_booking"}), {})
    html = CLONE.render(state)
    drifted = relabel_html(html, DRIFT_RELABELS)
    assert DRIFT_RELABELS["查询车票"] == "搜索车票"
    assert "选择乘客" in drifted and "选择乘车人" not in drifted
    boundary_labels = {s.text for s in PACK.real_app.forbidden}
    for old in DRIFT_RELABELS:
        assert not any(old in label for label in boundary_labels), old
    assert "提交订单" in drifted


# --- golden plans and verifiers ----------------------------------------------------------------


@pytest.mark.parametrize("task_id", TASK_IDS)
def test_golden_plan_satisfies_the_verifier(task_id):
    task = PACK.task(task_id)
    for inst in instances(task):
        before, run = play(inst)
        v = verdict(inst, before, run.after, run.answer)
        assert v.success, (inst.params, v.reason, run.refusals)
        assert v.progress == 1.0
        assert CLONE.side_effects(task.clone.side_effect_checks, before, run.after, inst.verifier_args) == []
        assert CLONE.invariants(run.after) == []
        if task.real.boundary:
            assert run.boundary, "a task with a commit boundary must end by crossing it"


def _plan(task, steps):
    return task.model_copy(update={"golden": [PlanStep.model_validate(s) for s in steps]})


def _steps(task):
    return [s.model_dump(exclude_none=True, exclude_defaults=False) for s in task.golden]


def _replace_selector(task, match, update):
    steps = _steps(task)
    for s in steps:
        for kind in ("tap",):
            sel = s.get(kind)
            if sel and all(sel.get(k) == v for k, v in match.items()):
                sel.update(update)
                return _plan(task, steps)
    return None


def _run_variant(inst, variant_task, state=None):
    variant = inst.model_copy(update={"task": variant_task})
    before, run = play(variant, state)
    return before, run


def test_every_verifier_registers_wrong_end_states():
    """Each task's wrong end states are registered beside its verifier
    (clones/train_ticketing/wrong_states.py) and checked for every task in
    tests/test_verifier_contracts.py."""
    used = {t.clone.verifier.name for t in PACK.tasks}
    assert sorted(n for n in used if CLONE.verifiers[n].wrong_end_states is None) == []


def test_progress_counts_sub_goals():
    task = PACK.task("book-two-window-seats")
    inst = instances(task)[0]
    wrong = _replace_selector(task, {"resource_id": "seat_F"}, {"resource_id": "seat_C"})
    before, run = _run_variant(inst, wrong)
    v = verdict(inst, before, run.after, None)
    assert not v.success and 0.5 < v.progress < 1.0
    assert "seats" in v.reason


# --- timetable -----------------------------------------------------------------------------------


def test_timetable_is_deterministic_for_a_seed():
    a, b = build_world(7), build_world(7)
    assert a == b
    c = build_world(8)
    assert [t["stops"][0]["dep"] for t in a["trains"]] != [t["stops"][0]["dep"] for t in c["trains"]]
    state = {"world": a, "user": {"sold": {}}}
    again = {"world": b, "user": {"sold": {}}}
    train = a["trains"][0]
    assert available(state, train, "2026-03-05") == available(again, train, "2026-03-05")


def test_data_seed_changes_inventory_not_schedule():
    plain = CLONE.build_state(CloneSetup(), {})
    drifted = CLONE.build_state(CloneSetup(data={"data_seed": 99}), {})
    assert plain["world"]["trains"] == drifted["world"]["trains"]
    day = "2026-03-09"
    seats = [available(plain, t, day) for t in plain["world"]["trains"]]
    seats_drifted = [available(drifted, t, day) for t in drifted["world"]["trains"]]
    assert seats != seats_drifted


def _legs_by_scanning(world, from_name, to_name, exact):
    """The search spelled out: every train's first departure from the from-city (station), then its
    first arrival in the to-city after it."""

    def at(name, wanted):
        return name == wanted if exact else city_of(name) == city_of(wanted)

    out = []
    for train in world["trains"]:
        stops = train["stops"]
        fi = next(
            (i for i, s in enumerate(stops) if s["dep"] is not None and at(s["station"], from_name)), None
        )
        if fi is None:
            continue
        ti = next(
            (
                i
                for i in range(fi + 1, len(stops))
                if stops[i]["arr"] is not None and at(stops[i]["station"], to_name)
            ),
            None,
        )
        if ti is not None:
            out.append((train["no"], fi, ti))
    return sorted(out)


def test_the_indexed_search_finds_what_scanning_every_stop_finds():
    world = build_world(0)
    # a patched timetable (a new trains list, as a setup's patch makes) gets its own index
    patched = {**world, "trains": [t for t in world["trains"] if t["type"] != "G"][:40]}
    stations = sorted({s["station"] for t in world["trains"] for s in t["stops"]})[::7]
    cities = sorted({city_of(s) for s in stations})
    found = 0
    for w in (world, patched):
        for exact, names in ((False, cities), (True, stations)):
            for a in names:
                for b in names:
                    legs = legs_between(w, a, b, "2026-03-09", exact=exact)
                    assert sorted((x.no, x.from_idx, x.to_idx) for x in legs) == _legs_by_scanning(
                        w, a, b, exact
                    )
                    found += len(legs)
    assert found > 100  # the pairs do have trains between them


def test_timetable_is_plausible():
    world = build_world(0)
    legs = legs_between(world, "北京", "上海", "2026-03-09")
    assert legs and all(leg.duration > 0 for leg in legs)
    g = [leg for leg in legs if leg.type == "G"]
    k = [leg for leg in legs if leg.type in "ZTK"]
    assert g and k
    # high-speed is faster and dearer per seat than conventional trains on the same route
    assert min(x.duration for x in g) < min(x.duration for x in k)
    assert min(x.price("edz") for x in g) > min(x.price("yz") for x in k)
    assert all(leg.price("swz") > leg.price("ydz") > leg.price("edz") for leg in g)
    numbers = [t["no"] for t in world["trains"]]
    assert len(numbers) == len(set(numbers))


# --- ID numbers ----------------------------------------------------------------------------------


def test_gb11643_checksum():
    assert is_valid("11010519491231002X")
    assert check_char("11010519491231002") == "X"
    assert id_problem("110105194912310021") == "证件号码校验位错误，请核对"
    assert id_problem("11010519491331002X") == "证件号码中的出生日期有误"
    assert id_problem("1101051949123100") == "证件号码应为18位，请检查"
    assert is_valid(make_id("320102", date(2005, 11, 30), 71))
    assert id_problem(make_id("110105", date(2030, 1, 1), 1), today=date(2026, 3, 2)) is not None


def test_adding_a_passenger_with_a_bad_id_is_refused():
    state = CLONE.build_state(CloneSetup(route="passengers"), {})
    CLONE.handle(state, UIEvent("add_passenger"))
    with pytest.raises(CloneError, match="校验位"):
        CLONE.handle(
            state, UIEvent("save_passenger", form={"p_name": "赵磊", "p_id_no": "110101199003071235"})
        )
    assert len(state["user"]["passengers"]) == 5
    CLONE.handle(state, UIEvent("save_passenger", form={"p_name": "赵磊", "p_id_no": "110101199003071233"}))
    assert state["user"]["passengers"][-1]["name"] == "赵磊"
    assert state["ui"]["route"] == "passengers"


# --- rules ----------------------------------------------------------------------------------------


def test_refund_fee_rules():
    state = CLONE.build_state(CloneSetup(data={"scenario": "with_orders"}), {})
    order = dict(state["user"]["orders"][0])
    now = datetime.fromisoformat(state["clock"])
    for hours_left, fee in ((24 * 9, 0.0), (24 * 3, 5.0), (30, 10.0), (3, 20.0)):
        dep = now + timedelta(hours=hours_left)
        order.update(date=dep.date().isoformat(), dep_min=dep.hour * 60 + dep.minute)
        assert booking.refund_fee(state, order, 100.0) == fee


def test_submitting_holds_seats_and_cancelling_releases_them():
    state = CLONE.build_state(CloneSetup(data={"scenario": "mid_booking"}), {})
    b = state["ui"]["booking"]
    leg_before = available(
        state, next(t for t in state["world"]["trains"] if t["no"] == b["train"]), b["date"]
    )[b["cls"]]
    CLONE.handle(state, UIEvent("submit_order"))
    assert state["ui"]["route"] == "order_pay"
    order = state["user"]["orders"][-1]
    assert order["status"] == "unpaid" and order["pay_deadline"] > state["clock"]
    train = next(t for t in state["world"]["trains"] if t["no"] == order["train"])
    assert available(state, train, order["date"])[b["cls"]] == leg_before - 2
    CLONE.handle(state, UIEvent("cancel_order", order["id"]))
    CLONE.handle(state, UIEvent("confirm_cancel_order", order["id"]))
    assert available(state, train, order["date"])[b["cls"]] == leg_before
    assert CLONE.invariants(state) == []


def test_invariants_catch_inconsistent_state():
    state = CLONE.build_state(CloneSetup(data={"scenario": "with_orders"}), {})
    assert CLONE.invariants(state) == []
    state["user"]["orders"][0]["total"] += 1
    key = next(iter(state["user"]["sold"]))
    state["user"]["sold"][key] = -1
    problems = CLONE.invariants(state)
    assert any("total" in p for p in problems) and any("negative" in p for p in problems)


def test_answer_matching():
    assert matches("train", "G11", "g11次")
    assert not matches("train", "G11", "G1")
    assert matches("time", "08:10", "8点10分") and not matches("time", "08:10", "08:15")
    assert matches("number", 13.0, "¥13元") and not matches("number", 13.0, "13.5")
    assert matches("date", date(2026, 3, 6), "3月6日") and matches("date", date(2026, 3, 6), "2026-03-06")
    assert matches("station", "南京南", "南京南站") and not matches("station", "南京南", "南京")


# --- routes and screens ---------------------------------------------------------------------------


def test_routes_and_starting_states_render():
    assert len(CLONE.routes()) >= 37
    states = CLONE.stats_states()
    assert {s["ui"]["route"] for s in states} >= {"home", "order_form"}
    for s in states:
        assert CLONE.invariants(s) == []
        html = CLONE.render(s)
        assert 'data-ev="' in html
    assert ".tt-header" in CLONE.stylesheet


@pytest.mark.slow
def test_crawl_reaches_the_fidelity_bar():
    from clones.stats import crawl

    stats = crawl(CLONE)
    assert stats.errors == []
    assert stats.unreached_routes == []
    assert stats.routes >= 37 and stats.interactive_actions >= 166 and stats.transitions >= 86


@pytest.mark.parametrize("seed", [3, 7, 13])
def test_every_scenario_builds_under_other_seeds(seed):
    for scenario in ("fresh", "with_orders", "lived_in", "mid_booking"):
        state = CLONE.build_state(
            CloneSetup(seed=seed, data={"scenario": scenario, "data_seed": seed * 7}), {}
        )
        assert CLONE.invariants(state) == []
        assert CLONE.render(state)


def test_an_overdue_unpaid_order_lapses_and_frees_its_seats():
    state = CLONE.build_state(CloneSetup(data={"scenario": "with_orders"}), {})
    unpaid = next(o for o in state["user"]["orders"] if o["status"] == "unpaid")
    state["clock"] = (datetime.fromisoformat(unpaid["pay_deadline"]) + timedelta(minutes=1)).isoformat()
    CLONE.handle(state, UIEvent("tab", "orders"))
    assert unpaid["status"] == "cancelled"
    with pytest.raises(CloneError):
        CLONE.handle(state, UIEvent("pay_order", unpaid["id"]))
    assert CLONE.invariants(state) == []


def test_sessions_share_the_generated_world_but_not_what_a_setup_patches():
    from realbench.taskpack import CloneSetup

    patched = CLONE.build_state(
        CloneSetup(seed=7, data={"sms_code": "135790"}, patch={"world": {"inventory_overrides": {"G1": 0}}}),
        {},
    )
    plain = CLONE.build_state(CloneSetup(seed=7), {})
    assert plain["world"]["trains"] is patched["world"]["trains"]  # generated once for the seed
    assert patched["world"]["sms_code"] == "135790" and "sms_code" not in plain["world"]
    assert patched["world"]["inventory_overrides"] == {"G1": 0}
    assert plain["world"]["inventory_overrides"] == {}
    assert plain["world"] == {**build_world(7), "inventory_overrides": {}}
