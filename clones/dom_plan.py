"""Run a golden plan against any clone's rendered HTML, without a browser.

The HTML is turned into the node list the page runtime (clones/static/runtime.js) dumps, by the same
rules: text-only inline content folds into one text view, plain wrappers with fewer than two
children are flattened, ``id`` becomes the resource-id, ``aria-label`` the content-desc, ``data-ev``
makes a node clickable, ``data-lp-ev`` long-clickable, ``aria-hidden``/``data-rb-skip`` subtrees are
not in the dump. What needs a layout engine (clipping, CSS ``display: none``, the front dialog) is
not modelled: this dump is a superset of the browser's, which a browser-tier test checks on every
crawl seed state. Selectors resolve with `realbench.hierarchy.Selector`; a tap fires the
``data-ev`` of the node or its nearest ancestor with every named form field, as the runtime does.
"""

from __future__ import annotations

import re
from collections.abc import Iterator
from dataclasses import dataclass, field
from html.parser import HTMLParser
from typing import Any

from clones.base import Clone, State, UIEvent
from clones.screen import SCREEN_CLOSE, SCREEN_OPEN, screen_html
from clones.state_copy import copy_tree
from realbench.actions import Key
from realbench.errors import CloneError
from realbench.hierarchy import Node, Selector, read_as_shown
from realbench.outcome import Verdict
from realbench.taskpack import PlanStep, ReadAnswer, Task, TaskInstance, TypeStep
from realbench.templating import render

# The tag sets of runtime.js's hierarchy dump (lower case here: html.parser lowers tag names).
PHRASING = frozenset(
    {"span", "b", "i", "em", "strong", "small", "br", "sub", "sup", "mark", "s", "u"}
    | {"del", "ins", "code", "font", "abbr", "time", "label", "q", "wbr"}
)
ATOMIC = frozenset({"input", "select", "textarea", "img", "svg", "canvas"})
SKIP = frozenset({"script", "style", "template", "noscript", "head", "meta", "link"})
_VOID = frozenset({"input", "br", "img", "meta", "hr", "link", "source", "wbr", "area", "base", "col"})
_FIELDS = ("input", "select", "textarea")


class PlanStepError(CloneError):
    """A golden-plan step could not be carried out on the rendered screen."""


def squash(text: str) -> str:
    return re.sub(r"\s+", " ", text).strip()


@dataclass
class DomNode:
    """One element: its tag, attributes, tree links and (when dumped) the hierarchy node."""

    tag: str
    attrs: dict[str, str]
    parent: DomNode | None = None
    children: list[DomNode] = field(default_factory=list)
    # text and element children in document order (str for text, DomNode for elements)
    content: list[str | DomNode] = field(default_factory=list)
    node: Node = field(default_factory=Node)

    def interactive(self) -> bool:
        if self.tag == "form":
            return False
        return "data-ev" in self.attrs or "data-lp-ev" in self.attrs or self.tag in ("button", *_FIELDS)

    def is_leaf(self) -> bool:
        if self.tag in ATOMIC:
            return True
        return all(
            c.tag in PHRASING
            and not c.attrs.get("id")
            and not c.interactive()
            and "aria-label" not in c.attrs
            and c.is_leaf()
            for c in self.children
        )

    def inner_text(self) -> str:
        """The browser's innerText for phrasing content: text as written, ``<br>`` as a line break."""
        parts: list[str] = []
        for item in self.content:
            if isinstance(item, str):
                parts.append(item)
            elif item.tag == "br":
                parts.append("\n")
            elif item.tag not in SKIP:
                parts.append(item.inner_text())
        return "".join(parts)

    def own_text(self) -> str:
        return squash(" ".join(item for item in self.content if isinstance(item, str)))

    def ancestors(self) -> Iterator[DomNode]:
        node = self.parent
        while node is not None:
            yield node
            node = node.parent

    def disabled(self) -> bool:
        classes = self.attrs.get("class", "").split()
        return "disabled" in self.attrs or self.attrs.get("aria-disabled") == "true" or "disabled" in classes


