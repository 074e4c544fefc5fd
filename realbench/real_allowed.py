"""Which planned episodes a real run may start: only tasks allowed on a real account.

A task the pack marks ``real: {allowed: false, why: ...}`` (its golden plan changes the account with
no commit boundary before the change, or it would type personal data) is never started on a real
app; the run lists it as skipped with its reason, in summary.json and `realbench show`.
"""

from __future__ import annotations

import logging
from dataclasses import asdict, dataclass

from realbench.store import EpisodeKey
from realbench.taskpack import TaskPack

log = logging.getLogger(__name__)


@dataclass(frozen=True)
class SkippedTask:
    task: str
    reason: str

    def as_dict(self) -> dict[str, str]:
        return asdict(self)


def split_real_allowed(pack: TaskPack, keys: list[EpisodeKey]) -> tuple[list[EpisodeKey], list[SkippedTask]]:
    """(episodes a real run may start, tasks it skips with their reason), in plan order."""
    runnable: list[EpisodeKey] = []
    skipped: dict[str, SkippedTask] = {}
    for key in keys:
        real = pack.task(key.task).real
        if real.allowed:
            runnable.append(key)
        elif key.task not in skipped:
            skipped[key.task] = SkippedTask(key.task, f"not allowed on a real account: {real.why}")
    for s in skipped.values():
        log.info("skipping %s on the real app (%s)", s.task, s.reason)
    return runnable, list(skipped.values())


def real_exclusions(pack: TaskPack) -> dict[str, str]:
    """task → why a real run skips it (what `split_real_allowed` would skip), for every task of the pack.

    `realbench select` leaves these out of the phone sample, with the same reason a run would give."""
    return {
        task.id: f"not allowed on a real account: {task.real.why}"
        for task in pack.tasks
        if not task.real.allowed
    }
