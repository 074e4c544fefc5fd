"""Screenshots of the train-ticketing clone's main screens, taken in headless Chromium through the
clone server: ``.venv/bin/python benchmarks/train_ticketing_screenshots.py [OUT_DIR [SCREEN...]]``.

Each screen is reached by firing the clone's own UI events on a task-like starting state, then the
state is loaded into a server session and the page is captured at 412x915 CSS px.
"""

from __future__ import annotations

import logging
import sys
from collections.abc import Callable
from pathlib import Path
from typing import Any

import httpx

from clones.base import UIEvent, get_clone, navigate
from clones.server import CloneServer
from realbench.taskpack import CloneSetup

log = logging.getLogger("train_ticketing_screenshots")
CLONE = get_clone("train_ticketing")
CHROMIUM = "/usr/bin/chromium"
ARGS = [
    "--no-sandbox",
    "--disable-gpu",
    "--no-first-run",
    "--disable-background-networking",
    "--disable-component-update",
    "--disable-sync",
]


def _events(
    scenario: str, *events: tuple[str, str | None] | tuple[str, str | None, dict[str, str]]
) -> dict[str, Any]:
    state = CLONE.build_state(CloneSetup(data={"scenario": scenario}), {})
    for ev in events:
        name, arg = ev[0], ev[1]
        form = ev[2] if len(ev) > 2 else {}  # type: ignore[misc]
        CLONE.handle(state, UIEvent(name, arg, dict(form)))
    return state


def _logged_out(*events: tuple[str, str | None, dict[str, str]]) -> dict[str, Any]:
    state = CLONE.build_state(CloneSetup(data={"logged_in": False, "sms_code": "602418"}), {})
    for name, arg, form in events:
        CLONE.handle(state, UIEvent(name, arg, dict(form)))
    return state


# the clone's test account (invented values; the password is stated openly in task instructions)
LOGIN_FORM = {"login_account": "liming88", "login_password": "Rail2026"}


def _sleeper_form(*events: tuple[str, str | None]) -> dict[str, Any]:
    """The order form of Z19 (北京西 → 西安) 硬卧, with seats left, after `events`."""
    day = "2026-03-13"
    state = CLONE.build_state(
        CloneSetup(
            data={"scenario": "fresh"},
            patch={"world": {"inventory_overrides": {f"Z19|{day}": {"yw": 30, "rw": 30}}}},
        ),
        {},
    )
    navigate(state, "train_seats", train="Z19", date=day, **{"from": "北京西", "to": "西安"})
    for name, arg in events:
        CLONE.handle(state, UIEvent(name, arg))
    return state


def _checked_form() -> dict[str, Any]:
    """The `submit_check` variant's dialog after 提交订单 on the mid-booking form."""
    state = CLONE.build_state(CloneSetup(data={"scenario": "mid_booking", "submit_check": True}), {})
    CLONE.handle(state, UIEvent("submit_order"))
    return state


def _cashier() -> dict[str, Any]:
    state = _events("mid_booking", ("submit_order", None))
    order = state["user"]["orders"][-1]["id"]
    CLONE.handle(state, UIEvent("pay_order", order))
    CLONE.handle(state, UIEvent("pick_pay_channel", "wechat"))
    return state


def _first_order(state: dict[str, Any]) -> str:
    return str(state["user"]["orders"][0]["id"])


