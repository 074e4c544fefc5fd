"""Replays recorded action traces on the headless clone: the reproducibility screen's replayer."""

from __future__ import annotations

import logging
from contextlib import ExitStack
from pathlib import Path
from typing import Any

from realbench.episode import run_episode
from realbench.replay import ReplayAgent
from realbench.taskpack import TaskPack, load_pack

log = logging.getLogger(__name__)


class CloneReplayer:
    """`(task_id, actions, seed) -> success` on a fresh clone session of the task, each call.

    Starts its clone server and browser on first use; `close()` stops them.
    """

    def __init__(self, pack: TaskPack | str | Path, *, scale: float = 1.0) -> None:
        self.pack = pack if isinstance(pack, TaskPack) else load_pack(pack)
        self.scale = scale
        self._stack: ExitStack | None = None
        self._target: Any = None

    def _ensure(self) -> Any:
        if self._target is None:
            from clones.server import CloneServer
            from devices.clone_device import CloneTarget, launch_browser

            stack = ExitStack()
            server = stack.enter_context(CloneServer())
            browser = stack.enter_context(launch_browser())
            self._target = CloneTarget(self.pack, server.url, browser=browser, scale=self.scale)
            stack.callback(self._target.teardown)
            self._stack = stack
        return self._target

    def __call__(self, task_id: str, actions: list[dict[str, Any]], seed: int = 0) -> bool:
        task = self.pack.task(task_id)
        instance = task.instantiate(seed, task.clone.setup.clock.date())
        result = run_episode(instance, self._ensure(), ReplayAgent(actions))
        log.debug("replayed %s seed %d: %s", task_id, seed, result.outcome)
        return bool(result.success)

    def close(self) -> None:
        if self._stack is not None:
            self._stack.close()
            self._stack = None
            self._target = None

    def __enter__(self) -> CloneReplayer:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()
