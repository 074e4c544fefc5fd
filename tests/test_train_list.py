"""The train list (fast tier): date strip, 直达/中转 tabs, quick filters, the filter sheet and the
seats that expand inside a train card. Every check reads the list the screen shows (the hierarchy
derived from the rendered page), and compares it with the timetable read directly."""

from __future__ import annotations

from datetime import date, timedelta
from typing import Any

import pytest

from clones.base import UIEvent
from clones.dom_plan import parse, screen_page
from clones.train_ticketing import booking
from clones.train_ticketing.list_filters import fleet_of
from clones.train_ticketing.timetable import HIGH_SPEED, legs_between
from clones.train_ticketing.views import transfer_plans
from realbench.errors import CloneError
from realbench.taskpack import CloneSetup
from tests.tt_support import CLONE, PACK, instances, play, verdict

PKG = CLONE.package


def _state(frm: str = "北京", to: str = "上海") -> dict[str, Any]:
    state = CLONE.build_state(CloneSetup(data={"scenario": "fresh"}), {})
    state["ui"]["search"]["from"], state["ui"]["search"]["to"] = frm, to
    CLONE.handle(state, UIEvent("search_trains", None))
    return state


def _fire(state: dict[str, Any], *events: tuple[str, str | None]) -> dict[str, Any]:
    for name, arg in events:
        CLONE.handle(state, UIEvent(name, arg))
    return state


def _nodes(state: dict[str, Any], rid: str) -> list[Any]:
    return [d.node for d in parse(screen_page(CLONE, state), PKG) if d.node.resource_id == f"{PKG}:id/{rid}"]


def _shown(state: dict[str, Any]) -> list[str]:
    """The train numbers the list shows, top to bottom."""
    return [n.text for n in _nodes(state, "train_no")]


def _legs(state: dict[str, Any]) -> list[Any]:
    s = state["ui"]["search"]
    now = booking.now_of(state)
    return [
        leg
        for leg in legs_between(state["world"], s["from"], s["to"], s["date"])
        if booking.departure_at(leg.day, leg.dep_min) > now
    ]


# --- the per-train fleet guess ------------------------------------------------------------------


def test_fleet_is_a_stable_guess_on_high_speed_trains_only() -> None:
    trains = _state()["world"]["trains"]
    fleets = {t["no"]: fleet_of(t) for t in trains}
    assert fleets == {t["no"]: fleet_of(dict(t)) for t in trains}  # a function of the train alone
    assert all(not f for t, f in zip(trains, fleets.values(), strict=True) if t["type"] not in HIGH_SPEED)
    assert all("fxh" in f for f in fleets.values() if "smart" in f)  # smart sets are 复兴号 too
    kinds = {frozenset(f) for f in fleets.values()}
    assert kinds == {frozenset(), frozenset({"fxh"}), frozenset({"fxh", "smart"})}


# --- quick filters ------------------------------------------------------------------------------


def test_quick_normal_shows_exactly_the_non_high_speed_trains() -> None:
    state = _state()
    normal = sorted(leg.no for leg in _legs(state) if leg.type not in HIGH_SPEED)
    fast = sorted(leg.no for leg in _legs(state) if leg.type in HIGH_SPEED)
    assert normal and fast
    _fire(state, ("quick_normal", None))
    assert sorted(_shown(state)) == normal
    assert "on" in _class(state, "quick_normal") and "on" not in _class(state, "quick_gd")
    _fire(state, ("quick_gd", None))  # the other quick filter replaces it
    assert sorted(_shown(state)) == fast
    _fire(state, ("quick_gd", None))  # a second tap clears it
    assert sorted(_shown(state)) == sorted(normal + fast)


def _class(state: dict[str, Any], dom_id: str) -> str:
    html = CLONE.render(state)
    at = html.index(f'id="{dom_id}"')
    start = html.rindex("<", 0, at)
    tag = html[start:at]
    return tag.split('class="', 1)[1].split('"', 1)[0]


def test_quick_available_hides_a_sold_out_train() -> None:
    state = _state()
    victim = _shown(state)[0]
    day = state["ui"]["search"]["date"]
    train = next(t for t in state["world"]["trains"] if t["no"] == victim)
    state["world"]["inventory_overrides"][f"{victim}|{day}"] = {c: 0 for c in train["classes"]}
    assert victim in _shown(state)
    labels = [n.text for n in _nodes(state, "quick_avail")]
    assert labels == ["有票"]
    _fire(state, ("quick_avail", None))
    assert victim not in _shown(state) and _shown(state)


