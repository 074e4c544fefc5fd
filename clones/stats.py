"""`realbench clone-stats`: how rich a clone is, measured by exploring it, not declared.

A breadth-first crawl starts from the clone's `stats_states()` (or its default state), renders
each state, finds every control on the screen (``data-ev`` taps, ``data-lp-ev`` long presses and
named form fields), fires every event, and records the routes it reaches. The figures are:

- routes: distinct screens reached;
- interactive actions: distinct (screen, control) pairs — a tap event, a long-press event or a
  form field; one event name with many arguments (rows of a list) counts once per screen;
- transitions: distinct (screen → other screen) pairs observed when firing events.
"""

from __future__ import annotations

import hashlib
import json
import logging
from collections import deque
from dataclasses import dataclass, field
from html.parser import HTMLParser
from typing import Any

from clones.base import Clone, State, UIEvent
from clones.state_copy import copy_tree
from realbench.errors import CloneError
from realbench.taskpack import CloneSetup

log = logging.getLogger(__name__)


@dataclass(frozen=True)
class Control:
    kind: str  # "tap", "long_press" or "field"
    name: str
    arg: str | None = None
    default: str = ""


class _ControlParser(HTMLParser):
    def __init__(self) -> None:
        super().__init__(convert_charrefs=True)
        self.controls: list[Control] = []
        self.form: dict[str, str] = {}

    def handle_starttag(self, tag: str, attrs: list[tuple[str, str | None]]) -> None:
        a = {k: v for k, v in attrs}
        if a.get("data-ev"):
            self.controls.append(Control("tap", str(a["data-ev"]), a.get("data-arg")))
        if a.get("data-lp-ev"):
            self.controls.append(Control("long_press", str(a["data-lp-ev"]), a.get("data-lp-arg")))
        if tag in ("input", "select", "textarea") and a.get("name"):
            name = str(a["name"])
            value = a.get("value") or ""
            if tag == "input" and a.get("type") in ("checkbox", "radio") and "checked" not in a:
                value = ""
            self.controls.append(Control("field", name, default=value))
            self.form.setdefault(name, value)


def controls_of(html: str) -> tuple[list[Control], dict[str, str]]:
    parser = _ControlParser()
    parser.feed(html)
    return parser.controls, parser.form


@dataclass
class CloneStats:
    clone: str
    routes: int
    interactive_actions: int
    transitions: int
    states_explored: int
    route_names: list[str] = field(default_factory=list)
    unreached_routes: list[str] = field(default_factory=list)
    errors: list[str] = field(default_factory=list)

    def as_dict(self) -> dict[str, Any]:
        return {
            "clone": self.clone,
            "routes": self.routes,
            "interactive_actions": self.interactive_actions,
            "transitions": self.transitions,
            "states_explored": self.states_explored,
            "route_names": self.route_names,
            "unreached_routes": self.unreached_routes,
            "errors": self.errors,
        }


def _branch(state: State) -> State:
    """A copy that shares the read-only world (the costly part) with its parent."""
    return {k: (v if k == "world" else copy_tree(v)) for k, v in state.items()}


def _world_text(state: State) -> str:
    return json.dumps(state.get("world"), sort_keys=True, default=str)


def _fingerprint(state: State) -> str:
    body = json.dumps({k: v for k, v in state.items() if k != "world"}, sort_keys=True, default=str)
    return hashlib.blake2b(body.encode(), digest_size=12).hexdigest()


def crawl(clone: Clone, *, max_states: int = 2500, per_route: int = 40, max_errors: int = 50) -> CloneStats:
    seeds_fn = getattr(clone, "stats_states", None)
    seeds: list[State] = list(seeds_fn()) if callable(seeds_fn) else []
    if not seeds:
        seeds = [clone.build_state(CloneSetup(), {})]
    # Every explored state shares its seed's world, as sessions and snapshots do on the server; a
    # handler that changes it would leak into every other session built from the same seed.
    worlds_before = [_world_text(s) for s in seeds]
    seen: set[str] = set()
    per_route_count: dict[str, int] = {}
    frontier: deque[State] = deque()
    for s in seeds:
        fp = _fingerprint(s)
        if fp not in seen:
            seen.add(fp)
            frontier.append(s)
    routes: set[str] = set()
    actions: set[tuple[str, str, str]] = set()
    transitions: set[tuple[str, str]] = set()
    errors: list[str] = []
    explored = 0
    while frontier and explored < max_states:
        state = frontier.popleft()
        explored += 1
        route = state["ui"]["route"]
        routes.add(route)
        try:
            html = clone.render(state)
        except Exception as exc:  # a crash while rendering is a finding, not a crawl failure
            errors.append(f"render {route}: {exc!r}")
            continue
        controls, form = controls_of(html)
        for control in controls:
            actions.add((route, control.kind, control.name))
            if control.kind == "field":
                continue
            nxt = _branch(state)
            event = UIEvent(control.name, control.arg, dict(form), long_press=control.kind == "long_press")
            try:
                clone.handle(nxt, event)
            except CloneError:
                continue  # the app refused (e.g. empty form): not a transition
            except Exception as exc:
                if len(errors) < max_errors:
                    errors.append(f"event {route}:{control.name}({control.arg}): {exc!r}")
                continue
            new_route = nxt["ui"]["route"]
            routes.add(new_route)
            if new_route != route:
                transitions.add((route, new_route))
            fp = _fingerprint(nxt)
            if fp in seen or per_route_count.get(new_route, 0) >= per_route:
                continue
            seen.add(fp)
            per_route_count[new_route] = per_route_count.get(new_route, 0) + 1
            frontier.append(nxt)
    for i, (seed, before) in enumerate(zip(seeds, worlds_before, strict=True)):
        if _world_text(seed) != before:
            errors.append(f"a handler changed the world of start state {i}, which is read-only")
    declared = set(clone.routes())
    return CloneStats(
        clone=clone.name,
        routes=len(routes),
        interactive_actions=len(actions),
        transitions=len(transitions),
        states_explored=explored,
        route_names=sorted(routes),
        unreached_routes=sorted(declared - routes),
        errors=errors,
    )
