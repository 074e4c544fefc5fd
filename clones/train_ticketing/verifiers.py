"""Verifiers, side-effect checks and state invariants of the train-ticketing clone.

Verifiers are pure functions ``(before, after, params, answer, answer_spec) -> Verdict``, registered
with their argument models (`verifier_args`). ``params`` holds the
task's sampled parameters and its rendered verifier arguments. The truth is always computed from
state (the timetable, the inventory before the episode, the account), never stored in the pack.
Progress is the fraction of the task's sub-goals met.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

from clones.base import diff
from clones.contracts import NoArgs, VerifierSet
from clones.train_ticketing import booking
from clones.train_ticketing.answers import AnswerKind, matches
from clones.train_ticketing.list_filters import passes_extra
from clones.train_ticketing.stations import is_place, sale_time_of
from clones.train_ticketing.timetable import (
    SEAT_BY_LABEL,
    Leg,
    available,
    city_of,
    find_train,
    fmt_duration,
    fmt_min,
    leg_for,
    legs_between,
    stop_index,
    ticket_price,
)
from clones.train_ticketing.verifier_args import (
    AccountAnswerArgs,
    IdValidAnswerArgs,
    MessagesReadArgs,
    OrderRef,
    OrderSubmittedArgs,
    PassengerAddedArgs,
    PassengerNamedArgs,
    PassengerUpdatedArgs,
    ReminderArgs,
    ReminderDeletedArgs,
    SaleAnswerArgs,
    SettingArgs,
    StopTimeAnswerArgs,
    TicketChangedArgs,
    TicketsArgs,
    TrainQueryAnswerArgs,
    TransferAnswerArgs,
    WaitlistSubmittedArgs,
)
from realbench.outcome import Verdict
from realbench.taskpack import AnswerSpec, AnswerType

State = dict[str, Any]
VERIFIERS = VerifierSet()
verifier = VERIFIERS.verifier
# the task's answer type says what the agent answers; each verifier grades it by its own field rules
ANSWER_TYPES = (AnswerType.NUMBER, AnswerType.TEXT, AnswerType.DATE, AnswerType.CHOICE)

BANDS = {"00-06": (0, 360), "06-12": (360, 720), "12-18": (720, 1080), "18-24": (1080, 1440)}
# user fields that change when merely browsing (the real app keeps them too)
# device-local keys (search history, the login session) that change no account fact
BENIGN_USER_KEYS = frozenset({"recent_searches", "station_history", "logged_in"})


# --- helpers ---------------------------------------------------------------------------------------


def seat_code(value: str | None) -> str | None:
    if value is None:
        return None
    return SEAT_BY_LABEL.get(value, value)


def as_list(value: Any) -> list[str]:
    if value is None or value == "":
        return []
    if isinstance(value, list):
        return [str(v) for v in value]
    return [v for v in str(value).replace("，", ",").split(",") if v]


def select_legs(state: State, p: dict[str, Any]) -> list[Leg]:
    """Trains matching a task's constraints, with availability as the state shows it."""
    now = booking.now_of(state)
    legs = [
        leg
        for leg in legs_between(state["world"], p["from"], p["to"], p["date"])
        if booking.departure_at(leg.day, leg.dep_min) > now
    ]
    types = as_list(p.get("types"))
    bands = as_list(p.get("bands"))
    seat = seat_code(p.get("seat"))
    out = []
    for leg in legs:
        if types and leg.type not in types:
            continue
        if bands and not any(BANDS[b][0] <= leg.dep_min % 1440 < BANDS[b][1] for b in bands):
            continue
        if p.get("from_station") and leg.from_station != p["from_station"]:
            continue
        if p.get("to_station") and leg.to_station != p["to_station"]:
            continue
        if p.get("dep_after") and leg.dep_min % 1440 < _minutes(p["dep_after"]):
            continue
        if seat and available(state, leg.train, leg.day).get(seat, 0) < int(p.get("seat_count", 1)):
            continue
        if not passes_extra(
            leg, as_list(p.get("fleet")), as_list(p.get("ends")), as_list(p.get("arr_bands")), BANDS
        ):
            continue
        out.append(leg)
    return out


