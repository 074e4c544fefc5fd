"""UI events of the search side: home, station picker, calendar, train list and filters, transfers."""

from __future__ import annotations

from collections.abc import Callable
from datetime import date, timedelta

from clones.base import State, UIEvent, back, clock_of, navigate, replace_route, require
from clones.train_ticketing import booking, views
from clones.train_ticketing.list_filters import ENDS, FLEETS
from clones.train_ticketing.stations import BY_NAME, is_place
from clones.train_ticketing.timetable import SEAT_LABELS, find_train
from clones.train_ticketing.ui import (
    DEP_BANDS,
    LIST_TABS,
    NORMAL_TYPES,
    SORTS,
    TYPE_FILTERS,
    default_list_filters,
)


def current_leg_args(state: State, train_no: str) -> dict[str, str]:
    """The screen args of `train_no` as the train list shows it for the current search."""
    s = state["ui"]["search"]
    leg = next((leg for leg in views.list_legs(state, filtered=False) if leg.no == train_no), None)
    require(leg is not None, "车次不存在")
    assert leg is not None
    return {"train": leg.no, "date": s["date"], "from": leg.from_station, "to": leg.to_station}


class SearchHandlers:
    """Handlers mixed into `TrainTicketing`; each mutates the state in place or raises CloneError."""

    # home

    def _open_station_picker(self, state: State, ev: UIEvent) -> None:
        require(ev.arg in ("from", "to", "r_from", "r_to"), "未知选择")
        state["ui"]["form"]["station_query"] = ""
        navigate(state, "station_picker", target=ev.arg, letter="")

    def _swap(self, state: State, ev: UIEvent) -> None:
        s = state["ui"]["search"] if ev.arg != "reminder" else state["ui"]["reminder"]
        require(s is not None, "请先选择行程")
        s["from"], s["to"] = s["to"], s["from"]

    def _open_calendar(self, state: State, ev: UIEvent) -> None:
        require(ev.arg in ("search", "reminder"), "未知日期")
        navigate(state, "calendar", target=ev.arg)

    def _toggle_search_flag(self, flag: str) -> Callable[[State, UIEvent], None]:
        def handler(state: State, ev: UIEvent) -> None:
            state["ui"]["search"][flag] = not state["ui"]["search"][flag]

        return handler

    def _search_trains(self, state: State, ev: UIEvent) -> None:
        s = state["ui"]["search"]
        require(s["from"] != s["to"], "出发地和目的地不能相同")
        require(booking.in_window(state, s["date"]), "所选日期不在预售期内")
        key = f"{s['from']}|{s['to']}"
        recent = [k for k in state["user"]["recent_searches"] if k != key]
        state["user"]["recent_searches"] = [key, *recent][:6]
        state["ui"]["list"] = default_list_filters()
        if s["gd_only"]:
            state["ui"]["list"]["types"] = ["G", "C", "D"]
        navigate(state, "train_list")

    def _recent_search(self, state: State, ev: UIEvent) -> None:
        frm, _, to = str(ev.arg).partition("|")
        require(is_place(frm) and is_place(to), "历史记录已失效")
        state["ui"]["search"]["from"], state["ui"]["search"]["to"] = frm, to

    def _clear_recent(self, state: State, ev: UIEvent) -> None:
        state["user"]["recent_searches"] = []

    def _open_transfer(self, state: State, ev: UIEvent) -> None:
        s = state["ui"]["search"]
        require(s["from"] != s["to"], "出发地和目的地不能相同")
        require(booking.in_window(state, s["date"]), "所选日期不在预售期内")
        state["ui"]["transfer_sort"] = "total"
        navigate(state, "transfer_list")

    # station picker and calendar

    def _pick_station(self, state: State, ev: UIEvent) -> None:
        name = str(ev.arg)
        require(is_place(name), "未找到该车站")
        target = state["ui"]["args"].get("target", "from")
        if target in ("from", "to"):
            state["ui"]["search"][target] = name
        else:
            require(state["ui"]["reminder"] is not None, "请重新设置提醒")
            state["ui"]["reminder"][target[2:]] = name
        history = [n for n in state["user"]["station_history"] if n != name]
        state["user"]["station_history"] = [name, *history][:8]
        state["ui"]["form"]["station_query"] = ""
        back(state)

    def _index_letter(self, state: State, ev: UIEvent) -> None:
        letter = str(ev.arg)
        require(len(letter) == 1 and letter.isalpha(), "未知字母")
        state["ui"]["args"]["letter"] = letter.upper()

    def _clear_station_history(self, state: State, ev: UIEvent) -> None:
        state["user"]["station_history"] = []

    def _pick_date(self, state: State, ev: UIEvent) -> None:
        try:
            day = date.fromisoformat(str(ev.arg))
        except ValueError:
            require(False, "日期无效")
            return
        target = state["ui"]["args"].get("target", "search")
        today = clock_of(state).date()
        if target == "reminder":
            require(
                not booking.in_window(state, day.isoformat()) and day > today, "该日期车票已开售，可直接购买"
            )
            require(state["ui"]["reminder"] is not None, "请重新设置提醒")
            state["ui"]["reminder"]["date"] = day.isoformat()
        else:
            require(booking.in_window(state, day.isoformat()), "所选日期不在预售期内")
            state["ui"]["search"]["date"] = day.isoformat()
        back(state)

    # train list

    def _list_date(self, state: State, ev: UIEvent) -> None:
        s = state["ui"]["search"]
        s["date"] = booking.stepped_day(state, s["date"], ev.arg)
        state["ui"]["args"] = {}  # an expanded card belongs to the day it was opened on

    def _list_tab(self, state: State, ev: UIEvent) -> None:
        """直达 / 中转: the two tabs replace each other, so back leaves both for the screen before."""
        require(ev.arg in LIST_TABS, "未知页面")
        route = state["ui"]["route"]
        if ev.arg == "transfer" and route != "transfer_list":
            self._open_transfer(state, ev)
            state["ui"]["stack"].pop()
        elif ev.arg == "direct" and route != "train_list":
            s = state["ui"]["search"]
            require(s["from"] != s["to"], "出发地和目的地不能相同")
            require(booking.in_window(state, s["date"]), "所选日期不在预售期内")
            replace_route(state, "train_list")

    def _sort(self, state: State, ev: UIEvent) -> None:
        require(ev.arg in SORTS, "未知排序")
        state["ui"]["list"]["sort"] = ev.arg

    def _filter_toggle(self, state: State, ev: UIEvent) -> None:
        kind, _, value = str(ev.arg).partition(":")
        lists = {
            "type": ("types", TYPE_FILTERS),
            "band": ("bands", DEP_BANDS),
            "from": ("from_st", None),
            "to": ("to_st", None),
            "seat": ("seats", tuple(SEAT_LABELS)),
            "fleet": ("fleet", tuple(FLEETS)),
            "end": ("ends", tuple(ENDS)),
            "arr": ("arr_bands", DEP_BANDS),
        }
        require(kind in lists, "未知筛选")
        key, allowed = lists[kind]
        require(allowed is None or value in allowed, "未知筛选")
        if kind in ("from", "to"):
            require(value in BY_NAME, "未知车站")
        chosen: list[str] = state["ui"]["list"][key]
        if value in chosen:
            chosen.remove(value)
        else:
            chosen.append(value)

    def _filter_reset(self, state: State, ev: UIEvent) -> None:
        sort = state["ui"]["list"]["sort"]
        state["ui"]["list"] = default_list_filters()
        state["ui"]["list"]["sort"] = sort

    def _quick_types(self, state: State, chosen: tuple[str, ...]) -> None:
        """高铁动车 / 普通车 set the type filter to their types, or clear it when already set so."""
        types = state["ui"]["list"]["types"]
        state["ui"]["list"]["types"] = [] if sorted(types) == sorted(chosen) else list(chosen)

    def _quick_gd(self, state: State, ev: UIEvent) -> None:
        self._quick_types(state, ("G", "C", "D"))

    def _quick_normal(self, state: State, ev: UIEvent) -> None:
        self._quick_types(state, NORMAL_TYPES)

    def _quick_avail(self, state: State, ev: UIEvent) -> None:
        state["ui"]["list"]["avail_only"] = not state["ui"]["list"]["avail_only"]

    def _open_train(self, state: State, ev: UIEvent) -> None:
        """A tap on a train card expands its seat classes inside the list (another tap folds them);
        the list's args then name that train, so 预订 books it as the seats screen would."""
        args = current_leg_args(state, str(ev.arg))
        if state["ui"]["args"].get("train") == args["train"]:
            state["ui"]["args"] = {}
        else:
            state["ui"]["args"] = args

    def _expand_train(self, state: State, ev: UIEvent) -> None:
        """A tap on a collapsed card's seat label (二等) unfolds the card's seat rows and never folds
        them (the current real list, REAL_APPS.md 1d)."""
        state["ui"]["args"] = current_leg_args(state, str(ev.arg))

    def _open_stops(self, state: State, ev: UIEvent) -> None:
        train_no, _, day = str(ev.arg).partition("|")
        train = find_train(state["world"], train_no)
        require(train is not None, "车次不存在")
        args = state["ui"]["args"]
        navigate(
            state,
            "train_stops",
            train=train_no,
            date=day or args.get("date", state["ui"]["search"]["date"]),
            **{"from": args.get("from", ""), "to": args.get("to", "")},
        )

    def _shift_day(self, state: State, current: str, arg: str | None) -> str:
        require(arg in ("prev", "next"), "日期无效")
        day = date.fromisoformat(current) + timedelta(days=-1 if arg == "prev" else 1)
        require(booking.in_window(state, day.isoformat()), "所选日期不在预售期内")
        return day.isoformat()

    def _seats_date(self, state: State, ev: UIEvent) -> None:
        args = state["ui"]["args"]
        args["date"] = self._shift_day(state, args["date"], ev.arg)

    def _transfer_date(self, state: State, ev: UIEvent) -> None:
        s = state["ui"]["search"]
        s["date"] = self._shift_day(state, s["date"], ev.arg)

    def _transfer_sort(self, state: State, ev: UIEvent) -> None:
        require(ev.arg in views.TRANSFER_SORTS, "未知排序")
        state["ui"]["transfer_sort"] = str(ev.arg)

    # transfer

    def _open_transfer_detail(self, state: State, ev: UIEvent) -> None:
        plans = views.transfer_plans(state, state["ui"].get("transfer_sort", "total"))
        require(str(ev.arg).isdigit() and int(str(ev.arg)) < len(plans), "方案不存在")
        navigate(state, "transfer_detail", idx=int(str(ev.arg)))

    def _book_leg(self, state: State, ev: UIEvent) -> None:
        plans = views.transfer_plans(state, state["ui"].get("transfer_sort", "total"))
        idx = int(state["ui"]["args"].get("idx", 0))
        require(idx < len(plans) and ev.arg in ("1", "2"), "方案不存在")
        leg = plans[idx].first if ev.arg == "1" else plans[idx].second
        navigate(
            state,
            "train_seats",
            train=leg.no,
            date=leg.day,
            **{"from": leg.from_station, "to": leg.to_station},
        )