SCREENS: dict[str, Callable[[], dict[str, Any]]] = {
    "01_home": lambda: _events("lived_in"),
    "02_station_picker": lambda: _events("fresh", ("open_station_picker", "to")),
    "03_station_search": lambda: _events(
        "fresh", ("open_station_picker", "to"), ("__sync__", None, {"station_query": "nj"})
    ),
    "04_calendar": lambda: _events("fresh", ("open_calendar", "search")),
    "05_train_list": lambda: _events("fresh", ("search_trains", None)),
    "05b_train_list_seats": lambda: _events("fresh", ("search_trains", None), ("expand_train", "G101")),
    "06_train_filter": lambda: _events(
        "fresh",
        ("search_trains", None),
        ("open_filter", None),
        ("filter_toggle", "type:G"),
        ("filter_toggle", "fleet:fxh"),
    ),
    # the list expands seats inline; the seats screen is still where a transfer leg is booked
    "07_train_seats": lambda: _events("mid_booking", ("__back__", None)),
    "08_train_stops": lambda: _events(
        "fresh", ("search_trains", None), ("open_train", "G1"), ("open_stops", "G1")
    ),
    "09_order_form": lambda: _events("mid_booking", ("seat_pos", "A"), ("seat_pos", "F")),
    "10_passenger_add": lambda: _events("fresh", ("go", "passengers"), ("add_passenger", None)),
    "12_orders_upcoming": lambda: _events(
        "with_orders", ("tab", "orders"), ("orders_tab", "orders_upcoming")
    ),
    "13_refund_confirm": lambda: _events("with_orders", ("tab", "orders"), ("orders_tab", "orders_upcoming")),
    "14_transfer_list": lambda: _events(
        "fresh", ("open_station_picker", "to"), ("pick_station", "杭州"), ("open_transfer", None)
    ),
    "15_waitlist_detail": lambda: _events("lived_in", ("go", "waitlist_orders")),
    "16_reminder_add": lambda: _events("fresh", ("go", "reminders"), ("add_reminder", None)),
    "17_mine": lambda: _events("lived_in", ("tab", "mine")),
    "18_services": lambda: _events("fresh", ("tab", "services")),
    "19_login": lambda: _logged_out(("tab", "orders", {}), ("__sync__", None, {"login_account": "liming88"})),
    "20_login_sms": lambda: _logged_out(
        ("open_login", None, {}), ("login_submit", None, LOGIN_FORM), ("sms_send", None, {})
    ),
    "21_member": lambda: _events("lived_in", ("tab", "member")),
    "22_mine_logged_out": lambda: _logged_out(("tab", "mine", {})),
    "23_sleeper_seats": lambda: _sleeper_form(),
    "24_sleeper_berth": lambda: _sleeper_form(
        ("book_seat", "yw"), ("toggle_rider", "p2"), ("set_berth", "下铺")
    ),
    "25_submit_check": _checked_form,
    "26_pay_platform": _cashier,
    "27_passenger_pick": lambda: _events("mid_booking", ("open_passenger_pick", "booking")),
    "28_abandon_pay": lambda: _events("mid_booking", ("submit_order", None), ("ask_abandon_pay", None)),
}


def _finish(name: str, state: dict[str, Any]) -> dict[str, Any]:
    """Screens that need an id picked from the state."""
    if name == "11_order_pay":
        CLONE.handle(state, UIEvent("submit_order"))
    if name == "13_refund_confirm":
        order = next(
            o
            for o in state["user"]["orders"]
            if o["status"] == "paid" and o["tickets"][0]["status"] == "paid"
        )
        CLONE.handle(state, UIEvent("open_order", order["id"]))
        CLONE.handle(state, UIEvent("refund_ticket", f"{order['id']}#0"))
    if name == "15_waitlist_detail":
        CLONE.handle(state, UIEvent("open_waitlist", state["user"]["waitlists"][0]["id"]))
    return state


def main(out_dir: str = "docs/screenshots/train_ticketing", *only: str) -> list[Path]:
    """Writes every screen, or only those whose names start with one of `only`."""
    from playwright.sync_api import sync_playwright

    out = Path(out_dir)
    out.mkdir(parents=True, exist_ok=True)
    screens = dict(SCREENS)
    screens["11_order_pay"] = lambda: _events("mid_booking")
    written: list[Path] = []
    with CloneServer() as server, sync_playwright() as pw:
        browser = pw.chromium.launch(executable_path=CHROMIUM, headless=True, args=ARGS)
        try:
            page = browser.new_page(viewport={"width": 412, "height": 915}, device_scale_factor=1.5)
            for name in sorted(screens):
                if only and not name.startswith(only):
                    continue
                state = _finish(name, screens[name]())
                resp = httpx.post(
                    f"{server.url}/api/sessions", json={"clone": CLONE.name, "state": state}, timeout=30
                )
                resp.raise_for_status()
                page.goto(f"{server.url}/s/{resp.json()['session']}")
                page.wait_for_timeout(150)
                path = out / f"{name}.png"
                page.screenshot(path=str(path))
                written.append(path)
                log.info("wrote %s", path)
        finally:
            browser.close()
    return written


if __name__ == "__main__":
    logging.basicConfig(level=logging.INFO, format="%(message)s")
    main(*sys.argv[1:])
