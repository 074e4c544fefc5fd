"""Golden plans played on a clone's rendered HTML (no browser), for the contract tests."""

from __future__ import annotations

from clones.base import Clone, State, snapshot
from clones.contracts import GoldenRun
from clones.dom_plan import run_plan
from realbench.taskpack import Task, TaskInstance


def instance_of(task: Task, seed: int = 0) -> TaskInstance:
    return task.instantiate(seed, task.clone.setup.clock.date())


def play(clone: Clone, instance: TaskInstance, state: State | None = None) -> tuple[State, State, str | None]:
    """(before, after, answer) of the instance's golden plan from its start (or the given) state."""
    start = state if state is not None else clone.build_state(instance.task.clone.setup, instance.params)
    before = snapshot(start)
    run = run_plan(clone, start, instance)
    return before, run.after, run.answer


def golden_run(clone: Clone, instance: TaskInstance) -> GoldenRun:
    before, after, answer = play(clone, instance)
    return GoldenRun(clone, instance, before, after, answer, lambda inst, state: play(clone, inst, state))
