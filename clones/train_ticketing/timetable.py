"""The timetable: trains generated deterministically from a seed, prices by distance and seat class,
and seat inventory per (train, date).

Everything is drawn from seeded ``numpy.random.Generator`` instances: the same seed gives the same
timetable on every machine. Inventory is a pure function of (inventory seed, train, date), so the
world stays small and read-only; tickets sold by the user are kept in ``user.sold``.
"""

from __future__ import annotations

import threading
import zlib
from bisect import bisect_right
from collections import OrderedDict
from collections.abc import Callable
from dataclasses import dataclass
from datetime import date, timedelta
from enum import StrEnum
from functools import lru_cache
from typing import Any

import numpy as np

from clones.train_ticketing.real_timetable import covered_corridors, real_numbers, real_trains
from clones.train_ticketing.stations import BY_NAME, CORRIDORS, HOT_CITIES, STATIONS, Corridor


class SeatClass(StrEnum):
    BUSINESS = "swz"
    PREMIUM_FIRST = "yxydz"
    FIRST = "ydz"
    SECOND = "edz"
    DELUXE_SLEEPER = "gjrw"
    SOFT_SLEEPER = "rw"
    EMU_SLEEPER = "dw"
    HARD_SLEEPER = "yw"
    SOFT_SEAT = "rz"
    HARD_SEAT = "yz"
    STANDING = "wz"


# in the order the real app lists them (the codes of the first seven classes are kept from before the
# four later ones were added, so tasks that name them keep their meaning)
SEAT_LABELS: dict[str, str] = {
    "swz": "商务座",
    "yxydz": "优选一等座",
    "ydz": "一等座",
    "edz": "二等座",
    "gjrw": "高级软卧",
    "rw": "软卧",
    "dw": "动卧",
    "yw": "硬卧",
    "rz": "软座",
    "yz": "硬座",
    "wz": "无座",
}
SEAT_BY_LABEL: dict[str, str] = {v: k for k, v in SEAT_LABELS.items()}

TYPE_LABELS: dict[str, str] = {"G": "高铁", "D": "动车", "C": "城际", "Z": "直达", "T": "特快", "K": "快速"}
HIGH_SPEED = frozenset({"G", "D", "C"})

# yuan per km by seat class; 无座 costs what the cheapest seat costs
# (sleepers: the rate of the upper berth, the cheapest; see BERTH_FACTORS)
_RATES: dict[str, dict[str, float]] = {
    "G": {"swz": 1.33, "yxydz": 0.85, "ydz": 0.71, "edz": 0.42, "wz": 0.42},
    "D": {"ydz": 0.50, "edz": 0.31, "dw": 0.56, "wz": 0.31},
    "C": {"ydz": 0.50, "edz": 0.31, "wz": 0.31},
    "Z": {"gjrw": 0.52, "rw": 0.29, "yw": 0.19, "yz": 0.11, "wz": 0.11},
    "T": {"gjrw": 0.50, "rw": 0.28, "yw": 0.18, "rz": 0.165, "yz": 0.105, "wz": 0.105},
    "K": {"rw": 0.27, "yw": 0.17, "rz": 0.16, "yz": 0.10, "wz": 0.10},
}
_SPEED_KMH: dict[str, float] = {"G": 290.0, "D": 210.0, "C": 190.0, "Z": 120.0, "T": 100.0, "K": 80.0}
_FIRST_DEPARTURE: dict[str, tuple[int, int]] = {
    "G": (6 * 60 + 30, 19 * 60 + 30),
    "D": (6 * 60 + 30, 19 * 60),
    "C": (6 * 60, 22 * 60),
    "Z": (18 * 60, 22 * 60 + 30),
    "T": (7 * 60, 21 * 60),
    "K": (0, 23 * 60 + 30),
}
_STOP_PROBABILITY: dict[str, float] = {"G": 0.45, "D": 0.7, "C": 0.6, "Z": 0.25, "T": 0.6, "K": 1.0}
STUDENT_CLASSES = frozenset({"edz", "wz", "yz", "yw"})
MIN_PRICE = 5.0


