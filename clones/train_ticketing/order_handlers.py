"""UI events on existing orders: payment, cancellation, refunds, 改签 and 变更到站."""

from __future__ import annotations

from typing import Any

from clones.base import State, UIEvent, back, navigate, replace_route, require
from clones.train_ticketing import booking, views
from clones.train_ticketing.booking_handlers import leg_from_args
from clones.train_ticketing.timetable import SEAT_LABELS, available, leg_for
from clones.train_ticketing.ui import (
    ORDER_TABS,
)


class OrderHandlers:
    """Handlers mixed into `TrainTicketing`; each mutates the state in place or raises CloneError."""

    # payment and orders

    def _pay_order(self, state: State, ev: UIEvent) -> None:
        """立即支付 hands the order to the payment platform page (收银台); nothing is paid yet."""
        order_id = str(ev.arg or state["ui"]["args"].get("order", ""))
        order = booking.check_payable(state, order_id)
        order.setdefault("pay_requested_at", booking.now_of(state).isoformat(timespec="seconds"))
        navigate(state, "pay_platform", order=order_id, channel=booking.DEFAULT_PAY_CHANNEL)

    def _ask_abandon_pay(self, state: State, ev: UIEvent) -> None:
        """Back from an unpaid order's page asks first, in the app's native 温馨提示 dialog."""
        state["ui"]["dialog"] = {
            "kind": "tip",
            "text": "确定要放弃支付吗？",
            "cancel": "取消",
            "sure_ev": "abandon_pay",
            "arg": "",
        }

    def _abandon_pay(self, state: State, ev: UIEvent) -> None:
        """确定 leaves the page; the order stays unpaid until its deadline (nothing is cancelled)."""
        state["ui"]["dialog"] = None
        back(state)

    def _pick_pay_channel(self, state: State, ev: UIEvent) -> None:
        require(ev.arg in booking.PAY_CHANNELS, "未知支付方式")
        state["ui"]["args"]["channel"] = str(ev.arg)

    def _confirm_pay(self, state: State, ev: UIEvent) -> None:
        args = state["ui"]["args"]
        order_id = str(ev.arg or args.get("order", ""))
        booking.pay(state, order_id, str(args.get("channel", booking.DEFAULT_PAY_CHANNEL)))
        state["ui"]["stack"] = [{"route": "home", "args": {}}]
        replace_route(state, "pay_success", order=order_id)

    def _continue_pay(self, state: State, ev: UIEvent) -> None:
        order = booking.find_order(state, str(ev.arg))
        require(order["status"] == "unpaid" and not booking.expired(state, order), "订单无需支付")
        navigate(state, "order_pay", order=order["id"])

    def _confirm_cancel_order(self, state: State, ev: UIEvent) -> None:
        booking.cancel(state, str(ev.arg))
        state["ui"]["dialog"] = None
        state["ui"]["stack"] = []
        replace_route(state, "orders_history")
        state["ui"]["toast"] = "订单已取消"

    def _orders_tab(self, state: State, ev: UIEvent) -> None:
        require(ev.arg in ORDER_TABS, "未知页面")
        replace_route(state, str(ev.arg))

    def _open_order(self, state: State, ev: UIEvent) -> None:
        booking.find_order(state, str(ev.arg))
        navigate(state, "order_detail", order=str(ev.arg))

    def _ticket_ref(self, state: State, arg: str | None) -> tuple[dict[str, Any], int]:
        order_id, _, idx = str(arg).partition("#")
        order = booking.find_order(state, order_id)
        require(idx.isdigit() and int(idx) < len(order["tickets"]), "车票不存在")
        return order, int(idx)

    def _refund_ticket(self, state: State, ev: UIEvent) -> None:
        order, idx = self._ticket_ref(state, ev.arg)
        require(order["status"] == "paid" and order["tickets"][idx]["status"] == "paid", "该车票不能退票")
        require(booking.order_departure(order) > booking.now_of(state), "列车已发车，不能在线退票")
        navigate(state, "refund_confirm", order=order["id"], idx=idx)

    def _confirm_refund(self, state: State, ev: UIEvent) -> None:
        args = state["ui"]["args"]
        booking.refund(state, args["order"], int(args["idx"]))
        replace_route(state, "refund_result", order=args["order"], idx=args["idx"])

    def _change_ticket(self, state: State, ev: UIEvent) -> None:
        order, idx = self._ticket_ref(state, ev.arg)
        ticket = order["tickets"][idx]
        require(order["status"] == "paid" and ticket["status"] == "paid", "该车票不能改签")
        require(not ticket.get("changed_from"), "已改签的车票不能再次改签")
        require(booking.order_departure(order) > booking.now_of(state), "列车已发车，不能改签")
        navigate(state, "change_list", order=order["id"], idx=idx, date=order["date"])

    def _change_date(self, state: State, ev: UIEvent) -> None:
        args = state["ui"]["args"]
        args["date"] = booking.stepped_day(state, args["date"], ev.arg)

    def _change_pick(self, state: State, ev: UIEvent) -> None:
        args = state["ui"]["args"]
        train_no, _, cls = str(ev.arg).partition("|")
        order = booking.find_order(state, args["order"])
        leg = next((leg for leg in views.change_legs(state, order, args["date"]) if leg.no == train_no), None)
        require(leg is not None, "车次不存在")
        assert leg is not None
        require(cls in leg.train["classes"], "该车次没有所选席别")
        require(available(state, leg.train, leg.day).get(cls, 0) > 0, f"{SEAT_LABELS[cls]}已售完")
        navigate(
            state,
            "change_confirm",
            order=args["order"],
            idx=args["idx"],
            train=leg.no,
            date=leg.day,
            cls=cls,
            source="change",
            **{"from": leg.from_station, "to": leg.to_station},
        )

    def _change_station(self, state: State, ev: UIEvent) -> None:
        order, idx = self._ticket_ref(state, ev.arg)
        ticket = order["tickets"][idx]
        require(order["status"] == "paid" and ticket["status"] == "paid", "该车票不能变更到站")
        require(not ticket.get("changed_from"), "已改签的车票不能变更到站")
        require(booking.order_departure(order) > booking.now_of(state), "列车已发车，不能变更到站")
        navigate(state, "change_station", order=order["id"], idx=idx)

    def _change_station_pick(self, state: State, ev: UIEvent) -> None:
        args = state["ui"]["args"]
        order = booking.find_order(state, args["order"])
        ticket = order["tickets"][int(args["idx"])]
        leg = leg_for(state["world"], order["train"], order["from"], str(ev.arg), order["date"])
        require(leg is not None and leg.to_station != order["to"], "请选择新的到站")
        assert leg is not None
        cls = ticket["seat_class"]
        require(available(state, leg.train, leg.day).get(cls, 0) > 0, f"{SEAT_LABELS[cls]}已售完")
        navigate(
            state,
            "change_confirm",
            order=order["id"],
            idx=args["idx"],
            train=leg.no,
            date=leg.day,
            cls=cls,
            source="change_station",
            **{"from": leg.from_station, "to": leg.to_station},
        )

    def _confirm_change(self, state: State, ev: UIEvent) -> None:
        args = state["ui"]["args"]
        leg = leg_from_args(state, args)
        new = booking.change(state, args["order"], int(args["idx"]), leg, args["cls"], args["source"])
        state["ui"]["stack"] = [{"route": "orders_upcoming", "args": {}}]
        replace_route(state, "change_result", order=new["id"])
