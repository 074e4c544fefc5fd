"""`check_clone`: what every registered clone must satisfy, run in the tests over all of them.

A clone conforms when it declares its identity, builds a state of the documented shape that is
JSON-serialisable and deterministic for a seed, renders every state the crawler reaches without
error, keeps its invariants on them, and names routes it can actually reach.
"""

from __future__ import annotations

import json
from typing import Any

from clones.base import Clone, State
from clones.stats import crawl
from realbench.taskpack import CloneSetup

REQUIRED_KEYS = ("world", "user", "ui", "clock")


def _shape_problems(state: Any, where: str) -> list[str]:
    if not isinstance(state, dict):
        return [f"{where}: state is not a JSON object"]
    problems = [f"{where}: state has no {k!r}" for k in REQUIRED_KEYS if k not in state]
    ui = state.get("ui", {})
    if isinstance(ui, dict) and not isinstance(ui.get("route"), str):
        problems.append(f"{where}: ui.route is not a string")
    try:
        json.dumps(state)
    except (TypeError, ValueError) as exc:
        problems.append(f"{where}: state is not JSON-serialisable ({exc})")
    return problems


def check_clone(clone: Clone, *, max_states: int = 400) -> list[str]:
    """Problems found (empty when the clone conforms)."""
    problems: list[str] = []
    for attr in ("name", "package", "title"):
        if not getattr(clone, attr, None):
            problems.append(f"clone has no {attr}")
    first = clone.build_state(CloneSetup(seed=11), {})
    again = clone.build_state(CloneSetup(seed=11), {})
    problems += _shape_problems(first, "build_state")
    if json.dumps(first, sort_keys=True, default=str) != json.dumps(again, sort_keys=True, default=str):
        problems.append("build_state is not deterministic for a fixed seed")
    seeds_fn = getattr(clone, "stats_states", None)
    seeds: list[State] = list(seeds_fn()) if callable(seeds_fn) else [first]
    for i, state in enumerate(seeds):
        problems += _shape_problems(state, f"stats_states[{i}]")
        problems += [f"stats_states[{i}]: invariant violated: {v}" for v in clone.invariants(state)]
    stats = crawl(clone, max_states=max_states)
    problems += [f"crawl: {e}" for e in stats.errors]
    if not clone.verifiers:
        problems.append("clone registers no verifiers")
    if not clone.routes():
        problems.append("clone declares no routes")
    return problems
