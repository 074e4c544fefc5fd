"""Synthetic policies (named ``synthetic:NAME``): the golden plan executed with a seeded skill model.

For demos and pipeline tests only. They are not models, and every result they produce carries
their ``synthetic:`` name (the agent name is recorded with each episode, and every step's
``extra`` says ``synthetic: true``).

Skill model. For task t with difficulty d (1–4), the probability that an episode runs the plan
cleanly is

    p(t) = sigmoid(intercept − slope·(d − 1) + u_t + g_t)

where u_t ~ N(0, task_sd²) is a per-task effect drawn from a generator seeded by (effect_seed,
task id) — shared by every profile with the same effect_seed, so "base" and "trained" agree on
which tasks are intrinsically hard — and g_t ~ N(gain_mean, gain_sd²) is a per-task training gain
drawn from a generator seeded by (gain_seed, task id): zero for "base", positive on average for
"trained" but varying across tasks (on some tasks training barely helps or hurts).

Each episode draws from a generator seeded by (policy, task id, instance seed, run seed): with
probability p(t) the plan runs cleanly; otherwise one realistic mistake happens at a random point
of the plan: `wrong_item` (taps a neighbouring control instead of the planned one), `wrong_value`
(types or answers a slightly wrong value — a wrong date, a wrong number), `wandering` (a few
aimless taps, swipes or a back press before carrying on) or `early_terminate` (declares success or
answers before the plan is done). A mistake does not guarantee failure (a stray tap may land on
something harmless), so realised success rates are at least p(t).
"""

from __future__ import annotations

import hashlib
import logging
import math
import re
from enum import StrEnum
from typing import Any

import numpy as np
from pydantic import BaseModel, ConfigDict, Field

from realbench.actions import (
    Action,
    Answer,
    Click,
    Key,
    KeyPress,
    LongPress,
    Swipe,
    Terminate,
    TerminateStatus,
    Type,
    Wait,
)
from realbench.agent import AgentStep, HistoryItem
from realbench.errors import RealbenchError, UnknownNameError
from realbench.golden import GoldenAgent, PlanError, to_normalised
from realbench.hierarchy import Hierarchy, Node
from realbench.observation import Observation
from realbench.taskpack import AnswerType, TaskInstance, TypeStep

log = logging.getLogger(__name__)

SYNTHETIC_PREFIX = "synthetic:"


class Mistake(StrEnum):
    WRONG_ITEM = "wrong_item"
    WRONG_VALUE = "wrong_value"
    WANDERING = "wandering"
    EARLY_TERMINATE = "early_terminate"


class SkillModel(BaseModel):
    """Parameters of the skill model in the module docstring (logit scale)."""

    model_config = ConfigDict(extra="forbid", frozen=True)

    intercept: float
    difficulty_slope: float = Field(default=1.0, ge=0)
    task_sd: float = Field(default=0.8, ge=0)
    effect_seed: int = 1
    gain_mean: float = 0.0
    gain_sd: float = Field(default=0.0, ge=0)
    gain_seed: int = 2
    mistake_weights: dict[Mistake, float] = Field(
        default_factory=lambda: {
            Mistake.WRONG_ITEM: 0.35,
            Mistake.WRONG_VALUE: 0.25,
            Mistake.WANDERING: 0.25,
            Mistake.EARLY_TERMINATE: 0.15,
        }
    )


PROFILES: dict[str, SkillModel] = {
    # a plausible pre-RL checkpoint: good on easy tasks, poor on long ones
    "base": SkillModel(intercept=1.4),
    # the same agent after training on clones: better on average, unevenly across tasks (a few worse).
    # The gain is about +26 points over the pack, the size a study needs before its retention is
    # worth estimating: with +14 the demo's 27 phone tasks left the clone gain's interval across 0 in
    # some draws, and the headline was "not estimable" by chance (docs/benchmarks.md, the demo study).
    "trained": SkillModel(intercept=1.4, gain_mean=1.8, gain_sd=1.0),
    "weak": SkillModel(intercept=-0.5),
    "strong": SkillModel(intercept=3.5, difficulty_slope=0.5),
}


def _stable_seed(*parts: object) -> int:
    digest = hashlib.sha256("\x1f".join(str(p) for p in parts).encode()).digest()
    return int.from_bytes(digest[:8], "little")


def _sigmoid(x: float) -> float:
    return 1.0 / (1.0 + math.exp(-x))


def task_effect(model: SkillModel, task_id: str) -> float:
    if model.task_sd == 0:
        return 0.0
    return float(
        np.random.default_rng(_stable_seed("effect", model.effect_seed, task_id)).normal(0, model.task_sd)
    )


def task_gain(model: SkillModel, task_id: str) -> float:
    if model.gain_mean == 0 and model.gain_sd == 0:
        return 0.0
    rng = np.random.default_rng(_stable_seed("gain", model.gain_seed, task_id))
    return float(rng.normal(model.gain_mean, model.gain_sd))


