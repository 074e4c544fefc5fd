"""`copy_tree` copies as `copy.deepcopy` does: equal values, no mutable part shared with the original,
a sub-object reached twice copied once, other types through deepcopy. Checked on every registered
clone's start states and on hand-made trees."""

from __future__ import annotations

import copy
from collections import OrderedDict
from datetime import datetime
from typing import Any

import pytest

from clones.base import clone_names, get_clone
from clones.state_copy import copy_tree
from realbench.taskpack import CloneSetup


def mutable_ids(value: Any, out: set[int] | None = None) -> set[int]:
    out = set() if out is None else out
    if isinstance(value, dict | list | set):
        if id(value) in out:
            return out
        out.add(id(value))
        items = value.values() if isinstance(value, dict) else value
        for item in items:
            mutable_ids(item, out)
    return out


def start_states(name: str) -> list[Any]:
    clone = get_clone(name)
    seeds = getattr(clone, "stats_states", None)
    states = list(seeds()) if callable(seeds) else []
    return states or [clone.build_state(CloneSetup(seed=11), {})]


@pytest.mark.parametrize("name", clone_names())
def test_every_clone_state_copies_like_deepcopy(name: str) -> None:
    for state in start_states(name)[:2]:
        copied = copy_tree(state)
        assert copied == copy.deepcopy(state) == state
        assert mutable_ids(copied).isdisjoint(mutable_ids(state)), "a mutable part is shared"


def test_a_change_to_the_copy_leaves_the_original() -> None:
    state = {"user": {"orders": [{"id": 1, "tags": ["a"]}]}, "ui": {"route": "home"}}
    copied = copy_tree(state)
    copied["user"]["orders"][0]["tags"].append("b")
    copied["ui"]["route"] = "orders"
    assert state == {"user": {"orders": [{"id": 1, "tags": ["a"]}]}, "ui": {"route": "home"}}


def test_a_shared_sub_object_stays_shared_in_the_copy() -> None:
    item = {"id": 7}
    state: dict[str, Any] = {"list": [item, item], "selected": item}
    state["self"] = state  # a cycle, which deepcopy also keeps
    copied = copy_tree(state)
    assert copied["list"][0] is copied["list"][1] is copied["selected"]
    assert copied["list"][0] is not item and copied["self"] is copied


def test_other_types_go_through_deepcopy() -> None:
    when = datetime(2026, 3, 1, 8, 30)
    inner = [1, 2]
    state = {"pair": (inner, "x"), "set": {1, 2}, "when": when, "ordered": OrderedDict(a=[1])}
    copied = copy_tree(state)
    assert copied == state
    assert copied["pair"][0] is not inner and copied["set"] is not state["set"]
    assert type(copied["ordered"]) is OrderedDict and copied["ordered"]["a"] is not state["ordered"]["a"]
