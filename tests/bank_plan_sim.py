"""Runs a golden plan against the bank clone without a browser (test support).

The rendered HTML is parsed into elements with the attributes the page runtime maps to the UI
hierarchy (id -> resource-id, own text / leaf text -> text, aria-label -> content-desc); a plan
step's selector is resolved against them the way `realbench.hierarchy.Selector` matches nodes, and a
tap fires the ``data-ev`` of the element or its nearest tappable ancestor with the current form.
"""

from __future__ import annotations

import copy
import re
from dataclasses import dataclass, field
from html.parser import HTMLParser
from typing import Any

from clones.base import Clone, State, UIEvent
from realbench.errors import CloneError
from realbench.hierarchy import Selector
from realbench.outcome import Verdict
from realbench.taskpack import PlanStep, ReadAnswer, TaskInstance, TypeStep
from realbench.templating import render

VOID = {"input", "br", "img", "meta", "link", "hr"}
PHRASING = {
    "span",
    "b",
    "i",
    "em",
    "strong",
    "small",
    "br",
    "sub",
    "sup",
    "mark",
    "s",
    "u",
    "code",
    "label",
    "time",
    "abbr",
    "q",
}


@dataclass
class El:
    tag: str
    attrs: dict[str, str]
    parent: El | None = None
    children: list[El] = field(default_factory=list)
    own: list[str] = field(default_factory=list)

    def inner_text(self) -> str:
        parts = list(self.own)
        for c in self.children:
            parts.append(c.inner_text())
        return " ".join(p for p in parts if p).strip()

    def is_leaf(self) -> bool:
        """Mirrors the page runtime: only plain phrasing children (no id, not tappable) fold into the text."""
        for c in self.children:
            interactive = "data-ev" in c.attrs or c.tag in ("button", "input", "select", "textarea")
            if (
                c.tag not in PHRASING
                or "id" in c.attrs
                or interactive
                or "aria-label" in c.attrs
                or not c.is_leaf()
            ):
                return False
        return True

    @property
    def text(self) -> str:
        if self.tag == "input":
            return self.attrs.get("value") or self.attrs.get("placeholder", "")
        raw = self.inner_text() if self.is_leaf() else " ".join(self.own)
        return re.sub(r"\s+", " ", raw).strip()


class _Parser(HTMLParser):
    def __init__(self) -> None:
        super().__init__(convert_charrefs=True)
        self.root = El("root", {})
        self.cur = self.root
        self.all: list[El] = []

    def handle_starttag(self, tag: str, attrs: list[tuple[str, str | None]]) -> None:
        el = El(tag, {k: v or "" for k, v in attrs}, self.cur)
        self.cur.children.append(el)
        self.all.append(el)
        if tag not in VOID:
            self.cur = el

    def handle_endtag(self, tag: str) -> None:
        node = self.cur
        while node is not None and node.tag != tag:
            node = node.parent
        if node is not None and node.parent is not None:
            self.cur = node.parent

    def handle_data(self, data: str) -> None:
        if data.strip():
            self.cur.own.append(data.strip())


def parse(html: str) -> list[El]:
    p = _Parser()
    p.feed(html)
    return [e for e in p.all if e.tag not in ("style", "script")]


def _hidden(el: El) -> bool:
    node: El | None = el
    while node is not None:
        if node.attrs.get("aria-hidden") == "true":
            return True
        node = node.parent
    return False


def matches(sel: Selector, el: El) -> bool:
    text = el.text
    desc = el.attrs.get("aria-label", "")
    if sel.text is not None and text != sel.text and desc != sel.text:
        return False
    if sel.text_contains is not None and sel.text_contains not in text:
        return False
    if sel.text_regex is not None and not re.search(sel.text_regex, text):
        return False
    if sel.resource_id is not None and el.attrs.get("id") != sel.resource_id.rsplit("/", 1)[-1]:
        return False
    return not (sel.content_desc is not None and desc != sel.content_desc)


def find(html: str, sel: Selector) -> El | None:
    found = [e for e in parse(html) if not _hidden(e) and matches(sel, e)]
    if not found:
        return None
    i = sel.nth if sel.nth >= 0 else len(found) + sel.nth
    return found[i] if 0 <= i < len(found) else None