def station_rows() -> list[dict[str, str]]:
    return [s.as_json() for s in STATIONS]


def _stable(text: str) -> int:
    return zlib.crc32(text.encode("utf-8"))


def _classes_for(train_type: str, rng: np.random.Generator) -> list[str]:
    if train_type == "G":
        return ["swz", "ydz", "edz", "wz"]
    if train_type in ("D", "C"):
        return ["ydz", "edz", "wz"]
    if train_type == "K" and rng.random() < 0.5:
        return ["yw", "yz", "wz"]
    return ["rw", "yw", "yz", "wz"]


def _service(
    corridor: Corridor,
    stops: list[tuple[str, int]],
    train_type: str,
    start_min: int,
    rng: np.random.Generator,
) -> dict[str, Any]:
    keep = [stops[0]]
    p = _STOP_PROBABILITY[train_type]
    keep += [s for s in stops[1:-1] if rng.random() < p]
    keep.append(stops[-1])
    speed = _SPEED_KMH[train_type]
    high_speed = train_type in HIGH_SPEED
    rows: list[dict[str, Any]] = []
    t = start_min
    origin_km = keep[0][1]
    arr: int | None
    dep: int | None
    for i, (name, km) in enumerate(keep):
        if i == 0:
            arr = None
            dep = t
        else:
            run = abs(km - keep[i - 1][1]) / speed * 60.0 + (4 if high_speed else 8)
            t = t + int(round(run))
            arr = t
            dwell = 2 if high_speed else int(rng.integers(4, 13))
            dep = None if i == len(keep) - 1 else t + dwell
            if dep is not None:
                t = dep
        rows.append({"station": name, "arr": arr, "dep": dep, "km": abs(km - origin_km)})
    return {
        "type": train_type,
        "corridor": corridor.name,
        "stops": rows,
        "classes": _classes_for(train_type, rng),
        "factor": round(float(rng.uniform(0.96, 1.05)), 3),
    }


