"""Rendering: the data each screen shows (computed from state alone) and the Jinja2 templates."""

from __future__ import annotations

from dataclasses import dataclass
from datetime import date, datetime, timedelta
from functools import lru_cache
from pathlib import Path
from typing import Any

from jinja2 import Environment, FileSystemLoader, StrictUndefined, select_autoescape

from clones.train_ticketing import booking
from clones.train_ticketing.home_views import screen_context
from clones.train_ticketing.idcard import mask
from clones.train_ticketing.list_filters import ENDS, FLEETS, fleet_of, passes_extra
from clones.train_ticketing.lunar import lunar_label
from clones.train_ticketing.stations import DIRECTORY, HOT_CITIES
from clones.train_ticketing.timetable import (
    BERTHS,
    HIGH_SPEED,
    SEAT_LABELS,
    TYPE_LABELS,
    Leg,
    available,
    city_of,
    find_train,
    fmt_duration,
    fmt_min,
    leg_for,
    legs_between,
    sale_date,
)
from clones.train_ticketing.ui import NORMAL_TYPES, activity_of

TEMPLATES = Path(__file__).parent / "templates"
WEEKDAY_ZH = "一二三四五六日"
HOLIDAYS: dict[str, str] = {
    "2026-01-01": "元旦",
    "2026-02-16": "除夕",
    "2026-02-17": "春节",
    "2026-04-05": "清明",
    "2026-05-01": "劳动节",
    "2026-06-19": "端午",
    "2026-09-25": "中秋",
    "2026-10-01": "国庆",
}
REST_DAYS = {
    "2026-01-01",
    "2026-01-02",
    "2026-01-03",
    *(f"2026-02-{d:02d}" for d in range(15, 24)),
    "2026-04-04",
    "2026-04-05",
    "2026-04-06",
    *(f"2026-05-0{d}" for d in range(1, 6)),
    "2026-06-19",
    "2026-06-20",
    "2026-06-21",
}
BANDS = {"00-06": (0, 360), "06-12": (360, 720), "12-18": (720, 1080), "18-24": (1080, 1440)}
TICKET_STATUS = {
    "unpaid": "待支付",
    "paid": "已支付",
    "refunded": "已退票",
    "changed": "已改签",
    "station_changed": "已变更到站",
    "cancelled": "已取消",
    "changing": "改签中",
}


@lru_cache(maxsize=1)
def _env() -> Environment:
    env = Environment(
        loader=FileSystemLoader(str(TEMPLATES)),
        autoescape=select_autoescape(["html", "j2"]),
        undefined=StrictUndefined,
        trim_blocks=True,
        lstrip_blocks=True,
    )
    env.filters["hm"] = fmt_min
    env.filters["dur"] = fmt_duration
    env.filters["md"] = md
    env.filters["wd"] = weekday
    env.filters["rel_day"] = relative_day
    env.filters["lunar"] = lunar_label
    env.filters["money"] = money
    env.filters["mask"] = mask
    env.filters["avail"] = avail_text
    env.filters["seat"] = lambda c: SEAT_LABELS.get(c, c)
    return env


@lru_cache(maxsize=1)
def css() -> str:
    return (TEMPLATES / "train.css").read_text(encoding="utf-8")


def md(iso: str) -> str:
    d = date.fromisoformat(iso[:10])
    return f"{d.month}月{d.day}日"


def weekday(iso: str) -> str:
    return "周" + WEEKDAY_ZH[date.fromisoformat(iso[:10]).weekday()]


def relative_day(iso: str, today: str) -> str:
    """The home date row's day label: 今天/明天/后天 near the clock's day, else the weekday."""
    delta = (date.fromisoformat(iso[:10]) - date.fromisoformat(today[:10])).days
    return {0: "今天", 1: "明天", 2: "后天"}.get(delta, weekday(iso))


def money(x: float) -> str:
    return f"¥{x:.1f}"


def avail_text(n: int) -> str:
    if n <= 0:
        return "无"
    return "有" if n >= 20 else str(n)


def today_of(state: dict[str, Any]) -> date:
    return booking.now_of(state).date()


