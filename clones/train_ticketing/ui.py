"""Route names, UI constants and the initial screen state of the train-ticketing clone."""

from __future__ import annotations

from datetime import date, timedelta
from typing import Any

TAB_ROUTES = {
    "home": "home",
    "services": "services",
    "member": "member",
    "orders": "orders_unfinished",
    "mine": "mine",
}
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
    "pay_platform",
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
    "login",
    "login_sms",
    "member",
    "elsewhere",
)
# The activity each screen runs in (REAL_APPS.md 1a): the tab roots are the native MainActivity
# (the home is [script]; the other tabs are H5 views inside it, [web]); the booking and service
# pages are H5 pages in Alipay Nebula's H5Activity ([script] for the list and order pages).
MAIN_ACTIVITY = "com.MobileTicket.ui.activity.MainActivity"
H5_ACTIVITY = "com.alipay.mobile.nebulacore.ui.H5Activity"
NATIVE_ROUTES = frozenset(
    {"home", "services", "member", "orders_unfinished", "orders_upcoming", "orders_history", "mine"}
)


def activity_of(route: str) -> str:
    return MAIN_ACTIVITY if route in NATIVE_ROUTES else H5_ACTIVITY


# logged out, these tabs and links open the login page first (the rest of the app stays browsable)
LOGIN_GATED_TABS = frozenset({"orders"})
LOGIN_GATED_LINKS = frozenset(
    {
        "waitlist_orders",
        "reminders",
        "passengers",
        "messages",
        "account",
        "orders_unfinished",
        "orders_upcoming",
        "orders_history",
    }
)
# services the clone does not model: their tiles open a page saying where the real app sends the
# user (flights and coaches open partner mini-apps in the real app; which ones is a guess)
ELSEWHERE: dict[str, tuple[str, str]] = {
    "flight": ("飞机票", "机票服务由合作平台提供，请在对应小程序中查询和预订。"),
    "coach": ("汽车票", "汽车票服务由合作平台提供，请在对应小程序中查询和预订。"),
    "scan": ("扫一扫", "扫码需要使用相机，本仿真应用不提供该功能。"),
    "points_mall": ("积分兑换", "积分兑换车票请在铁路会员页面按规则办理，商城服务由合作平台提供。"),
    "punctuality": ("正晚点", "列车正晚点信息请以车站公告为准。"),
    "car": ("约车", "约车服务由合作平台提供。"),
    "hotel": ("酒店住宿", "酒店服务由合作平台提供。"),
    "food": ("餐饮特产", "餐饮特产服务由合作平台提供。"),
    "station_screen": ("车站大屏", "车站大屏信息请以车站公告为准。"),
    "lost_found": ("遗失物品", "遗失物品查找请联系车站或拨打12306。"),
    "priority": ("重点旅客", "重点旅客预约请提前联系车站。"),
    "season_ticket": ("计次·定期票", "计次票和定期票仅在部分线路发售。"),
    "ecard": ("铁路e卡通", "铁路e卡通服务由合作平台提供。"),
    "pickup": ("接送站", "接送站服务由合作平台提供。"),
    "travel": ("旅游", "旅游服务由合作平台提供。"),
    "station_guide": ("车站引导", "车站引导信息请以车站公告为准。"),
    "certificate": ("乘车证明", "乘车证明请在订单详情中申请。"),
    "wifi": ("站车Wi-Fi", "站车Wi-Fi服务请以现场提示为准。"),
    "register": ("注册", "注册新账户需要实名核验，本仿真应用不提供。"),
}
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
    "选座服务": "在线选座",
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
