"""The real timetable: on the covered corridors the world's trains are exactly the data file's."""

from __future__ import annotations

import copy
import time
from typing import Any

import pytest

from clones.train_ticketing.real_timetable import (
    covered_corridors,
    real_data,
    validate_real_data,
)
from clones.train_ticketing.stations import BY_NAME
from clones.train_ticketing.timetable import build_world, fmt_min
from realbench.errors import CloneError


def _hhmm(minutes: int | None) -> str | None:
    return None if minutes is None else fmt_min(minutes)


@pytest.mark.parametrize("seed", [0, 7, 20260302])
def test_covered_trains_in_the_world_are_the_data_files_trains(seed: int) -> None:
    world = build_world(seed)
    data = real_data()
    covered = covered_corridors()
    in_world = {t["no"]: t for t in world["trains"] if t["corridor"] in covered}
    assert set(in_world) == {t["no"] for t in data["trains"]}
    for train in data["trains"]:
        got = in_world[train["no"]]
        assert got["type"] == train["type"] and got["corridor"] == train["corridor"]
        assert [s["station"] for s in got["stops"]] == [s["station"] for s in train["stops"]]
        assert [(_hhmm(s["arr"]), _hhmm(s["dep"])) for s in got["stops"]] == [
            (s["arr"], s["dep"]) for s in train["stops"]
        ]


def test_no_generated_train_runs_on_a_covered_corridor_or_reuses_a_real_number() -> None:
    world = build_world(7)
    real_numbers = {t["no"] for t in real_data()["trains"]}
    for train in world["trains"]:
        assert (train["corridor"] in covered_corridors()) == bool(train.get("real")), train["no"]
    numbers = [t["no"] for t in world["trains"]]
    assert len(numbers) == len(set(numbers))
    assert real_numbers <= set(numbers)


def test_every_stop_of_the_data_is_a_directory_station() -> None:
    for train in real_data()["trains"]:
        for stop in train["stops"]:
            assert stop["station"] in BY_NAME, (train["no"], stop["station"])


def test_the_shipped_file_states_its_sources_and_revision() -> None:
    data = real_data()
    validate_real_data(data)
    assert data["timetable_revision"] and data["stops_note"]
    assert len(data["trains"]) >= 50
    assert all(t["stops_complete"] is False for t in data["trains"])  # the source lacks stations


def _without(data: dict[str, Any], edit: str) -> dict[str, Any]:
    bad = copy.deepcopy(data)
    stop = bad["trains"][3]["stops"][1]
    if edit == "source":
        del stop["source"]
    elif edit == "commit":
        stop["source"]["commit"] = ""
    elif edit == "unlisted":
        stop["source"]["path"] = "somewhere/else.csv"
    elif edit == "revision":
        bad["timetable_revision"] = ""
    elif edit == "backwards":
        stop["arr"], stop["dep"] = "23:59", "00:01"
        bad["trains"][3]["stops"][2]["arr"] = "00:30"
    return bad


@pytest.mark.parametrize("edit", ["source", "commit", "unlisted", "revision", "backwards"])
def test_a_row_without_provenance_or_with_broken_times_is_refused(edit: str) -> None:
    with pytest.raises(CloneError):
        validate_real_data(_without(real_data(), edit))


def test_building_the_world_stays_fast() -> None:
    build_world(1)  # warm the data cache, as every later reset is
    start = time.perf_counter()
    for seed in range(5):
        build_world(seed)
    assert (time.perf_counter() - start) / 5 < 0.5
