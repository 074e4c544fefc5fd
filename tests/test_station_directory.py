"""The train clone's station directory: several hundred real stations, pinyin and initials as
pypinyin reads them (place-name readings corrected), searchable in the picker; stations off the
clone's corridors are found and picked, and a search between them finds no trains."""

from __future__ import annotations

import json

import pytest

from clones.base import get_clone
from clones.dom_plan import DomPlanRunner
from clones.train_ticketing.station_directory import DATA, generate
from clones.train_ticketing.stations import BY_NAME, DIRECTORY, STATIONS
from clones.train_ticketing.views import station_matches
from realbench.hierarchy import Selector
from realbench.taskpack import CloneSetup, PlanStep, TypeStep

pytest.importorskip("pypinyin")


def test_the_checked_in_directory_is_what_pypinyin_generates() -> None:
    assert json.loads(DATA.read_text(encoding="utf-8")) == generate()


def test_real_scale_unique_names_and_the_served_stations_agree() -> None:
    names = [s.name for s in DIRECTORY]
    assert len(names) >= 500 and len(set(names)) == len(names)
    listed = {row[0]: row for row in generate()}
    for s in STATIONS:  # the corridor stations keep their readings and cities
        assert listed[s.name][1:] == [s.pinyin, s.initials, s.city]
    # one initial per character, the first being the reading's
    assert all(len(s.initials) == len(s.name) and s.pinyin.startswith(s.initials[0]) for s in DIRECTORY)


@pytest.mark.parametrize(
    ("name", "pinyin", "initials"),
    [
        ("长治东", "changzhidong", "czd"),  # 长 cháng in the place name, not zhǎng
        ("北京朝阳", "beijingchaoyang", "bjcy"),
        ("都匀东", "duyundong", "dyd"),
        ("漯河西", "luohexi", "lhx"),
        ("重庆北", "chongqingbei", "cqb"),
        ("厦门北", "xiamenbei", "xmb"),
        ("蚌埠南", "bengbunan", "bbn"),
        ("六安", "luan", "la"),
        ("乌鲁木齐南", "wulumuqinan", "wlmqn"),
    ],
)
def test_readings_of_place_names(name: str, pinyin: str, initials: str) -> None:
    assert (BY_NAME[name].pinyin, BY_NAME[name].initials) == (pinyin, initials)


def test_picker_search_by_initials_pinyin_and_characters() -> None:
    assert {"长治", "长治东", "常州", "常州北"} <= {m["name"] for m in station_matches("cz")}
    assert {"漯河", "漯河西"} <= {m["name"] for m in station_matches("luohe")}
    assert {m["name"] for m in station_matches("兰州")} == {"兰州", "兰州西", "兰州新区"}


def test_a_station_off_the_corridors_is_picked_and_its_search_finds_no_trains() -> None:
    clone = get_clone("train_ticketing")
    runner = DomPlanRunner(clone, clone.build_state(CloneSetup(), {}), {})
    for field, query, name in (
        ("home_page_train_dep1", "lz", "兰州"),
        ("home_page_train_arr1", "xn", "西宁"),
    ):
        runner.step(PlanStep(tap=Selector(resource_id=field)))
        runner.step(PlanStep(type=TypeStep(text=query, into=Selector(resource_id="station_search"))))
        runner.step(PlanStep(tap=Selector(text=f"火车站 {name}站", class_name="android.widget.Button")))
    assert (runner.state["ui"]["search"]["from"], runner.state["ui"]["search"]["to"]) == ("兰州", "西宁")
    runner.step(PlanStep(tap=Selector(resource_id="ticket_home_btn_search")))
    assert runner.route == "train_list"
    assert runner.find(Selector(resource_id="no_trains")) is not None
