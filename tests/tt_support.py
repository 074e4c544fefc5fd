"""Shared helpers for the train-ticketing tests: task instances for every parameter value, and
golden plans run against the rendered HTML (no browser)."""

from __future__ import annotations

import itertools
from typing import Any

from clones.base import get_clone, snapshot
from clones.train_ticketing.dom_plan import PlanRun, run_plan
from realbench import dates
from realbench.taskpack import RelativeDateParam, Task, TaskInstance, load_pack
from realbench.templating import render

PACK = load_pack("taskpacks/train_ticketing")
CLONE = get_clone("train_ticketing")


def instances(task: Task) -> list[TaskInstance]:
    """One instance per combination of parameter values (dates resolved against the task's clock)."""
    today = task.clone.setup.clock.date()
    names = list(task.params)
    choices: list[list[Any]] = []
    for spec in task.params.values():
        if isinstance(spec, RelativeDateParam):
            choices.append(list(spec.exprs))
        elif spec.type == "choice":
            choices.append(list(spec.values))
        else:
            choices.append(list(range(spec.min, spec.max + 1)))
    out = []
    for combo in itertools.product(*choices):
        values: dict[str, Any] = {}
        for name, raw in zip(names, combo, strict=True):
            if isinstance(task.params[name], RelativeDateParam):
                r = dates.resolve(str(raw), today)
                values.update({name: r.phrase, f"{name}_date": r.iso, f"{name}_md": r.month_day})
            else:
                values[name] = raw
        out.append(
            TaskInstance(task=task, seed=0, params=values, instruction=render(task.instruction, values))
        )
    return out


def play(instance: TaskInstance, state: dict[str, Any] | None = None) -> tuple[dict[str, Any], PlanRun]:
    """(before, run) for the instance's golden plan from its initial (or the given) state."""
    task = instance.task
    start = state if state is not None else CLONE.build_state(task.clone.setup, instance.params)
    before = snapshot(start)
    return before, run_plan(CLONE, start, instance)


def verdict(instance: TaskInstance, before: dict[str, Any], after: dict[str, Any], answer: str | None):
    return CLONE.verify(instance.task.clone.verifier.name, before, after, instance.verifier_args, answer)