def generate_trains(seed: int) -> list[dict[str, Any]]:
    """Every train of the timetable: real trains on the corridors ``real_timetable.json`` covers, generated
    ones elsewhere, numbered by corridor and direction (odd away from the first station)."""
    trains: list[dict[str, Any]] = []
    real = covered_corridors()
    taken = real_numbers()
    for corridor in CORRIDORS:
        if corridor.name in real:
            continue  # real trains replace the generated ones (real_timetable.py)
        rng = np.random.default_rng([seed, _stable(corridor.name)])
        for direction in (0, 1):
            stops = list(corridor.stops) if direction == 0 else list(reversed(corridor.stops))
            for train_type, count, first_number in corridor.services:
                lo, hi = _FIRST_DEPARTURE[train_type]
                starts = sorted(int(rng.integers(lo // 5, hi // 5)) * 5 for _ in range(count))
                number = first_number + direction
                for start in starts:
                    span = stops
                    if len(stops) > 3 and rng.random() < 0.25:
                        # a short working: starts or ends at a major intermediate station
                        cut = int(rng.integers(2, len(stops) - 1))
                        span = stops[: cut + 1] if rng.random() < 0.5 else stops[cut - 1 :]
                    service = _service(corridor, span, train_type, start, rng)
                    while f"{train_type}{number}" in taken:
                        number += 2  # a real train has this number
                    service["no"] = f"{train_type}{number}"
                    number += 2 * int(rng.integers(1, 4))
                    trains.append(service)
    trains += real_trains(seed, {c.name: c.stops for c in CORRIDORS}, _classes_for)
    return trains


# --- inventory and prices ----------------------------------------------------------------------


@lru_cache(maxsize=65536)
def _base_seats(
    inventory_seed: int, train_no: str, day: str, classes: tuple[str, ...]
) -> tuple[tuple[str, int], ...]:
    rng = np.random.default_rng([inventory_seed, _stable(train_no), _stable(day)])
    out: list[tuple[str, int]] = []
    drawn = [c for c in classes if c in _LEGACY_CLASSES] + [c for c in classes if c not in _LEGACY_CLASSES]
    for cls in drawn:
        roll = rng.random()
        if roll < 0.18:
            n = 0
        elif roll < 0.5:
            n = int(rng.integers(1, 20))
        else:
            n = int(rng.integers(20, 300))
        out.append((cls, n))
    return tuple(out)


def base_seats(world: dict[str, Any], train: dict[str, Any], day: str) -> dict[str, int]:
    seats = dict(_base_seats(int(world["inventory_seed"]), train["no"], day, tuple(train["classes"])))
    override = world.get("inventory_overrides", {}).get(f"{train['no']}|{day}", {})
    for cls, n in override.items():
        if cls in seats:
            seats[cls] = int(n)
    return seats


def sold_key(train_no: str, day: str, cls: str) -> str:
    return f"{train_no}|{day}|{cls}"


def available(state: dict[str, Any], train: dict[str, Any], day: str) -> dict[str, int]:
    seats = base_seats(state["world"], train, day)
    sold = state["user"].get("sold", {})
    return {cls: n - int(sold.get(sold_key(train["no"], day, cls), 0)) for cls, n in seats.items()}


def round_half(x: float) -> float:
    """Railway fares are quoted to half a yuan."""
    return float(np.floor(x * 2 + 0.5) / 2)


def fare(train: dict[str, Any], from_idx: int, to_idx: int, cls: str) -> float:
    """The listed fare of a class; for a sleeper the upper berth's (the cheapest berth)."""
    km = train["stops"][to_idx]["km"] - train["stops"][from_idx]["km"]
    rate = _RATES[train["type"]][cls]
    return max(MIN_PRICE, round_half(km * rate * float(train["factor"])))


def berth_fare(train: dict[str, Any], from_idx: int, to_idx: int, cls: str, berth: str) -> float:
    """The fare of one berth of a sleeper class (any other class: its fare; berth must be empty)."""
    base = fare(train, from_idx, to_idx, cls)
    if cls not in BERTHS:
        if berth:
            raise ValueError(f"{cls} has no berths")
        return base
    return round_half(base * BERTH_FACTORS[berth])


def ticket_price(base: float, cls: str, ticket_type: str) -> float:
    if ticket_type == "child":
        return round_half(base * 0.5)
    if ticket_type == "student" and cls in STUDENT_CLASSES:
        return round_half(base * 0.75)
    return base


# --- classes added on some trains, and sleeper berths ------------------------------------------

# berths of each sleeper class, top to bottom; a 4-berth compartment (软卧, 动卧) or a 2-berth one
# (高级软卧) has no middle berth
BERTHS: dict[str, tuple[str, ...]] = {
    "gjrw": ("上铺", "下铺"),
    "rw": ("上铺", "下铺"),
    "dw": ("上铺", "下铺"),
    "yw": ("上铺", "中铺", "下铺"),
}
# price of a berth relative to the upper berth; the ratios are a guess (lower berths cost more)
BERTH_FACTORS: dict[str, float] = {"上铺": 1.0, "中铺": 1.04, "下铺": 1.08}
# the classes present before the four later ones: their inventory draws come first, so adding a
# class to a train never changes the seats left in the others
_LEGACY_CLASSES = ("swz", "ydz", "edz", "rw", "yw", "yz", "wz")
# (train type, class, share of trains of that type that get it): which trains get which extra class
# is a guess, drawn per train from the timetable seed
_EXTRA_CLASSES: tuple[tuple[str, str, float], ...] = (
    ("G", "yxydz", 0.35),
    ("D", "dw", 0.5),
    ("Z", "gjrw", 0.4),
    ("T", "gjrw", 0.25),
    ("T", "rz", 0.4),
    ("K", "rz", 0.35),
)


def extra_classes(seed: int, train: dict[str, Any]) -> list[str]:
    """The later classes one train carries, a pure function of (seed, train number)."""
    out = []
    for train_type, cls, share in _EXTRA_CLASSES:
        if train["type"] != train_type:
            continue
        if cls == "dw" and train["stops"][-1]["km"] < 450:
            continue  # 动卧 run on long D services only
        roll = _stable(f"{seed}|{train['no']}|{cls}") % 1000 / 1000
        if roll < share:
            out.append(cls)
    return out


def with_extra_classes(seed: int, trains: list[dict[str, Any]]) -> list[dict[str, Any]]:
    """Adds each train's later classes, keeping the real app's order of classes."""
    order = list(SEAT_LABELS)
    for train in trains:
        classes = set(train["classes"]) | set(extra_classes(seed, train))
        train["classes"] = [c for c in order if c in classes]
    return trains


# --- the world ---------------------------------------------------------------------------------


def build_world(seed: int, inventory_seed: int | None = None, presale_days: int = 15) -> dict[str, Any]:
    return {
        "seed": seed,
        "inventory_seed": seed if inventory_seed is None else inventory_seed,
        "presale_days": presale_days,
        "stations": station_rows(),
        "hot_cities": list(HOT_CITIES),
        "trains": with_extra_classes(seed, generate_trains(seed)),
        "inventory_overrides": {},
    }


@lru_cache(maxsize=8)
def _generated_world(seed: int, inventory_seed: int | None, presale_days: int) -> dict[str, Any]:
    return build_world(seed, inventory_seed, presale_days)


def shared_world(seed: int, inventory_seed: int | None = None, presale_days: int = 15) -> dict[str, Any]:
    """`build_world`, generated once per process and seed. Sessions share its stations and trains,
    read-only by contract as snapshots and working copies already share them (building them took
    about half of a session's creation); the top level and the inventory overrides are each
    session's own, because a task's setup may patch them."""
    return {**_generated_world(seed, inventory_seed, presale_days), "inventory_overrides": {}}


def city_of(name: str) -> str:
    st = BY_NAME.get(name)
    return st.city if st else name


def find_train(world: dict[str, Any], train_no: str) -> dict[str, Any] | None:
    return next((t for t in world["trains"] if t["no"] == train_no), None)


def stop_index(train: dict[str, Any], station: str) -> int | None:
    return next((i for i, s in enumerate(train["stops"]) if s["station"] == station), None)


def fmt_min(minutes: int | None) -> str:
    if minutes is None:
        return "----"
    m = minutes % (24 * 60)
    return f"{m // 60:02d}:{m % 60:02d}"


def fmt_duration(minutes: int) -> str:
    h, m = divmod(minutes, 60)
    return f"{h}小时{m}分" if h else f"{m}分"


@dataclass(frozen=True)
class Leg:
    """One train between two of its stops on a date: what a row of the train list shows."""

    train: dict[str, Any]
    day: str
    from_idx: int
    to_idx: int

    @property
    def no(self) -> str:
        return str(self.train["no"])

    @property
    def type(self) -> str:
        return str(self.train["type"])

    @property
    def from_station(self) -> str:
        return str(self.train["stops"][self.from_idx]["station"])

    @property
    def to_station(self) -> str:
        return str(self.train["stops"][self.to_idx]["station"])

    @property
    def dep_min(self) -> int:
        return int(self.train["stops"][self.from_idx]["dep"])

    @property
    def arr_min(self) -> int:
        return int(self.train["stops"][self.to_idx]["arr"])

    @property
    def duration(self) -> int:
        return self.arr_min - self.dep_min

    @property
    def dep_date(self) -> date:
        """The calendar date the passenger boards (a train past midnight departs the next day)."""
        return date.fromisoformat(self.day)

    @property
    def days_to_arrival(self) -> int:
        return self.arr_min // (24 * 60) - self.dep_min // (24 * 60)

    def price(self, cls: str) -> float:
        return fare(self.train, self.from_idx, self.to_idx, cls)

    def berth_price(self, cls: str, berth: str) -> float:
        return berth_fare(self.train, self.from_idx, self.to_idx, cls, berth)

    @property
    def min_price(self) -> float:
        return min(self.price(c) for c in self.train["classes"])


class _StopIndex:
    """Where each train of one timetable can be boarded and left, by one key of a stop (its city,
    or its station): a search looks up the trains of its from-key instead of scanning every stop of
    every train (a task instance's trip sampling searched about five city pairs, 5 ms of each RL
    reset)."""

    def __init__(self, trains: list[dict[str, Any]], key: Callable[[str], str]) -> None:
        self.trains = trains  # held, so the cache's id() of it can't be reused while cached
        self.boarding: dict[str, list[tuple[int, int]]] = {}  # key -> (train, its first departure there)
        self.alighting: list[dict[str, list[int]]] = []  # per train: key -> its arrivals there
        for pos, train in enumerate(trains):
            alight: dict[str, list[int]] = {}
            boarded: set[str] = set()
            for i, stop in enumerate(train["stops"]):
                at = key(stop["station"])
                if stop["arr"] is not None:
                    alight.setdefault(at, []).append(i)
                if stop["dep"] is not None and at not in boarded:
                    boarded.add(at)
                    self.boarding.setdefault(at, []).append((pos, i))
            self.alighting.append(alight)

    def legs(self, from_key: str, to_key: str, day: str) -> list[Leg]:
        out: list[Leg] = []
        for pos, fi in self.boarding.get(from_key, ()):
            arrivals = self.alighting[pos].get(to_key, [])
            k = bisect_right(arrivals, fi)
            if k < len(arrivals):
                out.append(Leg(self.trains[pos], day, fi, arrivals[k]))
        return out


def _same_station(name: str) -> str:
    return name


_STOP_INDEXES: OrderedDict[tuple[int, bool], _StopIndex] = OrderedDict()
_STOP_INDEXES_LOCK = threading.Lock()
_STOP_INDEXES_KEPT = 16


def _stop_index(trains: list[dict[str, Any]], exact: bool) -> _StopIndex:
    """The index of a trains list by station (`exact`) or by city, found by the list's identity:
    worlds share their generated trains read-only (see `shared_world`); a setup that patches the
    trains makes a new list, and so a new index."""
    cache_key = (id(trains), exact)
    with _STOP_INDEXES_LOCK:
        index = _STOP_INDEXES.get(cache_key)
        if index is not None and index.trains is trains:
            _STOP_INDEXES.move_to_end(cache_key)
            return index
    index = _StopIndex(trains, _same_station if exact else city_of)
    with _STOP_INDEXES_LOCK:
        _STOP_INDEXES[cache_key] = index
        while len(_STOP_INDEXES) > _STOP_INDEXES_KEPT:
            _STOP_INDEXES.popitem(last=False)
    return index


def legs_between(
    world: dict[str, Any], from_name: str, to_name: str, day: str, *, exact: bool = False
) -> list[Leg]:
    """Trains that stop in the from-city and later in the to-city (by city, like the real app): for
    each, its first departure in the from-city and its first arrival in the to-city after that."""
    if exact:
        out = _stop_index(world["trains"], True).legs(from_name, to_name, day)
    else:
        out = _stop_index(world["trains"], False).legs(city_of(from_name), city_of(to_name), day)
    out.sort(key=lambda leg: (leg.dep_min % 1440, leg.no))
    return out


def leg_for(world: dict[str, Any], train_no: str, from_name: str, to_name: str, day: str) -> Leg | None:
    train = find_train(world, train_no)
    if train is None:
        return None
    fi, ti = stop_index(train, from_name), stop_index(train, to_name)
    if fi is None or ti is None or fi >= ti:
        return None
    return Leg(train, day, fi, ti)


def window(today: date, presale_days: int) -> list[date]:
    return [today + timedelta(days=i) for i in range(presale_days)]


def sale_date(travel_day: date, presale_days: int) -> date:
    """Tickets for a day go on sale ``presale_days - 1`` days before it (15-day window: 14 days)."""
    return travel_day - timedelta(days=presale_days - 1)
