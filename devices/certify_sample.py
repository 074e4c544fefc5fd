"""A small, deterministic set of tasks that exercises everything certify can meet.

Certifying every runnable task of both packs on virtual phones takes about a quarter of an hour on a
2-core machine (`make certify-all`, benchmarks/certify_all.py). `make test` certifies this subset
instead: a greedy cover of every *feature* the runnable tasks have — each app, each setup step kind,
each golden step kind, setup `expect` checks, real checks by kind, a commit boundary, manual
preconditions, each fixture field the parameters come from, each selector attribute — choosing the
cheapest task (fewest recipe steps, then id) that covers something still uncovered.
"""

from __future__ import annotations

from collections.abc import Iterable
from dataclasses import dataclass
from typing import Any

from devices.certify import not_runnable_reason
from realbench.taskpack import Task, TaskPack

SELECTOR_FIELDS = (
    "text",
    "text_contains",
    "text_regex",
    "text_pattern",
    "resource_id",
    "content_desc",
    "class_name",
)


@dataclass(frozen=True)
class SampledTask:
    app: str
    task: str
    covers: frozenset[str]  # the features this task was the cheapest to cover when chosen


def _selector_features(selector: Any) -> set[str]:
    return {f"selector:{f}" for f in SELECTOR_FIELDS if getattr(selector, f, None) is not None}


def task_features(pack: TaskPack, task: Task) -> set[str]:
    """What certifying this task exercises (the strata of the subset)."""
    real = task.real
    feats = {f"app:{pack.app}"}
    for step in real.setup:
        feats.add(f"setup:{step.do}")
        if getattr(step, "activity", None):
            feats.add("setup:wait_for_activity")
        if step.expect:
            feats.add("setup:expect")
        for sel in (getattr(step, "selector", None), getattr(step, "into", None)):
            if sel is not None:
                feats |= _selector_features(sel)
    for plan in real.golden:
        feats.add(f"golden:{plan.kind}")
        for sel in plan.selectors():
            feats |= _selector_features(sel)
        if plan.answer is not None and not isinstance(plan.answer, str):
            feats |= _selector_features(plan.answer.read)
    feats |= {f"check:{c.expect.value}" for c in real.checks}
    if real.boundary:
        feats.add("boundary")
    if real.manual:
        feats.add("manual")
    feats |= {f"fixture:{field.value}" for field in real.fixtures.holds}
    feats |= {f"fixture-param:{name}" for name in real.fixtures.params}
    return feats


def _cost(task: Task) -> int:
    return len(task.real.setup) + len(task.real.golden)


def runnable_tasks(pack: TaskPack, fixture: Any) -> list[Task]:
    """The tasks certify tries on a virtual phone whose account holds `fixture`."""
    return [
        t for t in pack.tasks if not_runnable_reason(t, fixture, virtual=True, confirm_manual=False) is None
    ]


def stratified_subset(packs: Iterable[tuple[TaskPack, Any]]) -> list[SampledTask]:
    """A greedy cover of every feature of the runnable tasks of `packs` ((pack, account fixture)
    pairs); deterministic for the same packs."""
    candidates = [
        (pack.app, task, frozenset(task_features(pack, task)))
        for pack, fixture in packs
        for task in runnable_tasks(pack, fixture)
    ]
    uncovered = set().union(*(feats for _, _, feats in candidates)) if candidates else set()
    chosen: list[SampledTask] = []
    while uncovered:
        app, task, feats = min(
            (c for c in candidates if c[2] & uncovered),
            key=lambda c: (-len(c[2] & uncovered), _cost(c[1]), c[0], c[1].id),
        )
        chosen.append(SampledTask(app, task.id, frozenset(feats & uncovered)))
        uncovered -= feats
    return chosen
