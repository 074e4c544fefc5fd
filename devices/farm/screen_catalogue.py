"""Keeping a money-moving pack's safe-screen catalogue in step with its real recipes.

The interlock of a money-moving app is default-deny: input reaches only screens of the pack's
`real_app.safe_screens`. Every screen a real recipe touches (setup steps, the steps around the
logged-in probe, golden steps before the commit tap) must therefore be catalogued, and a screen id
renamed in the clone or the recipes must be renamed in the catalogue. This module runs each
runnable task's real setup and golden plan browser-free on its clone (`clones.dom_plan`, the node
list the page runtime dumps) and reports:

- `uncatalogued_steps`: every input step whose screen no catalogue marker names, or whose screen is
  catalogued without the input (typing, ENTER) the step needs, or whose tapped control shows money
  words (去支付, 确定 …) its entry does not vouch for by stating the label — a false block waiting to
  happen;
- `suggest`: catalogue entries for the screens seen — per route, the ids drawn on that route in
  every render and on no other route, plus the page title where it never changes; a control that
  shows money words is listed with the label it shows (`{resource_id: continue_pay, text: 去支付}`).

Browser-free means presence, not layout: whether a marker is on screen after a scroll is settled
by certify on virtual phones (tests/test_certify_farm.py).
"""

from __future__ import annotations

import copy
import sys
from collections.abc import Iterator
from dataclasses import dataclass, field
from typing import Any

from clones.base import get_clone
from clones.dom_plan import DomPlanRunner
from devices.farm.interlock_policy import Recognised
from devices.farm.stop_labels import money_reading, own_texts, reading_order, subtree_readings
from realbench.errors import RealbenchError
from realbench.hierarchy import Node, Selector
from realbench.recipes import BackStep, ScrollStep, TapStep, TypeTextStep
from realbench.taskpack import PlanStep, SafeInput, SafeScreen, Task, TaskPack, instantiate_from_fixture

TITLE_SUFFIX = "title"  # a screen's fixed header title (page_title, h5_title): drawn once, never scrolled
MARKERS_PER_SCREEN = 4


@dataclass
class StepOnScreen:
    """One input step of a recipe and the screen it lands on."""

    task: str
    where: str  # "setup.2", "golden.0", "probe_via.0"
    route: str
    needs: SafeInput | None  # beyond a touch
    nodes: list[Node] = field(repr=False, default_factory=list)
    target: Node | None = field(repr=False, default=None)  # the control a tap lands on

    def describe(self) -> str:
        need = f" (needs {self.needs.value})" if self.needs else ""
        return f"{self.task} {self.where} on screen {self.route!r}{need}"


def _needs(step: PlanStep) -> SafeInput | None:
    if step.type is not None:
        text = step.type if isinstance(step.type, str) else step.type.text
        return SafeInput.ENTER if "\n" in text else SafeInput.TEXT
    if step.key is not None and str(step.key) == "enter":
        return SafeInput.ENTER
    return None


def _is_input(step: PlanStep) -> bool:
    return any(
        getattr(step, k, None) is not None for k in ("tap", "long_press", "type", "scroll_to", "key", "swipe")
    ) and not (step.key is not None and str(step.key) in ("back", "home", "recent"))


def trace(pack: TaskPack, tasks: list[Task], fixture: Any) -> Iterator[StepOnScreen]:
    """Every input step of the tasks' real recipes, on the screen it lands on."""
    clone = get_clone(pack.clone)
    for task in tasks:
        inst = instantiate_from_fixture(task, 0, task.clone.setup.clock.date(), fixture)
        state = clone.build_state(task.clone.setup, inst.params)
        runner = DomPlanRunner(clone, copy.deepcopy(state), inst.params, inst.boundary())

        def here(
            where: str,
            needs: SafeInput | None,
            tapped: Selector | None = None,
            r: DomPlanRunner = runner,
            t: Task = task,
        ) -> StepOnScreen:
            nodes = [d.node for d in r.nodes]
            return StepOnScreen(t.id, where, r.route, needs, nodes, _target(r, tapped))

        try:
            for i, s in enumerate(task.real.setup):
                if isinstance(s, TapStep):
                    yield here(f"setup.{i}", None, s.selector.format(inst.params))
                    runner.tap(s.selector.format(inst.params))
                elif isinstance(s, TypeTextStep):
                    yield here(f"setup.{i}", SafeInput.TEXT)
                    if s.into is not None:
                        runner.tap(s.into.format(inst.params))
                    runner.type_text(s.text)
                elif isinstance(s, ScrollStep):
                    yield here(f"setup.{i}", None)
                elif isinstance(s, BackStep):
                    runner.step(PlanStep.model_validate({"key": "back"}))
            plan = task.real.golden
            for i, step in enumerate(plan):
                last_commit = i == len(plan) - 1 and bool(task.real.boundary)
                if _is_input(step) and not last_commit:
                    tapped = step.tap or step.long_press
                    yield here(f"golden.{i}", _needs(step), tapped.format(inst.params) if tapped else None)
                runner.step(step)
                if runner.finished:
                    break
        except RealbenchError as exc:
            yield StepOnScreen(
                task.id,
                f"(plan does not run on the clone: {exc.message.splitlines()[0]})",
                runner.route,
                None,
            )


