"""``policy:PATH``: run an element-policy checkpoint (see `realbench.agents.policy_net`) as an agent.

The agent reads only the observation's hierarchy and the instruction (never the task's plan,
verifier or parameters beyond the instruction text). It clicks a node at its bounds' centre,
types a span of the instruction into the focused field, presses back, or terminates. By default
it acts greedily (the most probable action), so a run is reproducible; ``sample=True`` draws from
the policy with a seeded generator.

Recorded as ``policy:<name>@<first 12 hex of the weights' sha256>``; each step's ``extra`` carries
the checkpoint's training command, so a result names exactly what produced it.
"""

from __future__ import annotations

import hashlib
import logging
from pathlib import Path

import numpy as np

from realbench.actions import Action, Click, Key, KeyPress, Terminate, TerminateStatus, Type
from realbench.agent import AgentStep, HistoryItem
from realbench.agents.policy_features import Kind, Memory, NodeView, RowLabels, build_step
from realbench.agents.policy_net import load_checkpoint, probabilities
from realbench.golden import to_normalised
from realbench.hierarchy import Hierarchy
from realbench.observation import Observation
from realbench.taskpack import TaskInstance

log = logging.getLogger(__name__)

POLICY_PREFIX = "policy:"


def views_of(hierarchy: Hierarchy, *, context: bool = False) -> list[NodeView]:
    """The visible nodes with a non-empty box, as the policy sees them (with their rows' labels
    when the policy reads them)."""
    labels = RowLabels() if context else None
    return [
        NodeView.of(n, i, with_bounds=True, labels=labels)
        for i, n in enumerate(hierarchy.nodes)
        if n.visible and not n.bounds.empty
    ]


class PolicyAgent:
    """An element-policy checkpoint acting on a device's hierarchy."""

    def __init__(self, path: str | Path, *, seed: int = 0, sample: bool = False) -> None:
        self.path = Path(path)
        self.params, self.card = load_checkpoint(self.path)
        self.seed = seed
        self.sample = sample
        self._instruction = ""
        self._max_steps = 20
        self._memory = Memory()
        self._rng = np.random.default_rng(seed)

    @property
    def name(self) -> str:
        return f"{POLICY_PREFIX}{self.card.name}@{self.card.weights_sha256[:12]}"

    def reset(self, instance: TaskInstance) -> None:
        # The instruction and the step budget are all the policy learns of the task.
        self._instruction = instance.instruction
        self._max_steps = instance.task.max_steps
        self._memory = Memory()
        digest = hashlib.sha256(f"{self.seed}\x1f{instance.instruction}\x1f{instance.seed}".encode()).digest()
        self._rng = np.random.default_rng(int.from_bytes(digest[:8], "little"))

    def act(self, observation: Observation, history: list[HistoryItem]) -> AgentStep:
        extra = {
            "policy": self.card.description,
            "trained_by": self.card.command,
            "updates": self.card.updates,
        }
        if not observation.hierarchy:
            return AgentStep(action=None, error="the element policy needs a UI hierarchy", extra=extra)
        hierarchy = Hierarchy(observation.hierarchy)
        shape = self.card.shape
        views = views_of(hierarchy, context=shape.context)
        step = build_step(
            self._instruction, views, self._memory, shape.buckets, self._max_steps, context=shape.context
        )
        p = probabilities(self.params, step)
        index = int(self._rng.choice(len(p), p=p)) if self.sample else int(np.argmax(p))
        cand = step.candidates[index]
        width, height = observation.screenshot.width, observation.screenshot.height
        action: Action
        if cand.kind is Kind.CLICK:
            assert cand.node is not None and cand.node.bounds is not None
            cx, cy = cand.node.bounds.center
            x, y = to_normalised(cx, cy, width, height)
            action = Click(x=x, y=y)
            self._memory.record_click(cand.node, self._instruction)
        elif cand.kind is Kind.TYPE:
            action = Type(text=cand.text)
            self._memory.record(Kind.TYPE, text=cand.text)
        elif cand.kind is Kind.BACK:
            action = KeyPress(key=Key.BACK)
            self._memory.record(Kind.BACK)
        else:
            action = Terminate(status=TerminateStatus.SUCCESS)
            self._memory.record(Kind.TERMINATE)
        extra["p"] = round(float(p[index]), 4)
        return AgentStep(action=action, raw=action.model_dump_json(), extra=extra)
