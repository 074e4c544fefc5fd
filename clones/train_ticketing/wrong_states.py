"""Plausible wrong outcomes of each train-ticketing task, registered beside the verifiers: the
test suite checks, for every task, that its verifier rejects each of them.

They are produced by the clone's own handlers: an edited golden plan played from the start (a
different rider, seat or deadline), or events fired on the golden end state (an extra order, a
passenger deleted on the way).
"""

from __future__ import annotations

import contextlib
import re
from datetime import date, timedelta
from typing import Any

from clones.base import State, UIEvent, snapshot
from clones.contracts import GoldenRun, WrongEnd
from clones.train_ticketing import booking
from clones.train_ticketing.timetable import available, city_of, find_train, legs_between
from clones.train_ticketing.verifiers import VERIFIERS
from realbench.errors import CloneError
from realbench.hierarchy import Selector
from realbench.taskpack import PlanStep, Task
from realbench.templating import render

ANSWER_VERIFIERS = (
    "answer_train_query",
    "answer_stop_time",
    "answer_sale",
    "answer_transfer",
    "answer_account",
    "answer_id_valid",
)


# --- edited plans ----------------------------------------------------------------------------------


def _plan(task: Task, steps: list[dict[str, Any]]) -> Task:
    return task.model_copy(update={"golden": [PlanStep.model_validate(s) for s in steps]})


def _steps(task: Task) -> list[dict[str, Any]]:
    return [s.model_dump(exclude_none=True, exclude_defaults=False) for s in task.golden]


def _replace_selector(task: Task, match: dict[str, Any], update: dict[str, Any]) -> Task | None:
    steps = _steps(task)
    for s in steps:
        sel = s.get("tap")
        if sel and all(sel.get(k) == v for k, v in match.items()):
            sel.update(update)
            return _plan(task, steps)
    return None


def _insert_before(task: Task, match: dict[str, Any], new_step: dict[str, Any]) -> Task | None:
    steps = _steps(task)
    for i, s in enumerate(steps):
        sel = s.get("tap")
        if sel and all(sel.get(k) == v for k, v in match.items()):
            return _plan(task, steps[:i] + [new_step] + steps[i:])
    return None


def _played(run: GoldenRun, task: Task | None, label: str) -> WrongEnd:
    if task is None:
        raise CloneError(f"the golden plan of {run.instance.task.id} has no step to edit for {label!r}")
    before, after, answer = run.play(run.instance.model_copy(update={"task": task}), None)
    return WrongEnd(label, before, after, None)


def _fire(run: GoldenRun, state: State, name: str, arg: str | None = None) -> None:
    with contextlib.suppress(CloneError):
        run.clone.handle(state, UIEvent(name, arg))


# --- the generators ----------------------------------------------------------------------------------


def _wrong_answer(answer: str) -> str:
    if answer in ("有效", "无效"):
        return "有效" if answer == "无效" else "无效"
    digits = list(re.finditer(r"\d", answer))
    if digits:
        d = digits[-1]
        return answer[: d.start()] + str((int(d.group()) + 1) % 10) + answer[d.end() :]
    return "北京南" if answer != "北京南" else "上海"


@VERIFIERS.wrong_end_states(*ANSWER_VERIFIERS)
def wrong_answer_or_account_changed(run: GoldenRun) -> list[WrongEnd]:
    after = snapshot(run.after)
    _fire(run, after, "confirm_delete_passenger", "p5")
    return [
        WrongEnd("wrong answer", run.before, run.after, _wrong_answer(run.answer or "")),
        WrongEnd("right answer, but a passenger deleted", run.before, after, run.answer),
    ]


# the passenger picker's rows are CheckBoxes `姓名，成人，…`: a plan picks one by `text_contains: 姓名，`
PICK_ROW = "android.widget.CheckBox"


def _rider_text(sel: Selector) -> str | None:
    """The rider a plan's tap picks, as the plan writes it (a chip's text or a picker row's name)."""
    if sel.resource_id in ("rider_chip", "wl_rider") and sel.text:
        return sel.text
    if sel.class_name == PICK_ROW and sel.text_contains:
        return sel.text_contains.rstrip("，")
    return None


def _other_rider(run: GoldenRun) -> tuple[dict[str, str], str, dict[str, str]]:
    """(the first rider's selector fields as the plan writes them, that rider, the same fields for
    a rider not on the order); a sampled rider is written ``{rider.name}`` in the plan."""
    task, params = run.instance.task, run.instance.params
    taps = [s.tap for s in task.golden if s.tap is not None and _rider_text(s.tap) is not None]
    names = {render(str(_rider_text(t)), params) for t in taps}
    first = next(t for t in taps if t.resource_id != "wl_rider")
    sub = next(n for n in ("陈静", "王芳", "李明") if n not in names)
    key = "text_contains" if first.class_name == PICK_ROW else "text"
    value = str(first.text_contains if key == "text_contains" else first.text)
    wrong = f"{sub}，" if key == "text_contains" else sub
    return {key: value}, render(str(_rider_text(first)), params), {key: wrong}


