"""Domain operations on the account: orders, payment, refunds, changes, waitlists, reminders and
passengers. UI handlers and the account builder call these; each refuses what the real app would
refuse with a `CloneError` carrying the app's message."""

from __future__ import annotations

from datetime import date, datetime, time, timedelta
from typing import Any

from clones.base import require
from clones.train_ticketing.idcard import age_on, id_problem
from clones.train_ticketing.stations import is_place, sale_time_of
from clones.train_ticketing.timetable import (
    BERTHS,
    SEAT_LABELS,
    STUDENT_CLASSES,
    Leg,
    available,
    city_of,
    fmt_min,
    round_half,
    sale_date,
    sold_key,
    ticket_price,
)

PAY_MINUTES = 30
MAX_PASSENGERS = 5
TICKET_TYPE_LABELS = {"adult": "成人票", "child": "儿童票", "student": "学生票"}
PTYPE_LABELS = {"adult": "成人", "child": "儿童", "student": "学生"}
INSURANCE_FEE = 3.0
WAITLIST_DEADLINES = {
    "6h": ("开车前6小时", timedelta(hours=6)),
    "1d": ("开车前1天", timedelta(days=1)),
    "2d": ("开车前2天", timedelta(days=2)),
    "3d": ("开车前3天", timedelta(days=3)),
}
ACTIVE_TICKET = frozenset({"unpaid", "paid"})


def now_of(state: dict[str, Any]) -> datetime:
    return datetime.fromisoformat(state["clock"])


def next_id(state: dict[str, Any], prefix: str) -> str:
    user = state["user"]
    user["seq"] = int(user.get("seq", 0)) + 1
    return f"{prefix}{now_of(state):%m%d}{user['seq']:05d}"


def passenger(state: dict[str, Any], pid: str) -> dict[str, Any]:
    p = next((p for p in state["user"]["passengers"] if p["id"] == pid), None)
    require(p is not None, "乘车人不存在")
    assert p is not None
    return p


def departure_at(day: str, dep_min: int) -> datetime:
    return datetime.combine(date.fromisoformat(day), time(0)) + timedelta(minutes=dep_min)


def order_departure(order: dict[str, Any]) -> datetime:
    return departure_at(order["date"], int(order["dep_min"]))


def in_window(state: dict[str, Any], day: str) -> bool:
    today = now_of(state).date()
    d = date.fromisoformat(day)
    return today <= d < today + timedelta(days=int(state["world"]["presale_days"]))


def stepped_day(state: dict[str, Any], current: str, arg: str | None) -> str:
    """The date a date-tab event picks: `prev`/`next` around `current`, or an ISO date; refused
    outside the pre-sale window, as the real app greys those days out."""
    day = date.fromisoformat(current)
    if arg == "prev":
        day -= timedelta(days=1)
    elif arg == "next":
        day += timedelta(days=1)
    else:
        try:
            day = date.fromisoformat(str(arg))
        except ValueError:
            require(False, "日期无效")
    require(in_window(state, day.isoformat()), "所选日期不在预售期内")
    return day.isoformat()


# seat letters across a row, by class (the classes a passenger may pick a seat in)
SEAT_LETTERS: dict[str, str] = {"swz": "ACF", "yxydz": "ACF", "ydz": "ACDF", "edz": "ABCDF"}
BERTH_CHOICES = ("下铺", "中铺", "上铺")
BERTH_IDS = {"": "any", "下铺": "lower", "中铺": "middle", "上铺": "upper"}


def assigned_berth(state: dict[str, Any], leg: Leg, cls: str, wanted: str, nth: int) -> str:
    """The berth the nth rider of an order gets: the one asked for, else the next in rotation
    (lower berths first); '' for a class without berths."""
    berths = BERTHS.get(cls)
    if not berths:
        return ""
    if wanted:
        require(wanted in berths, f"{SEAT_LABELS[cls]}没有{wanted}")
        return wanted
    sold = int(state["user"]["sold"].get(sold_key(leg.no, leg.day, cls), 0)) + nth
    rotation = tuple(reversed(berths))
    return rotation[sold % len(rotation)]


