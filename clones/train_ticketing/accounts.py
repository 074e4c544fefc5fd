"""The invented account a task starts from: passengers, messages and (for some tasks) existing
orders, waitlists and reminders built against the generated timetable, so they always refer to
trains that exist under the task's seed."""

from __future__ import annotations

from datetime import date, datetime, timedelta
from typing import Any

from clones.train_ticketing import booking
from clones.train_ticketing.idcard import make_id
from clones.train_ticketing.timetable import Leg, available, legs_between


def _passenger(
    pid: str, name: str, id_no: str, ptype: str, phone: str, *, is_self: bool = False
) -> dict[str, Any]:
    return {
        "id": pid,
        "name": name,
        "id_type": "中国居民身份证",
        "id_no": id_no,
        "ptype": ptype,
        "phone": phone,
        "verified": True,
        "self": is_self,
    }


def default_passengers() -> list[dict[str, Any]]:
    return [
        _passenger(
            "p1", "李明", make_id("110105", date(1988, 7, 21), 35), "adult", "13812346612", is_self=True
        ),
        _passenger("p2", "王芳", make_id("110108", date(1990, 3, 14), 148), "adult", "13911228840"),
        _passenger("p3", "李小雨", make_id("110105", date(2018, 9, 2), 27), "child", ""),
        _passenger("p4", "张强", make_id("320102", date(2005, 11, 30), 71), "student", "15021349987"),
        _passenger("p5", "陈静", make_id("310104", date(1975, 1, 9), 262), "adult", "13661798825"),
    ]


def default_messages(now: datetime) -> list[dict[str, Any]]:
    rows = [
        ("m1", "温馨提示", "铁路部门提醒您：乘车前请提前到站，预留安检和检票时间。", 1, False),
        (
            "m2",
            "候补购票服务说明",
            "当所需车次席别无票时，可提交候补订单，系统将在有退票时自动为您兑现。",
            2,
            False,
        ),
        ("m3", "会员积分到账", "您本月获得铁路会员积分 126 分，可用于兑换车票。", 5, True),
        ("m4", "春运购票安全提示", "请通过官方渠道购票，谨防诈骗。", 9, True),
    ]
    return [
        {
            "id": mid,
            "title": title,
            "body": body,
            "time": (now - timedelta(days=days)).isoformat(timespec="minutes"),
            "read": read,
        }
        for mid, title, body, days, read in rows
    ]


def default_user(now: datetime) -> dict[str, Any]:
    return {
        "profile": {
            "name": "李明",
            "username": "liming88",
            "id_no": make_id("110105", date(1988, 7, 21), 35),
            "phone": "13812346612",
            "email": "liming88@example.com",
            "points": 1260,
            # 铁路会员 (its content is a guess: level names and rules follow public descriptions)
            "member_level": "银卡会员",
            "member_no": "9000238812",
            "points_expiring": 180,
        },
        "logged_in": True,
        "passengers": default_passengers(),
        "orders": [],
        "waitlists": [],
        "reminders": [],
        "messages": default_messages(now),
        "recent_searches": ["北京|上海", "上海|杭州"],
        "station_history": ["北京", "上海", "杭州"],
        "settings": {"push": True, "fingerprint": False, "night_mode": False},
        "sold": {},
        "seq": 0,
    }


def _first_leg(world: dict[str, Any], frm: str, to: str, day: date, *, types: str, after_min: int = 0) -> Leg:
    for leg in legs_between(world, frm, to, day.isoformat()):
        if leg.type in types and leg.dep_min >= after_min:
            return leg
    raise LookupError(f"no {types} train {frm}→{to} on {day}")


def _pick_class(leg: Leg, state: dict[str, Any], prefer: tuple[str, ...], riders: int = 2) -> str:
    """A preferred seat class with room for the riders; when every one is full (some inventory
    seeds), the first preference is pinned open so the account can always be built."""
    avail = available(state, leg.train, leg.day)
    for cls in prefer:
        if avail.get(cls, 0) >= riders:
            return cls
    cls = next(c for c in prefer if c in leg.train["classes"])
    state["world"]["inventory_overrides"][f"{leg.no}|{leg.day}"] = {cls: riders + 20}
    return cls


def add_existing_orders(state: dict[str, Any]) -> None:
    """A lived-in account: an upcoming trip for two, a trip tomorrow, an unpaid order, history."""
    now = datetime.fromisoformat(state["clock"])
    today = now.date()
    world = state["world"]

    trip = _first_leg(world, "北京", "上海", today + timedelta(days=5), types="G", after_min=8 * 60)
    cls = _pick_class(trip, state, ("edz", "ydz"))
    order = booking.create_order(
        state, trip, cls, [("p1", "adult", "A"), ("p2", "adult", "B")], insurance=False
    )
    booking.pay(state, order["id"])

    soon = _first_leg(world, "上海", "杭州", today + timedelta(days=1), types="GD", after_min=10 * 60)
    order = booking.create_order(
        state, soon, _pick_class(soon, state, ("edz", "ydz")), [("p1", "adult", "F")], insurance=True
    )
    booking.pay(state, order["id"])

    far = _first_leg(world, "北京", "天津", today + timedelta(days=10), types="C", after_min=7 * 60)
    order = booking.create_order(
        state, far, _pick_class(far, state, ("edz", "ydz")), [("p5", "adult", "")], insurance=False
    )
    booking.pay(state, order["id"])

    unpaid = _first_leg(world, "广州", "深圳", today + timedelta(days=3), types="CD")
    order = booking.create_order(
        state, unpaid, _pick_class(unpaid, state, ("edz", "ydz")), [("p1", "adult", "")], insurance=False
    )
    order["created"] = (now - timedelta(minutes=8)).isoformat(timespec="seconds")
    order["pay_deadline"] = (now + timedelta(minutes=22)).isoformat(timespec="seconds")

    past = _first_leg(world, "北京", "天津", today - timedelta(days=6), types="C")
    order = booking.create_order(
        state,
        past,
        _pick_class(past, state, ("edz", "ydz")),
        [("p1", "adult", "")],
        insurance=False,
        check_window=False,
    )
    booking.pay(state, order["id"])
    order["created"] = (now - timedelta(days=8)).isoformat(timespec="seconds")

    refunded = _first_leg(world, "成都", "重庆", today + timedelta(days=4), types="GD")
    order = booking.create_order(
        state, refunded, _pick_class(refunded, state, ("edz", "ydz")), [("p2", "adult", "")], insurance=False
    )
    booking.pay(state, order["id"])
    booking.refund(state, order["id"], 0)


def add_waitlist_and_reminders(state: dict[str, Any]) -> None:
    """A pending waitlist order (the first G train Beijing–Shanghai in six days, its second class
    pinned sold out) and a sale-start reminder for a date beyond the presale window."""
    today = datetime.fromisoformat(state["clock"]).date()
    day = (today + timedelta(days=6)).isoformat()
    leg = _first_leg(state["world"], "北京", "上海", today + timedelta(days=6), types="G")
    state["world"]["inventory_overrides"][f"{leg.no}|{day}"] = {"edz": 0}
    booking.create_waitlist(state, leg, "edz", ["p1"], "1d")
    booking.create_reminder(state, "北京", "上海", (today + timedelta(days=18)).isoformat())
