"""Task parameters drawn from the start state (see `realbench.state_params`).

Every sampler reads the generated world and the account, never a list of names fixed in advance:
a trip is a city pair and date the timetable serves with a train that has the seats asked for, a
stop is one the train makes, a passenger is one the account holds. So an instruction built from a
sample cannot state something false about the world it runs in.
"""

from __future__ import annotations

from datetime import date
from typing import Any, Literal

import numpy as np
from pydantic import Field, field_validator

from clones.train_ticketing import booking
from clones.train_ticketing.timetable import SEAT_LABELS, Leg, available, city_of, fmt_min, legs_between
from clones.train_ticketing.verifiers import find_existing
from clones.train_ticketing.views import BANDS
from realbench import dates
from realbench.errors import ConfigError
from realbench.state_params import NothingToSample, SamplerArgs, StateSamplerSet

State = dict[str, Any]
Band = Literal["00-06", "06-12", "12-18", "18-24"]

SAMPLERS = StateSamplerSet()


def _pick(rng: np.random.Generator, items: list[Any]) -> Any:
    return items[int(rng.integers(len(items)))]


# --- trips ---------------------------------------------------------------------------------------


class TripArgs(SamplerArgs):
    """A trip the train list of the clone shows, with at least one train that qualifies."""

    dates: list[str] = Field(min_length=1, description="relative date expressions to draw the day from")
    cities: list[str] | None = Field(
        default=None, description="cities to draw both ends from (default: the station picker's hot cities)"
    )
    from_city: str | None = None
    to_city: str | None = None
    types: list[str] | None = Field(default=None, description="train type letters a qualifying train has")
    seat: str | None = Field(default=None, description="seat class a qualifying train has seats in")
    min_seats: int = Field(default=1, ge=1)
    sold_out: bool = Field(default=False, description="the seat class must be sold out (a waitlist task)")
    bands: list[Band] | None = None
    min_trains: int = Field(default=1, ge=1, description="qualifying trains the trip must have")
    to_station: str | None = Field(
        default=None, description="the qualifying train must arrive at this station"
    )

    @field_validator("dates")
    @classmethod
    def _valid_dates(cls, v: list[str]) -> list[str]:
        for e in v:
            try:
                dates.validate_expr(e)
            except ConfigError as exc:
                raise ValueError(exc.message) from None
        return v

    @field_validator("seat")
    @classmethod
    def _known_seat(cls, v: str | None) -> str | None:
        if v is not None and v not in SEAT_LABELS:
            raise ValueError(f"unknown seat class {v!r} (known: {', '.join(SEAT_LABELS)})")
        return v


TRIP_FIELDS = (
    "from",
    "to",
    "from_station",
    "to_station",
    "date",
    "date_date",
    "date_md",
    "train",
    "dep",
    "seat",
    "seat_label",
    "count",
)


def _qualifies(state: State, leg: Leg, args: TripArgs) -> bool:
    if booking.departure_at(leg.day, leg.dep_min) <= booking.now_of(state):
        return False
    if args.types and leg.type not in args.types:
        return False
    if args.bands and not any(BANDS[b][0] <= leg.dep_min % 1440 < BANDS[b][1] for b in args.bands):
        return False
    if args.to_station and leg.to_station != args.to_station:
        return False
    if args.seat is None:
        return True
    if args.seat not in leg.train["classes"]:
        return False
    left = available(state, leg.train, leg.day).get(args.seat, 0)
    return left == 0 if args.sold_out else left >= args.min_seats


def trip_candidates(state: State, args: TripArgs, today: date) -> list[tuple[str, str, str]]:
    """Every (from city, to city, date expression) the arguments allow, before checking trains."""
    pool = list(args.cities) if args.cities else list(state["world"]["hot_cities"])
    froms = [args.from_city] if args.from_city else pool
    tos = [args.to_city] if args.to_city else pool
    city = {name: city_of(name) for name in {*froms, *tos}}
    pairs = [(f, t) for f in froms for t in tos if city[f] != city[t]]
    out: list[tuple[str, str, str]] = []
    for expr in args.dates:
        day = dates.resolve(expr, today).iso
        if booking.in_window(state, day):
            out += [(f, t, expr) for f, t in pairs]
    return out


@SAMPLERS.sampler("trip", args=TripArgs, fields=TRIP_FIELDS)
def sample_trip(state: State, args: TripArgs, rng: np.random.Generator, today: date) -> dict[str, Any]:
    """A city pair and date with at least `min_trains` qualifying trains, and one of those trains."""
    candidates = trip_candidates(state, args, today)
    for i in rng.permutation(len(candidates)):
        frm, to, expr = candidates[int(i)]
        resolved = dates.resolve(expr, today)
        legs = [
            leg for leg in legs_between(state["world"], frm, to, resolved.iso) if _qualifies(state, leg, args)
        ]
        if len(legs) < args.min_trains:
            continue
        leg: Leg = _pick(rng, legs)
        seat = args.seat or _pick(rng, list(leg.train["classes"]))
        return {
            "from": frm,
            "to": to,
            "from_station": leg.from_station,
            "to_station": leg.to_station,
            "date": resolved.phrase,
            "date_date": resolved.iso,
            "date_md": resolved.month_day,
            "train": leg.no,
            "dep": fmt_min(leg.dep_min),
            "seat": seat,
            "seat_label": SEAT_LABELS[seat],
            "count": len(legs),
        }
    raise NothingToSample(
        f"no trip among {len(candidates)} city pairs and dates has {args.min_trains} qualifying train(s)"
    )


