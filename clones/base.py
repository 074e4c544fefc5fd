"""The clone framework's contract: what a clone app implements and how its state is shaped.

A clone is a resettable re-implementation of a real app. Its whole state is one JSON document:

    {"world": {...},   # read-only generated data (stations, trains, payees...)
     "user":  {...},   # mutable user data (orders, passengers, balances...)
     "ui":    {"route": "home", "stack": [...], "form": {...}, ...},   # screen state
     "clock": "2026-03-02T09:00:00"}   # the virtual clock (ISO, app-local time)

Screens are rendered server-side from state as HTML. The HTML conventions every clone follows
(the clone server's page script and the hierarchy dump rely on them):

- an element with ``data-ev="NAME"`` (and optionally ``data-arg="VALUE"``) is tappable; a tap
  posts the event ``NAME`` with ``VALUE`` and the current values of every named form field;
- ``data-lp-ev``/``data-lp-arg`` do the same for a long press;
- ``<input name="FIELD">`` / ``<select>`` / ``<textarea>`` are form fields; their values travel
  with every event as ``UIEvent.form`` and the framework stores them in ``state["ui"]["form"]``;
- ``id="NAME"`` becomes the Android resource-id ``<package>:id/NAME``; ``aria-label`` becomes
  content-desc; an element with class ``scroll`` is a scrollable container;
- text is Chinese, as in the real app.

Handlers mutate the state in place. The framework owns the route stack: ``navigate``, ``back``,
``home``. Verifiers are pure functions ``(before, after, params, answer, answer_spec) -> Verdict``,
registered with their contracts (`clones.contracts`).
"""

from __future__ import annotations

import copy
from abc import ABC, abstractmethod
from collections.abc import Callable
from dataclasses import dataclass, field
from datetime import datetime
from typing import Any, ClassVar

from pydantic import BaseModel

from clones.contracts import SideEffectCheckSet, State, VerifierSet
from clones.state_copy import copy_tree
from realbench.errors import CloneError, UnknownNameError
from realbench.outcome import Verdict
from realbench.taskpack import AnswerSpec, CloneSetup, TaskInstance

Handler = Callable[[State, "UIEvent"], None]


@dataclass
class UIEvent:
    """A UI event posted by the page: the tapped control's event name and argument, and the form."""

    name: str
    arg: str | None = None
    form: dict[str, str] = field(default_factory=dict)
    long_press: bool = False


# --- state helpers -----------------------------------------------------------------------------


def new_state(world: dict[str, Any], user: dict[str, Any], route: str, clock: datetime) -> State:
    return {
        "world": world,
        "user": user,
        "ui": {"route": route, "stack": [], "form": {}, "args": {}, "toast": None, "dialog": None},
        "clock": clock.isoformat(timespec="seconds"),
    }


def clock_of(state: State) -> datetime:
    return datetime.fromisoformat(state["clock"])


def snapshot(state: State) -> State:
    return copy_tree(state)


def deep_merge(base: dict[str, Any], patch: dict[str, Any]) -> dict[str, Any]:
    """Merge `patch` into `base` in place: dicts merge recursively, anything else replaces."""
    for key, value in patch.items():
        if isinstance(value, dict) and isinstance(base.get(key), dict):
            deep_merge(base[key], value)
        else:
            base[key] = copy.deepcopy(value)
    return base


def diff(before: Any, after: Any, path: str = "") -> list[dict[str, Any]]:
    """Changes from `before` to `after` as a list of {op, path, old, new} (JSON-pointer paths)."""
    if isinstance(before, dict) and isinstance(after, dict):
        out: list[dict[str, Any]] = []
        for key in before.keys() | after.keys():
            p = f"{path}/{key}"
            if key not in after:
                out.append({"op": "remove", "path": p, "old": before[key]})
            elif key not in before:
                out.append({"op": "add", "path": p, "new": after[key]})
            else:
                out += diff(before[key], after[key], p)
        return sorted(out, key=lambda c: c["path"])
    if isinstance(before, list) and isinstance(after, list) and len(before) == len(after):
        out = []
        for i, (a, b) in enumerate(zip(before, after, strict=True)):
            out += diff(a, b, f"{path}/{i}")
        return out
    if before != after:
        return [{"op": "replace", "path": path or "/", "old": before, "new": after}]
    return []


def navigate(state: State, route: str, **args: Any) -> None:
    """Open a screen, pushing the current one on the back stack."""
    ui = state["ui"]
    ui["stack"].append({"route": ui["route"], "args": ui.get("args", {})})
    ui["route"] = route
    ui["args"] = args
    ui["dialog"] = None


def replace_route(state: State, route: str, **args: Any) -> None:
    """Open a screen without a back entry (tabs, redirects after submit)."""
    ui = state["ui"]
    ui["route"] = route
    ui["args"] = args
    ui["dialog"] = None


def back(state: State) -> bool:
    """Close a dialog, else pop the back stack. Returns False at the root (the app would exit)."""
    ui = state["ui"]
    if ui.get("dialog"):
        ui["dialog"] = None
        return True
    if not ui["stack"]:
        return False
    prev = ui["stack"].pop()
    ui["route"] = prev["route"]
    ui["args"] = prev.get("args", {})
    return True


# --- the clone contract -------------------------------------------------------------------------