def skill(model: SkillModel, task_id: str, difficulty: int) -> float:
    """p(t): the probability of a clean run of task `task_id`."""
    logit = model.intercept - model.difficulty_slope * (difficulty - 1)
    return _sigmoid(logit + task_effect(model, task_id) + task_gain(model, task_id))


def _perturb(text: str, rng: np.random.Generator) -> str:
    """A plausible wrong value: one digit changed (a wrong date, price or train), else a char dropped."""
    digits = [m.start() for m in re.finditer(r"\d", text)]
    if digits:
        i = int(rng.choice(digits))
        d = int(text[i])
        new = (d + int(rng.choice([1, 9]))) % 10
        return text[:i] + str(new) + text[i + 1 :]
    if len(text) > 1:
        i = int(rng.integers(len(text)))
        return text[:i] + text[i + 1 :]
    return text + text


class SyntheticPolicy:
    """`synthetic:NAME`: GoldenAgent plus the skill model. Deterministic per (seed, instance)."""

    def __init__(self, profile: str, *, seed: int = 0, model: SkillModel | None = None) -> None:
        if model is None:
            if profile not in PROFILES:
                raise UnknownNameError("synthetic policy", profile, list(PROFILES))
            model = PROFILES[profile]
        self.profile = profile
        self.model = model
        self.seed = seed
        self._golden = GoldenAgent(name=self.name)
        self._instance: TaskInstance | None = None
        self._rng = np.random.default_rng(0)
        self._mistake: Mistake | None = None
        self._trigger = 0
        self._ordinal = 0
        self._queued: list[Action] = []
        self._applied = False
        self.p_clean = 1.0

    @property
    def name(self) -> str:
        return f"{SYNTHETIC_PREFIX}{self.profile}"

    def reset(self, instance: TaskInstance) -> None:
        task = instance.task
        self._instance = instance
        self._golden.reset(instance)
        self._rng = np.random.default_rng(_stable_seed(self.name, task.id, instance.seed, self.seed))
        self.p_clean = skill(self.model, task.id, task.difficulty)
        self._queued = []
        self._ordinal = 0
        self._applied = False
        self._mistake = None
        if self._rng.random() >= self.p_clean:
            kinds = self._applicable()
            weights = np.array([self.model.mistake_weights.get(k, 0.0) for k in kinds], dtype=float)
            if weights.sum() <= 0:
                weights = np.ones(len(kinds))
            self._mistake = kinds[int(self._rng.choice(len(kinds), p=weights / weights.sum()))]
            if self._mistake is Mistake.WRONG_ITEM:
                # which of the plan's taps goes wrong
                slots = sum(
                    s.tap is not None
                    or s.long_press is not None
                    or (isinstance(s.type, TypeStep) and s.type.into is not None)
                    for s in task.golden
                )
            elif self._mistake is Mistake.WRONG_VALUE:
                # which of the typed values (or the answer) is wrong
                slots = sum(s.type is not None or s.answer is not None for s in task.golden)
            else:
                # after how many plan actions the agent wanders off or stops
                slots = len(task.golden) - 1
            self._trigger = int(self._rng.integers(0, max(1, slots)))

    def _applicable(self) -> list[Mistake]:
        assert self._instance is not None
        task = self._instance.task
        kinds = [Mistake.WANDERING]
        if any(s.tap is not None or s.long_press is not None for s in task.golden):
            kinds.append(Mistake.WRONG_ITEM)
        if any(s.type is not None for s in task.golden) or task.answer.type is not AnswerType.NONE:
            kinds.append(Mistake.WRONG_VALUE)
        if len(task.golden) > 1:
            kinds.append(Mistake.EARLY_TERMINATE)
        return kinds

    # --- acting ----------------------------------------------------------------------------

    def act(self, observation: Observation, history: list[HistoryItem]) -> AgentStep:
        try:
            action, note = self._next(observation)
        except PlanError as exc:
            # the plan cannot continue on this screen (often after an earlier mistake): give up
            action, note = Terminate(status=TerminateStatus.FAILURE), f"lost: {exc.message}"
        except RealbenchError as exc:
            action, note = Terminate(status=TerminateStatus.FAILURE), f"lost: {exc.message}"
        return AgentStep(
            action=action,
            raw="",
            thought=f"[{self.name}] {note}",
            extra={
                "synthetic": True,
                "policy": self.name,
                "p_clean": round(self.p_clean, 4),
                "mistake": self._mistake.value if self._mistake else None,
            },
        )

    def _next(self, obs: Observation) -> tuple[Action, str]:
        if self._queued:
            return self._queued.pop(0), "wandering"
        planned = self._golden.next_action(obs)
        if isinstance(planned, Wait) or self._mistake is None or self._applied:
            return planned, "plan"
        if self._mistake is Mistake.WRONG_ITEM:
            counts = isinstance(planned, Click | LongPress)
        elif self._mistake is Mistake.WRONG_VALUE:
            counts = isinstance(planned, Type | Answer)
        else:
            counts = True
        if counts or planned.is_final:
            ordinal = self._ordinal
            self._ordinal += 1
            if ordinal < self._trigger and not planned.is_final:
                return planned, "plan"
        else:
            return planned, "plan"
        changed = self._apply(self._mistake, planned, obs)
        if changed is None:
            return planned, "plan"
        self._applied = True
        return changed, f"mistake: {self._mistake.value}"

    def _apply(self, kind: Mistake, planned: Action, obs: Observation) -> Action | None:
        """The mistaken action in place of `planned`, or None when this step does not suit the mistake."""
        rng = self._rng
        if planned.is_final and kind is not Mistake.WRONG_VALUE:
            # the plan is done but the mistake never happened: the agent fails to notice it is
            # done and wanders until the step budget runs out
            self._queued = [self._random_action(obs) for _ in range(200)]
            return self._queued.pop(0)
        if kind is Mistake.WRONG_ITEM and isinstance(planned, Click | LongPress):
            return self._neighbour_tap(planned, obs)
        if kind is Mistake.WRONG_VALUE:
            if isinstance(planned, Type):
                return Type(text=_perturb(planned.text, rng))
            if isinstance(planned, Answer):
                return Answer(text=_perturb(planned.text, rng))
            return None
        if kind is Mistake.WANDERING:
            extra = [self._random_action(obs) for _ in range(int(rng.integers(2, 5)))]
            self._queued = extra[1:] + [planned]
            return extra[0]
        if kind is Mistake.EARLY_TERMINATE:
            assert self._instance is not None
            if self._instance.task.answer.type is not AnswerType.NONE:
                return Answer(text=self._visible_text(obs) or "不知道")
            return Terminate(status=TerminateStatus.SUCCESS)
        return None

    def _nodes(self, obs: Observation) -> list[Node]:
        if not obs.hierarchy:
            return []
        try:
            return [
                n for n in Hierarchy(obs.hierarchy).nodes if n.clickable and n.enabled and not n.bounds.empty
            ]
        except RealbenchError:
            return []

    def _neighbour_tap(self, planned: Click | LongPress, obs: Observation) -> Action:
        """A tap on the clickable control most like the planned one (same class, similar size,
        close by) — the way a model picks the wrong row of a list or the wrong day of a calendar."""
        width, height = obs.screenshot.width, obs.screenshot.height
        px, py = planned.x * (width - 1) / 1000, planned.y * (height - 1) / 1000
        nodes = self._nodes(obs)
        target = next((n for n in reversed(nodes) if n.bounds.contains(px, py)), None)
        others = [n for n in nodes if n is not target and not n.bounds.contains(px, py)]
        if not others:
            x = int(self._rng.integers(0, 1001))
            y = int(self._rng.integers(0, 1001))
            return Click(x=x, y=y)

        def distance(n: Node) -> float:
            cx, cy = n.bounds.center
            d = math.hypot(cx - px, cy - py) / max(width, height)
            if target is not None:
                d += 0.5 * (n.class_name != target.class_name)
                d += 0.5 * abs(n.bounds.height - target.bounds.height) / max(1, target.bounds.height)
            return d

        ranked = sorted(others, key=distance)[:3]
        pick = ranked[int(self._rng.integers(len(ranked)))]
        x, y = to_normalised(*pick.bounds.center, width, height)
        return Click(x=x, y=y) if isinstance(planned, Click) else LongPress(x=x, y=y)

    def _random_action(self, obs: Observation) -> Action:
        rng = self._rng
        roll = rng.random()
        nodes = self._nodes(obs)
        if roll < 0.6 and nodes:
            node = nodes[int(rng.integers(len(nodes)))]
            x, y = to_normalised(*node.bounds.center, obs.screenshot.width, obs.screenshot.height)
            return Click(x=x, y=y)
        if roll < 0.9:
            up = bool(rng.random() < 0.5)
            return Swipe(x=500, y=700 if up else 300, x2=500, y2=300 if up else 700)
        return KeyPress(key=Key.BACK)

    def _visible_text(self, obs: Observation) -> str:
        if not obs.hierarchy:
            return ""
        try:
            texts = [n.text for n in Hierarchy(obs.hierarchy).nodes if n.text.strip()]
        except RealbenchError:
            return ""
        return texts[int(self._rng.integers(len(texts)))] if texts else ""


def describe_profiles() -> dict[str, dict[str, Any]]:
    return {name: model.model_dump(mode="json") for name, model in PROFILES.items()}
