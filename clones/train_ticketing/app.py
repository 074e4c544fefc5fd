"""The train-ticketing clone (modelled on the China Railway 12306 app): building the state, the
table of UI events (handlers live in the ``*_handlers`` mixins), rendering and invariants."""

from __future__ import annotations

import copy
from collections.abc import Callable
from typing import Any, ClassVar

from pydantic import BaseModel, ConfigDict, Field, StrictBool, field_validator

from clones.base import (
    Clone,
    State,
    UIEvent,
    back,
    deep_merge,
    navigate,
    new_state,
    replace_route,
    require,
)
from clones.train_ticketing import accounts, booking, views
from clones.train_ticketing.account_handlers import AccountHandlers
from clones.train_ticketing.booking_handlers import BookingHandlers
from clones.train_ticketing.login import LOGIN_PASSWORD, LoginHandlers, needs_login, open_login
from clones.train_ticketing.order_handlers import OrderHandlers
from clones.train_ticketing.search_handlers import SearchHandlers
from clones.train_ticketing.timetable import available, shared_world
from clones.train_ticketing.ui import (
    DRIFT_RELABELS,
    ELSEWHERE,
    LINK_ROUTES,
    ROUTES,
    SCENARIOS,
    TAB_ROUTES,
    ui_extras,
)
from realbench.taskpack import CloneSetup

__all__ = ["DRIFT_RELABELS", "ROUTES", "TrainTicketing"]


class TrainTicketingSetupData(BaseModel):
    """What a task's `clone.setup.data` may say to the train-ticketing clone."""

    model_config = ConfigDict(extra="forbid")

    scenario: str = "fresh"
    data_seed: int | None = None  # the drifted-inventory seed (set by the clone server for drift profiles)
    # False: the app starts logged out (booking and account screens ask for a login first)
    logged_in: StrictBool = True
    # the code the clone 'texts' at login (its stand-in for the SMS); unset: derived from the clock
    sms_code: str | None = Field(default=None, pattern=r"^\d{6}$")
    # variant: 提交订单 opens a check dialog (乘车人, 席别, 确认/返回修改) before the order is created, as
    # the web site does; whether the app has this step is unverified, so it is off by default
    submit_check: bool = False
    # variant: the unfinished order's pay button reads 快速支付 instead of 立即支付 (REAL_APPS.md 1f names
    # both, [script]; which one a given account sees is unknown)
    quick_pay: bool = False

    @field_validator("scenario")
    @classmethod
    def _known_scenario(cls, v: str) -> str:
        if v not in SCENARIOS:
            raise ValueError(f"unknown scenario {v!r} (known: {', '.join(SCENARIOS)})")
        return v


