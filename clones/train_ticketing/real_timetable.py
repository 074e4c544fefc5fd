"""Real trains on the corridors where a public timetable was found (``real_timetable.json``).

On a covered corridor the world's trains are exactly the trains of the data file: numbers, stop
order and times. Kilometre posts, seat classes, the fare factor and seat inventory stay generated
(the source has none of them). Every stop row carries the repository file it was read from.
"""

from __future__ import annotations

import json
import zlib
from collections.abc import Callable
from functools import lru_cache
from pathlib import Path
from typing import Any

import numpy as np

from realbench.errors import CloneError

DATA_FILE = Path(__file__).with_name("real_timetable.json")

# Kilometre posts from 北京南 for stations the real trains call at that the generated corridor
# does not list; approximate, like the corridor's own posts (fares only).
_EXTRA_KM: dict[str, dict[str, int]] = {"京沪高铁": {"德州东": 314}}


def _minutes(hhmm: str | None) -> int | None:
    if hhmm is None:
        return None
    h, m = hhmm.split(":")
    return int(h) * 60 + int(m)


_PROVENANCE_KEYS = ("repository", "path", "commit")


def validate_real_data(data: dict[str, Any]) -> None:
    """Refuse a data file with a row that does not say where it was read from, or with times that
    run backwards: such a row would be presented as real without evidence."""
    listed = {(s["repository"], s["path"], s["commit"]) for s in data.get("sources", [])}
    if not data.get("timetable_revision"):
        raise CloneError("real timetable: the timetable revision (or that it is unknown) is not stated")
    seen: set[str] = set()
    for train in data["trains"]:
        no = train.get("no", "?")
        if no in seen:
            raise CloneError(f"real timetable: train {no} appears twice")
        seen.add(no)
        if len(train.get("stops", [])) < 2 or "stops_complete" not in train:
            raise CloneError(f"real timetable: train {no} lacks stops or stops_complete")
        last = -1
        for stop in train["stops"]:
            source = stop.get("source") or {}
            if any(not source.get(k) for k in _PROVENANCE_KEYS):
                raise CloneError(f"real timetable: {no} at {stop.get('station')} has no source")
            if tuple(source[k] for k in _PROVENANCE_KEYS) not in listed:
                raise CloneError(f"real timetable: {no} at {stop['station']} cites an unlisted source")
            for raw in (stop.get("arr"), stop.get("dep")):
                t = _minutes(raw)
                if t is not None and t < last:
                    raise CloneError(f"real timetable: {no} runs backwards at {stop['station']}")
                last = t if t is not None else last


@lru_cache(maxsize=1)
def real_data() -> dict[str, Any]:
    data: dict[str, Any] = json.loads(DATA_FILE.read_text(encoding="utf-8"))
    validate_real_data(data)
    return data


def covered_corridors() -> frozenset[str]:
    return frozenset(str(t["corridor"]) for t in real_data()["trains"])


def real_numbers() -> frozenset[str]:
    return frozenset(str(t["no"]) for t in real_data()["trains"])


def _km_posts(corridor_stops: tuple[tuple[str, int], ...], corridor: str) -> dict[str, int]:
    posts = dict(corridor_stops)
    posts.update(_EXTRA_KM.get(corridor, {}))
    return posts


def _stop_rows(train: dict[str, Any], posts: dict[str, int]) -> list[dict[str, Any]]:
    """Times as minutes after the origin day's midnight. No train in the data runs past midnight
    (``validate_real_data`` refuses times that go backwards), so no day offset is needed."""
    origin_km = posts[train["stops"][0]["station"]]
    return [
        {
            "station": stop["station"],
            "arr": _minutes(stop["arr"]),
            "dep": _minutes(stop["dep"]),
            "km": abs(posts[stop["station"]] - origin_km),
        }
        for stop in train["stops"]
    ]


@lru_cache(maxsize=4)
def _schedules(
    corridor_stops: tuple[tuple[str, tuple[tuple[str, int], ...]], ...],
) -> tuple[tuple[str, str, str, tuple[tuple[str, int | None, int | None, int], ...]], ...]:
    """The data file's trains as (no, type, corridor, stops); the same for every seed, so parsed once."""
    stops_of = dict(corridor_stops)
    out = []
    for train in real_data()["trains"]:
        corridor = str(train["corridor"])
        rows = _stop_rows(train, _km_posts(stops_of[corridor], corridor))
        out.append(
            (
                str(train["no"]),
                str(train["type"]),
                corridor,
                tuple((r["station"], r["arr"], r["dep"], r["km"]) for r in rows),
            )
        )
    return tuple(out)


def real_trains(
    seed: int,
    corridor_stops: dict[str, tuple[tuple[str, int], ...]],
    classes_for: Callable[[str, np.random.Generator], list[str]],
) -> list[dict[str, Any]]:
    """The data file's trains in the timetable's train format; the generated parts (seat classes,
    fare factor) are drawn per train number so they do not depend on the order of the file."""
    out: list[dict[str, Any]] = []
    for no, train_type, corridor, stops in _schedules(tuple(corridor_stops.items())):
        rng = np.random.default_rng([seed, zlib.crc32(f"real:{no}".encode())])
        out.append(
            {
                "no": no,
                "type": train_type,
                "corridor": corridor,
                "stops": [{"station": st, "arr": a, "dep": d, "km": km} for st, a, d, km in stops],
                "classes": classes_for(train_type, rng),
                "factor": round(float(rng.uniform(0.96, 1.05)), 3),
                "real": True,
            }
        )
    return out
