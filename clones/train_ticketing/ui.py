"""Route names, UI constants and the initial screen state of the train-ticketing clone."""

from __future__ import annotations

from datetime import date, timedelta
from typing import Any

TAB_ROUTES = {"home": "home", "services": "services", "orders": "orders_unfinished", "mine": "mine"}
ORDER_TABS = ("orders_unfinished", "orders_upcoming", "orders_history")
# screens reachable from plain links (service tiles, menu rows); everything else needs context
LINK_ROUTES = frozenset(
    {
        "waitlist_orders",
        "reminders",
        "sale_time",
        "train_no_search",
        "passengers",
        "messages",
        "account",
        "settings",
        "refund_rules",
        "about",
        "transfer_list",
        "orders_unfinished",
        "orders_upcoming",
        "orders_history",
        "insurance",
    }
)
ROUTES = (
    "home",
    "station_picker",
    "calendar",
    "train_list",
    "train_filter",
    "train_seats",
    "train_stops",
    "order_form",
    "passenger_pick",
    "passenger_add",
    "passenger_edit",
    "insurance",
    "order_pay",
    "pay_success",
    "orders_unfinished",
    "orders_upcoming",
    "orders_history",
    "order_detail",
    "refund_confirm",
    "refund_result",
    "change_list",
    "change_station",
    "change_confirm",
    "change_result",
    "transfer_list",
    "transfer_detail",
    "waitlist_form",
    "waitlist_orders",
    "waitlist_detail",
    "reminders",
    "reminder_add",
    "sale_time",
    "train_no_search",
    "services",
    "mine",
    "passengers",
    "account",
    "settings",
    "messages",
    "message_detail",
    "refund_rules",
    "about",
)
SCENARIOS = ("fresh", "with_orders", "lived_in", "mid_booking")
TYPE_FILTERS = ("G", "C", "D", "Z", "T", "K")
# the list's 普通车 quick filter: every type that is not 高铁/城际/动车
NORMAL_TYPES = ("Z", "T", "K")
LIST_TABS = ("direct", "transfer")
DEP_BANDS = ("00-06", "06-12", "12-18", "18-24")
SORTS = ("dep", "arr", "dur", "price")
CLEARABLE_FIELDS = frozenset(
    {"p_phone", "p_name", "p_id_no", "station_query", "sale_query", "train_no_query"}
)

# labels the drift framework may swap for plausible new wording (old → new); the drift relabels
# substrings of visible text, so no key occurs inside a commit-boundary label (提交订单, 立即支付...)
DRIFT_RELABELS: dict[str, str] = {
    "查询车票": "搜索车票",
    "常用乘车人": "乘车人管理",
    "起售提醒": "开售提醒",
    "起售时间": "开售时间",
    "中转换乘": "换乘方案",
    "退改说明": "退改签规则",
    "经停信息": "停靠站信息",
    "选择乘车人": "选择乘客",
    "在线选座": "选座服务",
    "普通车": "普速列车",
    "出发最早": "最早出发",
    "价格最低": "低价优先",
    "耗时最短": "用时最短",
    "筛选": "条件筛选",
    "预订": "购买",
    "变更到站": "改到站",
    "消息中心": "通知中心",
}


def default_list_filters() -> dict[str, Any]:
    return {
        "sort": "dep",
        "types": [],
        "bands": [],
        "from_st": [],
        "to_st": [],
        "seats": [],
        "avail_only": False,
        "fleet": [],
        "ends": [],
        "arr_bands": [],
    }


def ui_extras(today: date) -> dict[str, Any]:
    return {
        "search": {
            "from": "北京",
            "to": "上海",
            "date": (today + timedelta(days=1)).isoformat(),
            "student": False,
            "gd_only": False,
        },
        "list": default_list_filters(),
        "booking": None,
        "waitlist": None,
        "reminder": None,
        "transfer_sort": "total",
    }
