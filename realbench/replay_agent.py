"""The replay agent: re-issues a recorded action trace, step by step.

Used by the reproducibility screen (replay a clone trace k times; a verdict that flips marks a
flaky environment or verifier) and to re-run a trajectory on another target.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

from realbench.actions import Action, Terminate, TerminateStatus, parse_action
from realbench.agent import AgentStep, HistoryItem
from realbench.observation import Observation
from realbench.taskpack import TaskInstance


class ReplayAgent:
    """Replays `actions` (Action values or their JSON dicts); terminates when they run out."""

    def __init__(self, actions: Sequence[Action | dict[str, Any]], name: str = "replay") -> None:
        self._actions: list[Action] = [parse_action(a) for a in actions]
        self._name = name
        self._next = 0

    @property
    def name(self) -> str:
        return self._name

    def reset(self, instance: TaskInstance) -> None:
        self._next = 0

    def act(self, observation: Observation, history: list[HistoryItem]) -> AgentStep:
        if self._next >= len(self._actions):
            return AgentStep(action=Terminate(status=TerminateStatus.SUCCESS), raw="(end of recorded trace)")
        action = self._actions[self._next]
        self._next += 1
        return AgentStep(action=action, raw="(replayed)")
