"""Fake replayers for tests and demos — labelled as fakes: they never touch a clone.

The real replayer (a replay agent driving a headless clone session) satisfies the same
`analysis.selection.Replayer` protocol; these stand in for it where no clone runs.
"""

from __future__ import annotations

from typing import Any

import numpy as np


class FakeDeterministicReplayer:
    """FAKE: returns the fixed verdict given per task; otherwise the status of the trace's final
    ``terminate`` action (as if the clone agreed with the agent), or success iff the trace is non-empty."""

    label = "fake:deterministic"

    def __init__(self, verdicts: dict[str, bool] | None = None) -> None:
        self.verdicts = verdicts or {}
        self.calls: list[str] = []

    def __call__(self, task_id: str, actions: list[dict[str, Any]], seed: int = 0) -> bool:
        self.calls.append(task_id)
        if task_id in self.verdicts:
            return self.verdicts[task_id]
        if actions and actions[-1].get("type") == "terminate":
            return actions[-1].get("status", "success") == "success"
        return bool(actions)


class FakeFlakyReplayer:
    """FAKE: like the deterministic fake, but the verdict of tasks in ``flaky`` flips with
    probability ``flip_p`` on each replay (seeded generator, so a test is reproducible)."""

    label = "fake:flaky"

    def __init__(
        self, verdicts: dict[str, bool], flaky: set[str], flip_p: float = 0.5, seed: int = 0
    ) -> None:
        self.inner = FakeDeterministicReplayer(verdicts)
        self.flaky = set(flaky)
        self.flip_p = flip_p
        self.rng = np.random.default_rng(seed)

    def __call__(self, task_id: str, actions: list[dict[str, Any]], seed: int = 0) -> bool:
        verdict = self.inner(task_id, actions)
        if task_id in self.flaky and self.rng.random() < self.flip_p:
            return not verdict
        return verdict