def _extra_order(run: GoldenRun, state: State) -> State:
    """The task's order plus one more (Guangzhou to Shenzhen, for 张强 or, when the task's order
    is his, another passenger not on it), booked through the screens."""
    after = snapshot(state)
    on_order = {t["passenger_id"] for o in state["user"]["orders"] for t in o["tickets"]}
    rider = next(p for p in ("p4", "p5", "p2", "p1") if p not in on_order)
    _fire(run, after, "tab", "home")
    after["ui"]["search"].update({"from": "广州", "to": "深圳"})
    _fire(run, after, "search_trains")
    for leg in legs_between(after["world"], "广州", "深圳", after["ui"]["search"]["date"]):
        if available(after, leg.train, leg.day).get("edz", 0) > 0:
            _fire(run, after, "open_train", leg.no)
            _fire(run, after, "book_seat", "edz")
            _fire(run, after, "toggle_rider", rider)
            _fire(run, after, "submit_order")
            _fire(run, after, "confirm_submit")  # under the submit_check variant
            break
    if len(after["user"]["orders"]) != len(state["user"]["orders"]) + 1:
        raise CloneError("could not book the extra order on the clone")
    return after


@VERIFIERS.wrong_end_states("order_submitted")
def other_rider_or_extra_order(run: GoldenRun) -> list[WrongEnd]:
    task = run.instance.task
    first, rider, sub = _other_rider(run)
    wrong = [
        _played(
            run,
            _replace_selector(task, first, sub),
            f"booked for {next(iter(sub.values())).rstrip('，')} instead of {rider}",
        ),
        WrongEnd("an extra order", run.before, _extra_order(run, run.after), None),
    ]
    args = task.clone.verifier.args if task.clone else {}
    if args.get("berth"):
        wanted = booking.BERTH_IDS[str(args["berth"])]
        other = "upper" if wanted != "upper" else "lower"  # not "any": it may assign the wanted one
        wrong.append(
            _played(
                run,
                _replace_selector(
                    task, {"resource_id": f"berth_{wanted}"}, {"resource_id": f"berth_{other}"}
                ),
                f"berth {other} instead of {wanted}",
            )
        )
    return wrong


@VERIFIERS.wrong_end_states("order_paid", "order_cancelled")
def paid_instead_of_cancelled(run: GoldenRun) -> list[WrongEnd]:
    after = run.start()
    unpaid = next(o for o in after["user"]["orders"] if o["status"] == "unpaid")
    if run.instance.task.clone.verifier.name == "order_paid":
        _fire(run, after, "confirm_cancel_order", unpaid["id"])
        return [WrongEnd("cancelled instead of paid", run.before, after, None)]
    _fire(run, after, "pay_order", unpaid["id"])
    _fire(run, after, "confirm_pay", unpaid["id"])
    return [WrongEnd("paid instead of cancelled", run.before, after, None)]


@VERIFIERS.wrong_end_states("ticket_refunded")
def another_ticket_refunded(run: GoldenRun) -> list[WrongEnd]:
    after = snapshot(run.after)
    other = next(
        f"{o['id']}#{i}"
        for o in after["user"]["orders"]
        for i, t in enumerate(o["tickets"])
        if t["status"] == "paid"
        and o["status"] == "paid"
        and booking.order_departure(o) > booking.now_of(after)
    )
    _fire(run, after, "refund_ticket", other)
    _fire(run, after, "confirm_refund")
    return [WrongEnd("another ticket refunded as well", run.before, after, None)]


def _another_stop(state: State, order_to: str, station: str) -> str:
    """An intermediate stop of the order's train other than the asked one (trains and their stops
    come from the timetable, so no station name is fixed here)."""
    for order in state["user"]["orders"]:
        train = find_train(state["world"], order["train"])
        if train is None or city_of(order["to"]) != order_to:
            continue
        names = [s["station"] for s in train["stops"][1:-1]]
        return next(n for n in names if n != station)
    raise CloneError(f"no order to {order_to} with a train to change on")


