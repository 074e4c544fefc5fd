"""A browser-free clone episode for the element policy: the server's session model (drift overlays
included) rendered to HTML and turned into hierarchy nodes by `clones.dom_plan.parse`, with taps
firing the tapped node's ``data-ev`` as the page runtime does.

No layout: nodes have no bounds, so the policy's features do not use them. While a drift overlay is
open only its own controls can be tapped (as its modal covers the screen in a browser); the clone's
own dialogs are not modelled as covering (the hierarchy is a superset of the browser's). A browser
test replays a browser-free episode's choices on the browser env and compares verdicts.
"""

from __future__ import annotations

import copy
import dataclasses
import logging
from dataclasses import dataclass, field
from typing import Any

from clones.base import Clone, State, UIEvent
from clones.dom_plan import _FIELDS, DomNode, PlanRun, _field_text, parse, plan_verdict
from clones.drift import DRIFT_EVENT, Drift
from clones.server import Session, render_screen
from realbench.agents.policy_features import Kind, NodeView, RowLabels
from realbench.errors import CloneError
from realbench.outcome import Verdict
from realbench.taskpack import TaskInstance

log = logging.getLogger(__name__)

SHAPING_WEIGHT = 0.3  # a failed episode earns this times the verifier's progress (0–1)


@dataclass
class FreeResult:
    """How a browser-free episode ended."""

    verdict: Verdict
    side_effects: list[str]
    reward: float
    steps: int
    boundary: bool
    terminated: bool
    choices: list[dict[str, Any]] = field(default_factory=list)


def reward_of(verdict: Verdict, side_effects: list[str]) -> float:
    """1 for a verified success without side effects; else shaped by the verifier's progress."""
    if verdict.success and not side_effects:
        return 1.0
    return SHAPING_WEIGHT * float(verdict.progress)


class _FreeSession(Session):
    """The server's session without its copies: the episode owns its working state (a copy made once)
    and the start state it came from is its read-only baseline."""

    def reset_to(self, state: State) -> None:
        self.baseline = state
        self.state = {k: (v if k == "world" else copy.deepcopy(v)) for k, v in state.items()}
        if self.overlays is not None:
            self.overlays.arm()

    def apply(self, event: UIEvent) -> None:
        # Session.apply's rules, handling the event in place (a refusal leaves a toast)
        if (
            self.overlays is not None
            and self.overlays.active is not None
            and event.name in (DRIFT_EVENT, "__back__")
        ):
            self.overlays.dismiss(event.arg if event.name == DRIFT_EVENT else None)
            self.state["ui"]["form"].update(event.form)
            return
        if event.name == DRIFT_EVENT:
            return
        try:
            self.clone.handle(self.state, event)
        except CloneError as exc:
            self.state["ui"]["form"].update(event.form)
            self.state["ui"]["toast"] = exc.message
        except (ValueError, TypeError, KeyError, IndexError) as exc:
            # a handler choking on a typed value (e.g. text in a number field): the server would
            # answer 500 and the screen would stay; here it stays, with the error as a toast
            log.debug("clone %s refused %s: %r", self.clone.name, event.name, exc)
            self.state["ui"]["toast"] = "invalid input"


class FreeEpisode:
    """One episode of one task instance on a clone without a browser."""

    def __init__(
        self,
        clone: Clone,
        instance: TaskInstance,
        state: State,
        drift: Drift | None = None,
        *,
        context: bool = False,
    ) -> None:
        self.clone = clone
        self.context = context  # the views carry their rows' labels (a policy shape's `context`)
        self.instance = instance
        # `state` is shared read-only (a cached start state); the session works on its own copy
        self.session = _FreeSession(id="free", clone=clone, state=state, drift=drift)
        self.boundary = [s for s in instance.boundary()]
        self.focused: str | None = None
        self.fields: dict[str, str] = {}
        self.crossed = False
        self.terminated = False
        self.steps = 0
        self.choices: list[dict[str, Any]] = []
        self.nodes: list[DomNode] = []
        self.tappable: list[DomNode] = []
        self._refresh()

    def _refresh(self) -> None:
        self.nodes = parse(render_screen(self.session), self.clone.package)
        self.fields = {
            d.attrs["name"]: d.attrs.get("value", "") if d.tag == "input" else _field_text(d)
            for d in self.nodes
            if d.tag in _FIELDS and d.attrs.get("name")
        }
        self.tappable = self.nodes
        if self.session.overlays is not None and self.session.overlays.active is not None:
            front = [d for d in self.nodes if "modal" in d.attrs.get("class", "").split()]
            if front:
                modal = front[-1]
                self.tappable = [d for d in self.nodes if d is modal or modal in d.ancestors()]

    def views(self) -> list[NodeView]:
        out = []
        labels = RowLabels() if self.context else None
        for i, d in enumerate(self.tappable):
            view = NodeView.of(d.node, i, with_bounds=False, labels=labels)
            if (
                self.focused is not None
                and d.tag in ("input", "textarea")
                and d.attrs.get("name") == self.focused
            ):
                view = dataclasses.replace(view, focused=True)
            out.append(view)
        return out

    @property
    def done(self) -> bool:
        return self.crossed or self.terminated

    def _fire(self, name: str, arg: str | None) -> None:
        self.session.apply(UIEvent(name, arg, dict(self.fields)))
        self._refresh()

    def _crosses(self, *nodes: DomNode) -> bool:
        return any(b.matches(n.node) for b in self.boundary for n in nodes)

    def click(self, ref: int) -> None:
        dom = self.tappable[ref]
        hit = next((d for d in (dom, *dom.ancestors()) if "data-ev" in d.attrs and d.tag != "form"), None)
        if dom.tag in ("input", "textarea"):
            self.focused = dom.attrs.get("name")
        if hit is None:
            return
        if self._crosses(dom, hit):
            self.crossed = True
        if hit.disabled():
            return
        self._fire(hit.attrs["data-ev"], hit.attrs.get("data-arg"))

    def type_text(self, text: str) -> None:
        if not self.focused:
            return
        self.fields[self.focused] = self.fields.get(self.focused, "") + text
        self._fire("__sync__", None)

    def back(self) -> None:
        self._fire("__back__", None)

    def act(self, kind: Kind, ref: int = -1, text: str = "") -> None:
        """One action; the choice is recorded (kind, and the node's identity) for replays."""
        self.steps += 1
        record: dict[str, Any] = {"kind": kind.name.lower()}
        if kind is Kind.CLICK:
            node = self.tappable[ref].node
            record.update(text=node.text, desc=node.content_desc, id=node.short_id, cls=node.class_name)
            # by identity: copies of one control (a 退票 per passenger) compare equal as values
            same = [d.node for d in self.tappable if _same_control(d.node, node)]
            record["nth"] = next(i for i, n in enumerate(same) if n is node)
            self.click(ref)
        elif kind is Kind.TYPE:
            record["text"] = text
            self.type_text(text)
        elif kind is Kind.BACK:
            self.back()
        else:
            self.terminated = True
        self.choices.append(record)

    def result(self) -> FreeResult:
        run = PlanRun(before=self.session.baseline, after=self.session.state)
        verdict, effects = plan_verdict(self.clone, self.instance, run)
        return FreeResult(
            verdict=verdict,
            side_effects=effects,
            reward=reward_of(verdict, effects),
            steps=self.steps,
            boundary=self.crossed,
            terminated=self.terminated,
            choices=self.choices,
        )


def _same_control(a: Any, b: Any) -> bool:
    return (a.text, a.content_desc, a.short_id, a.class_name) == (
        b.text,
        b.content_desc,
        b.short_id,
        b.class_name,
    )
