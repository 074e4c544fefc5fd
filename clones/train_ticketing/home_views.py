"""What the home, login, 铁路会员 and 'service elsewhere' screens show (computed from state alone)."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from clones.train_ticketing.login import logged_in, masked_phone
from clones.train_ticketing.ui import ELSEWHERE

GRID_COLUMNS, GRID_ROWS = 5, 3


@dataclass(frozen=True)
class Tile:
    """One service-grid tile: its label, the event it fires and its resource-id."""

    label: str
    ev: str
    arg: str
    id: str


def _link(label: str, route: str, rid: str) -> Tile:
    return Tile(label, "go", route, rid)


def _elsewhere(key: str) -> Tile:
    return Tile(ELSEWHERE[key][0], "open_elsewhere", key, f"entry_{key}")


# Page one keeps every tile the clone's tasks use (the first page is the one on screen at launch);
# the real grid's order and its second page are guesses.
SERVICE_TILES: tuple[Tile, ...] = (
    _link("候补订单", "waitlist_orders", "entry_waitlist"),
    _link("起售提醒", "reminders", "entry_reminders"),
    _link("起售时间", "sale_time", "entry_sale_time"),
    _link("车次查询", "train_no_search", "entry_train_no"),
    _link("常用乘车人", "passengers", "entry_passengers"),
    _link("退改说明", "refund_rules", "entry_rules"),
    _link("换乘查询", "transfer_list", "entry_transfer"),
    _link("我的订单", "orders_unfinished", "entry_orders"),
    _elsewhere("points_mall"),
    _elsewhere("punctuality"),
    _elsewhere("car"),
    _elsewhere("hotel"),
    _elsewhere("food"),
    _elsewhere("station_guide"),
    Tile("更多服务", "tab", "services", "entry_more"),
    _elsewhere("station_screen"),
    _elsewhere("lost_found"),
    _elsewhere("priority"),
    _elsewhere("season_ticket"),
    _elsewhere("ecard"),
    _elsewhere("pickup"),
    _elsewhere("travel"),
    _elsewhere("certificate"),
    _elsewhere("wifi"),
)

# invented headlines (the real home shows a news feed; its items here are placeholders)
NEWS = (
    "铁路部门增开周末旅客列车，方便群众出行",
    "候补购票服务扩展至全部旅客列车",
    "电子客票报销凭证可在乘车后180日内打印",
)

# 铁路会员 rules as publicly described in outline (the exact figures are a guess)
MEMBER_RULES = (
    "乘坐列车按票面金额每元累积5积分。",
    "积分可在积分兑换中兑换车票，100积分相当于1元。",
    "积分有效期为12个月，到期未使用的积分将被清零。",
)


def grid_pages() -> list[list[Tile]]:
    per_page = GRID_COLUMNS * GRID_ROWS
    return [list(SERVICE_TILES[i : i + per_page]) for i in range(0, len(SERVICE_TILES), per_page)]


def screen_context(state: dict[str, Any], route: str) -> dict[str, Any]:
    """The extra template values of the screens this module owns (every screen gets `logged_in`)."""
    ui = state["ui"]
    ctx: dict[str, Any] = {"logged_in": logged_in(state)}
    if route == "home":
        ctx.update(grid_pages=grid_pages(), news=NEWS)
    elif route in ("login", "login_sms"):
        ctx.update(login=ui.get("login"), phone=masked_phone(state["user"]["profile"]["phone"]))
    elif route == "member":
        ctx["member_rules"] = MEMBER_RULES
    elif route == "elsewhere":
        key = ui.get("args", {}).get("service", "")
        ctx["service"] = ELSEWHERE.get(key, ("服务", "该服务暂未开通。"))
    return ctx