# --- train list -------------------------------------------------------------------------------------


def list_legs(state: dict[str, Any], *, filtered: bool = True) -> list[Leg]:
    s = state["ui"]["search"]
    now = booking.now_of(state)
    legs = [
        leg
        for leg in legs_between(state["world"], s["from"], s["to"], s["date"])
        if booking.departure_at(leg.day, leg.dep_min) > now
    ]
    if not filtered:
        return legs
    f = state["ui"]["list"]
    out: list[Leg] = []
    for leg in legs:
        avail = available(state, leg.train, leg.day)
        if f["types"] and leg.type not in f["types"]:
            continue
        if f["bands"] and not any(BANDS[b][0] <= leg.dep_min % 1440 < BANDS[b][1] for b in f["bands"]):
            continue
        if f["from_st"] and leg.from_station not in f["from_st"]:
            continue
        if f["to_st"] and leg.to_station not in f["to_st"]:
            continue
        if f["seats"] and not any(avail.get(c, 0) > 0 for c in f["seats"]):
            continue
        if f["avail_only"] and not any(n > 0 for n in avail.values()):
            continue
        if not passes_extra(leg, f.get("fleet", []), f.get("ends", []), f.get("arr_bands", []), BANDS):
            continue
        out.append(leg)
    key = {
        "dep": lambda leg: (leg.dep_min % 1440, leg.no),
        "arr": lambda leg: (leg.arr_min - (leg.dep_min // 1440) * 1440, leg.no),
        "dur": lambda leg: (leg.duration, leg.no),
        "price": lambda leg: (leg.min_price, leg.no),
    }[f["sort"]]
    return sorted(out, key=key)


def leg_row(state: dict[str, Any], leg: Leg) -> dict[str, Any]:
    avail = available(state, leg.train, leg.day)
    seats = [
        {
            "cls": c,
            "label": SEAT_LABELS[c],
            "n": avail[c],
            "text": avail_text(avail[c]),
            "price": leg.price(c),
            "berths": [{"berth": x, "price": leg.berth_price(c, x)} for x in BERTHS.get(c, ())],
        }
        for c in leg.train["classes"]
    ]
    return {
        "no": leg.no,
        "a11y": row_string(leg),
        "panel_seats": sorted(seats, key=lambda st: PANEL_ORDER.get(st["cls"], len(PANEL_ORDER))),
        "type": leg.type,
        "from": leg.from_station,
        "to": leg.to_station,
        "dep": fmt_min(leg.dep_min),
        "arr": fmt_min(leg.arr_min),
        "dur": fmt_duration(leg.duration),
        "plus_days": leg.days_to_arrival,
        "min_price": leg.min_price,
        "seats": seats,
        "sold_out": all(s["n"] <= 0 for s in seats),
        "origin": leg.from_idx == 0,
        "terminal": leg.to_idx == len(leg.train["stops"]) - 1,
        "fleet": _fleet_label(leg),
    }


# the unfolded card lists 二等 / 一等 / 商务 / 无座 in this order (REAL_APPS.md 1d, the current UI);
# the other classes follow in the clone's order
PANEL_ORDER = {"edz": 0, "ydz": 1, "yxydz": 2, "swz": 3, "wz": 4}


def spaced(train_no: str) -> str:
    """A train number as the H5 list's accessibility text spells it: `G 7 0 0 4`."""
    return " ".join(train_no)


def row_string(leg: Leg) -> str:
    """The train row's one accessibility string (REAL_APPS.md 1d), e.g.
    `G 1 3 5 0次列车14点24分从海口东出发16点16分到达三亚,历时1时52分,`."""
    dep, arr = leg.dep_min % 1440, leg.arr_min % 1440
    h, m = divmod(leg.duration, 60)
    return (
        f"{spaced(leg.no)}次列车{dep // 60:02d}点{dep % 60:02d}分从{leg.from_station}出发"
        f"{arr // 60:02d}点{arr % 60:02d}分到达{leg.to_station},历时{h}时{m}分,"
    )


def _fleet_label(leg: Leg) -> str:
    fleet = fleet_of(leg.train)
    return FLEETS["smart"] if "smart" in fleet else FLEETS["fxh"] if fleet else ""


def date_strip(state: dict[str, Any]) -> list[dict[str, str]]:
    """The list's date tabs: every day of the pre-sale window (15 days by default), today first."""
    today = today_of(state)
    days = int(state["world"]["presale_days"])
    return [{"iso": (today + timedelta(days=i)).isoformat()} for i in range(days)]


def list_context(state: dict[str, Any]) -> dict[str, Any]:
    """What the train list shows; the filter sheet is drawn over the same list."""
    ui = state["ui"]
    legs = list_legs(state)
    everything = list_legs(state, filtered=False)
    args = ui.get("args", {})
    expanded = args.get("train", "") if ui["route"] == "train_list" else ""
    return {
        "rows": [leg_row(state, leg) for leg in legs],
        "total": len(everything),
        "strip": date_strip(state),
        "f": ui["list"],
        "expanded": expanded,
        # under the filter sheet the list is inert: no control of it is in the hierarchy or tappable
        "under_sheet": ui["route"] == "train_filter",
        "ev_attr": "data-inert" if ui["route"] == "train_filter" else "data-ev",
        "quick_gd_on": sorted(ui["list"]["types"]) == sorted(HIGH_SPEED),
        "quick_normal_on": sorted(ui["list"]["types"]) == sorted(NORMAL_TYPES),
        "from_stations": sorted({leg.from_station for leg in everything}),
        "to_stations": sorted({leg.to_station for leg in everything}),
    }


def change_legs(state: dict[str, Any], order: dict[str, Any], day: str) -> list[Leg]:
    legs = legs_between(state["world"], order["from"], order["to"], day)
    now = booking.now_of(state)
    return [leg for leg in legs if booking.departure_at(leg.day, leg.dep_min) > now]


# --- transfers --------------------------------------------------------------------------------------


@dataclass(frozen=True)
class TransferPlan:
    first: Leg
    second: Leg

    @property
    def hub(self) -> str:
        return self.first.to_station

    @property
    def wait(self) -> int:
        return self.second.dep_min - self.first.arr_min

    @property
    def total(self) -> int:
        return self.second.arr_min - self.first.dep_min

    @property
    def same_station(self) -> bool:
        return self.first.to_station == self.second.from_station


TRANSFER_SORTS = {"total": "耗时最短", "dep": "出发最早", "wait": "换乘时间短"}


def transfer_plans(state: dict[str, Any], sort: str = "total") -> list[TransferPlan]:
    """Two-train journeys through a hub city, 20 min–4 h to change; the fastest first by default."""
    s = state["ui"]["search"]
    world = state["world"]
    fc, tc = city_of(s["from"]), city_of(s["to"])
    plans: list[TransferPlan] = []
    # Onward trains depend only on the hub's city: found once per city, not once per arriving train.
    onward: dict[str, list[Leg]] = {}
    for train in world["trains"]:
        stops = train["stops"]
        fi = next(
            (i for i, st in enumerate(stops) if st["dep"] is not None and city_of(st["station"]) == fc), None
        )
        if fi is None:
            continue
        if any(city_of(st["station"]) == tc for st in stops[fi + 1 :]):
            continue
        for hi in range(fi + 1, len(stops)):
            hub = stops[hi]["station"]
            first = Leg(train, s["date"], fi, hi)
            hub_city = city_of(hub)
            if hub_city not in onward:
                onward[hub_city] = legs_between(world, hub, s["to"], s["date"])
            for second in onward[hub_city]:
                if city_of(second.from_station) != hub_city or second.no == train["no"]:
                    continue
                wait = second.dep_min - first.arr_min
                if 20 <= wait <= 240:
                    plans.append(TransferPlan(first, second))
    keys = {
        "total": lambda p: (p.total, p.first.dep_min, p.first.no, p.second.no),
        "dep": lambda p: (p.first.dep_min, p.total, p.first.no, p.second.no),
        "wait": lambda p: (p.wait, p.total, p.first.no, p.second.no),
    }
    plans.sort(key=keys[sort])
    return plans[:20]


# --- calendar ---------------------------------------------------------------------------------------


def calendar_months(state: dict[str, Any], target: str) -> list[dict[str, Any]]:
    today = today_of(state)
    presale = int(state["world"]["presale_days"])
    last_sale = today + timedelta(days=presale - 1)
    selected = (
        state["ui"]["search"]["date"]
        if target == "search"
        else (state["ui"]["reminder"] or {}).get("date", "")
    )
    months: list[dict[str, Any]] = []
    first = today.replace(day=1)
    for m in range(2):
        year, month = first.year + (first.month - 1 + m) // 12, (first.month - 1 + m) % 12 + 1
        start = date(year, month, 1)
        days: list[dict[str, Any] | None] = [None] * start.weekday()
        d = start
        while d.month == month:
            iso = d.isoformat()
            on_sale = today <= d <= last_sale
            enabled = on_sale if target == "search" else d > last_sale
            days.append(
                {
                    "iso": iso,
                    "day": d.day,
                    "today": d == today,
                    "enabled": enabled,
                    "selected": iso == selected,
                    "weekend": d.weekday() >= 5,
                    "holiday": HOLIDAYS.get(iso, ""),
                    "rest": iso in REST_DAYS,
                    "sale": md(sale_date(d, presale).isoformat()) if d > last_sale else "",
                }
            )
            d += timedelta(days=1)
        months.append({"title": f"{year}年{month}月", "days": days})
    return months


# --- station picker ---------------------------------------------------------------------------------


def station_matches(query: str) -> list[dict[str, str]]:
    q = query.strip().lower()
    if not q:
        return []
    return [
        s.as_json() for s in DIRECTORY if q in s.name or s.pinyin.startswith(q) or s.initials.startswith(q)
    ]


def station_groups() -> list[dict[str, Any]]:
    groups: dict[str, list[str]] = {}
    for s in sorted(DIRECTORY, key=lambda s: s.pinyin):
        groups.setdefault(s.pinyin[0].upper(), []).append(s.name)
    return [{"letter": k, "names": v} for k, v in sorted(groups.items())]


# --- screen contexts --------------------------------------------------------------------------------


def order_view(state: dict[str, Any], order: dict[str, Any]) -> dict[str, Any]:
    now = booking.now_of(state)
    status = order["status"]
    if booking.expired(state, order):
        status = "expired"
    dep = booking.order_departure(order)
    tickets = []
    for i, t in enumerate(order["tickets"]):
        can_act = status == "paid" and t["status"] == "paid" and dep > now
        tickets.append(
            {
                **t,
                "idx": i,
                "ref": f"{order['id']}#{i}",
                "status_text": TICKET_STATUS.get(t["status"], t["status"]),
                "can_refund": can_act,
                "can_change": can_act and not t.get("changed_from"),
                "type_text": booking.TICKET_TYPE_LABELS[t["ticket_type"]],
            }
        )
    status_text = {"unpaid": "待支付", "paid": "已支付", "cancelled": "已取消", "expired": "已超时取消"}[
        status
    ]
    if status == "paid" and all(
        t["status"] in ("refunded", "changed", "station_changed") for t in order["tickets"]
    ):
        status_text = (
            TICKET_STATUS[order["tickets"][0]["status"]]
            if len({t["status"] for t in order["tickets"]}) == 1
            else "已办理"
        )
    elif status == "paid" and dep <= now:
        status_text = "已出行"
    left = datetime.fromisoformat(order["pay_deadline"]) - now
    seconds = max(0, int(left.total_seconds()))
    return {
        **order,
        "view_status": status,
        "status_text": status_text,
        "tickets": tickets,
        "pay_left": f"{seconds // 60:02d}:{seconds % 60:02d}",
        "seat_label": SEAT_LABELS[order["tickets"][0]["seat_class"]],
    }


def order_bucket(state: dict[str, Any], order: dict[str, Any]) -> str:
    if order["status"] == "unpaid" and not booking.expired(state, order):
        return "orders_unfinished"
    if (
        order["status"] == "paid"
        and booking.order_departure(order) > booking.now_of(state)
        and any(t["status"] == "paid" for t in order["tickets"])
    ):
        return "orders_upcoming"
    return "orders_history"


def _booking_ctx(state: dict[str, Any]) -> dict[str, Any]:
    b = state["ui"]["booking"]
    if b is None:
        return {"b": None}
    leg = leg_for(state["world"], b["train"], b["from"], b["to"], b["date"])
    assert leg is not None
    avail = available(state, leg.train, leg.day)
    wanted = str(b.get("berth", ""))
    riders = []
    for n, pid in enumerate(b["passengers"]):
        p = booking.passenger(state, pid)
        tt = b["types"].get(pid, "adult")
        # the berth and price the order will get: the same rule create_order applies
        berth = booking.assigned_berth(state, leg, b["cls"], wanted, n)
        riders.append(
            {
                **p,
                "ticket_type": tt,
                "berth": berth,
                "price": booking.rider_price(state, leg, b["cls"], tt, berth),
                "id_masked": mask(p["id_no"]),
            }
        )
    berths = BERTHS.get(b["cls"], ())
    return {
        "b": b,
        "leg": leg_row(state, leg),
        "riders": riders,
        "total": sum(r["price"] for r in riders),
        "classes": [
            {
                "cls": c,
                "label": SEAT_LABELS[c],
                "price": leg.price(c),
                "text": avail_text(avail[c]),
                "n": avail[c],
            }
            for c in leg.train["classes"]
        ],
        "letters": booking.SEAT_LETTERS.get(b["cls"], ""),
        "berths": [
            {"berth": x, "id": booking.BERTH_IDS[x], "price": leg.berth_price(b["cls"], x)}
            for x in booking.BERTH_CHOICES
            if x in berths
        ],
        "submit_check": bool(state["ui"].get("submit_check")),
    }


def context(state: dict[str, Any]) -> dict[str, Any]:
    ui = state["ui"]
    user = state["user"]
    route = ui["route"]
    args = ui.get("args", {})
    today = today_of(state)
    ctx: dict[str, Any] = {
        "state": state,
        "ui": ui,
        "user": user,
        "world": state["world"],
        "route": route,
        "activity": activity_of(route),
        "args": args,
        "s": ui["search"],
        "form": ui["form"],
        "today": today.isoformat(),
        "now": booking.now_of(state),
        "seat_labels": SEAT_LABELS,
        "type_labels": TYPE_LABELS,
        "ptype_labels": booking.PTYPE_LABELS,
        "tt_labels": booking.TICKET_TYPE_LABELS,
        "unread": sum(1 for m in user["messages"] if not m["read"]),
        "dialog": ui.get("dialog"),
        "toast": ui.get("toast"),
    }
    if route == "home":
        ctx["recent"] = [r.split("|") for r in user["recent_searches"]]
        ctx["upcoming"] = [
            order_view(state, o)
            for o in user["orders"]
            if user.get("logged_in", True) and order_bucket(state, o) == "orders_upcoming"
        ][:1]
    elif route == "station_picker":
        q = ui["form"].get("station_query", "")
        ctx.update(
            query=q,
            matches=station_matches(q),
            hot=HOT_CITIES,
            groups=station_groups(),
            letter=args.get("letter", ""),
        )
    elif route == "calendar":
        ctx["months"] = calendar_months(state, args.get("target", "search"))
        ctx["target"] = args.get("target", "search")
    elif route == "train_list":
        ctx.update(list_context(state))
    elif route == "train_filter":
        ctx.update(list_context(state))
        legs = list_legs(state, filtered=False)
        ctx["fleets"] = FLEETS
        ctx["ends"] = ENDS
        ctx["seat_classes"] = [c for c in SEAT_LABELS if any(c in leg.train["classes"] for leg in legs)]
        ctx["types"] = [
            ("G", "G-高铁"),
            ("C", "C-城际"),
            ("D", "D-动车"),
            ("Z", "Z-直达"),
            ("T", "T-特快"),
            ("K", "K-快速"),
        ]
        ctx["bands"] = list(BANDS)
        ctx["count"] = len(list_legs(state))
    elif route in ("train_seats",):
        leg = leg_for(state["world"], args["train"], args["from"], args["to"], args["date"])
        assert leg is not None
        ctx["row"] = leg_row(state, leg)
        ctx["day"] = args["date"]
        ctx["on_sale"] = booking.in_window(state, args["date"])
    elif route == "train_stops":
        train = find_train(state["world"], args["train"])
        assert train is not None
        ctx["train"] = train
        ctx["stops"] = [
            {
                **st,
                "idx": i,
                "stay": (st["dep"] - st["arr"]) if st["arr"] is not None and st["dep"] is not None else None,
                "day_n": (st["arr"] if st["arr"] is not None else st["dep"]) // 1440,
                "mine": st["station"] in (args.get("from"), args.get("to")),
            }
            for i, st in enumerate(train["stops"])
        ]
        ctx["day"] = args.get("date", today.isoformat())
    elif route in ("order_form", "insurance"):
        ctx.update(_booking_ctx(state))
        ctx["passengers"] = user["passengers"]
    elif route == "passenger_pick":
        target = args.get("target", "booking")
        draft = ui[target] or {"passengers": []}
        ctx["chosen"] = draft["passengers"]
        ctx["target"] = target
        ctx["passengers"] = [{**p, "id_masked": mask(p["id_no"])} for p in user["passengers"]]
    elif route in (
        "order_pay",
        "pay_platform",
        "pay_success",
        "order_detail",
        "refund_confirm",
        "refund_result",
        "change_result",
    ):
        order = booking.find_order(state, args["order"])
        ctx["o"] = order_view(state, order)
        if route == "refund_confirm":
            t = order["tickets"][int(args["idx"])]
            fee = booking.refund_fee(state, order, float(t["price"]))
            ctx["t"] = t
            ctx["fee"] = fee
            ctx["refund_amount"] = float(t["price"]) - fee
        ctx["pay_channels"] = booking.PAY_CHANNELS
        if route == "pay_platform":
            ctx["channels"] = booking.PAY_CHANNELS
            ctx["channel"] = args.get("channel", booking.DEFAULT_PAY_CHANNEL)
        if route == "refund_result":
            ctx["t"] = order["tickets"][int(args["idx"])]
    elif route in ("orders_unfinished", "orders_upcoming", "orders_history"):
        rows = [o for o in user["orders"] if order_bucket(state, o) == route]
        q = ui["form"].get("order_query", "").strip().upper() if route == "orders_history" else ""
        if q:
            rows = [
                o
                for o in rows
                if q in o["train"]
                or q in o["from"]
                or q in o["to"]
                or any(q in t["name"] for t in o["tickets"])
            ]
        if route == "orders_upcoming":
            rows.sort(key=booking.order_departure)
        elif route == "orders_history":
            rows.sort(key=booking.order_departure, reverse=True)
        else:
            rows.reverse()
        ctx["orders"] = [order_view(state, o) for o in rows]
    elif route == "change_list":
        order = booking.find_order(state, args["order"])
        ctx["o"] = order_view(state, order)
        ctx["rows"] = [leg_row(state, leg) for leg in change_legs(state, order, args["date"])]
        ctx["day"] = args["date"]
        ctx["ticket"] = order["tickets"][int(args["idx"])]
    elif route == "change_station":
        order = booking.find_order(state, args["order"])
        train = find_train(state["world"], order["train"])
        assert train is not None
        fi = next(i for i, st in enumerate(train["stops"]) if st["station"] == order["from"])
        ctx["o"] = order_view(state, order)
        cls = order["tickets"][int(args["idx"])]["seat_class"]
        ctx["options"] = [
            {
                "station": st["station"],
                "arr": fmt_min(st["arr"]),
                "price": (
                    leg_for(state["world"], order["train"], order["from"], st["station"], order["date"])
                    or Leg(train, order["date"], fi, i)
                ).price(cls),
            }
            for i, st in enumerate(train["stops"])
            if i > fi and st["station"] != order["to"]
        ]
    elif route == "change_confirm":
        order = booking.find_order(state, args["order"])
        leg = leg_for(state["world"], args["train"], args["from"], args["to"], args["date"])
        assert leg is not None
        old = order["tickets"][int(args["idx"])]
        new_price = leg.price(args["cls"])
        from clones.train_ticketing.timetable import ticket_price

        new_price = ticket_price(new_price, args["cls"], old["ticket_type"])
        ctx.update(
            o=order_view(state, order),
            row=leg_row(state, leg),
            old=old,
            new_price=new_price,
            diff=new_price - float(old["price"]),
            cls=args["cls"],
            source=args["source"],
            day=args["date"],
        )
    elif route in ("transfer_list", "transfer_detail"):
        ctx["tsort"] = ui.get("transfer_sort", "total")
        ctx["tsorts"] = TRANSFER_SORTS
        plans = transfer_plans(state, ctx["tsort"])
        ctx["plans"] = [
            {
                "first": leg_row(state, p.first),
                "second": leg_row(state, p.second),
                "hub": p.hub,
                "wait": fmt_duration(p.wait),
                "total": fmt_duration(p.total),
                "same": p.same_station,
                "price": p.first.min_price + p.second.min_price,
            }
            for p in plans
        ]
        if route == "transfer_detail":
            ctx["p"] = ctx["plans"][int(args.get("idx", 0))]
    elif route == "waitlist_form":
        w = ui["waitlist"]
        if w is not None:
            leg = leg_for(state["world"], w["train"], w["from"], w["to"], w["date"])
            assert leg is not None
            ctx["row"] = leg_row(state, leg)
            ctx["price"] = leg.price(w["cls"])
            ctx["deadlines"] = [(k, v[0]) for k, v in booking.WAITLIST_DEADLINES.items()]
        ctx["w"] = w
        ctx["passengers"] = user["passengers"]
    elif route == "waitlist_orders":
        ctx["items"] = list(reversed(user["waitlists"]))
    elif route == "waitlist_detail":
        ctx["w"] = next(w for w in user["waitlists"] if w["id"] == args["id"])
    elif route == "reminders":
        ctx["items"] = list(user["reminders"])
    elif route == "reminder_add":
        r = ui["reminder"]
        ctx["r"] = r
        if r is not None:
            ctx["sale_at"] = booking.sale_at(state, r["from"], r["date"])
    elif route == "sale_time":
        q = ui["form"].get("sale_query", "").strip().lower()
        ctx["stations"] = [
            s for s in DIRECTORY if not q or q in s.name or s.pinyin.startswith(q) or s.initials.startswith(q)
        ]
        ctx["last_sale"] = (today + timedelta(days=int(state["world"]["presale_days"]) - 1)).isoformat()
    elif route == "train_no_search":
        q = ui["form"].get("train_no_query", "").strip().upper()
        ctx["results"] = [t for t in state["world"]["trains"] if q and t["no"].startswith(q)][:20]
    elif route == "passengers":
        q = ui["form"].get("passenger_query", "").strip()
        ctx["passengers"] = [
            {**p, "id_masked": mask(p["id_no"])} for p in user["passengers"] if not q or q in p["name"]
        ]
        ctx["total"] = len(user["passengers"])
    elif route == "passenger_edit":
        ctx["p"] = booking.passenger(state, args["pid"])
    elif route == "message_detail":
        ctx["msg"] = next(m for m in user["messages"] if m["id"] == args["id"])
    elif route == "mine":
        ctx["counts"] = {
            b: sum(1 for o in user["orders"] if order_bucket(state, o) == b)
            for b in ("orders_unfinished", "orders_upcoming")
        }
    ctx["high_speed"] = HIGH_SPEED
    ctx.update(screen_context(state, route))
    return ctx


def render(state: dict[str, Any]) -> str:
    from clones.train_ticketing.ui import ROUTES

    route = state["ui"]["route"]
    if route not in ROUTES:  # a route is a template name: never look up one the clone does not have
        route = "home"
        state = {**state, "ui": {**state["ui"], "route": route}}
    template = _env().get_template(f"{route}.html")
    return template.render(**context(state))