class _TreeBuilder(HTMLParser):
    def __init__(self) -> None:
        super().__init__(convert_charrefs=True)
        self.root = DomNode("#root", {})
        self.stack: list[DomNode] = [self.root]

    def handle_starttag(self, tag: str, attrs: list[tuple[str, str | None]]) -> None:
        parent = self.stack[-1]
        el = DomNode(tag, {k: (v if v is not None else "") for k, v in attrs}, parent)
        parent.children.append(el)
        parent.content.append(el)
        if tag not in _VOID:
            self.stack.append(el)

    def handle_startendtag(self, tag: str, attrs: list[tuple[str, str | None]]) -> None:
        self.handle_starttag(tag, attrs)
        if tag not in _VOID:
            self.stack.pop()

    def handle_endtag(self, tag: str) -> None:
        for i in range(len(self.stack) - 1, 0, -1):
            if self.stack[i].tag == tag:
                del self.stack[i:]
                return

    def handle_data(self, data: str) -> None:
        self.stack[-1].content.append(data)


def _field_text(el: DomNode) -> str:
    if el.tag == "select":
        options = [c for c in el.children if c.tag == "option"]
        chosen = next((o for o in options if "selected" in o.attrs), options[0] if options else None)
        return squash(chosen.inner_text()) if chosen is not None else ""
    value = el.attrs.get("value", "") if el.tag == "input" else squash(el.inner_text())
    if value and el.attrs.get("type", "").lower() == "password":
        return "•" * len(value)
    return value or el.attrs.get("placeholder", "")


def _describe(el: DomNode, package: str, leaf: bool, labels: dict[str, DomNode]) -> Node:
    tag, attrs = el.tag, el.attrs
    kind = attrs.get("type", "text").lower()
    role = attrs.get("role")
    clickable = "data-ev" in attrs and tag != "form"
    node = Node(
        resource_id=f"{package}:id/{attrs['id']}" if attrs.get("id") else "",
        package=package,
        content_desc=attrs.get("aria-label", ""),
        clickable=clickable,
        long_clickable="data-lp-ev" in attrs,
    )
    if tag == "input" and kind in ("checkbox", "radio"):
        node.class_name = "android.widget.CheckBox" if kind == "checkbox" else "android.widget.RadioButton"
        node.checked = "checked" in attrs
        node.clickable = True
        label = labels.get(attrs.get("id", "")) or next((a for a in el.ancestors() if a.tag == "label"), None)
        node.text = squash(label.inner_text()) if label is not None else ""
    elif tag in ("input", "textarea"):
        node.class_name = "android.widget.EditText"
        node.password = kind == "password"
        node.text = _field_text(el)
        node.clickable = node.long_clickable = node.focusable = True
    elif tag == "select":
        node.class_name = "android.widget.Spinner"
        node.text = _field_text(el)
        node.clickable = True
    elif tag in ("img", "svg", "canvas"):
        node.class_name = "android.widget.ImageView"
        node.content_desc = node.content_desc or attrs.get("alt", "")
    elif role in ("switch", "checkbox"):
        node.class_name = "android.widget.Switch" if role == "switch" else "android.widget.CheckBox"
        node.text = squash(el.inner_text()) if leaf else el.own_text()
    elif leaf:
        node.text = squash(el.inner_text())
        if tag == "button" and node.text:
            node.class_name = "android.widget.Button"
        elif node.text or (not clickable and tag != "button"):
            node.class_name = "android.widget.TextView"
        else:
            node.class_name = "android.widget.ImageButton"
    else:
        node.text = el.own_text()
        node.class_name = "android.widget.Button" if tag == "button" else "android.widget.FrameLayout"
    if tag == "button":
        node.clickable = True
    if role in ("switch", "checkbox"):
        node.checked = attrs.get("aria-checked") == "true"
    node.focusable = node.focusable or node.clickable
    node.enabled = not el.disabled()
    classes = attrs.get("class", "").split()
    node.selected = attrs.get("aria-selected") == "true" or "selected" in classes or "active" in classes
    node.scrollable = "scroll" in classes or "scroll-x" in classes
    return node


def _marked(el: DomNode, node: Node) -> bool:
    classes = el.attrs.get("class", "").split()
    return (
        node.clickable
        or node.long_clickable
        or node.scrollable
        or node.class_name in ("android.widget.ImageView", "android.widget.EditText")
        or node.class_name
        in ("android.widget.CheckBox", "android.widget.RadioButton", "android.widget.Switch")
        or bool(el.attrs.get("id"))
        or bool(node.content_desc)
        or "modal" in classes
    )