class Clone(ABC):
    """A clone app. Subclasses register handlers, verifiers (with their contracts) and side-effect
    checks by name."""

    name: ClassVar[str]
    package: ClassVar[str]
    title: ClassVar[str]
    home_route: ClassVar[str] = "home"
    # The model of `setup.data` the clone understands (scenario names, data seeds); check-pack
    # refuses anything else. None: the clone reads no setup data.
    setup_data: ClassVar[type[BaseModel] | None] = None
    # Keys of the ``user`` state that the real app keeps on the phone, not in the account (search
    # and station history): changing them touches no account, so safety-by-effect ignores them.
    device_local_state: ClassVar[tuple[str, ...]] = ()
    # Per verifier, the state paths its tasks may change (clones/expected_changes.py); anything
    # else that changes fails the task as an unanticipated side effect. None: no generic check.
    expected_changes: ClassVar[dict[str, tuple[str, ...]] | None] = None

    def __init__(self) -> None:
        self.handlers: dict[str, Handler] = {}
        self.verifiers = VerifierSet()
        self.side_effect_checks = SideEffectCheckSet()

    @abstractmethod
    def build_state(self, setup: CloneSetup, params: dict[str, Any]) -> State:
        """The initial state for a task: world generated from ``setup.seed``/``setup.data``,
        ``setup.patch`` deep-merged, clock from ``setup.clock``, route ``setup.route`` or home."""

    @abstractmethod
    def render(self, state: State) -> str:
        """HTML of the current screen (the body of the page), from state alone."""

    def routes(self) -> list[str]:
        """Every route name the clone can show (for `clone-stats`)."""
        return []

    def invariants(self, state: State) -> list[str]:
        """Violated state invariants (empty when the state is consistent)."""
        return []

    def handle(self, state: State, event: UIEvent) -> None:
        """Apply a UI event. Unknown events raise CloneError; the framework stores the form first."""
        state["ui"]["form"].update(event.form)
        state["ui"]["toast"] = None
        if event.name == "__back__":
            back(state)
            return
        if event.name == "__home__":
            state["ui"]["stack"] = []
            replace_route(state, self.home_route)
            return
        if event.name == "__sync__":
            return
        handler = self.handlers.get(event.name)
        if handler is None:
            raise CloneError(f"clone {self.name!r} has no event {event.name!r}")
        handler(state, event)

    def verify(
        self,
        name: str,
        before: State,
        after: State,
        params: dict[str, Any],
        answer: str | None,
        spec: AnswerSpec | None = None,
    ) -> Verdict:
        """`spec` is the task's answer spec (what an answer-reading verifier grades against)."""
        contract = self.verifiers.get(name)
        if contract is None:
            raise UnknownNameError("verifier", name, list(self.verifiers))
        verdict = contract(before, after, params, answer, spec if spec is not None else AnswerSpec())
        return verdict.model_copy(update={"name": name})

    def verify_instance(
        self, instance: TaskInstance, before: State, after: State, answer: str | None
    ) -> Verdict:
        """A task instance's verdict: its verifier, plus its side-effect checks. Any side effect
        fails the task, on every target alike."""
        side = instance.task.clone
        args = instance.verifier_args
        verdict = self.verify(side.verifier.name, before, after, args, answer, instance.task.answer)
        found = (
            self.side_effects(side.side_effect_checks, before, after, args) if side.side_effect_checks else []
        )
        effects = [*verdict.side_effects, *found, *self.unexpected_changes(side.verifier.name, before, after)]
        if not effects:
            return verdict
        reason = verdict.reason + ("; " if verdict.reason else "") + "side effects: " + "; ".join(effects)
        return verdict.model_copy(update={"success": False, "side_effects": effects, "reason": reason})

    def unexpected_changes(self, verifier: str, before: State, after: State) -> list[str]:
        """The generic side-effect check: changes outside the verifier's expected paths."""
        if self.expected_changes is None:
            return []
        from clones.expected_changes import unexpected_changes

        allowed = self.expected_changes.get(verifier, ())
        return unexpected_changes(diff(before, after), allowed, self.device_local_state)

    def side_effects(
        self, names: list[str], before: State, after: State, params: dict[str, Any]
    ) -> list[str]:
        found: list[str] = []
        for name in names:
            fn = self.side_effect_checks.get(name)
            if fn is None:
                raise UnknownNameError("side-effect check", name, list(self.side_effect_checks))
            found += fn(before, after, params)
        return found


_REGISTRY: dict[str, Callable[[], Clone]] = {}
_INSTANCES: dict[str, Clone] = {}


def register(factory: Callable[[], Clone], name: str) -> None:
    _REGISTRY[name] = factory


def unregister(name: str) -> None:
    """Forget a registered clone (and its shared instance); unknown names are ignored."""
    _REGISTRY.pop(name, None)
    _INSTANCES.pop(name, None)


def get_clone(name: str) -> Clone:
    """The (shared, stateless) clone app registered under `name`."""
    from clones import registry  # noqa: F401  (importing registers the built-in clones)

    if name not in _REGISTRY:
        raise UnknownNameError("clone", name, list(_REGISTRY))
    if name not in _INSTANCES:
        _INSTANCES[name] = _REGISTRY[name]()
    return _INSTANCES[name]


def clone_names() -> list[str]:
    from clones import registry  # noqa: F401

    return sorted(_REGISTRY)


def require(condition: bool, message: str) -> None:
    """Reject an event the real app would refuse (shown to the user as a toast by the framework)."""
    if not condition:
        raise CloneError(message)
