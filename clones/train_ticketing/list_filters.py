"""What the train list's filters test on one train: fleet (车组类型), origin/terminal, arrival band.

The real app's filter sheet offers 车组类型 复兴号 / 智能动车组 (REAL_APPS.md, [clone notes]); the
generated timetable has no rolling stock, so which trains are which is derived here from the train
number alone — a deterministic guess, the same on every seed, never a fact about a real train.
"""

from __future__ import annotations

import zlib
from typing import Any

from clones.train_ticketing.timetable import HIGH_SPEED, Leg

# fleet code -> the label the filter sheet and the train card show
FLEETS: dict[str, str] = {"fxh": "复兴号", "smart": "智能动车组"}
# stop-end code -> the filter sheet's label
ENDS: dict[str, str] = {"origin": "只看始发", "terminal": "只看终到"}
# share of trains (in tenths) run by 复兴号 sets, by train type; smart sets are a subset on G trains
_FUXING_TENTHS = {"G": 6, "D": 3, "C": 3}
_SMART_TENTHS = 2


def _bucket(train_no: str) -> int:
    return zlib.crc32(f"fleet|{train_no}".encode()) % 10


def fleet_of(train: dict[str, Any]) -> frozenset[str]:
    """The fleet codes a train carries: {"fxh"}, {"fxh", "smart"} (smart sets are 复兴号 too) or none."""
    kind = str(train["type"])
    if kind not in HIGH_SPEED:
        return frozenset()
    bucket = _bucket(str(train["no"]))
    if bucket >= _FUXING_TENTHS.get(kind, 0):
        return frozenset()
    if kind == "G" and bucket < _SMART_TENTHS:
        return frozenset({"fxh", "smart"})
    return frozenset({"fxh"})


def is_origin(leg: Leg) -> bool:
    return leg.from_idx == 0


def is_terminal(leg: Leg) -> bool:
    return leg.to_idx == len(leg.train["stops"]) - 1


def in_bands(minute: int, bands: list[str], table: dict[str, tuple[int, int]]) -> bool:
    """Whether a time of day (minutes, any day) lies in one of the named bands."""
    m = minute % 1440
    return any(table[b][0] <= m < table[b][1] for b in bands)


def passes_extra(
    leg: Leg, fleet: list[str], ends: list[str], arr_bands: list[str], table: dict[str, tuple[int, int]]
) -> bool:
    """The sheet's 车组类型 (any chosen fleet), 只看始发/终到 (all chosen) and 到达时间 (any band) tests."""
    if fleet and not fleet_of(leg.train) & set(fleet):
        return False
    if "origin" in ends and not is_origin(leg):
        return False
    if "terminal" in ends and not is_terminal(leg):
        return False
    return not (arr_bands and not in_bands(leg.arr_min, arr_bands, table))
