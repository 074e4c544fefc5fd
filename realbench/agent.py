"""The agent protocol: `act(observation, history) -> AgentStep` (an Action plus the raw model text)."""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any, Protocol, runtime_checkable

from realbench.actions import Action
from realbench.observation import Observation
from realbench.taskpack import TaskInstance


@dataclass
class AgentStep:
    """One decision. `action is None` means the model output could not be parsed (a format error)."""

    action: Action | None
    raw: str = ""
    thought: str | None = None
    error: str | None = None
    tokens_in: int = 0
    tokens_out: int = 0
    latency_s: float = 0.0
    extra: dict[str, Any] = field(default_factory=dict)


@dataclass
class HistoryItem:
    """What an agent may remember of an earlier step."""

    index: int
    action: Action | None
    thought: str | None
    observation: Observation | None = None


@runtime_checkable
class Agent(Protocol):
    @property
    def name(self) -> str:
        """Recorded with every episode; synthetic policies are named ``synthetic:*``."""
        ...

    def reset(self, instance: TaskInstance) -> None: ...

    def act(self, observation: Observation, history: list[HistoryItem]) -> AgentStep: ...
