"""Run a golden plan against a clone's rendered HTML, without a browser.

The HTML is parsed into the same `realbench.hierarchy.Node` shape a device dump produces (text,
resource-id from ``id``, content-desc from ``aria-label``, clickable from ``data-ev``), selectors
are resolved with `realbench.hierarchy.Selector`, and a tap fires the ``data-ev`` of the node or
its nearest ancestor with every named form field, as the page runtime does. It checks plans and
selectors in fast tests; the browser tier runs the same plans through Chromium.
"""

from __future__ import annotations

import re
from dataclasses import dataclass, field
from html.parser import HTMLParser
from typing import Any

from clones.base import Clone, State, UIEvent
from realbench.actions import Key
from realbench.errors import CloneError
from realbench.hierarchy import Node, Selector
from realbench.taskpack import PlanStep, ReadAnswer, TaskInstance, TypeStep
from realbench.templating import render

_VOID = frozenset({"input", "br", "img", "meta", "hr", "link", "source", "wbr"})
_SKIP = frozenset({"style", "script"})
# inline elements whose text merges into the parent's single text view (as the page's dump does)
_PHRASING = frozenset(
    {"span", "b", "i", "em", "strong", "small", "br", "sub", "sup", "mark", "s", "u", "code", "label"}
)
_INTERACTIVE = frozenset({"button", "input", "select", "textarea"})


class PlanStepError(CloneError):
    """A golden-plan step could not be carried out on the rendered screen."""


@dataclass
class DomNode:
    node: Node
    attrs: dict[str, str]
    tag: str
    parent: DomNode | None = None
    texts: list[str] = field(default_factory=list)
    children: list[DomNode] = field(default_factory=list)
    absorbed: bool = False

    @property
    def interactive(self) -> bool:
        return "data-ev" in self.attrs or "data-lp-ev" in self.attrs or self.tag in _INTERACTIVE

    def is_leaf(self) -> bool:
        if self.tag in _INTERACTIVE:
            return True
        return all(
            c.tag in _PHRASING
            and not c.attrs.get("id")
            and not c.interactive
            and "aria-label" not in c.attrs
            and c.is_leaf()
            for c in self.children
        )

    def all_texts(self) -> list[str]:
        # own text first, then the children's (a close enough reading order for the templates here)
        return [*self.texts, *(t for c in self.children for t in c.all_texts())]


class _Builder(HTMLParser):
    def __init__(self, package: str) -> None:
        super().__init__(convert_charrefs=True)
        self.package = package
        self.nodes: list[DomNode] = []
        self.stack: list[DomNode] = []
        self.skipping = 0

    def handle_starttag(self, tag: str, attrs: list[tuple[str, str | None]]) -> None:
        if tag in _SKIP:
            self.skipping += 1
            return
        a = {k: (v or "") for k, v in attrs}
        node = Node(
            resource_id=f"{self.package}:id/{a['id']}" if a.get("id") else "",
            content_desc=a.get("aria-label", ""),
            clickable="data-ev" in a,
            long_clickable="data-lp-ev" in a,
            text=a.get("value", "") if tag == "input" else "",
        )
        dom = DomNode(node, a, tag, self.stack[-1] if self.stack else None)
        if dom.parent is not None:
            dom.parent.children.append(dom)
        self.nodes.append(dom)
        if tag not in _VOID:
            self.stack.append(dom)

    def handle_endtag(self, tag: str) -> None:
        if tag in _SKIP:
            self.skipping -= 1
            return
        while self.stack:
            top = self.stack.pop()
            if top.tag == tag:
                break

    def handle_data(self, data: str) -> None:
        if self.skipping or not self.stack or not data.strip():
            return
        self.stack[-1].texts.append(data.strip())


def parse(html: str, package: str) -> list[DomNode]:
    """Nodes as the page runtime dumps them: text-only inline content merges into one node."""
    b = _Builder(package)
    b.feed(html)
    for d in b.nodes:
        if d.absorbed or d.tag == "input":
            continue
        if d.children and d.is_leaf():
            d.node.text = " ".join(d.all_texts())
            stack = list(d.children)
            while stack:
                c = stack.pop()
                c.absorbed = True
                stack.extend(c.children)
        else:
            d.node.text = " ".join(d.texts)
    return [d for d in b.nodes if not d.absorbed]


