"""`check_clone`: what every registered clone must satisfy, run in the tests over all of them.

A clone conforms when it declares its identity, builds a state of the documented shape that is
JSON-serialisable and deterministic for a seed, renders every state the crawler reaches without
error, keeps its invariants on them, names routes it can actually reach, and escapes every state
string it renders.

The escaping check (`poison_problems`) walks the clone's screens, and on each one poisons every
string of the state that the screen shows (plus every form value and the toast) with markup that
would open a tag and break out of an attribute, then renders it again: a raw ``<rb-poison>`` tag
or an ``rb-poison`` attribute in the result means a state string (what a user types, what a
server's state PUT or a task's setup holds) reached the page as HTML. A string whose poisoned
value the clone cannot render at all (a key it looks up) is narrowed down by halving and left
out; the clone validates it.
"""

from __future__ import annotations

import json
from collections import deque
from collections.abc import Iterator
from html import unescape
from html.parser import HTMLParser
from typing import Any

from clones.base import Clone, State, UIEvent
from clones.screen import screen_html
from clones.state_copy import copy_tree
from clones.stats import controls_of, crawl
from realbench.errors import CloneError
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
    problems += poison_problems(clone, seeds)
    return problems


# --- escaping ----------------------------------------------------------------------------------

POISON_TAG = "rb-poison"
POISON = f"\"' {POISON_TAG}=1 <{POISON_TAG}>x</{POISON_TAG}>"
Path = tuple[Any, ...]


class _PoisonFinder(HTMLParser):
    """Finds the poison's tag or attribute in markup (what a browser would build from it)."""

    def __init__(self) -> None:
        super().__init__(convert_charrefs=True)
        self.found: list[str] = []

    def handle_starttag(self, tag: str, attrs: list[tuple[str, str | None]]) -> None:
        if tag == POISON_TAG:
            self.found.append(f"a raw <{POISON_TAG}> tag")
        for name, _ in attrs:
            if name == POISON_TAG:
                self.found.append(f"an attribute broken out of <{tag}>")


def _raw_poison(markup: str) -> list[str]:
    finder = _PoisonFinder()
    finder.feed(markup)
    finder.close()
    return finder.found


def _strings(value: Any, path: Path = ()) -> Iterator[tuple[Path, str]]:
    if isinstance(value, str):
        yield path, value
    elif isinstance(value, dict):
        for k, v in value.items():
            yield from _strings(v, (*path, k))
    elif isinstance(value, list):
        for i, v in enumerate(value):
            yield from _strings(v, (*path, i))


def _shown(text: str, plain: str) -> bool:
    """Whether the screen (`plain`: its markup with entities decoded) shows `text` as it is, so
    that a poisoned copy would be rendered too."""
    if len(text) < 2 or text.replace(".", "", 1).replace("-", "", 1).isdigit():
        return False
    return text in plain


def _poisoned(state: State, paths: list[Path]) -> State:
    """A copy with the strings at `paths` poisoned; only the containers along them are copied."""
    out: Any = dict(state)
    copied: set[int] = {id(out)}
    for path in paths:
        holder = out
        for key in path[:-1]:
            child = holder[key]
            if id(child) not in copied:
                child = dict(child) if isinstance(child, dict) else list(child)
                copied.add(id(child))
                holder[key] = child
            holder = child
        holder[path[-1]] = str(holder[path[-1]]) + POISON
    return out  # type: ignore[no-any-return]


def _screens(clone: Clone, seeds: list[State], *, per_route: int, max_states: int) -> list[State]:
    """Up to `per_route` states of every route the clone's controls reach from `seeds` (breadth
    first, the frontier bounded: a sample of screens, not the crawl's census)."""
    out: list[State] = []
    counts: dict[str, int] = {}
    frontier: deque[State] = deque(seeds)
    seen: set[str] = set()
    while frontier and len(out) < max_states:
        state = frontier.popleft()
        key = json.dumps({k: v for k, v in state.items() if k != "world"}, sort_keys=True, default=str)
        route = str(state["ui"]["route"])
        if key in seen or counts.get(route, 0) >= per_route:
            continue
        seen.add(key)
        try:
            markup = clone.render(state)
        except Exception:  # a crash is the crawl's finding, reported there
            continue
        counts[route] = counts.get(route, 0) + 1
        out.append(state)
        controls, form = controls_of(markup)
        for control in controls:
            if control.kind == "field":
                continue
            nxt = {k: (v if k == "world" else copy_tree(v)) for k, v in state.items()}
            event = UIEvent(control.name, control.arg, dict(form), long_press=control.kind == "long_press")
            try:
                clone.handle(nxt, event)
            except CloneError:
                continue
            except Exception:
                continue
            frontier.append(nxt)
            if len(frontier) >= 4 * max_states:
                break
    return out


def poison_problems(
    clone: Clone, seeds: list[State] | None = None, *, per_route: int = 2, max_states: int = 60
) -> list[str]:
    """Screens that render a poisoned state string as markup (see the module's docstring)."""
    starts = seeds or [clone.build_state(CloneSetup(seed=11), {})]
    problems: list[str] = []
    for state in _screens(clone, starts, per_route=per_route, max_states=max_states):
        state = {**state, "ui": copy_tree(state["ui"])}
        ui = state["ui"]
        if ui.get("toast") is None:
            ui["toast"] = "toast"
        try:
            plain = unescape(screen_html(clone, state))
        except Exception:
            continue
        paths = [
            p
            for p, text in _strings(state)
            if p[:1] != ("ui",) or p[1:2] in (("form",), ("toast",), ("dialog",))
            if (p[:2] == ("ui", "form") or p[:2] == ("ui", "toast") or _shown(text, plain))
        ]
        route = ui["route"]
        for path, found in _poison_renders(clone, state, paths):
            where = ".".join(str(k) for k in path)
            problems.append(f"render {route}: the state string at {where} is rendered unescaped ({found})")
            if len(problems) >= 20:
                return problems
    return problems


def _poison_renders(clone: Clone, state: State, paths: list[Path]) -> Iterator[tuple[Path, str]]:
    """(path, what was found) for each poisoned string that renders raw; halves groups whose
    poisoned render fails until the strings the clone cannot take are set aside."""
    groups: deque[list[Path]] = deque([paths] if paths else [])
    renders = 0
    while groups and renders < 400:
        group = groups.popleft()
        renders += 1
        try:
            markup = screen_html(clone, _poisoned(state, group))
        except Exception:
            if len(group) > 1:
                half = len(group) // 2
                groups.extend([group[:half], group[half:]])
            continue
        found = _raw_poison(markup)
        if not found:
            continue
        if len(group) == 1:
            yield group[0], found[0]
            continue
        half = len(group) // 2
        groups.extend([group[:half], group[half:]])
