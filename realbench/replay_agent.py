"""The replay agent: re-issues a recorded action trace, step by step.

Used by the reproducibility screen (replay a clone trace k times; a verdict that flips marks a
flaky environment or verifier) and to re-run a trajectory on another target: `--agent
replay:STORE` replays a run store's episodes (`StoredEpisodeAgent`).
"""

from __future__ import annotations

from collections.abc import Sequence
from pathlib import Path
from typing import Any

from realbench.actions import Action, Terminate, TerminateStatus, parse_action
from realbench.agent import AgentStep, HistoryItem
from realbench.errors import ConfigError, UnknownNameError
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


class StoredEpisodeAgent:
    """``--agent replay:STORE[#RUN_ID]``: for each task instance, replays the actions of the stored
    episode of the same task and seed (its last scored attempt) from a run store.

    Run with the same pack, ``--seed`` and ``--repeats`` as the stored run, so the instances match.
    A store holding several runs needs ``#RUN_ID``. An instance with no stored episode is a
    configuration error, not an agent failure.
    """

    def __init__(self, spec: str) -> None:
        from realbench.store import RunStore, is_run_store

        location, _, run_id = spec.partition("#")
        path = Path(location)
        if not is_run_store(path):
            raise ConfigError(
                f"replay:{spec}: {path} is not a run store", hint="pass the --out folder of `realbench run`"
            )
        with RunStore(path, create=False) as store:
            runs = [r["run_id"] for r in store.runs()]
            if run_id and run_id not in runs:
                raise UnknownNameError("run", run_id, runs)
            if not run_id:
                if len(runs) != 1:
                    raise ConfigError(
                        f"replay:{spec}: the store holds {len(runs)} runs ({', '.join(runs) or 'none'})",
                        hint=f"name one: --agent 'replay:{location}#RUN_ID'",
                    )
                run_id = runs[0]
            frame = store.episodes_frame([run_id])
            traces: dict[tuple[str, int], list[dict[str, Any]]] = {}
            for row in frame[frame["scored"]].itertuples():  # ordered by attempt: the last one wins
                steps = store.steps(str(row.episode_id))
                traces[(str(row.task), int(row.seed))] = [s["action"] for s in steps if s.get("action")]
        self._traces = traces
        self._name = f"replay:{path.name}#{run_id}"
        self._replay: ReplayAgent | None = None
        self.source_run = run_id

    @property
    def name(self) -> str:
        return self._name

    def reset(self, instance: TaskInstance) -> None:
        actions = self._traces.get((instance.task.id, instance.seed))
        if actions is None:
            raise ConfigError(
                f"{self._name} has no scored episode of task {instance.task.id!r} with seed {instance.seed}",
                hint="replay with the stored run's pack, --seed and --repeats",
            )
        self._replay = ReplayAgent(actions, name=self._name)

    def act(self, observation: Observation, history: list[HistoryItem]) -> AgentStep:
        if self._replay is None:
            raise ConfigError(f"{self._name}: act() before reset()")
        return self._replay.act(observation, history)