# --- the filter sheet ---------------------------------------------------------------------------


@pytest.mark.parametrize("fleet", ["fxh", "smart"])
def test_fleet_filter_shows_exactly_the_trains_of_that_fleet(fleet: str) -> None:
    state = _state()
    want = sorted(leg.no for leg in _legs(state) if fleet in fleet_of(leg.train))
    others = [leg.no for leg in _legs(state) if fleet not in fleet_of(leg.train)]
    assert want and others
    _fire(state, ("open_filter", None), ("filter_toggle", f"fleet:{fleet}"), ("filter_apply", None))
    assert state["ui"]["route"] == "train_list"
    assert sorted(_shown(state)) == want
    assert {n.text for n in _nodes(state, "fleet_tag")} <= {"复兴号", "智能动车组"}


def test_terminal_only_keeps_trains_ending_at_the_destination() -> None:
    state = _state("北京", "南京")
    ending = sorted(leg.no for leg in _legs(state) if leg.to_idx == len(leg.train["stops"]) - 1)
    assert ending and len(ending) < len(_legs(state))
    _fire(state, ("open_filter", None), ("filter_toggle", "end:terminal"), ("filter_apply", None))
    assert sorted(_shown(state)) == ending


def test_origin_only_drops_trains_passing_through() -> None:
    state = _state("天津", "上海")
    starting = sorted(leg.no for leg in _legs(state) if leg.from_idx == 0)
    assert starting and len(starting) < len(_legs(state))
    _fire(state, ("open_filter", None), ("filter_toggle", "end:origin"), ("filter_apply", None))
    assert sorted(_shown(state)) == starting


def test_arrival_band_filter_tests_the_arrival_time() -> None:
    state = _state()
    want = sorted(leg.no for leg in _legs(state) if 720 <= leg.arr_min % 1440 < 1080)
    assert want and len(want) < len(_legs(state))
    _fire(state, ("open_filter", None), ("filter_toggle", "arr:12-18"), ("filter_apply", None))
    assert sorted(_shown(state)) == want
    assert all("12:00" <= n.text < "18:00" for n in _nodes(state, "arr_time"))


def test_the_sheet_lies_over_an_inert_list_and_counts_what_it_keeps() -> None:
    state = _fire(_state(), ("open_filter", None), ("filter_toggle", "fleet:fxh"))
    assert state["ui"]["route"] == "train_filter"
    assert _nodes(state, "train_row") == [] and _nodes(state, "quick_gd") == []
    assert 'data-ev="open_train"' not in CLONE.render(state)  # nothing under the sheet is tappable
    kept = sum(1 for leg in _legs(state) if "fxh" in fleet_of(leg.train))
    assert _nodes(state, "filter_apply")[0].text == f"确定（{kept}个车次）"
    _fire(state, ("filter_reset", None))
    assert state["ui"]["list"]["fleet"] == []
    with pytest.raises(CloneError):
        _fire(state, ("filter_toggle", "fleet:maglev"))


def test_station_tags_filter_by_departure_and_arrival_station() -> None:
    state = _state()
    tags = [n.text for n in _nodes(state, "station_tag_from")]
    assert tags == sorted({leg.from_station for leg in _legs(state)}) and len(tags) > 1
    _fire(state, ("filter_toggle", "from:北京"))
    assert sorted(_shown(state)) == sorted(leg.no for leg in _legs(state) if leg.from_station == "北京")
    assert [n.selected for n in _nodes(state, "station_tag_from")] == [t == "北京" for t in tags]
    to = [n.text for n in _nodes(state, "station_tag_to")][0]
    _fire(state, ("filter_toggle", f"to:{to}"))
    assert sorted(_shown(state)) == sorted(
        leg.no for leg in _legs(state) if leg.from_station == "北京" and leg.to_station == to
    )


# --- date strip and tabs ------------------------------------------------------------------------


def test_date_strip_covers_the_presale_window_and_marks_the_chosen_day() -> None:
    state = _state()
    today = booking.now_of(state).date()
    days = [n.content_desc for n in _nodes(state, "strip_day")]
    assert days == [(today + timedelta(days=i)).isoformat() for i in range(15)]
    assert [n.content_desc for n in _nodes(state, "strip_day") if n.selected] == [
        state["ui"]["search"]["date"]
    ]
    last = days[-1]
    _fire(state, ("list_date", last))
    assert state["ui"]["search"]["date"] == last
    assert [n.content_desc for n in _nodes(state, "strip_day") if n.selected] == [last]
    with pytest.raises(CloneError):
        _fire(state, ("list_date", (date.fromisoformat(last) + timedelta(days=1)).isoformat()))
    assert _nodes(state, "prev_day") == [] and _nodes(state, "next_day") == []


