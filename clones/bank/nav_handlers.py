"""Bank UI events that only move between screens: plain openers, tabs, dialogs."""

from __future__ import annotations

from clones.bank.handler_kit import HANDLERS, arg, go_home, on, toast
from clones.base import Handler, State, UIEvent, navigate, replace_route, require

SIMPLE_SCREENS = {
    "open_accounts": "accounts",
    "open_transfer_home": "transfer_home",
    "open_records": "transfer_records",
    "open_scheduled": "scheduled_list",
    "open_payees": "payees",
    "open_credit_bill": "credit_bill",
    "open_pay_records": "pay_records",
    "open_deposit_home": "deposit_home",
    "open_holdings": "holdings",
    "open_fx": "fx_rates",
    "open_branches": "branches",
    "open_settings": "settings",
    "open_limits": "limits",
    "open_notifications": "notifications",
    "open_security": "security",
    "open_messages": "messages",
    "open_all": "all_services",
    "open_history_filter": "history_filter",
}


def _opener(route: str) -> Handler:
    def handler(state: State, event: UIEvent) -> None:
        navigate(state, route)

    return handler


for _ev, _route in SIMPLE_SCREENS.items():
    HANDLERS[_ev] = _opener(_route)

TABS = {"home": "home", "wealth": "wealth_home", "credit": "credit_home", "life": "pay_home", "mine": "mine"}


@on("tab")
def _tab(state: State, event: UIEvent) -> None:
    route = TABS.get(arg(event))
    require(route is not None, "未知的页面")
    state["ui"]["stack"] = []
    replace_route(state, route)  # type: ignore[arg-type]


@on("done")
def _done(state: State, event: UIEvent) -> None:
    go_home(state)


@on("dismiss")
def _dismiss(state: State, event: UIEvent) -> None:
    state["ui"]["dialog"] = None
    state["ui"]["sheet"] = None
    state["ui"]["drawer"] = False


@on("home_drawer")
def _home_drawer(state: State, event: UIEvent) -> None:
    """The home's top-left `home_drawer`: a side panel with `btn_login_new` (登录) when logged out."""
    state["ui"]["drawer"] = not state["ui"].get("drawer")


@on("toast")
def _toast(state: State, event: UIEvent) -> None:
    """Entries the clone shows but does not implement (the real app opens a web page)."""
    toast(state, f"{event.arg or '该功能'}暂未开放，敬请期待")


@on("open_credit")
def _open_credit(state: State, event: UIEvent) -> None:
    navigate(state, "credit_home")


@on("open_pay_home")
def _open_pay_home(state: State, event: UIEvent) -> None:
    navigate(state, "pay_home")


@on("open_wealth")
def _open_wealth(state: State, event: UIEvent) -> None:
    navigate(state, "wealth_home")