class TrainTicketing(SearchHandlers, BookingHandlers, OrderHandlers, AccountHandlers, LoginHandlers, Clone):
    name = "train_ticketing"
    package = "com.MobileTicket"
    # the login session is held by the phone's app, not the account: logging in changes no account fact
    device_local_state = ("recent_searches", "station_history", "logged_in")
    # What each verifier's tasks may change; anything else is an unanticipated side effect.
    expected_changes: ClassVar[dict[str, tuple[str, ...]] | None] = {
        "order_submitted": ("/user/orders/**", "/user/passengers/**", "/user/sold/**"),
        "order_paid": (
            "/user/orders/*/paid_at",
            "/user/orders/*/pay_channel",
            "/user/orders/*/pay_requested_at",
            "/user/orders/*/status",
            "/user/orders/*/tickets/*/status",
        ),
        "order_cancelled": ("/user/orders/*/status", "/user/orders/*/tickets/*/status", "/user/sold/**"),
        "ticket_refunded": ("/user/orders/*/status", "/user/orders/*/tickets/*/**", "/user/sold/**"),
        "ticket_changed": ("/user/orders/**", "/user/sold/**"),
        "waitlist_submitted": ("/user/waitlists/**",),
        "waitlist_cancelled": ("/user/waitlists/*/status",),
        "reminder_set": ("/user/reminders/**",),
        "reminder_deleted": ("/user/reminders/**",),
        "passenger_added": ("/user/passengers/**",),
        "passenger_deleted": ("/user/passengers/**",),
        "passenger_updated": ("/user/passengers/*/**",),
        "messages_read": ("/user/messages/*/read",),
        "setting_set": ("/user/settings/**",),
    }
    title = "铁路12306"
    home_route = "home"
    setup_data: ClassVar[type[BaseModel] | None] = TrainTicketingSetupData
    drift_relabels = DRIFT_RELABELS

    def __init__(self) -> None:
        super().__init__()
        self._register_handlers()
        from clones.train_ticketing import wrong_states  # noqa: F401  (registers the wrong end states)
        from clones.train_ticketing.checks import SIDE_EFFECT_CHECKS
        from clones.train_ticketing.verifiers import VERIFIERS

        self.verifiers.update(VERIFIERS)
        self.side_effect_checks.update(SIDE_EFFECT_CHECKS)

    # --- state ---------------------------------------------------------------------------------

    def build_state(self, setup: CloneSetup, params: dict[str, Any]) -> State:
        data = setup.data
        inventory_seed = data.get("data_seed")
        world = shared_world(setup.seed, None if inventory_seed is None else int(inventory_seed))
        clock = setup.clock
        state = new_state(world, accounts.default_user(clock), self.home_route, clock)
        state["ui"].update(ui_extras(clock.date()))
        state["ui"]["submit_check"] = bool(data.get("submit_check", False))
        state["ui"]["quick_pay"] = bool(data.get("quick_pay", False))
        scenario = str(data.get("scenario", "fresh"))
        require(scenario in SCENARIOS, f"unknown scenario {scenario!r}; known: {', '.join(SCENARIOS)}")
        if scenario in ("with_orders", "lived_in"):
            accounts.add_existing_orders(state)
        if scenario == "lived_in":
            accounts.add_waitlist_and_reminders(state)
        state["user"]["logged_in"] = bool(data.get("logged_in", True))
        if data.get("sms_code"):
            state["world"]["sms_code"] = str(data["sms_code"])
        deep_merge(state, setup.patch)
        booking.expire_overdue(state)
        if scenario == "mid_booking":
            self._start_mid_booking(state)
        elif setup.route:
            replace_route(state, setup.route)
        return state

    def _start_mid_booking(self, state: State) -> None:
        s = state["ui"]["search"]
        navigate(state, "train_list")
        legs = views.list_legs(state)
        leg = next(leg for leg in legs if leg.type == "G")
        navigate(
            state,
            "train_seats",
            train=leg.no,
            date=leg.day,
            **{"from": leg.from_station, "to": leg.to_station},
        )
        seats = available(state, leg.train, leg.day)
        cls = next(c for c in ("edz", "ydz", "swz", "wz") if seats.get(c, 0) > 2)
        self._open_order_form(state, leg.no, leg.day, leg.from_station, leg.to_station, cls)
        state["ui"]["booking"]["passengers"] = ["p1", "p2"]
        state["ui"]["booking"]["types"] = {"p1": "adult", "p2": "adult"}
        s["date"] = leg.day

    def handle(self, state: State, event: UIEvent) -> None:
        # the payment deadline runs on the virtual clock: overdue orders lapse before anything else
        booking.expire_overdue(state)
        if needs_login(state, event):
            state["ui"]["form"].update(event.form)
            state["ui"]["toast"] = None
            open_login(state)
            return
        super().handle(state, event)

    @property
    def stylesheet(self) -> str:
        """The clone's own CSS, served by the clone server on top of the shared base stylesheet."""
        return views.css()

    def render(self, state: State) -> str:
        return views.render(state)

    def routes(self) -> list[str]:
        return list(ROUTES)

    def invariants(self, state: State) -> list[str]:
        from clones.train_ticketing.checks import invariant_problems

        return invariant_problems(state)

    def stats_states(self) -> list[State]:
        """Starting states from which a crawler discovers every screen."""
        out: list[State] = []
        for scenario, route in (
            ("fresh", None),
            ("lived_in", None),
            ("mid_booking", None),
            ("lived_in", "orders_upcoming"),
        ):
            out.append(self.build_state(CloneSetup(data={"scenario": scenario}, route=route), {}))
        logged_out = self.build_state(CloneSetup(data={"logged_in": False}), {})
        out.append(copy.deepcopy(logged_out))
        # the login page filled in, so a crawler (which types nothing) gets past it to the SMS step
        open_login(logged_out)
        logged_out["ui"]["form"].update(login_account=logged_out["user"]["profile"]["username"])
        logged_out["ui"]["form"]["login_password"] = LOGIN_PASSWORD
        out.append(logged_out)
        return out

    # --- handlers ------------------------------------------------------------------------------

    def _back(self, state: State, ev: UIEvent) -> None:
        back(state)

    def _register_handlers(self) -> None:
        h: dict[str, Callable[[State, UIEvent], None]] = {
            # navigation
            "tab": self._tab,
            "go": self._go,
            "close_dialog": self._back,
            # home
            "open_station_picker": self._open_station_picker,
            "swap_stations": self._swap,
            "open_calendar": self._open_calendar,
            "toggle_student": self._toggle_search_flag("student"),
            "toggle_gd_only": self._toggle_search_flag("gd_only"),
            "search_trains": self._search_trains,
            "recent_search": self._recent_search,
            "clear_recent": self._clear_recent,
            "open_transfer": self._open_transfer,
            # station picker and calendar
            "pick_station": self._pick_station,
            "index_letter": self._index_letter,
            "clear_station_history": self._clear_station_history,
            "pick_date": self._pick_date,
            # train list and filters
            "list_date": self._list_date,
            "sort": self._sort,
            "open_filter": lambda s, e: navigate(s, "train_filter"),
            "filter_toggle": self._filter_toggle,
            "filter_reset": self._filter_reset,
            "filter_apply": self._back,
            "quick_gd": self._quick_gd,
            "quick_avail": self._quick_avail,
            "quick_normal": self._quick_normal,
            "list_tab": self._list_tab,
            "open_train": self._open_train,
            "expand_train": self._expand_train,
            "open_stops": self._open_stops,
            "seats_date": self._seats_date,
            "transfer_date": self._transfer_date,
            "transfer_sort": self._transfer_sort,
            "delete_message": self._delete_message,
            # booking
            "book_seat": self._book_seat,
            "waitlist_seat": self._waitlist_seat,
            "toggle_rider": self._toggle_rider,
            "open_passenger_pick": self._open_passenger_pick,
            "pick_done": self._back,
            "remove_rider": self._remove_rider,
            "set_ticket_type": self._set_ticket_type,
            "seat_pos": self._seat_pos,
            "set_class": self._set_class,
            "toggle_insurance": self._toggle_insurance,
            "decline_insurance": self._set_insurance(False),
            "accept_insurance": self._set_insurance(True),
            "submit_order": self._submit_order,
            "set_berth": self._set_berth,
            "confirm_submit": self._confirm_submit,
            # payment and orders
            "pay_order": self._pay_order,
            "ask_abandon_pay": self._ask_abandon_pay,
            "abandon_pay": self._abandon_pay,
            "pick_pay_channel": self._pick_pay_channel,
            "confirm_pay": self._confirm_pay,
            "continue_pay": self._continue_pay,
            "cancel_order": self._ask("cancel_order"),
            "confirm_cancel_order": self._confirm_cancel_order,
            "orders_tab": self._orders_tab,
            "open_order": self._open_order,
            "refund_ticket": self._refund_ticket,
            "confirm_refund": self._confirm_refund,
            "change_ticket": self._change_ticket,
            "change_date": self._change_date,
            "change_pick": self._change_pick,
            "change_station": self._change_station,
            "change_station_pick": self._change_station_pick,
            "confirm_change": self._confirm_change,
            # transfer
            "open_transfer_detail": self._open_transfer_detail,
            "book_leg": self._book_leg,
            # waitlist
            "wl_toggle_rider": self._wl_toggle_rider,
            "wl_deadline": self._wl_deadline,
            "submit_waitlist": self._submit_waitlist,
            "open_waitlist": self._open_waitlist,
            "cancel_waitlist": self._ask("cancel_waitlist"),
            "confirm_cancel_waitlist": self._confirm_cancel_waitlist,
            # reminders
            "add_reminder": self._add_reminder,
            "save_reminder": self._save_reminder,
            "delete_reminder": self._delete_reminder,
            # services
            "search_train_no": self._search_train_no,
            # passengers
            "add_passenger": self._add_passenger,
            "set_ptype": self._set_ptype,
            "save_passenger": self._save_passenger,
            "edit_passenger": self._edit_passenger,
            "delete_passenger": self._ask_delete_passenger,
            "confirm_delete_passenger": self._confirm_delete_passenger,
            # messages and settings
            "open_message": self._open_message,
            "read_all": self._read_all,
            "toggle_setting": self._toggle_setting,
            "clear_field": self._clear_field,
            # login and the 铁路会员 tab
            "open_login": self._open_login,
            "login_submit": self._login_submit,
            "sms_send": self._sms_send,
            "sms_submit": self._sms_submit,
            "logout": self._logout,
            "open_elsewhere": self._open_elsewhere,
        }
        self.handlers.update(h)

    # navigation

    def _tab(self, state: State, ev: UIEvent) -> None:
        require(ev.arg in TAB_ROUTES, "未知页面")
        state["ui"]["stack"] = []
        replace_route(state, TAB_ROUTES[str(ev.arg)])

    def _go(self, state: State, ev: UIEvent) -> None:
        require(ev.arg in LINK_ROUTES, "未知页面")
        if ev.arg == "transfer_list":
            self._open_transfer(state, ev)
            return
        navigate(state, str(ev.arg))

    def _open_elsewhere(self, state: State, ev: UIEvent) -> None:
        require(ev.arg in ELSEWHERE, "未知服务")
        navigate(state, "elsewhere", service=str(ev.arg))

    def _ask(self, kind: str) -> Callable[[State, UIEvent], None]:
        def handler(state: State, ev: UIEvent) -> None:
            state["ui"]["dialog"] = {"kind": kind, "arg": ev.arg}

        return handler