def _walk(el: DomNode, package: str, labels: dict[str, DomNode], out: list[DomNode]) -> list[DomNode]:
    """Appends the dumped nodes under `el` to `out` (document order); returns `el`'s dumped children."""
    if el.tag in SKIP or "data-rb-skip" in el.attrs or el.attrs.get("aria-hidden") == "true":
        return []
    leaf = el.is_leaf()
    node = _describe(el, package, leaf, labels)
    el.node = node
    mine: list[DomNode] = []
    index = len(out)
    out.append(el)
    if not leaf:
        for c in el.children:
            mine.extend(_walk(c, package, labels, out))
    emit = _marked(el, node) or bool(node.text) or (not leaf and len(mine) >= 2)
    if not emit:
        del out[index]
        return mine
    node.children = [c.node for c in mine]
    for c in mine:
        c.node.parent = node
    return [el]


def screen_page(clone: Clone, state: State) -> str:
    """The markup the page runtime walks for this state (the children of ``#app``, drift aside)."""
    return f"{SCREEN_OPEN}{screen_html(clone, state)}{SCREEN_CLOSE}"


def parse(html: str, package: str) -> list[DomNode]:
    """The nodes of the hierarchy the page runtime would dump, in document order (layout aside)."""
    builder = _TreeBuilder()
    builder.feed(html)
    builder.close()
    top = builder.root
    # the runtime dumps the children of #app; a bare template fragment is its own app
    app = next((d for d in _iter(top) if d.attrs.get("id") == "app"), None)
    labels = {d.attrs["for"]: d for d in _iter(top) if d.tag == "label" and d.attrs.get("for")}
    out: list[DomNode] = []
    for el in (app or top).children:
        _walk(el, package, labels, out)
    return out


def _iter(el: DomNode) -> Iterator[DomNode]:
    for c in el.children:
        yield c
        yield from _iter(c)


# --- the plan runner ---------------------------------------------------------------------------


@dataclass
class PlanRun:
    """What a golden plan did: the states before and after, the answer, and how it ended."""

    before: State
    after: State
    answer: str | None = None
    boundary: bool = False
    terminated: bool = False
    steps: int = 0
    refusals: list[str] = field(default_factory=list)


