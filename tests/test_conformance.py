"""Conformance checks over every registered item: packs, clones (devices: see the browser/farm tiers)."""

from pathlib import Path

import pytest

from clones.base import clone_names, get_clone
from clones.conformance import check_clone
from clones.contracts import pack_checks
from realbench.taskpack import check_pack, load_pack

PACKS = sorted(Path(__file__).resolve().parent.parent.glob("taskpacks/*/pack.yaml"))


def test_there_is_something_to_check():
    assert PACKS, "no task packs found under taskpacks/"
    assert clone_names(), "no clones registered"


@pytest.mark.parametrize("path", PACKS, ids=lambda p: p.parent.name)
def test_every_pack_conforms(path):
    pack = load_pack(path)
    assert check_pack(pack, **pack_checks()) == []


@pytest.mark.parametrize("name", clone_names())
def test_every_clone_conforms(name):
    assert check_clone(get_clone(name)) == []


def test_a_handler_that_changes_the_shared_world_is_a_finding():
    """Sessions built from one seed share the world's generated data; a handler that writes into it
    would leak into all of them, so the conformance crawl reports it."""
    from clones.toy.app import ToyShop

    class WorldWriter(ToyShop):
        def _fav(self, state, event):
            super()._fav(state, event)
            state["world"]["items"][0]["stock"] += 1  # the defect under test

    assert check_clone(ToyShop()) == []
    problems = check_clone(WorldWriter())
    assert any("changed the world" in p for p in problems), problems