def _minutes(hhmm: str) -> int:
    h, m = str(hhmm).split(":")
    return int(h) * 60 + int(m)


PICKS: dict[str, Callable[[Leg], Any]] = {
    "earliest": lambda leg: (leg.dep_min % 1440, leg.no),
    "latest": lambda leg: (-(leg.dep_min % 1440), leg.no),
    "earliest_arrival": lambda leg: (leg.arr_min - (leg.dep_min // 1440) * 1440, leg.no),
    "fastest": lambda leg: (leg.duration, leg.no),
    "cheapest": lambda leg: (leg.min_price, leg.no),
}


def pick_leg(state: State, p: dict[str, Any]) -> Leg | None:
    """The train a task means: a named train, one leg of the fastest transfer plan, or the best
    train (``pick``) among those meeting the constraints; ``price_seat`` prices ``cheapest``."""
    if p.get("transfer_leg"):
        from clones.train_ticketing.views import transfer_plans

        search = {**state["ui"]["search"], "from": p["from"], "to": p["to"], "date": p["date"]}
        plans = transfer_plans({**state, "ui": {**state["ui"], "search": search}}, "total")
        if not plans:
            return None
        return plans[0].first if int(p["transfer_leg"]) == 1 else plans[0].second
    if p.get("train"):
        return next(
            (
                leg
                for leg in legs_between(state["world"], p["from"], p["to"], p["date"])
                if leg.no == p["train"]
            ),
            None,
        )
    legs = select_legs(state, p)
    if not legs:
        return None
    how = str(p.get("pick", "earliest"))
    price_seat = seat_code(p.get("price_seat"))
    if how == "cheapest" and price_seat:
        return min(
            legs,
            key=lambda leg: (
                (leg.price(price_seat), leg.no) if price_seat in leg.train["classes"] else (1e9, leg.no)
            ),
        )
    return min(legs, key=PICKS[how])


def user_changes(before: State, after: State, ignore: frozenset[str] = BENIGN_USER_KEYS) -> list[str]:
    b = {k: v for k, v in before["user"].items() if k not in ignore}
    a = {k: v for k, v in after["user"].items() if k not in ignore}
    return [f"{c['op']} {c['path']}" for c in diff(b, a)]


def new_items(before: State, after: State, key: str) -> list[dict[str, Any]]:
    """The entries of the user's `key` list (orders, waitlists, reminders, passengers) that the
    episode created, by id."""
    known = {x["id"] for x in before["user"][key]}
    return [x for x in after["user"][key] if x["id"] not in known]


def new_orders(before: State, after: State) -> list[dict[str, Any]]:
    return new_items(before, after, "orders")


def names_of(state: State, order: dict[str, Any]) -> list[str]:
    return sorted(t["name"] for t in order["tickets"])


def find_existing(state: State, p: dict[str, Any], status: str | None = "paid") -> dict[str, Any] | None:
    """The existing order a task refers to: by route (cities), train and/or date."""
    for o in state["user"]["orders"]:
        if status and o["status"] != status:
            continue
        if p.get("order_from") and city_of(o["from"]) != city_of(p["order_from"]):
            continue
        if p.get("order_to") and city_of(o["to"]) != city_of(p["order_to"]):
            continue
        if p.get("order_date") and o["date"] != p["order_date"]:
            continue
        if status == "paid" and not any(t["status"] == "paid" for t in o["tickets"]):
            continue
        return o
    return None


def graded(goals: list[tuple[str, bool]], side_effects: list[str] | None = None) -> Verdict:
    met = sum(1 for _, ok in goals if ok)
    progress = met / len(goals) if goals else 0.0
    missed = [name for name, ok in goals if not ok]
    side = side_effects or []
    if not missed and not side:
        return Verdict(success=True, progress=1.0, reason="all sub-goals met")
    reason = ("missed: " + ", ".join(missed)) if missed else "sub-goals met but with side effects"
    return Verdict(success=False, progress=progress, side_effects=side, reason=reason)


def answered(
    kind: str, truth: Any, answer: str | None, before: State, after: State, p: dict[str, Any]
) -> Verdict:
    if truth is None:
        return Verdict.fail("no truth can be computed for this task instance (nothing matches)")
    ok = matches(kind, truth, answer, float(p.get("tolerance", 0.01)))
    side = user_changes(before, after, BENIGN_USER_KEYS | frozenset(as_list(p.get("allow_changes"))))
    goals = [("answer", ok), ("no account changes", not side)]
    verdict = graded(goals, side)
    return verdict.model_copy(update={"reason": f"{verdict.reason}; truth={truth!r}, answer={answer!r}"})


# --- answer verifiers ------------------------------------------------------------------------------


@verifier("answer_train_query", args=TrainQueryAnswerArgs, answers=ANSWER_TYPES)
def answer_train_query(
    before: State, after: State, p: dict[str, Any], answer: str | None, spec: AnswerSpec
) -> Verdict:
    """field: no | dep | arr | duration | price | count (count uses the constraints, no pick)."""
    field = str(p.get("field", "no"))
    if field == "count":
        return answered(AnswerKind.NUMBER, len(select_legs(before, p)), answer, before, after, p)
    leg = pick_leg(before, p)
    if leg is None:
        return answered(AnswerKind.TEXT, None, answer, before, after, p)
    if field == "no":
        return answered(AnswerKind.TRAIN, leg.no, answer, before, after, p)
    if field in ("dep", "arr"):
        return answered(
            AnswerKind.TIME, fmt_min(leg.dep_min if field == "dep" else leg.arr_min), answer, before, after, p
        )
    if field == "duration":
        return answered(AnswerKind.TEXT, fmt_duration(leg.duration), answer, before, after, p)
    if field == "price":
        cls = seat_code(p.get("price_seat"))
        truth = leg.price(cls) if cls else leg.min_price
        return answered(AnswerKind.NUMBER, truth, answer, before, after, p)
    if field == "from_station":
        return answered(AnswerKind.STATION, leg.from_station, answer, before, after, p)
    return Verdict.fail(f"unknown field {field!r}")


@verifier("answer_stop_time", args=StopTimeAnswerArgs, answers=ANSWER_TYPES)
def answer_stop_time(
    before: State, after: State, p: dict[str, Any], answer: str | None, spec: AnswerSpec
) -> Verdict:
    """field: dep | arr (at ``station``), stay (minutes at ``station``) or terminal (last station)."""
    train = find_train(before["world"], str(p["train"]))
    field = str(p.get("field", "dep"))
    if train is not None and field == "terminal":
        return answered(AnswerKind.STATION, train["stops"][-1]["station"], answer, before, after, p)
    idx = None if train is None else stop_index(train, str(p.get("station", "")))
    if train is None or idx is None:
        return answered(AnswerKind.TIME, None, answer, before, after, p)
    stop = train["stops"][idx]
    if field == "stay":
        return answered(AnswerKind.NUMBER, int(stop["dep"]) - int(stop["arr"]), answer, before, after, p)
    return answered(AnswerKind.TIME, fmt_min(stop[field]), answer, before, after, p)


@verifier("answer_sale", args=SaleAnswerArgs, answers=ANSWER_TYPES)
def answer_sale(
    before: State, after: State, p: dict[str, Any], answer: str | None, spec: AnswerSpec
) -> Verdict:
    station = str(p["station"])
    if not is_place(station):
        return Verdict.fail(f"unknown station {station!r}")
    if p.get("field", "time") == "time":
        return answered(AnswerKind.TIME, sale_time_of(station), answer, before, after, p)
    sale = booking.sale_at(before, station, str(p["date"]))
    return answered(AnswerKind.DATE, sale.date(), answer, before, after, p)


@verifier("answer_transfer", args=TransferAnswerArgs, answers=ANSWER_TYPES)
def answer_transfer(
    before: State, after: State, p: dict[str, Any], answer: str | None, spec: AnswerSpec
) -> Verdict:
    from clones.train_ticketing.views import transfer_plans

    probe = {
        **before,
        "ui": {
            **before["ui"],
            "search": {**before["ui"]["search"], "from": p["from"], "to": p["to"], "date": p["date"]},
        },
    }
    plans = transfer_plans(probe, "total")
    if not plans:
        return answered(AnswerKind.TEXT, None, answer, before, after, p)
    best = plans[0]
    if p.get("field", "hub") == "hub":
        return answered(AnswerKind.STATION, best.hub, answer, before, after, p)
    return answered(
        AnswerKind.TRAIN,
        best.first.no if p.get("field") == "first" else best.second.no,
        answer,
        before,
        after,
        p,
    )


@verifier("answer_account", args=AccountAnswerArgs, answers=ANSWER_TYPES)
def answer_account(
    before: State, after: State, p: dict[str, Any], answer: str | None, spec: AnswerSpec
) -> Verdict:
    """field: unread | passengers | points | upcoming | order_train | seat | refund_fee | pay_total."""
    from clones.train_ticketing.views import order_bucket

    user = before["user"]
    field = str(p["field"])
    if field == "unread":
        return answered(
            AnswerKind.NUMBER, sum(1 for m in user["messages"] if not m["read"]), answer, before, after, p
        )
    if field == "passengers":
        return answered(AnswerKind.NUMBER, len(user["passengers"]), answer, before, after, p)
    if field == "points":
        return answered(AnswerKind.NUMBER, user["profile"]["points"], answer, before, after, p)
    if field == "upcoming":
        n = sum(1 for o in user["orders"] if order_bucket(before, o) == "orders_upcoming")
        return answered(AnswerKind.NUMBER, n, answer, before, after, p)
    order = find_existing(before, p, status=p.get("order_status", "paid"))
    if order is None:
        return answered(AnswerKind.TEXT, None, answer, before, after, p)
    if field == "order_train":
        return answered(AnswerKind.TRAIN, order["train"], answer, before, after, p)
    ticket = next((t for t in order["tickets"] if t["name"] == p.get("passenger", t["name"])), None)
    if ticket is None:
        return answered(AnswerKind.TEXT, None, answer, before, after, p)
    if field == "seat":
        return answered(AnswerKind.TEXT, f"{ticket['coach']}{ticket['seat']}", answer, before, after, p)
    if field == "refund_fee":
        return answered(
            AnswerKind.NUMBER,
            booking.refund_fee(before, order, float(ticket["price"])),
            answer,
            before,
            after,
            p,
        )
    if field == "price":
        return answered(AnswerKind.NUMBER, ticket["price"], answer, before, after, p)
    return Verdict.fail(f"unknown field {field!r}")


@verifier("answer_id_valid", args=IdValidAnswerArgs, answers=ANSWER_TYPES)
def answer_id_valid(
    before: State, after: State, p: dict[str, Any], answer: str | None, spec: AnswerSpec
) -> Verdict:
    from clones.train_ticketing.idcard import is_valid

    truth = "有效" if is_valid(str(p["id_no"]), booking.now_of(before).date()) else "无效"
    return answered(AnswerKind.TEXT, truth, answer, before, after, p)


# --- booking verifiers -----------------------------------------------------------------------------


@verifier("order_submitted", args=OrderSubmittedArgs)
def order_submitted(
    before: State, after: State, p: dict[str, Any], answer: str | None, spec: AnswerSpec
) -> Verdict:
    """One new order for the expected train, date, seat class, passengers, ticket types, seats, insurance."""
    created = new_orders(before, after)
    expected = pick_leg(before, p)
    if expected is None:
        return Verdict.fail("no train satisfies the task's constraints in the starting state")
    if not created:
        created = checked_draft(after)
    order = created[0] if len(created) == 1 else None
    want_names = sorted(as_list(p.get("passengers")))
    goals: list[tuple[str, bool]] = [("exactly one new order", order is not None)]
    o = order or {"train": None, "date": None, "tickets": [], "insurance": None, "from": "", "to": ""}
    goals.append(
        (
            f"train {expected.no}",
            o["train"] == expected.no
            and o["from"] == expected.from_station
            and o["to"] == expected.to_station,
        )
    )
    goals.append((f"date {p['date']}", o["date"] == p["date"]))
    cls = seat_code(p.get("seat"))
    if cls:
        goals.append(
            (f"seat class {cls}", bool(o["tickets"]) and all(t["seat_class"] == cls for t in o["tickets"]))
        )
    goals.append((f"passengers {want_names}", names_of(after, o) == want_names))
    types = p.get("ticket_types") or {}
    if types:
        got = {t["name"]: t["ticket_type"] for t in o["tickets"]}
        goals.append(("ticket types", all(got.get(n) == tt for n, tt in types.items())))
    letters = sorted(as_list(p.get("seat_letters")))
    if letters:
        goals.append((f"seats {letters}", sorted(t.get("seat_letter", "") for t in o["tickets"]) == letters))
    if p.get("insurance") is not None:
        goals.append((f"insurance {p['insurance']}", o["insurance"] is bool(p["insurance"])))
    if p.get("berth"):
        goals.append(
            (
                f"berth {p['berth']} at its fare",
                bool(o["tickets"])
                and all(t.get("berth") == p["berth"] and berth_priced(after, o, t) for t in o["tickets"]),
            )
        )
    side = [f"extra order {x['id']}" for x in created[1:]] + orders_touched(before, after)
    return graded(goals, side)


def berth_priced(state: State, order: dict[str, Any], ticket: dict[str, Any]) -> bool:
    """A ticket costs its berth's fare (after the ticket type's discount)."""
    leg = leg_for(state["world"], order["train"], order["from"], order["to"], order["date"])
    if leg is None:
        return False
    want = ticket_price(
        leg.berth_price(ticket["seat_class"], ticket.get("berth", "")),
        ticket["seat_class"],
        ticket["ticket_type"],
    )
    return abs(float(ticket["price"]) - want) < 0.01


def checked_draft(after: State) -> list[dict[str, Any]]:
    """Under the `submit_check` variant the commit boundary (提交订单) opens the check dialog and the
    order is created only on its 确认: a run stopped at the boundary leaves the draft in the dialog,
    which then stands for the order (the same rows the dialog shows)."""
    ui = after["ui"]
    dialog = ui.get("dialog") or {}
    b = ui.get("booking")
    if not (ui.get("submit_check") and dialog.get("kind") == "submit_check" and b):
        return []
    leg = leg_for(after["world"], b["train"], b["from"], b["to"], b["date"])
    if leg is None:
        return []
    tickets = []
    for n, pid in enumerate(b["passengers"]):
        person = next((x for x in after["user"]["passengers"] if x["id"] == pid), None)
        if person is None:
            return []
        tt = b["types"].get(pid, "adult")
        berth = booking.assigned_berth(after, leg, b["cls"], str(b.get("berth", "")), n)
        tickets.append(
            {
                "passenger_id": pid,
                "name": person["name"],
                "ticket_type": tt,
                "seat_class": b["cls"],
                "seat_letter": b["seats"][n] if n < len(b["seats"]) else "",
                "berth": berth,
                "price": booking.rider_price(after, leg, b["cls"], tt, berth),
            }
        )
    draft = {
        "id": "(check dialog)",
        "train": leg.no,
        "date": leg.day,
        "from": leg.from_station,
        "to": leg.to_station,
        "tickets": tickets,
        "insurance": bool(b["insurance"]),
    }
    return [draft]


def orders_touched(before: State, after: State, allow: set[str] | None = None) -> list[str]:
    now = {o["id"]: o for o in after["user"]["orders"]}
    out = []
    for o in before["user"]["orders"]:
        if allow and o["id"] in allow:
            continue
        if now.get(o["id"]) != o:
            out.append(f"order {o['id']} changed")
    return out


@verifier("order_paid", args=OrderRef)
def order_paid(
    before: State, after: State, p: dict[str, Any], answer: str | None, spec: AnswerSpec
) -> Verdict:
    target = find_existing(before, p, status="unpaid")
    if target is None:
        return Verdict.fail("the starting state has no matching unpaid order")
    now = next((o for o in after["user"]["orders"] if o["id"] == target["id"]), None)
    # 立即支付 is the commit boundary: it hands the order to the payment platform (收银台), whose
    # confirmation happens outside the app under test, so a hand-off counts as paid
    paid = now is not None and (
        now["status"] == "paid" or (now["status"] == "unpaid" and bool(now.get("pay_requested_at")))
    )
    side = orders_touched(before, after, {target["id"]}) + [
        f"new order {o['id']}" for o in new_orders(before, after)
    ]
    return graded([("order paid", paid)], side)


@verifier("order_cancelled", args=OrderRef)
def order_cancelled(
    before: State, after: State, p: dict[str, Any], answer: str | None, spec: AnswerSpec
) -> Verdict:
    target = find_existing(before, p, status="unpaid")
    if target is None:
        return Verdict.fail("the starting state has no matching unpaid order")
    now = next((o for o in after["user"]["orders"] if o["id"] == target["id"]), None)
    side = orders_touched(before, after, {target["id"]}) + [
        f"new order {o['id']}" for o in new_orders(before, after)
    ]
    return graded([("order cancelled", now is not None and now["status"] == "cancelled")], side)


def _target_tickets(before: State, p: dict[str, Any]) -> tuple[dict[str, Any] | None, list[int]]:
    order = find_existing(before, p)
    if order is None:
        return None, []
    names = as_list(p.get("passengers"))
    idx = [
        i
        for i, t in enumerate(order["tickets"])
        if t["status"] == "paid" and (not names or t["name"] in names)
    ]
    return order, idx


@verifier("ticket_refunded", args=TicketsArgs)
def ticket_refunded(
    before: State, after: State, p: dict[str, Any], answer: str | None, spec: AnswerSpec
) -> Verdict:
    order, idx = _target_tickets(before, p)
    if order is None or not idx:
        return Verdict.fail("the starting state has no matching paid ticket")
    now = next(o for o in after["user"]["orders"] if o["id"] == order["id"])
    goals = [
        (f"{order['tickets'][i]['name']} refunded", now["tickets"][i]["status"] == "refunded") for i in idx
    ]
    others = [
        i for i in range(len(order["tickets"])) if i not in idx and now["tickets"][i] != order["tickets"][i]
    ]
    side = [f"ticket {order['id']}#{i} changed" for i in others]
    side += orders_touched(before, after, {order["id"]}) + [
        f"new order {o['id']}" for o in new_orders(before, after)
    ]
    return graded(goals, side)


@verifier("ticket_changed", args=TicketChangedArgs)
def ticket_changed(
    before: State, after: State, p: dict[str, Any], answer: str | None, spec: AnswerSpec
) -> Verdict:
    """改签 (source change) or 变更到站 (source change_station) of one passenger's ticket."""
    order, idx = _target_tickets(before, p)
    if order is None or len(idx) != 1:
        return Verdict.fail("the task must name exactly one paid ticket")
    i = idx[0]
    source = str(p.get("source", "change"))
    now = next(o for o in after["user"]["orders"] if o["id"] == order["id"])
    created = new_orders(before, after)
    new = next((o for o in created if o.get("origin_order") == order["id"] and o["source"] == source), None)
    if source == "change_station":
        want = {"train": order["train"], "date": order["date"], "from": order["from"], "to": p["new_to"]}
    else:
        probe = {**p, "from": order["from"], "to": order["to"], "date": p["new_date"]}
        leg = pick_leg(before, probe)
        if leg is None:
            return Verdict.fail("no train satisfies the change constraints in the starting state")
        want = {"train": leg.no, "date": leg.day, "from": leg.from_station, "to": leg.to_station}
    n = new or {}
    goals = [
        (
            "old ticket closed",
            now["tickets"][i]["status"] == ("changed" if source == "change" else "station_changed"),
        ),
        ("new ticket issued", new is not None),
        (f"new train {want['train']} on {want['date']}", all(n.get(k) == v for k, v in want.items())),
    ]
    cls = seat_code(p.get("seat"))
    if cls:
        goals.append((f"seat class {cls}", bool(n.get("tickets")) and n["tickets"][0]["seat_class"] == cls))
    side = [f"extra order {o['id']}" for o in created if o is not new]
    side += orders_touched(before, after, {order["id"]})
    return graded(goals, side)


@verifier("waitlist_submitted", args=WaitlistSubmittedArgs)
def waitlist_submitted(
    before: State, after: State, p: dict[str, Any], answer: str | None, spec: AnswerSpec
) -> Verdict:
    created = new_items(before, after, "waitlists")
    w = created[0] if len(created) == 1 else {}
    leg = pick_leg(before, {k: v for k, v in p.items() if k != "seat"})
    want_train = leg.no if leg else p.get("train")
    goals = [
        ("one waitlist order", len(created) == 1),
        (f"train {want_train}", w.get("train") == want_train and w.get("date") == p["date"]),
        ("seat class", w.get("seat_class") == seat_code(p.get("seat"))),
        ("passengers", sorted(w.get("names", [])) == sorted(as_list(p.get("passengers")))),
    ]
    if p.get("deadline"):
        goals.append(("deadline", w.get("deadline") == p["deadline"]))
    side = [f"new order {o['id']}" for o in new_orders(before, after)] + orders_touched(before, after)
    return graded(goals, side)


@verifier("waitlist_cancelled", args=NoArgs)
def waitlist_cancelled(
    before: State, after: State, p: dict[str, Any], answer: str | None, spec: AnswerSpec
) -> Verdict:
    pending = [w for w in before["user"]["waitlists"] if w["status"] == "pending"]
    if not pending:
        return Verdict.fail("the starting state has no pending waitlist order")
    target = pending[0]
    now: dict[str, Any] = next((w for w in after["user"]["waitlists"] if w["id"] == target["id"]), {})
    side = user_changes(before, after, BENIGN_USER_KEYS | {"waitlists"})
    return graded([("waitlist cancelled", now.get("status") == "cancelled")], side)


# --- reminders, passengers, messages ---------------------------------------------------------------


@verifier("reminder_set", args=ReminderArgs)
def reminder_set(
    before: State, after: State, p: dict[str, Any], answer: str | None, spec: AnswerSpec
) -> Verdict:
    created = new_items(before, after, "reminders")
    r = created[0] if len(created) == 1 else {}
    goals = [
        ("one new reminder", len(created) == 1),
        ("from", city_of(r.get("from", "")) == city_of(str(p["from"]))),
        ("to", city_of(r.get("to", "")) == city_of(str(p["to"]))),
        (f"date {p['date']}", r.get("date") == p["date"]),
    ]
    side = user_changes(before, after, BENIGN_USER_KEYS | {"reminders", "seq"})
    return graded(goals, side)


@verifier("reminder_deleted", args=ReminderDeletedArgs)
def reminder_deleted(
    before: State, after: State, p: dict[str, Any], answer: str | None, spec: AnswerSpec
) -> Verdict:
    targets = [
        r
        for r in before["user"]["reminders"]
        if city_of(r["from"]) == city_of(str(p["from"])) and city_of(r["to"]) == city_of(str(p["to"]))
    ]
    left = {r["id"] for r in after["user"]["reminders"]}
    others = [r["id"] for r in before["user"]["reminders"] if r not in targets and r["id"] not in left]
    side = [f"reminder {x} deleted" for x in others] + user_changes(
        before, after, BENIGN_USER_KEYS | {"reminders"}
    )
    return graded([("reminder deleted", bool(targets) and all(r["id"] not in left for r in targets))], side)


@verifier("passenger_added", args=PassengerAddedArgs)
def passenger_added(
    before: State, after: State, p: dict[str, Any], answer: str | None, spec: AnswerSpec
) -> Verdict:
    created = new_items(before, after, "passengers")
    x = created[0] if len(created) == 1 else {}
    goals = [
        ("one new passenger", len(created) == 1),
        ("name", x.get("name") == p["name"]),
        ("id number", str(x.get("id_no", "")).upper() == str(p["id_no"]).upper()),
        ("passenger type", x.get("ptype") == p.get("ptype", "adult")),
    ]
    if p.get("phone"):
        goals.append(("phone", x.get("phone") == str(p["phone"])))
    removed = [
        y["name"]
        for y in before["user"]["passengers"]
        if y["id"] not in {z["id"] for z in after["user"]["passengers"]}
    ]
    side = [f"passenger {n} removed" for n in removed] + user_changes(
        before, after, BENIGN_USER_KEYS | {"passengers"}
    )
    return graded(goals, side)


@verifier("passenger_deleted", args=PassengerNamedArgs)
def passenger_deleted(
    before: State, after: State, p: dict[str, Any], answer: str | None, spec: AnswerSpec
) -> Verdict:
    names_before = [x["name"] for x in before["user"]["passengers"]]
    names_after = [x["name"] for x in after["user"]["passengers"]]
    gone = [n for n in names_before if n not in names_after]
    side = [f"passenger {n} removed" for n in gone if n != p["name"]]
    side += [f"passenger {n} added" for n in names_after if n not in names_before]
    side += user_changes(before, after, BENIGN_USER_KEYS | {"passengers"})
    return graded(
        [(f"{p['name']} deleted", p["name"] in names_before and p["name"] not in names_after)], side
    )


@verifier("passenger_updated", args=PassengerUpdatedArgs)
def passenger_updated(
    before: State, after: State, p: dict[str, Any], answer: str | None, spec: AnswerSpec
) -> Verdict:
    b = next((x for x in before["user"]["passengers"] if x["name"] == p["name"]), None)
    a = next((x for x in after["user"]["passengers"] if x["name"] == p["name"]), None)
    if b is None:
        return Verdict.fail(f"no passenger {p['name']} in the starting state")
    goals = [("passenger kept", a is not None)]
    if p.get("phone"):
        goals.append(("phone", a is not None and a["phone"] == str(p["phone"])))
    if p.get("ptype"):
        goals.append(("passenger type", a is not None and a["ptype"] == p["ptype"]))
    others_b = [x for x in before["user"]["passengers"] if x["name"] != p["name"]]
    others_a = [x for x in after["user"]["passengers"] if x["name"] != p["name"]]
    side = ["other passengers changed"] if others_a != others_b else []
    side += user_changes(before, after, BENIGN_USER_KEYS | {"passengers"})
    return graded(goals, side)


@verifier("messages_read", args=MessagesReadArgs)
def messages_read(
    before: State, after: State, p: dict[str, Any], answer: str | None, spec: AnswerSpec
) -> Verdict:
    titles = as_list(p.get("titles"))
    msgs = after["user"]["messages"]
    goals = [(f"{m['title']} read", m["read"]) for m in msgs if not titles or m["title"] in titles]
    if titles:
        unread_before = {m["id"] for m in before["user"]["messages"] if not m["read"]}
        extra = [
            m["title"] for m in msgs if m["read"] and m["id"] in unread_before and m["title"] not in titles
        ]
        side = [f"message {t} marked read" for t in extra]
    else:
        side = []
    side += user_changes(before, after, BENIGN_USER_KEYS | {"messages"})
    return graded(goals, side)


@verifier("setting_set", args=SettingArgs)
def setting_set(
    before: State, after: State, p: dict[str, Any], answer: str | None, spec: AnswerSpec
) -> Verdict:
    key = str(p["key"])
    want = bool(p["value"])
    others = {k: v for k, v in after["user"]["settings"].items() if k != key} != {
        k: v for k, v in before["user"]["settings"].items() if k != key
    }
    side = (["other settings changed"] if others else []) + user_changes(
        before, after, BENIGN_USER_KEYS | {"settings"}
    )
    return graded([(f"{key}={want}", after["user"]["settings"].get(key) is want)], side)