class DomPlanRunner:
    """Executes plan steps on one clone state (mutated in place), as the page runtime would."""

    def __init__(
        self, clone: Clone, state: State, params: dict[str, Any], boundary: list[Selector] | None = None
    ) -> None:
        self.clone = clone
        self.state = state
        self.params = params
        self.boundary = list(boundary or [])
        self.focused: str | None = None
        self.fields: dict[str, str] = {}
        self.run = PlanRun(before=copy_tree(state), after=state)
        self.crossed = False
        self._refresh()

    def _refresh(self) -> None:
        self.nodes = parse(screen_page(self.clone, self.state), self.clone.package)
        self.fields = {
            d.attrs["name"]: d.attrs.get("value", "") if d.tag == "input" else _field_text(d)
            for d in self.nodes
            if d.tag in _FIELDS and d.attrs.get("name")
        }

    @property
    def route(self) -> str:
        return str(self.state.get("ui", {}).get("route", ""))

    def find(self, selector: Selector) -> DomNode:
        sel = selector.format(self.params)
        hits = [d for d in self.nodes if sel.matches(d.node)]
        index = sel.nth if sel.nth >= 0 else len(hits) + sel.nth
        if not 0 <= index < len(hits):
            raise PlanStepError(
                f"no node matches {sel} on screen {self.route!r}",
                hint="check the plan's selectors against the rendered screen",
            )
        return hits[index]

    def _fire(self, name: str, arg: str | None) -> None:
        try:
            self.clone.handle(self.state, UIEvent(name, arg, dict(self.fields)))
        except CloneError as exc:
            # the app refuses with a toast; the screen stays (as on the device)
            self.run.refusals.append(exc.message)
            self.state.setdefault("ui", {})["toast"] = exc.message
        self._refresh()

    def _crosses(self, *nodes: DomNode) -> bool:
        return any(b.format(self.params).matches(n.node) for b in self.boundary for n in nodes)

    def tap(self, selector: Selector, long_press: bool = False) -> None:
        dom = self.find(selector)
        attr = "data-lp-ev" if long_press else "data-ev"
        hit = next((d for d in (dom, *dom.ancestors()) if attr in d.attrs and d.tag != "form"), None)
        if dom.tag in ("input", "textarea") and (hit is None or long_press):
            self.focused = dom.attrs.get("name")
            return
        if hit is None:
            raise PlanStepError(
                f"{selector} is not {'long-' if long_press else ''}tappable on screen {self.route!r}"
            )
        self.crossed = self._crosses(dom, hit)
        if dom.tag in ("input", "textarea"):
            self.focused = dom.attrs.get("name")
        if hit.disabled():
            return
        self._fire(hit.attrs[attr], hit.attrs.get("data-lp-arg" if long_press else "data-arg"))

    def type_text(self, step: str | TypeStep) -> None:
        text = render(step if isinstance(step, str) else step.text, self.params)
        name = self.focused
        if isinstance(step, TypeStep) and step.into is not None:
            dom = self.find(step.into)
            if dom.tag not in ("input", "textarea"):
                raise PlanStepError(f"{step.into} is not a text field on screen {self.route!r}")
            name = dom.attrs.get("name")
        if not name:
            raise PlanStepError(f"typing with no focused text field on screen {self.route!r}")
        self.focused = name
        # a newline typed into a field submits it, as ENTER does
        lines = text.split("\n")
        self.fields[name] = self.fields.get(name, "") + lines[0]
        self._fire("__sync__", None)
        if len(lines) > 1:
            self.enter()

    def enter(self) -> None:
        """ENTER in a focused field submits its ``form[data-ev]``, else syncs the fields."""
        field_el = next((d for d in self.nodes if self.focused and d.attrs.get("name") == self.focused), None)
        if field_el is None:
            return
        form = next((a for a in field_el.ancestors() if a.tag == "form" and "data-ev" in a.attrs), None)
        if form is None:
            self._fire("__sync__", None)
            return
        self.crossed = self._crosses(form)
        self._fire(form.attrs["data-ev"], form.attrs.get("data-arg"))

    def read(self, spec: ReadAnswer) -> str:
        node = self.find(spec.read).node
        text = read_as_shown(node.text or node.content_desc, spec.regex)
        if text is None:
            raise PlanStepError(
                f"answer regex {spec.regex!r} does not match {node.text or node.content_desc!r}"
            )
        return text

    def step(self, step: PlanStep) -> None:
        """One step; swipes, waits and scrolls change no state in the clone's model (layout is not modelled)."""
        self.run.steps += 1
        self.crossed = False
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
                self.enter()
        elif step.open_app is not None:
            raise PlanStepError("a golden plan on the clone cannot open another app")
        elif step.answer is not None:
            self.run.answer = (
                render(step.answer, self.params) if isinstance(step.answer, str) else self.read(step.answer)
            )
        elif step.terminate is not None:
            self.run.terminated = True
        if self.crossed:
            self.run.boundary = True

    @property
    def finished(self) -> bool:
        return self.run.boundary or self.run.terminated or self.run.answer is not None


def plan_runner(clone: Clone, state: State, instance: TaskInstance) -> DomPlanRunner:
    return DomPlanRunner(clone, state, instance.params, instance.boundary())


def run_plan(
    clone: Clone, state: State, instance: TaskInstance, steps: list[PlanStep] | None = None
) -> PlanRun:
    """Run the task's golden plan (or `steps`) on a copy of `state` until it answers, terminates or
    crosses the commit boundary; `state` itself is left as it was."""
    runner = plan_runner(clone, copy_tree(state), instance)
    for step in instance.task.golden if steps is None else steps:
        runner.step(step)
        if runner.finished:
            break
    return runner.run


def initial_state(clone: Clone, instance: TaskInstance) -> State:
    return clone.build_state(instance.task.clone.setup, instance.params)


def instantiate(task: Task, seed: int = 0, values: dict[str, Any] | None = None) -> TaskInstance:
    """The task instance on the day of its clone setup's clock."""
    return task.instantiate(seed, task.clone.setup.clock.date(), values)


def plan_verdict(clone: Clone, instance: TaskInstance, run: PlanRun) -> tuple[Verdict, list[str]]:
    """The verifier's verdict on the run's end state and the side effects it caused."""
    args = instance.verifier_args
    v = clone.verify(
        instance.task.clone.verifier.name, run.before, run.after, args, run.answer, instance.task.answer
    )
    effects = clone.side_effects(instance.task.clone.side_effect_checks, run.before, run.after, args)
    effects += clone.unexpected_changes(instance.task.clone.verifier.name, run.before, run.after)
    return v, effects
