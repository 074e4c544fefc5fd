"""Shared helpers for the train-ticketing tests: task instances for every parameter value, and
golden plans run against the rendered HTML (no browser)."""

from __future__ import annotations

import itertools
from typing import Any

from clones.base import get_clone, snapshot
from clones.dom_plan import PlanRun, instantiate, run_plan
from realbench.taskpack import (
    ChoiceParam,
    IntParam,
    RelativeDateParam,
    StateParam,
    Task,
    TaskInstance,
    load_pack,
)

PACK = load_pack("taskpacks/train_ticketing")
CLONE = get_clone("train_ticketing")


# Seeds of a task whose parameters are drawn from its start state (they have no finite list).
SAMPLED_SEEDS = range(6)


def instances(task: Task) -> list[TaskInstance]:
    """One instance per combination of parameter values (dates resolved against the task's clock);
    a task with a ``from_state`` parameter gets one instance per seed of `SAMPLED_SEEDS`."""
    if any(isinstance(spec, StateParam) for spec in task.params.values()):
        return [instantiate(task, seed) for seed in SAMPLED_SEEDS]
    names = list(task.params)
    choices: list[list[Any]] = []
    for spec in task.params.values():
        if isinstance(spec, RelativeDateParam):
            choices.append(list(spec.exprs))
        elif isinstance(spec, ChoiceParam):
            choices.append(list(spec.values))
        elif isinstance(spec, IntParam):
            choices.append(list(range(spec.min, spec.max + 1)))
    return [
        instantiate(task, 0, dict(zip(names, combo, strict=True))) for combo in itertools.product(*choices)
    ]


def play(instance: TaskInstance, state: dict[str, Any] | None = None) -> tuple[dict[str, Any], PlanRun]:
    """(before, run) for the instance's golden plan from its initial (or the given) state."""
    task = instance.task
    start = state if state is not None else CLONE.build_state(task.clone.setup, instance.params)
    before = snapshot(start)
    return before, run_plan(CLONE, start, instance)


def verdict(instance: TaskInstance, before: dict[str, Any], after: dict[str, Any], answer: str | None):
    task = instance.task
    return CLONE.verify(task.clone.verifier.name, before, after, instance.verifier_args, answer, task.answer)
