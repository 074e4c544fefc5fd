"""The argument models of the train-ticketing verifiers (what `check-pack` validates each task against).

Train constraints (``from``/``to``/``date`` and the filters a task may add) are shared by the
verifiers that pick "the train the task means"; lists may be written as YAML lists or as
comma-separated text.
"""

from __future__ import annotations

from typing import Annotated, Any, Literal

from pydantic import BeforeValidator, ConfigDict, Field, StrictBool, model_validator

from clones.contracts import VerifierArgs
from clones.train_ticketing.timetable import BERTHS, SEAT_BY_LABEL


def _digits_as_text(value: Any) -> Any:
    return str(value) if isinstance(value, int) and not isinstance(value, bool) else value


Text = Annotated[str, BeforeValidator(_digits_as_text)]
Names = list[str] | str
Pick = Literal["earliest", "latest", "earliest_arrival", "fastest", "cheapest"]
Band = Literal["00-06", "06-12", "12-18", "18-24"]


class _Args(VerifierArgs):
    model_config = ConfigDict(extra="forbid", populate_by_name=True)


class TrainFilters(_Args):
    """Which trains qualify, and which one of them the task means."""

    types: Names | None = None
    bands: list[Band] | str | None = None
    seat: str | None = None
    seat_count: int | None = Field(default=None, ge=1)
    from_station: str | None = None
    to_station: str | None = None
    dep_after: str | None = Field(default=None, pattern=r"^\d{1,2}:\d{2}$")
    pick: Pick | None = None
    price_seat: str | None = None
    train: str | None = None
    transfer_leg: Literal[1, 2] | None = None
    # the train list's filter sheet: 车组类型 (any of), 只看始发/终到 (all of), 到达时间 (any band)
    fleet: list[Literal["fxh", "smart"]] | None = None
    ends: list[Literal["origin", "terminal"]] | None = None
    arr_bands: list[Band] | None = None


class TrainQuery(TrainFilters):
    from_: str = Field(alias="from")
    to: str
    date: str


class _Answering(_Args):
    # account keys an answering task may change without it counting as a side effect
    allow_changes: Names | None = None


class TrainQueryAnswerArgs(TrainQuery, _Answering):
    field: Literal["no", "dep", "arr", "duration", "price", "count", "from_station"] = "no"


class StopTimeAnswerArgs(_Answering):
    train: str
    station: str | None = None
    field: Literal["dep", "arr", "stay", "terminal"] = "dep"

    @model_validator(mode="after")
    def _station_named(self) -> StopTimeAnswerArgs:
        if self.field != "terminal" and not self.station:
            raise ValueError(f"field {self.field!r} needs the `station`")
        return self


class SaleAnswerArgs(_Answering):
    station: str
    field: Literal["time", "date"] = "time"
    date: str | None = None

    @model_validator(mode="after")
    def _date_for_date(self) -> SaleAnswerArgs:
        if self.field == "date" and not self.date:
            raise ValueError("field 'date' needs the travel `date`")
        return self


class TransferAnswerArgs(_Answering):
    from_: str = Field(alias="from")
    to: str
    date: str
    field: Literal["hub", "first", "second"] = "hub"


class OrderRef(_Args):
    """The existing order a task refers to (by cities and/or date)."""

    order_from: str | None = None
    order_to: str | None = None
    order_date: str | None = None


class AccountAnswerArgs(OrderRef, _Answering):
    field: Literal["unread", "passengers", "points", "upcoming", "order_train", "seat", "refund_fee", "price"]
    order_status: str | None = None
    passenger: str | None = None


class IdValidAnswerArgs(_Answering):
    id_no: Text


class OrderSubmittedArgs(TrainQuery):
    passengers: Names | None = None
    ticket_types: dict[str, str] | None = None
    seat_letters: Names | None = None
    insurance: StrictBool | None = None
    # the berth every ticket of a sleeper order must have (and be priced at)
    berth: Literal["上铺", "中铺", "下铺"] | None = None

    @model_validator(mode="after")
    def _berth_on_a_sleeper(self) -> OrderSubmittedArgs:
        if self.berth is not None:
            cls = SEAT_BY_LABEL.get(self.seat or "", self.seat or "")
            if self.berth not in BERTHS.get(cls, ()):
                raise ValueError(
                    f"`berth` {self.berth} needs a `seat` class with that berth, not {self.seat!r}"
                )
        return self


class TicketsArgs(OrderRef):
    passengers: Names | None = None


class TicketChangedArgs(TicketsArgs, TrainFilters):
    source: Literal["change", "change_station"] = "change"
    new_date: str | None = None
    new_to: str | None = None

    @model_validator(mode="after")
    def _target_named(self) -> TicketChangedArgs:
        if self.source == "change" and not self.new_date:
            raise ValueError("a change of ticket (source 'change') needs `new_date`")
        if self.source == "change_station" and not self.new_to:
            raise ValueError("a change of arrival station needs `new_to`")
        return self


class WaitlistSubmittedArgs(TrainQuery):
    passengers: Names | None = None
    deadline: str | None = None


class ReminderArgs(_Args):
    from_: str = Field(alias="from")
    to: str
    date: str


class ReminderDeletedArgs(_Args):
    from_: str = Field(alias="from")
    to: str


class PassengerAddedArgs(_Args):
    name: str
    id_no: Text
    phone: Text | None = None
    ptype: str | None = None


class PassengerNamedArgs(_Args):
    name: str


class PassengerUpdatedArgs(_Args):
    name: str
    phone: Text | None = None
    ptype: str | None = None


class MessagesReadArgs(_Args):
    titles: Names | None = None


class SettingArgs(_Args):
    key: str
    value: StrictBool