@VERIFIERS.wrong_end_states("ticket_changed")
def changed_to_the_wrong_train(run: GoldenRun) -> list[WrongEnd]:
    task, inst = run.instance.task, run.instance
    if inst.verifier_args.get("source") == "change_station":
        station = inst.verifier_args["new_to"]
        other = _another_stop(run.before, inst.verifier_args.get("order_to", ""), station)
        wrong = _replace_selector(task, {"resource_id": "new_station_name"}, {"text": other})
    else:
        wrong = _insert_before(
            task, {"resource_id": "change_seat_edz"}, {"tap": {"resource_id": "change_next_day"}}
        )
    return [_played(run, wrong, "changed to the wrong train or station")]


@VERIFIERS.wrong_end_states("waitlist_submitted")
def wrong_waitlist_deadline(run: GoldenRun) -> list[WrongEnd]:
    task = run.instance.task
    wrong = _replace_selector(
        task, {"resource_id": "deadline_1d"}, {"resource_id": "deadline_3d"}
    ) or _replace_selector(task, {"resource_id": "deadline_6h"}, {"resource_id": "deadline_3d"})
    if wrong is None:
        wrong = _insert_before(task, {"text": "提交候补订单"}, {"tap": {"resource_id": "deadline_3d"}})
    return [_played(run, wrong, "wrong waitlist deadline")]


@VERIFIERS.wrong_end_states("reminder_set")
def reminder_for_the_next_day(run: GoldenRun) -> list[WrongEnd]:
    inst = run.instance
    shifted = (date.fromisoformat(inst.params["date_date"]) + timedelta(days=1)).isoformat()
    before, after, _ = run.play(
        inst.model_copy(update={"params": {**inst.params, "date_date": shifted}}), None
    )
    return [WrongEnd("reminder for the next day", before, after, None)]


@VERIFIERS.wrong_end_states("reminder_deleted", "waitlist_cancelled")
def done_but_a_passenger_deleted(run: GoldenRun) -> list[WrongEnd]:
    after = snapshot(run.after)
    _fire(run, after, "confirm_delete_passenger", "p5")
    return [WrongEnd("done, but a passenger deleted", run.before, after, None)]


@VERIFIERS.wrong_end_states("passenger_added")
def wrong_passenger_type(run: GoldenRun) -> list[WrongEnd]:
    task = run.instance.task
    wrong: Task | None
    ptype_taps = [
        s for s in task.golden if s.tap is not None and (s.tap.resource_id or "").startswith("ptype_")
    ]
    if ptype_taps:
        wrong = _plan(task, [s.model_dump(exclude_none=True) for s in task.golden if s not in ptype_taps])
    else:
        wrong = _insert_before(
            task, {"resource_id": "save_passenger"}, {"tap": {"resource_id": "ptype_student"}}
        )
    return [_played(run, wrong, "wrong passenger type")]


@VERIFIERS.wrong_end_states("passenger_deleted")
def deleted_the_wrong_passenger(run: GoldenRun) -> list[WrongEnd]:
    task, inst = run.instance.task, run.instance
    target = inst.verifier_args["name"]
    written = next(
        s.tap.text
        for s in task.golden
        if s.tap is not None and s.tap.text and render(s.tap.text, inst.params) == target
    )
    other = next(p["name"] for p in run.before["user"]["passengers"] if p["name"] != target and not p["self"])
    return [
        _played(
            run, _replace_selector(task, {"text": written}, {"text": other}), "deleted the wrong passenger"
        )
    ]


@VERIFIERS.wrong_end_states("passenger_updated")
def wrong_passenger_details(run: GoldenRun) -> list[WrongEnd]:
    task, inst = run.instance.task, run.instance
    wrong: Task | None
    if inst.verifier_args.get("phone"):
        steps = _steps(task)
        for s in steps:
            if isinstance(s.get("type"), dict):
                s["type"]["text"] = "13500002223"
        wrong = _plan(task, steps)
    else:
        wrong = _replace_selector(task, {"resource_id": "ptype_adult"}, {"resource_id": "ptype_child"})
    return [_played(run, wrong, "wrong passenger details")]


@VERIFIERS.wrong_end_states("messages_read")
def opened_a_different_message(run: GoldenRun) -> list[WrongEnd]:
    after = run.start()
    titles = run.instance.verifier_args.get("titles") or []
    unread = [m for m in after["user"]["messages"] if not m["read"] and m["title"] not in titles]
    _fire(run, after, "open_message", unread[0]["id"])
    return [WrongEnd("opened a different message", run.before, after, None)]


@VERIFIERS.wrong_end_states("setting_set")
def toggled_a_different_setting(run: GoldenRun) -> list[WrongEnd]:
    after = run.start()
    _fire(run, after, "toggle_setting", "night_mode")
    return [WrongEnd("toggled a different setting", run.before, after, None)]