@dataclass
class PlanRun:
    state: State
    answer: str | None = None
    boundary: bool = False
    terminated: bool = False
    steps: int = 0
    refusals: list[str] = field(default_factory=list)


class DomPlanRunner:
    """Executes plan steps on one clone state (mutated in place)."""

    def __init__(self, clone: Clone, state: State, params: dict[str, Any], boundary: list[Selector]) -> None:
        self.clone = clone
        self.run = PlanRun(state)
        self.params = params
        self.boundary = boundary
        self.focused: str | None = None
        self.fields: dict[str, str] = {}
        self._refresh()

    def _refresh(self) -> None:
        self.nodes = parse(self.clone.render(self.run.state), self.clone.package)
        self.fields = {
            d.attrs["name"]: d.node.text
            for d in self.nodes
            if d.tag in ("input", "select", "textarea") and d.attrs.get("name")
        }

    def find(self, selector: Selector) -> DomNode:
        sel = selector.format(self.params)
        hits = [d for d in self.nodes if sel.matches(d.node)]
        index = sel.nth if sel.nth >= 0 else len(hits) + sel.nth
        if not 0 <= index < len(hits):
            route = self.run.state["ui"]["route"]
            raise PlanStepError(
                f"no node matches {sel} on screen {route!r}",
                hint="check the plan's selectors against the rendered screen",
            )
        return hits[index]

    def _fire(self, name: str, arg: str | None) -> None:
        try:
            self.clone.handle(self.run.state, UIEvent(name, arg, dict(self.fields)))
        except CloneError as exc:
            # the app refuses with a toast; the screen stays (as on the device)
            self.run.refusals.append(exc.message)
            self.run.state["ui"]["toast"] = exc.message
        self._refresh()

    def tap(self, selector: Selector, long_press: bool = False) -> None:
        dom: DomNode | None = self.find(selector)
        if dom is not None and dom.tag in ("input", "textarea"):
            self.focused = dom.attrs.get("name")
            return
        hit = dom
        attr = "data-lp-ev" if long_press else "data-ev"
        while hit is not None and attr not in hit.attrs:
            hit = hit.parent
        if hit is None:
            raise PlanStepError(f"{selector} is not tappable on screen {self.run.state['ui']['route']!r}")
        crossing = any(
            b.matches(hit.node) or (dom is not None and b.matches(dom.node)) for b in self.boundary
        )
        self._fire(hit.attrs[attr], hit.attrs.get("data-lp-arg" if long_press else "data-arg"))
        if crossing:
            self.run.boundary = True

    def type_text(self, step: str | TypeStep) -> None:
        text = render(step if isinstance(step, str) else step.text, self.params)
        name = self.focused
        if isinstance(step, TypeStep) and step.into is not None:
            dom = self.find(step.into)
            name = dom.attrs.get("name")
        if not name:
            raise PlanStepError("typing with no focused input")
        self.focused = name
        self.fields[name] = text
        self._fire("__sync__", None)

    def read(self, spec: ReadAnswer) -> str:
        text = self.find(spec.read).node.text
        if spec.regex:
            m = re.search(spec.regex, text)
            if not m:
                raise PlanStepError(f"answer regex {spec.regex!r} does not match {text!r}")
            return m.group(1) if m.groups() else m.group(0)
        return text

    def step(self, step: PlanStep) -> None:
        self.run.steps += 1
        if step.tap is not None:
            self.tap(step.tap)
        elif step.long_press is not None:
            self.tap(step.long_press, long_press=True)
        elif step.type is not None:
            self.type_text(step.type)
        elif step.scroll_to is not None:
            self.find(step.scroll_to.selector)
        elif step.key is not None:
            if step.key is Key.BACK:
                self._fire("__back__", None)
            elif step.key is Key.HOME:
                self._fire("__home__", None)
            elif step.key is Key.ENTER:
                self._fire("__sync__", None)
        elif step.answer is not None:
            self.run.answer = (
                render(step.answer, self.params) if isinstance(step.answer, str) else self.read(step.answer)
            )
        elif step.terminate is not None:
            self.run.terminated = True


def run_plan(clone: Clone, state: State, instance: TaskInstance) -> PlanRun:
    """Run the task's golden plan until it answers, terminates or crosses the commit boundary."""
    runner = DomPlanRunner(clone, state, instance.params, instance.boundary())
    for step in instance.task.golden:
        runner.step(step)
        if runner.run.boundary or runner.run.terminated or runner.run.answer is not None:
            break
    return runner.run