def test_calendar_icon_opens_the_calendar_and_returns_to_the_list() -> None:
    state = _state()
    assert _nodes(state, "list_calendar")[0].content_desc == "日历"
    target = (booking.now_of(state).date() + timedelta(days=9)).isoformat()
    _fire(state, ("open_calendar", "search"), ("pick_date", target))
    assert state["ui"]["route"] == "train_list" and state["ui"]["search"]["date"] == target


def test_transfer_tab_shows_the_transfer_plans_and_tabs_replace_each_other() -> None:
    state = _state("北京", "杭州")
    depth = len(state["ui"]["stack"])
    _fire(state, ("list_tab", "transfer"))
    assert state["ui"]["route"] == "transfer_list" and len(state["ui"]["stack"]) == depth
    hubs = [n.text for n in _nodes(state, "plan_hub")]
    assert hubs and hubs == [p.hub for p in transfer_plans(state)]
    assert [n.selected for n in _nodes(state, "list_tab_transfer")] == [True]
    _fire(state, ("list_tab", "direct"))
    assert state["ui"]["route"] == "train_list" and len(state["ui"]["stack"]) == depth
    _fire(state, ("__back__", None))
    assert state["ui"]["route"] == "home"


# --- seats inside the train card ----------------------------------------------------------------


def test_a_tap_expands_the_cards_seats_and_booking_continues_from_there() -> None:
    state = _state()
    first, second = _shown(state)[:2]
    assert _nodes(state, "seat_panel") == []
    _fire(state, ("open_train", second))
    assert state["ui"]["route"] == "train_list"
    assert len(_nodes(state, "seat_panel")) == 1
    leg = next(leg for leg in _legs(state) if leg.no == second)
    for cls in leg.train["classes"]:
        assert [n.text for n in _nodes(state, f"seat_price_{cls}")] == [f"¥{leg.price(cls):.1f}"]
    cls = next(c for c in leg.train["classes"] if _nodes(state, f"book_{c}"))
    _fire(state, ("book_seat", cls))
    assert state["ui"]["route"] == "order_form"
    assert (state["ui"]["booking"]["train"], state["ui"]["booking"]["cls"]) == (second, cls)
    _fire(state, ("__back__", None), ("open_train", first))
    assert state["ui"]["args"]["train"] == first and len(_nodes(state, "seat_panel")) == 1
    _fire(state, ("open_train", first))  # a second tap folds it
    assert _nodes(state, "seat_panel") == []
    _fire(state, ("open_train", first), ("list_date", "next"))  # a new day starts folded
    assert _nodes(state, "seat_panel") == []


def test_a_sold_out_class_in_the_card_offers_waitlist() -> None:
    state = _state()
    no = _shown(state)[0]
    day = state["ui"]["search"]["date"]
    state["world"]["inventory_overrides"][f"{no}|{day}"] = {"edz": 0}
    _fire(state, ("open_train", no))
    assert _nodes(state, "book_edz") == [] and len(_nodes(state, "waitlist_edz")) == 1
    _fire(state, ("waitlist_seat", f"{no}|edz"))
    assert state["ui"]["route"] == "waitlist_form" and state["ui"]["waitlist"]["train"] == no


# --- the new tasks' verifiers -------------------------------------------------------------------


def test_list_filter_tasks_reject_the_unfiltered_answer() -> None:
    fuxing = instances(PACK.task("lookup-fuxing-count"))[0]
    before, run = play(fuxing)
    assert verdict(fuxing, before, run.after, run.answer).success
    everything = str(len(_legs(before)))
    assert everything != run.answer
    assert not verdict(fuxing, before, run.after, everything).success
    normal = instances(PACK.task("lookup-normal-train-earliest"))[0]
    before, run = play(normal)
    assert verdict(normal, before, run.after, run.answer).success
    state = _fire(_state(), ("sort", "dep"))
    earliest_any = _shown(state)[0]
    assert earliest_any != run.answer
    assert not verdict(normal, before, run.after, earliest_any).success