# --- stops of a train ------------------------------------------------------------------------------


class TrainStopArgs(SamplerArgs):
    """A train of the timetable and one of its stops."""

    types: list[str] | None = None
    stop: Literal["intermediate", "any"] = "intermediate"
    min_stops: int = Field(default=3, ge=2)


@SAMPLERS.sampler("train_stop", args=TrainStopArgs, fields=("train", "station", "origin", "terminal"))
def sample_train_stop(
    state: State, args: TrainStopArgs, rng: np.random.Generator, today: date
) -> dict[str, Any]:
    trains = [
        t
        for t in state["world"]["trains"]
        if (not args.types or t["type"] in args.types) and len(t["stops"]) >= args.min_stops
    ]
    if not trains:
        raise NothingToSample(f"no train of types {args.types} has {args.min_stops} stops")
    train = _pick(rng, trains)
    stops = train["stops"]
    # an intermediate stop has both times: the stop the train makes on its way
    pool = stops[1:-1] if args.stop == "intermediate" else stops
    stop = _pick(rng, pool)
    return {
        "train": train["no"],
        "station": stop["station"],
        "origin": stops[0]["station"],
        "terminal": stops[-1]["station"],
    }


# --- stations --------------------------------------------------------------------------------------


class StationArgs(SamplerArgs):
    """A station of the world's station table."""

    exclude_cities: list[str] = Field(default_factory=list)


@SAMPLERS.sampler("station", args=StationArgs, fields=("name", "city"))
def sample_station(state: State, args: StationArgs, rng: np.random.Generator, today: date) -> dict[str, Any]:
    rows = [s for s in state["world"]["stations"] if s["city"] not in args.exclude_cities]
    if not rows:
        raise NothingToSample("the world has no station outside the excluded cities")
    row = _pick(rng, rows)
    return {"name": row["name"], "city": row["city"]}


# --- the account -----------------------------------------------------------------------------------


class PassengerArgs(SamplerArgs):
    """A passenger of the account's list of common passengers."""

    ptypes: list[str] = Field(default_factory=lambda: ["adult"], min_length=1)
    exclude: list[str] = Field(default_factory=list, description="names not to draw")
    include_self: bool = Field(default=True, description="whether the account holder may be drawn")


@SAMPLERS.sampler("passenger", args=PassengerArgs, fields=("name", "ptype"))
def sample_passenger(
    state: State, args: PassengerArgs, rng: np.random.Generator, today: date
) -> dict[str, Any]:
    rows = [
        p
        for p in state["user"]["passengers"]
        if p["ptype"] in args.ptypes
        and p["name"] not in args.exclude
        and (args.include_self or not p["self"])
    ]
    if not rows:
        raise NothingToSample(f"the account has no passenger of types {args.ptypes} outside {args.exclude}")
    row = _pick(rng, rows)
    return {"name": row["name"], "ptype": row["ptype"]}


class RouteArgs(SamplerArgs):
    """A city pair the timetable serves (some train stops in the first city, later in the second)."""

    cities: list[str] | None = Field(default=None, description="default: the station picker's hot cities")


@SAMPLERS.sampler("route", args=RouteArgs, fields=("from", "to"))
def sample_route(state: State, args: RouteArgs, rng: np.random.Generator, today: date) -> dict[str, Any]:
    pool = list(args.cities) if args.cities else list(state["world"]["hot_cities"])
    pairs = [(f, t) for f in pool for t in pool if city_of(f) != city_of(t)]
    day = today.isoformat()
    for i in rng.permutation(len(pairs)):
        frm, to = pairs[int(i)]
        if legs_between(state["world"], frm, to, day):
            return {"from": frm, "to": to}
    raise NothingToSample(f"no train serves any pair of {pool}")


class OrderArgs(SamplerArgs):
    """A paid, upcoming order of the account that a task can name by its destination city (the
    order a verifier's ``order_to`` finds), and a stop its train makes before that destination."""

    order_to: list[str] | None = Field(default=None, description="destination cities to draw from")
    need_stop: bool = Field(default=False, description="the train must stop between boarding and arrival")


@SAMPLERS.sampler(
    "order", args=OrderArgs, fields=("from", "to", "from_station", "to_station", "label", "train", "stop")
)
def sample_order(state: State, args: OrderArgs, rng: np.random.Generator, today: date) -> dict[str, Any]:
    now = booking.now_of(state)
    out: list[dict[str, Any]] = []
    for order in state["user"]["orders"]:
        city = city_of(order["to"])
        if args.order_to and city not in args.order_to:
            continue
        found = find_existing(state, {"order_to": city})
        if found is None or found["id"] != order["id"] or booking.order_departure(order) <= now:
            continue
        train = next(t for t in state["world"]["trains"] if t["no"] == order["train"])
        names = [s["station"] for s in train["stops"]]
        between = names[names.index(order["from"]) + 1 : names.index(order["to"])]
        if args.need_stop and not between:
            continue
        out.append(
            {
                "from": city_of(order["from"]),
                "to": city,
                "from_station": order["from"],
                "to_station": order["to"],
                "label": f"{order['from']} → {order['to']}",
                "train": order["train"],
                "stop": _pick(rng, between) if between else "",
            }
        )
    if not out:
        raise NothingToSample(
            f"the account has no upcoming paid order to {args.order_to or 'anywhere'} that fits"
        )
    return _pick(rng, out)
