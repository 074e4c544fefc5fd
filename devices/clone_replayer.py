"""Replays recorded action traces on the headless clone: the reproducibility screen's replayer."""

from __future__ import annotations

import logging
import queue
import threading
from contextlib import ExitStack
from pathlib import Path
from typing import Any

from realbench.episode import run_episode
from realbench.replay_agent import ReplayAgent
from realbench.taskpack import TaskPack, load_pack

log = logging.getLogger(__name__)


class CloneReplayer:
    """`(task_id, actions, seed) -> success` on a fresh clone session of the task, each call.

    Holds `workers` headless clone pages (one browser, one clone server, started on first use;
    `close()` stops them); up to `concurrency` calls may run at once from different threads.
    """

    def __init__(self, pack: TaskPack | str | Path, *, scale: float = 1.0, workers: int = 2) -> None:
        self.pack = pack if isinstance(pack, TaskPack) else load_pack(pack)
        self.scale = scale
        self.concurrency = max(1, workers)
        self._stack: ExitStack | None = None
        self._idle: queue.Queue[Any] = queue.Queue()
        self._lock = threading.Lock()

    def _start(self) -> None:
        with self._lock:
            if self._stack is not None:
                return
            from clones.server import CloneServer
            from devices.clone_browser import launch_browser
            from devices.clone_target import CloneTarget

            stack = ExitStack()
            server = stack.enter_context(CloneServer())
            browser = stack.enter_context(launch_browser())
            for _ in range(self.concurrency):
                target = CloneTarget(self.pack, server.url, browser=browser, scale=self.scale)
                stack.callback(target.teardown)
                self._idle.put(target)
            self._stack = stack

    def __call__(self, task_id: str, actions: list[dict[str, Any]], seed: int = 0) -> bool:
        task = self.pack.task(task_id)
        instance = task.instantiate(seed, task.clone.setup.clock.date())
        self._start()
        target = self._idle.get()
        try:
            result = run_episode(instance, target, ReplayAgent(actions))
        finally:
            self._idle.put(target)
        log.debug("replayed %s seed %d: %s", task_id, seed, result.outcome)
        return bool(result.success)

    def close(self) -> None:
        with self._lock:
            if self._stack is not None:
                self._stack.close()
                self._stack = None
                self._idle = queue.Queue()

    def __enter__(self) -> CloneReplayer:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()