def probe_trace(pack: TaskPack, task: Task, fixture: Any) -> Iterator[StepOnScreen]:
    """The steps around the logged-in probe, from the app's start screen."""
    clone = get_clone(pack.clone)
    inst = instantiate_from_fixture(task, 0, task.clone.setup.clock.date(), fixture)
    runner = DomPlanRunner(clone, clone.build_state(task.clone.setup, inst.params), inst.params)
    for name in ("probe_via", "probe_back"):
        for i, s in enumerate(getattr(pack.real_app, name)):
            if isinstance(s, TapStep):
                nodes = [d.node for d in runner.nodes]
                yield StepOnScreen(
                    "(probe)", f"{name}.{i}", runner.route, None, nodes, _target(runner, s.selector)
                )
                try:
                    runner.tap(s.selector)
                except RealbenchError as exc:
                    yield StepOnScreen(
                        "(probe)", f"{name}.{i}: {exc.message.splitlines()[0]}", runner.route, None
                    )
                    return


def _takes_touch(node: Node) -> bool:
    return node.clickable or node.long_clickable or "EditText" in node.class_name


def _target(runner: DomPlanRunner, selector: Selector | None) -> Node | None:
    """The control a tap on `selector` activates (the node or its nearest clickable ancestor)."""
    if selector is None:
        return None
    try:
        dom = runner.find(selector)
    except RealbenchError:
        return None
    return next((d.node for d in (dom, *dom.ancestors()) if _takes_touch(d.node)), None)


def shows_money_words(node: Node) -> bool:
    """Whether the guard reads a money act in the control's label (devices.farm.stop_labels)."""
    return money_reading(subtree_readings(node)) is not None


def unvouched_money_words(target: Node, recognised: Recognised) -> Node | None:
    """A node of the tapped control (itself, or a leaf inside it: a row's `… · 转账` line) whose
    label the guard reads as money words and the recognised entries do not vouch for (the node,
    or a control it sits in), as `devices.farm.interlock.money_word_controls` reads them."""
    for n in (target, *target.descendants()):
        if n.children and not (n.clickable or n.long_clickable):
            continue
        if money_reading((*own_texts(n), *subtree_readings(n))) is None:
            continue
        holders = (n, *(a for a in n.ancestors() if a.clickable or a.long_clickable))
        if not any(recognised.vouches_for(h) for h in holders):
            return n
    return None


def shown_label(node: Node) -> str:
    """The control's visible text as a reader meets it (what a catalogue entry states)."""
    return "".join(n.text for n in reading_order([node, *node.descendants()]) if n.text).strip()


def control_pattern(rid: str) -> str:
    """A catalogue control for an id: rows drawn from data (`payee_p6`, `day_2026-03-05`,
    `stop_arr_上海虹桥`) become their prefix and `*`."""
    cut = next((i for i, c in enumerate(rid) if c.isdigit() or not c.isascii()), None)
    if cut is None or cut < 3:
        return rid
    return rid[:cut] + "*"


def recognised_by(catalogue: list[SafeScreen], nodes: list[Node]) -> list[SafeScreen]:
    return [s for s in catalogue if any(sel.matches(n) for sel in s.markers for n in nodes)]


def uncatalogued_steps(pack: TaskPack, tasks: list[Task], fixture: Any) -> list[str]:
    """The recipe steps the pack's catalogue would refuse (empty: no false block is expected)."""
    catalogue = list(pack.real_app.safe_screens)
    steps = list(trace(pack, tasks, fixture))
    if tasks:
        steps += list(probe_trace(pack, tasks[0], fixture))
    problems: list[str] = []
    for st in steps:
        if not st.nodes:
            problems.append(st.describe())
            continue
        screens = recognised_by(catalogue, st.nodes)
        if not screens:
            problems.append(f"{st.describe()}: no safe_screens entry recognises it")
        elif st.needs is not None and not any(st.needs in s.allow for s in screens):
            names = ", ".join(s.name for s in screens)
            problems.append(f"{st.describe()}: catalogued as {names} without `{st.needs.value}`")
        elif st.target is not None and not Recognised(tuple((s, ()) for s in screens)).knows_control(
            st.target
        ):
            names = ", ".join(s.name for s in screens)
            problems.append(f"{st.describe()}: control {st.target.short_id!r} is not in {names}'s `controls`")
        elif (
            st.target is not None
            and (words := unvouched_money_words(st.target, Recognised(tuple((s, ()) for s in screens))))
            is not None
        ):
            names = ", ".join(s.name for s in screens)
            problems.append(
                f"{st.describe()}: control {st.target.short_id!r} shows money words "
                f"({shown_label(words)!r}); {names}'s `controls` must state that label"
            )
    return problems