def _seat_no(state: dict[str, Any], leg: Leg, cls: str, letter: str, nth: int, berth: str) -> tuple[str, str]:
    sold = int(state["user"]["sold"].get(sold_key(leg.no, leg.day, cls), 0)) + nth
    if cls == "wz":
        return f"{4 + sold % 4:02d}车", "无座"
    if berth:
        first_coach = {"gjrw": 7, "dw": 9}.get(cls, 8)
        return f"{first_coach + sold % 6:02d}车", f"{1 + sold // 3 % 20:03d}号{berth}"
    if cls in ("yz", "rz"):
        first_coach = 2 if cls == "yz" else 1
        return f"{first_coach + sold % 5:02d}车", f"{1 + sold % 118:03d}号"
    letters = SEAT_LETTERS[cls]
    seat_letter = letter if letter and letter in letters else letters[sold % len(letters)]
    coach = {"swz": 1, "yxydz": 1, "ydz": 2, "edz": 4 + sold // 90 % 12}[cls]
    return f"{coach:02d}车", f"{1 + sold // len(letters) % 18:02d}{seat_letter}号"


def rider_price(state: dict[str, Any], leg: Leg, cls: str, ticket_type: str, berth: str) -> float:
    """What one rider pays: the berth's fare for a sleeper, then the ticket type's discount."""
    return ticket_price(leg.berth_price(cls, berth), cls, ticket_type)


def _conflicts(state: dict[str, Any], pid: str, leg: Leg) -> bool:
    start = departure_at(leg.day, leg.dep_min)
    end = departure_at(leg.day, leg.arr_min)
    for order in state["user"]["orders"]:
        if order["status"] not in ("unpaid", "paid"):
            continue
        o_start = order_departure(order)
        o_end = departure_at(order["date"], int(order["arr_min"]))
        if o_start < end and start < o_end:
            for t in order["tickets"]:
                if t["passenger_id"] == pid and t["status"] in ACTIVE_TICKET:
                    return True
    return False


def create_order(
    state: dict[str, Any],
    leg: Leg,
    cls: str,
    riders: list[tuple[str, str, str]],
    *,
    insurance: bool,
    source: str = "book",
    check_window: bool = True,
    berth: str = "",
) -> dict[str, Any]:
    """Submit an order (提交订单): seats are held and the order waits for payment. ``berth`` is the
    berth every rider asks for on a sleeper ('' lets the railway assign one)."""
    require(bool(riders), "请选择乘车人")
    require(len(riders) <= MAX_PASSENGERS, f"一个订单最多{MAX_PASSENGERS}位乘车人")
    require(cls in leg.train["classes"], "该车次没有所选席别")
    require(not berth or cls in BERTHS, f"{SEAT_LABELS[cls]}不能选铺")
    if check_window:
        require(in_window(state, leg.day), "该日期车票尚未开售")
        require(departure_at(leg.day, leg.dep_min) > now_of(state), "该车次已发车")
    require(available(state, leg.train, leg.day).get(cls, 0) >= len(riders), f"{SEAT_LABELS[cls]}余票不足")
    types = [t for _, t, _ in riders]
    require(
        not ("child" in types and "adult" not in types and "student" not in types), "儿童须与成人或学生同行"
    )
    tickets: list[dict[str, Any]] = []
    for n, (pid, ticket_type, letter) in enumerate(riders):
        p = passenger(state, pid)
        require(not any(t["passenger_id"] == pid for t in tickets), f"{p['name']}已添加")
        if ticket_type == "student":
            require(p["ptype"] == "student", f"{p['name']}不是学生旅客，不能购买学生票")
            require(cls in STUDENT_CLASSES, f"学生票不能购买{SEAT_LABELS[cls]}")
        if ticket_type == "child":
            age = age_on(p["id_no"], now_of(state).date())
            require(age is not None and age < 14, f"{p['name']}已满14周岁，不能购买儿童票")
        if check_window:
            require(not _conflicts(state, pid, leg), f"{p['name']}在同一时间已有车票，行程冲突")
        rider_berth = assigned_berth(state, leg, cls, berth, n)
        coach, seat = _seat_no(state, leg, cls, letter, n, rider_berth)
        tickets.append(
            {
                "passenger_id": pid,
                "name": p["name"],
                "id_no": p["id_no"],
                "ticket_type": ticket_type,
                "seat_class": cls,
                "seat_letter": letter,
                "coach": coach,
                "seat": seat,
                "berth": rider_berth,
                "price": rider_price(state, leg, cls, ticket_type, rider_berth),
                "status": "unpaid",
                "refund_fee": 0.0,
            }
        )
    now = now_of(state)
    order = {
        "id": next_id(state, "E"),
        "created": now.isoformat(timespec="seconds"),
        "pay_deadline": (now + timedelta(minutes=PAY_MINUTES)).isoformat(timespec="seconds"),
        "status": "unpaid",
        "train": leg.no,
        "train_type": leg.type,
        "date": leg.day,
        "from": leg.from_station,
        "to": leg.to_station,
        "dep_min": leg.dep_min,
        "arr_min": leg.arr_min,
        "dep": fmt_min(leg.dep_min),
        "arr": fmt_min(leg.arr_min),
        "tickets": tickets,
        "total": round_half(sum(t["price"] for t in tickets)),
        "insurance": insurance,
        "insurance_fee": INSURANCE_FEE * len(tickets) if insurance else 0.0,
        "source": source,
    }
    key = sold_key(leg.no, leg.day, cls)
    state["user"]["sold"][key] = int(state["user"]["sold"].get(key, 0)) + len(tickets)
    state["user"]["orders"].append(order)
    return order


def find_order(state: dict[str, Any], order_id: str) -> dict[str, Any]:
    order = next((o for o in state["user"]["orders"] if o["id"] == order_id), None)
    require(order is not None, "订单不存在")
    assert order is not None
    return order


def expired(state: dict[str, Any], order: dict[str, Any]) -> bool:
    return order["status"] == "unpaid" and datetime.fromisoformat(order["pay_deadline"]) <= now_of(state)


def expire_overdue(state: dict[str, Any]) -> None:
    """Unpaid orders past their payment deadline are cancelled and their seats released."""
    for order in state["user"]["orders"]:
        if expired(state, order):
            order["status"] = "cancelled"
            order["expired"] = True
            for t in order["tickets"]:
                t["status"] = "cancelled"
                _release(state, order, t)


def _release(state: dict[str, Any], order: dict[str, Any], ticket: dict[str, Any]) -> None:
    key = sold_key(order["train"], order["date"], ticket["seat_class"])
    state["user"]["sold"][key] = max(0, int(state["user"]["sold"].get(key, 0)) - 1)


# the payment platforms the cashier page offers (code → label); which ones, and their order, are a guess
PAY_CHANNELS: dict[str, str] = {
    "alipay": "支付宝",
    "wechat": "微信支付",
    "unionpay": "中国银联",
    "icbc": "中国工商银行",
    "ccb": "中国建设银行",
    "abc": "中国农业银行",
    "boc": "中国银行",
    "cmb": "招商银行",
}
DEFAULT_PAY_CHANNEL = "alipay"


def check_payable(state: dict[str, Any], order_id: str) -> dict[str, Any]:
    order = find_order(state, order_id)
    require(order["status"] == "unpaid", "订单无需支付")
    require(not expired(state, order), "订单已超过支付时间，已自动取消")
    return order


def pay(state: dict[str, Any], order_id: str, channel: str = DEFAULT_PAY_CHANNEL) -> dict[str, Any]:
    order = check_payable(state, order_id)
    require(channel in PAY_CHANNELS, "请选择支付方式")
    order["status"] = "paid"
    order["pay_channel"] = channel
    order["paid_at"] = now_of(state).isoformat(timespec="seconds")
    for t in order["tickets"]:
        t["status"] = "paid"
    return order


def cancel(state: dict[str, Any], order_id: str) -> None:
    order = find_order(state, order_id)
    require(order["status"] == "unpaid", "只能取消未支付的订单")
    order["status"] = "cancelled"
    for t in order["tickets"]:
        t["status"] = "cancelled"
        _release(state, order, t)


def refund_fee(state: dict[str, Any], order: dict[str, Any], price: float) -> float:
    """Fee rules (退票费): 8+ days before departure free; 48 h–8 days 5%; 24–48 h 10%; under 24 h 20%."""
    left = order_departure(order) - now_of(state)
    if left >= timedelta(days=8):
        return 0.0
    rate = 0.05 if left >= timedelta(hours=48) else 0.10 if left >= timedelta(hours=24) else 0.20
    return max(2.0, round_half(price * rate))


def refund(state: dict[str, Any], order_id: str, ticket_idx: int) -> dict[str, Any]:
    order = find_order(state, order_id)
    require(0 <= ticket_idx < len(order["tickets"]), "车票不存在")
    ticket = order["tickets"][ticket_idx]
    require(order["status"] == "paid" and ticket["status"] == "paid", "该车票不能退票")
    require(order_departure(order) > now_of(state), "列车已发车，不能在线退票")
    ticket["refund_fee"] = refund_fee(state, order, float(ticket["price"]))
    ticket["refund_amount"] = round_half(float(ticket["price"]) - ticket["refund_fee"])
    ticket["status"] = "refunded"
    _release(state, order, ticket)
    return ticket


def change(
    state: dict[str, Any], order_id: str, ticket_idx: int, leg: Leg, cls: str, source: str
) -> dict[str, Any]:
    """改签 / 变更到站: the old ticket is closed and a new paid order holds the new ticket."""
    order = find_order(state, order_id)
    require(0 <= ticket_idx < len(order["tickets"]), "车票不存在")
    ticket = order["tickets"][ticket_idx]
    require(order["status"] == "paid" and ticket["status"] == "paid", "该车票不能改签")
    require(not ticket.get("changed_from"), "已改签的车票不能再次改签")
    require(order_departure(order) > now_of(state), "列车已发车，不能改签")
    if source == "change_station":
        require(
            leg.no == order["train"] and leg.day == order["date"] and leg.from_station == order["from"],
            "变更到站只能变更同一车次的到站",
        )
        require(leg.to_station != order["to"], "请选择新的到站")
    else:
        require(not (leg.no == order["train"] and leg.day == order["date"]), "请选择不同的车次或日期")
    ticket["status"] = "changing"  # so the new ticket does not conflict with the one it replaces
    try:
        new = create_order(
            state,
            leg,
            cls,
            [(ticket["passenger_id"], ticket["ticket_type"], ticket.get("seat_letter", ""))],
            insurance=False,
            source=source,
        )
    except Exception:
        ticket["status"] = "paid"
        raise
    new["status"] = "paid"
    new["paid_at"] = now_of(state).isoformat(timespec="seconds")
    new["origin_order"] = order["id"]
    new_ticket = new["tickets"][0]
    new_ticket["status"] = "paid"
    new_ticket["changed_from"] = f"{order['id']}#{ticket_idx}"
    new["diff"] = round_half(float(new_ticket["price"]) - float(ticket["price"]))
    ticket["status"] = "changed" if source == "change" else "station_changed"
    ticket["changed_to"] = new["id"]
    _release(state, order, ticket)
    return new


# --- waitlist and reminders ---------------------------------------------------------------------


def create_waitlist(
    state: dict[str, Any], leg: Leg, cls: str, pids: list[str], deadline: str
) -> dict[str, Any]:
    require(bool(pids), "请选择乘车人")
    require(len(pids) <= MAX_PASSENGERS, f"候补订单最多{MAX_PASSENGERS}位乘车人")
    require(deadline in WAITLIST_DEADLINES, "请选择截止兑现时间")
    require(in_window(state, leg.day), "该日期车票尚未开售")
    require(available(state, leg.train, leg.day).get(cls, 0) == 0, f"{SEAT_LABELS[cls]}有余票，请直接购买")
    label, offset = WAITLIST_DEADLINES[deadline]
    dep = departure_at(leg.day, leg.dep_min)
    require(dep - offset > now_of(state), "截止兑现时间已过，请选择更晚的截止时间")
    pending = [w for w in state["user"]["waitlists"] if w["status"] == "pending"]
    require(len(pending) < 6, "候补订单数量已达上限")
    names = [passenger(state, pid)["name"] for pid in pids]
    price = leg.price(cls)
    item = {
        "id": next_id(state, "H"),
        "created": now_of(state).isoformat(timespec="seconds"),
        "train": leg.no,
        "date": leg.day,
        "from": leg.from_station,
        "to": leg.to_station,
        "dep": fmt_min(leg.dep_min),
        "arr": fmt_min(leg.arr_min),
        "seat_class": cls,
        "passengers": list(pids),
        "names": names,
        "deadline": deadline,
        "deadline_label": label,
        "deadline_at": (dep - offset).isoformat(timespec="minutes"),
        "prepay": round_half(price * len(pids)),
        "status": "pending",
    }
    state["user"]["waitlists"].append(item)
    return item


def cancel_waitlist(state: dict[str, Any], wid: str) -> None:
    item = next((w for w in state["user"]["waitlists"] if w["id"] == wid), None)
    require(item is not None and item["status"] == "pending", "候补订单不能取消")
    assert item is not None
    item["status"] = "cancelled"


def sale_at(state: dict[str, Any], from_station: str, day: str) -> datetime:
    hh, mm = (int(x) for x in sale_time_of(from_station).split(":"))
    sale_day = sale_date(date.fromisoformat(day), int(state["world"]["presale_days"]))
    return datetime.combine(sale_day, time(hh, mm))


def create_reminder(state: dict[str, Any], frm: str, to: str, day: str) -> dict[str, Any]:
    require(is_place(frm) and is_place(to), "未找到该车站")
    require(city_of(frm) != city_of(to), "出发地和到达地不能相同")
    d = date.fromisoformat(day)
    require(d >= now_of(state).date(), "请选择今天以后的日期")
    require(not in_window(state, day), "该日期车票已开售，可直接购买")
    require(
        not any(r["from"] == frm and r["to"] == to and r["date"] == day for r in state["user"]["reminders"]),
        "已设置过该行程的起售提醒",
    )
    item = {
        "id": next_id(state, "R"),
        "from": frm,
        "to": to,
        "date": day,
        "sale_at": sale_at(state, frm, day).isoformat(timespec="minutes"),
    }
    state["user"]["reminders"].append(item)
    return item


# --- passengers ----------------------------------------------------------------------------------


def validate_passenger(
    state: dict[str, Any], name: str, id_no: str, phone: str, ptype: str, *, editing: str | None = None
) -> None:
    name = name.strip()
    require(
        2 <= len(name) <= 20 and all("\u4e00" <= ch <= "\u9fff" or ch == "·" for ch in name),
        "请输入正确的姓名（2-20个汉字）",
    )
    problem = id_problem(id_no, now_of(state).date())
    require(problem is None, problem or "")
    require(
        not any(
            p["id_no"].upper() == id_no.strip().upper() and p["id"] != editing
            for p in state["user"]["passengers"]
        ),
        "该乘车人已存在",
    )
    require(
        phone == "" or (len(phone) == 11 and phone.isdigit() and phone.startswith("1")),
        "请输入正确的手机号码",
    )
    require(ptype in PTYPE_LABELS, "请选择旅客类型")
    if ptype == "child":
        age = age_on(id_no.strip(), now_of(state).date())
        require(age is not None and age < 14, "儿童旅客须未满14周岁")


def add_passenger(state: dict[str, Any], name: str, id_no: str, phone: str, ptype: str) -> dict[str, Any]:
    validate_passenger(state, name, id_no, phone, ptype)
    require(len(state["user"]["passengers"]) < 15, "常用乘车人已达上限")
    existing = {p["id"] for p in state["user"]["passengers"]}
    n = 1
    while f"p{n}" in existing:
        n += 1
    item = {
        "id": f"p{n}",
        "name": name.strip(),
        "id_type": "中国居民身份证",
        "id_no": id_no.strip().upper(),
        "ptype": ptype,
        "phone": phone,
        "verified": True,
        "self": False,
    }
    state["user"]["passengers"].append(item)
    return item


def delete_passenger(state: dict[str, Any], pid: str) -> None:
    p = passenger(state, pid)
    require(not p.get("self"), "本人信息不能删除")
    state["user"]["passengers"] = [q for q in state["user"]["passengers"] if q["id"] != pid]
