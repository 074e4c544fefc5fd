"""What a task's golden plan does to the account, computed on the clone.

The clone is the ground truth of what a plan changes: its golden plan runs step by step on the
clone (browser-free, `clones.dom_plan`) and the account part of the state (``user``) is diffed after
every step. A step that changes the account is *guarded* when it crosses one of the task's commit
boundaries (on a real phone the interlock never sends it) or comes after such a step; any other
change would reach a real account unguarded.
"""

from __future__ import annotations

import copy
from dataclasses import dataclass, field

from clones.base import Clone, diff
from clones.dom_plan import PlanStepError, initial_state, instantiate, plan_runner
from realbench.errors import PackProblem
from realbench.taskpack import Task

ACCOUNT_KEY = "user"


@dataclass(frozen=True)
class AccountChange:
    """One account field the plan changed, and the plan step (1-based) that changed it."""

    step: int
    path: str
    guarded: bool


@dataclass
class TaskEffect:
    task_id: str
    changes: list[AccountChange] = field(default_factory=list)
    boundary_step: int | None = None
    error: str | None = None

    @property
    def changes_account(self) -> bool:
        return bool(self.changes)

    @property
    def unguarded(self) -> list[AccountChange]:
        return [c for c in self.changes if not c.guarded]

    @property
    def first_unguarded(self) -> AccountChange | None:
        return next(iter(self.unguarded), None)


def task_effect(clone: Clone, task: Task, seed: int = 0) -> TaskEffect:
    """Run `task`'s golden plan on the clone and record every account change, step by step."""
    effect = TaskEffect(task.id)
    instance = instantiate(task, seed)
    runner = plan_runner(clone, initial_state(clone, instance), instance)
    for number, step in enumerate(task.golden, 1):
        account = copy.deepcopy(runner.state.get(ACCOUNT_KEY, {}))
        try:
            runner.step(step)
        except PlanStepError as exc:
            effect.error = f"step {number}: {exc.message}"
            break
        if runner.crossed and effect.boundary_step is None:
            effect.boundary_step = number
        guarded = effect.boundary_step is not None
        for change in diff(account, runner.state.get(ACCOUNT_KEY, {})):
            if change["path"].split("/")[1] in clone.device_local_state:
                continue
            effect.changes.append(AccountChange(number, f"/{ACCOUNT_KEY}{change['path']}", guarded))
        if runner.finished:
            break
    return effect


def effect_problems(clone: Clone, task: Task) -> list[PackProblem]:
    """check-pack's rule: a real-allowed task changes the account only behind a commit boundary."""
    if not task.real.allowed:
        return []
    effect = task_effect(clone, task)
    if effect.error is not None:
        return [
            PackProblem(
                task.id,
                "golden",
                f"the golden plan does not run on the clone ({effect.error}): its effect on the account is unknown",
            )
        ]
    first = effect.first_unguarded
    if first is None:
        return []
    return [
        PackProblem(
            task.id,
            "real",
            f"the golden plan changes account state {first.path} at step {first.step} with no commit boundary "
            "before it: declare the committing control in real.boundary, or set real: {allowed: false, why: ...}",
        )
    ]
