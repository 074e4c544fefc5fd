"""Property test: random event sequences picked from the rendered screens never break the bank.

Only CloneError refusals are allowed, and the invariants (balances reconcile with history, no
negative balance, transfer limits respected, credit card consistent) hold after every event.
"""

from __future__ import annotations

import copy
from html.parser import HTMLParser

import numpy as np

from clones.bank.app import Bank
from clones.base import State, UIEvent
from realbench.errors import CloneError

SEQUENCES = 500
LENGTH = 8
FIELD_VALUES = [
    "",
    "100",
    "2500.5",
    "abc",
    "-5",
    "0",
    "99999999",
    "0.001",
    "6222020200112233445",
    "6217000130002468135",
    "陈静",
    "张伟",
    "2026-02-01",
    "2026-02-30",
    "2026-03-01",
    "0102345678",
    "13912345678",
    "123456",
    "12",
]


class _Controls(HTMLParser):
    def __init__(self) -> None:
        super().__init__()
        self.taps: list[tuple[str, str | None]] = []
        self.fields: dict[str, str] = {}

    def handle_starttag(self, tag: str, attrs: list[tuple[str, str | None]]) -> None:
        a = dict(attrs)
        if a.get("data-ev"):
            self.taps.append((str(a["data-ev"]), a.get("data-arg")))
        if tag == "input" and a.get("name"):
            self.fields[str(a["name"])] = a.get("value") or ""


def _controls(html: str) -> _Controls:
    c = _Controls()
    c.feed(html)
    return c


def _fork(state: State) -> State:
    return {k: (v if k == "world" else copy.deepcopy(v)) for k, v in state.items()}


def test_random_event_sequences_keep_the_invariants() -> None:
    bank = Bank()
    seeds = bank.stats_states()
    rng = np.random.default_rng(20260302)
    refused = fired = 0
    routes: set[str] = set()
    for n in range(SEQUENCES):
        state = _fork(seeds[int(rng.integers(len(seeds)))])
        for _ in range(LENGTH):
            c = _controls(bank.render(state))
            form = dict(c.fields)
            if c.fields and rng.random() < 0.2:
                name = sorted(c.fields)[int(rng.integers(len(c.fields)))]
                form[name] = FIELD_VALUES[int(rng.integers(len(FIELD_VALUES)))]
            if not c.taps or rng.random() < 0.05:
                event = UIEvent("__back__", None, form)
            else:
                name, arg = c.taps[int(rng.integers(len(c.taps)))]
                event = UIEvent(name, arg, form)
            fired += 1
            try:
                bank.handle(state, event)
            except CloneError:
                refused += 1
            routes.add(state["ui"]["route"])
            problems = bank.invariants(state)
            assert problems == [], (n, event, problems)
    assert fired == SEQUENCES * LENGTH
    assert refused < fired  # the walk gets somewhere, not only refusals
    assert len(routes) >= 30