@dataclass
class _Route:
    ids: list[str] | None = None  # in document order, drawn in every render
    titles: set[tuple[str, str]] | None = None
    needs: set[SafeInput] = field(default_factory=set)
    controls: set[str] = field(default_factory=set)
    stated: dict[str, str] = field(default_factory=dict)  # id -> label, for controls with money words


def suggest(pack: TaskPack, tasks: list[Task], fixture: Any) -> list[SafeScreen]:
    """Catalogue entries for every screen the recipes touch."""
    routes: dict[str, _Route] = {}
    drawn: dict[str, set[str]] = {}
    steps = list(trace(pack, tasks, fixture))
    if tasks:
        steps += list(probe_trace(pack, tasks[0], fixture))
    for st in steps:
        if not st.nodes:
            continue
        ids = [n.short_id for n in st.nodes if n.short_id]
        once = {i for i in ids if ids.count(i) == 1}
        titles = {
            (n.short_id, n.text)
            for n in st.nodes
            if n.short_id.endswith(TITLE_SUFFIX) and n.short_id in once and n.text.strip()
        }
        r = routes.setdefault(st.route, _Route())
        r.ids = ids if r.ids is None else [i for i in r.ids if i in set(ids)]
        r.titles = titles if r.titles is None else r.titles & titles
        if st.needs is not None:
            r.needs.add(st.needs)
        r.controls |= {control_pattern(n.short_id) for n in st.nodes if n.short_id and _takes_touch(n)}
        r.stated |= {
            n.short_id: shown_label(n)
            for n in st.nodes
            if n.short_id and _takes_touch(n) and shows_money_words(n) and shown_label(n)
        }
        drawn.setdefault(st.route, set()).update(ids)
    out: list[SafeScreen] = []
    for route, r in sorted(routes.items()):
        others = set().union(*(v for k, v in drawn.items() if k != route))
        unique = list(dict.fromkeys(i for i in (r.ids or []) if i not in others))
        # ids without digits first: list rows (payee_p6, day_2026-03-16) follow the account's data
        unique = [i for i in unique if not any(c.isdigit() for c in i)] or unique
        picks = (
            unique[: MARKERS_PER_SCREEN - 1] + unique[-1:] if len(unique) >= MARKERS_PER_SCREEN else unique
        )
        markers = [Selector(resource_id=i) for i in dict.fromkeys(picks)]
        markers += [Selector(resource_id=i, text=t) for i, t in sorted(r.titles or ())]
        if not markers:
            continue
        kept = sorted(
            c
            for c in r.controls
            if not any(o != c and o.endswith("*") and c.startswith(o[:-1]) for o in r.controls)
        )
        # a control with money words is vouched for only by the label it shows: state it
        controls: list[str | Selector] = [c for c in kept if c not in r.stated] + [
            Selector(resource_id=i, text=t) for i, t in sorted(r.stated.items())
        ]
        out.append(SafeScreen(name=route, when=markers, allow=sorted(r.needs, key=str), controls=controls))
    return out


def _control_yaml(control: str | Selector) -> str:
    if isinstance(control, Selector):
        return (
            "{" + ", ".join(f"{k}: {v}" for k, v in control.model_dump(exclude_defaults=True).items()) + "}"
        )
    return f"'{control}'" if control.endswith("*") else control


def _yaml(screens: list[SafeScreen]) -> str:
    lines = ["  safe_screens:"]
    for s in screens:
        when = ", ".join(
            "{" + ", ".join(f"{k}: {v}" for k, v in m.model_dump(exclude_defaults=True).items()) + "}"
            for m in s.markers
        )
        allow = ", ".join(a.value for a in s.allow)
        controls = ", ".join(_control_yaml(c) for c in s.controls)
        lines.append(f"    - {{name: {s.name}, when: [{when}], allow: [{allow}],")
        lines.append(f"       controls: [{controls}]}}")
    return "\n".join(lines)


def main(argv: list[str]) -> int:
    """`python -m devices.farm.screen_catalogue PACK_DIR [RIG]`: the steps the catalogue would
    refuse, then suggested entries (YAML) for every screen the recipes touch."""
    from devices.certify_sample import runnable_tasks
    from devices.rig import load_rig
    from realbench.taskpack import load_pack

    pack = load_pack(argv[0])
    rig = load_rig(argv[1] if len(argv) > 1 else "rigs/virtual.yaml")
    fixture = {a.app: a.fixture for a in rig.accounts}.get(pack.real_app.package)
    tasks = runnable_tasks(pack, fixture)
    for problem in uncatalogued_steps(pack, tasks, fixture):
        print(f"# refused: {problem}")
    print(_yaml(suggest(pack, tasks, fixture)))
    return 0


if __name__ == "__main__":
    raise SystemExit(main(sys.argv[1:]))
