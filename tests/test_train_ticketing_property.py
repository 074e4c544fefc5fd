"""Random event sequences (picked from what each rendered screen offers) never crash the
train-ticketing clone and never break its invariants. A seeded numpy generator drives 500 runs."""

from __future__ import annotations

import copy

import numpy as np

from clones.base import UIEvent
from clones.stats import controls_of
from realbench.errors import CloneError
from tests.tt_support import CLONE

SEQUENCES = 500
STEPS = 6
TYPED = (
    "shanghai",
    "bj",
    "南京",
    "G1",
    "K4015",
    "110101199003071233",
    "110101199003071235",
    "13700001111",
    "赵磊",
    "",
    "x",
)


def _branch(state):
    return {k: (v if k == "world" else copy.deepcopy(v)) for k, v in state.items()}


def test_random_event_sequences_keep_invariants():
    rng = np.random.default_rng(20260302)
    starts = CLONE.stats_states()
    fired = refused = 0
    routes: set[str] = set()
    for _ in range(SEQUENCES):
        state = _branch(starts[int(rng.integers(len(starts)))])
        for _ in range(STEPS):
            controls, form = controls_of(CLONE.render(state))
            fields = [c for c in controls if c.kind == "field"]
            taps = [c for c in controls if c.kind != "field"]
            if fields and rng.random() < 0.2:
                field = fields[int(rng.integers(len(fields)))]
                form[field.name] = TYPED[int(rng.integers(len(TYPED)))]
                event = UIEvent("__sync__", None, form)
            else:
                c = taps[int(rng.integers(len(taps)))]
                event = UIEvent(c.name, c.arg, form, long_press=c.kind == "long_press")
            try:
                CLONE.handle(state, event)
                fired += 1
            except CloneError:
                refused += 1
            routes.add(state["ui"]["route"])
            problems = CLONE.invariants(state)
            assert problems == [], (event, problems)
    assert fired + refused == SEQUENCES * STEPS
    assert fired > refused  # most controls a screen offers do something
    assert len(routes) >= 25