def form_of(html: str) -> dict[str, str]:
    return {
        e.attrs["name"]: e.attrs.get("value", "")
        for e in parse(html)
        if e.tag in ("input", "textarea") and e.attrs.get("name")
    }


@dataclass
class PlanRun:
    before: State
    after: State
    answer: str | None
    boundary_hit: bool
    steps: int


class PlanFailed(AssertionError):
    pass


def run_plan(
    clone: Clone, instance: TaskInstance, state: State, steps: list[PlanStep] | None = None
) -> PlanRun:
    """Execute the instance's golden plan (or `steps`) on `state` (not modified); stops at a boundary tap."""
    before = copy.deepcopy(state)
    s = copy.deepcopy(state)
    params = instance.params
    boundary = instance.boundary()
    answer: str | None = None
    hit = False
    n = 0
    for n, step in enumerate(instance.task.golden if steps is None else steps, 1):  # noqa: B007
        html = clone.render(s)
        if step.tap is not None:
            sel = step.tap.format(params)
            el = find(html, sel)
            if el is None:
                raise PlanFailed(f"step {n}: no element for {sel} on route {s['ui']['route']}")
            target: El | None = el
            while target is not None and "data-ev" not in target.attrs:
                target = target.parent
            if target is None:
                raise PlanFailed(f"step {n}: {sel} is not tappable on route {s['ui']['route']}")
            crossing = any(matches(b, el) for b in boundary)
            clone.handle(s, UIEvent(target.attrs["data-ev"], target.attrs.get("data-arg"), form_of(html)))
            if crossing:
                hit = True
                break
        elif step.type is not None:
            spec = step.type if isinstance(step.type, TypeStep) else TypeStep(text=step.type)
            if spec.into is None:
                raise PlanFailed(f"step {n}: typing needs a target field in the simulator")
            el = find(html, spec.into.format(params))
            if el is None or el.tag != "input":
                raise PlanFailed(f"step {n}: no input for {spec.into} on route {s['ui']['route']}")
            form = form_of(html)
            name = el.attrs["name"]
            form[name] = form.get(name, "") + render(spec.text, params)
            clone.handle(s, UIEvent("__sync__", None, form))
        elif step.scroll_to is not None:
            if find(html, step.scroll_to.selector.format(params)) is None:
                raise PlanFailed(
                    f"step {n}: scroll target {step.scroll_to.selector} is not on route {s['ui']['route']}"
                )
        elif step.answer is not None:
            if isinstance(step.answer, ReadAnswer):
                el = find(html, step.answer.read.format(params))
                if el is None:
                    raise PlanFailed(
                        f"step {n}: nothing to read at {step.answer.read} on route {s['ui']['route']}"
                    )
                text = el.text or el.attrs.get("aria-label", "")
                if step.answer.regex:
                    m = re.search(step.answer.regex, text)
                    if not m:
                        raise PlanFailed(f"step {n}: {text!r} does not match {step.answer.regex!r}")
                    text = m.group(1) if m.groups() else m.group(0)
                answer = text
            else:
                answer = render(step.answer, params)
            break
        elif step.terminate is not None:
            break
        elif step.key is not None:
            clone.handle(s, UIEvent("__back__" if step.key.value == "back" else "__home__"))
    return PlanRun(before, s, answer, hit, n)


def verdict(clone: Clone, instance: TaskInstance, run: PlanRun) -> tuple[Verdict, list[str]]:
    args = instance.verifier_args
    v = clone.verify(instance.task.clone.verifier.name, run.before, run.after, args, run.answer)
    effects = clone.side_effects(instance.task.clone.side_effect_checks, run.before, run.after, args)
    return v, effects


def initial_state(clone: Clone, instance: TaskInstance) -> State:
    return clone.build_state(instance.task.clone.setup, instance.params)


def instantiate(task: Any, seed: int = 0) -> TaskInstance:
    return task.instantiate(seed, task.clone.setup.clock.date())


__all__ = ["CloneError", "PlanFailed", "PlanRun", "initial_state", "instantiate", "run_plan", "verdict"]
