"""UI events of booking: seat choice, the order form, passengers on it, and waitlist (候补) orders."""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

from clones.base import State, UIEvent, back, navigate, replace_route, require
from clones.train_ticketing import booking
from clones.train_ticketing.search_handlers import current_leg_args
from clones.train_ticketing.timetable import BERTHS, SEAT_LABELS, Leg, available, find_train, leg_for


def leg_from_args(state: State, args: dict[str, Any]) -> Leg:
    """The leg a screen's args name (train, from, to, date); refuses when it no longer runs."""
    leg = leg_for(state["world"], args["train"], args["from"], args["to"], args["date"])
    require(leg is not None, "车次信息已失效")
    assert leg is not None
    return leg


class BookingHandlers:
    """Handlers mixed into `TrainTicketing`; each mutates the state in place or raises CloneError."""

    # booking

    def _open_order_form(self, state: State, train: str, day: str, frm: str, to: str, cls: str) -> None:
        state["ui"]["booking"] = {
            "train": train,
            "date": day,
            "from": frm,
            "to": to,
            "cls": cls,
            "passengers": [],
            "types": {},
            "seats": [],
            "berth": "",
            "insurance": True,
        }
        navigate(state, "order_form")

    def _book_seat(self, state: State, ev: UIEvent) -> None:
        args = state["ui"]["args"]
        leg = leg_from_args(state, args)
        cls = str(ev.arg)
        require(cls in leg.train["classes"], "该车次没有所选席别")
        require(booking.in_window(state, leg.day), "该日期车票尚未开售")
        require(
            available(state, leg.train, leg.day).get(cls, 0) > 0, f"{SEAT_LABELS[cls]}已售完，可提交候补订单"
        )
        self._open_order_form(state, leg.no, leg.day, leg.from_station, leg.to_station, cls)

    def _waitlist_seat(self, state: State, ev: UIEvent) -> None:
        args = state["ui"]["args"]
        if state["ui"]["route"] == "train_list":
            train_no, _, cls = str(ev.arg).partition("|")
            args = current_leg_args(state, train_no)
        else:
            cls = str(ev.arg)
        leg = leg_from_args(state, args)
        require(cls in leg.train["classes"], "该车次没有所选席别")
        require(
            available(state, leg.train, leg.day).get(cls, 0) == 0, f"{SEAT_LABELS[cls]}有余票，请直接购买"
        )
        state["ui"]["waitlist"] = {
            "train": leg.no,
            "date": leg.day,
            "from": leg.from_station,
            "to": leg.to_station,
            "cls": cls,
            "passengers": [],
            "deadline": "1d",
        }
        navigate(state, "waitlist_form")

    def _booking(self, state: State) -> dict[str, Any]:
        b = state["ui"]["booking"]
        require(b is not None, "请重新选择车次")
        return b  # type: ignore[no-any-return]

    def _default_ticket_type(self, state: State, pid: str) -> str:
        p = booking.passenger(state, pid)
        if p["ptype"] == "child":
            return "child"
        if p["ptype"] == "student" and state["ui"]["search"]["student"]:
            return "student"
        return "adult"

    def _toggle_rider(self, state: State, ev: UIEvent) -> None:
        b = self._booking(state)
        pid = str(ev.arg)
        booking.passenger(state, pid)
        if pid in b["passengers"]:
            b["passengers"].remove(pid)
            b["types"].pop(pid, None)
            b["seats"] = b["seats"][: len(b["passengers"])]
        else:
            require(
                len(b["passengers"]) < booking.MAX_PASSENGERS, f"一个订单最多{booking.MAX_PASSENGERS}位乘车人"
            )
            b["passengers"].append(pid)
            b["types"][pid] = self._default_ticket_type(state, pid)

    def _open_passenger_pick(self, state: State, ev: UIEvent) -> None:
        target = "waitlist" if ev.arg == "waitlist" else "booking"
        require(state["ui"][target] is not None, "请重新选择车次")
        navigate(state, "passenger_pick", target=target)

    def _remove_rider(self, state: State, ev: UIEvent) -> None:
        b = self._booking(state)
        require(ev.arg in b["passengers"], "乘车人不在订单中")
        self._toggle_rider(state, ev)

    def _set_ticket_type(self, state: State, ev: UIEvent) -> None:
        b = self._booking(state)
        pid, _, ticket_type = str(ev.arg).partition("|")
        require(pid in b["passengers"], "乘车人不在订单中")
        require(ticket_type in booking.TICKET_TYPE_LABELS, "未知票种")
        p = booking.passenger(state, pid)
        if ticket_type == "student":
            require(p["ptype"] == "student", f"{p['name']}不是学生旅客，不能购买学生票")
        b["types"][pid] = ticket_type

    def _seat_pos(self, state: State, ev: UIEvent) -> None:
        b = self._booking(state)
        letter = str(ev.arg)
        require(letter in "ABCDF" and len(letter) == 1, "未知座位")
        if letter in b["seats"]:
            b["seats"].remove(letter)
            return
        require(b["cls"] in booking.SEAT_LETTERS, "该席别不支持选座")
        require(len(b["seats"]) < max(1, len(b["passengers"])), "选座数量不能超过乘车人数")
        b["seats"].append(letter)

    def _set_class(self, state: State, ev: UIEvent) -> None:
        b = self._booking(state)
        train = find_train(state["world"], b["train"])
        require(train is not None and ev.arg in train["classes"], "该车次没有所选席别")
        b["cls"] = str(ev.arg)
        b["seats"] = []
        b["berth"] = ""

    def _set_berth(self, state: State, ev: UIEvent) -> None:
        """A berth for every rider of a sleeper order ('' = 不限, the railway assigns)."""
        b = self._booking(state)
        berth = str(ev.arg or "")
        require(b["cls"] in BERTHS, "该席别不能选铺")
        require(berth == "" or berth in BERTHS[b["cls"]], f"{SEAT_LABELS[b['cls']]}没有{berth}")
        b["berth"] = berth

    def _toggle_insurance(self, state: State, ev: UIEvent) -> None:
        b = self._booking(state)
        b["insurance"] = not b["insurance"]

    def _set_insurance(self, value: bool) -> Callable[[State, UIEvent], None]:
        def handler(state: State, ev: UIEvent) -> None:
            self._booking(state)["insurance"] = value
            back(state)

        return handler

    def _submit_order(self, state: State, ev: UIEvent) -> None:
        """提交订单: creates the order, or, under the `submit_check` variant, first opens the check
        dialog whose 确认 creates it."""
        b = self._booking(state)
        if state["ui"].get("submit_check"):
            leg_from_args(state, b)
            require(bool(b["passengers"]), "请选择乘车人")
            state["ui"]["dialog"] = {"kind": "submit_check", "arg": None}
            return
        self._create_booked_order(state)

    def _confirm_submit(self, state: State, ev: UIEvent) -> None:
        dialog = state["ui"].get("dialog")
        require(bool(dialog) and dialog["kind"] == "submit_check", "请先提交订单")
        state["ui"]["dialog"] = None
        self._create_booked_order(state)

    def _create_booked_order(self, state: State) -> None:
        b = self._booking(state)
        leg = leg_from_args(state, b)
        riders = [
            (pid, b["types"].get(pid, "adult"), (b["seats"][i] if i < len(b["seats"]) else ""))
            for i, pid in enumerate(b["passengers"])
        ]
        order = booking.create_order(
            state, leg, b["cls"], riders, insurance=bool(b["insurance"]), berth=str(b.get("berth", ""))
        )
        state["ui"]["booking"] = None
        state["ui"]["stack"] = [{"route": "home", "args": {}}]
        replace_route(state, "order_pay", order=order["id"])

    # waitlist

    def _wl(self, state: State) -> dict[str, Any]:
        w = state["ui"]["waitlist"]
        require(w is not None, "请重新选择车次")
        return w  # type: ignore[no-any-return]

    def _wl_toggle_rider(self, state: State, ev: UIEvent) -> None:
        w = self._wl(state)
        pid = str(ev.arg)
        booking.passenger(state, pid)
        if pid in w["passengers"]:
            w["passengers"].remove(pid)
        else:
            require(
                len(w["passengers"]) < booking.MAX_PASSENGERS, f"候补订单最多{booking.MAX_PASSENGERS}位乘车人"
            )
            w["passengers"].append(pid)

    def _wl_deadline(self, state: State, ev: UIEvent) -> None:
        require(ev.arg in booking.WAITLIST_DEADLINES, "未知截止时间")
        self._wl(state)["deadline"] = str(ev.arg)

    def _submit_waitlist(self, state: State, ev: UIEvent) -> None:
        w = self._wl(state)
        leg = leg_from_args(state, w)
        item = booking.create_waitlist(state, leg, w["cls"], list(w["passengers"]), w["deadline"])
        state["ui"]["waitlist"] = None
        state["ui"]["stack"] = [{"route": "home", "args": {}}]
        replace_route(state, "waitlist_detail", id=item["id"])

    def _open_waitlist(self, state: State, ev: UIEvent) -> None:
        require(any(w["id"] == ev.arg for w in state["user"]["waitlists"]), "候补订单不存在")
        navigate(state, "waitlist_detail", id=str(ev.arg))

    def _confirm_cancel_waitlist(self, state: State, ev: UIEvent) -> None:
        booking.cancel_waitlist(state, str(ev.arg))
        state["ui"]["dialog"] = None
        state["ui"]["toast"] = "候补订单已取消"
