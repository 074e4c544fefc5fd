"""The one episode loop, shared by every target (clone, clone-on-phone, real app).

setup → observe → agent → step rules (`realbench.episode_step`, shared with the RL environments)
→ device, until terminate / answer / boundary / step budget / too many format errors / abort. A device failure ends the episode as `env_invalid` (an
unscored abort, rerun by the runner), never as an agent failure.
"""

from __future__ import annotations

import logging
import time
from dataclasses import dataclass, field
from typing import Any

from realbench.actions import Action, Wait, action_to_dict
from realbench.agent import Agent, HistoryItem
from realbench.device import Target
from realbench.episode_step import StepCounts, StepRules, decide_step
from realbench.errors import BoundaryBlocked, DeviceError, ModelError, RealbenchError
from realbench.hierarchy import Hierarchy
from realbench.observation import ImageFormat, Observation
from realbench.outcome import EndReason, Outcome, Verdict
from realbench.taskpack import TaskInstance

log = logging.getLogger(__name__)

DEFAULT_MAX_FORMAT_ERRORS = 3


@dataclass
class StepRecord:
    """One step: the observation the agent saw, what it said and did, and how long each part took."""

    index: int
    action: dict[str, Any] | None
    raw: str = ""
    thought: str | None = None
    error: str | None = None
    screenshot: bytes | None = None
    image_format: ImageFormat = ImageFormat.JPEG
    width: int = 0
    height: int = 0
    hierarchy: str | None = None
    app: str | None = None
    boundary: str | None = None
    t_observe_s: float = 0.0
    t_agent_s: float = 0.0
    t_act_s: float = 0.0
    tokens_in: int = 0
    tokens_out: int = 0
    extra: dict[str, Any] = field(default_factory=dict)


@dataclass
class EpisodeResult:
    """Everything an episode produced. Serialisable (plain data + bytes) so remote workers can
    return it to the process that owns the run store."""

    task_id: str
    seed: int
    instruction: str
    params: dict[str, Any]
    agent: str
    target: str
    device: dict[str, Any]
    outcome: Outcome
    end_reason: EndReason
    answer: str | None = None
    verdicts: list[Verdict] = field(default_factory=list)
    steps: list[StepRecord] = field(default_factory=list)
    final_screenshot: bytes | None = None
    final_image_format: ImageFormat = ImageFormat.JPEG
    final_hierarchy: str | None = None
    started: float = 0.0
    finished: float = 0.0
    error: str | None = None
    format_errors: int = 0
    video: bytes | None = None  # the episode's screen recording (MP4), where one was asked for

    @property
    def success(self) -> bool | None:
        """The primary verdict's decision (clone verifier), or None where nothing decided yet."""
        return self.verdicts[0].success if self.verdicts else None

    @property
    def progress(self) -> float | None:
        return self.verdicts[0].progress if self.verdicts else None


def decide_outcome(end: EndReason, verdict: Verdict | None) -> Outcome:
    """How an episode ended (`end`) and its verdict, if any, as one Outcome — for every target."""
    if end is EndReason.ABORT:
        return Outcome.ENV_INVALID
    if verdict is not None and verdict.success:
        return Outcome.SUCCESS
    if end is EndReason.FORMAT_ERRORS:
        return Outcome.FORMAT_ERROR
    if end is EndReason.STEP_BUDGET:
        return Outcome.STEP_BUDGET
    if verdict is None:
        # Real apps: nothing programmatic decides; checks, judges and labels decide later.
        return Outcome.BOUNDARY_REACHED if end is EndReason.BOUNDARY else Outcome.UNVERIFIED
    return Outcome.FAILURE


def _parse_hierarchy(obs: Observation) -> Hierarchy | None:
    if not obs.hierarchy:
        return None
    try:
        return Hierarchy(obs.hierarchy)
    except RealbenchError:
        log.warning("unparseable hierarchy; boundary checks skipped for this step")
        return None


def run_episode(
    instance: TaskInstance,
    target: Target,
    agent: Agent,
    *,
    max_format_errors: int = DEFAULT_MAX_FORMAT_ERRORS,
    keep_hierarchy: bool = True,
) -> EpisodeResult:
    """Run one episode of `instance` on `target` with `agent`. Never raises for device or agent
    failures: they end the episode as env_invalid / format_error with the error recorded."""
    task = instance.task
    result = EpisodeResult(
        task_id=task.id,
        seed=instance.seed,
        instruction=instance.instruction,
        params=instance.params,
        agent=agent.name,
        target=str(target.kind),
        device={},
        outcome=Outcome.ENV_INVALID,
        end_reason=EndReason.ABORT,
        started=time.time(),
    )
    boundary = instance.boundary()
    history: list[HistoryItem] = []
    rules = StepRules(max_steps=task.max_steps, max_format_errors=max_format_errors)
    counts = StepCounts()
    end = EndReason.STEP_BUDGET
    withheld: Action | None = None
    try:
        result.device = target.describe()
        target.setup(instance)
        agent.reset(instance)
        device = target.device
        while True:
            index = counts.steps
            t0 = time.perf_counter()
            obs = device.observe()
            t1 = time.perf_counter()
            decision = agent.act(obs, history)
            t2 = time.perf_counter()
            step = StepRecord(
                index=index,
                action=action_to_dict(decision.action) if decision.action is not None else None,
                raw=decision.raw,
                thought=decision.thought,
                error=decision.error,
                screenshot=obs.screenshot.data,
                image_format=obs.screenshot.format,
                width=obs.screenshot.width,
                height=obs.screenshot.height,
                hierarchy=obs.hierarchy if keep_hierarchy else None,
                app=obs.app,
                t_observe_s=t1 - t0,
                t_agent_s=t2 - t1,
                tokens_in=decision.tokens_in,
                tokens_out=decision.tokens_out,
                extra=decision.extra,
            )
            result.steps.append(step)
            history.append(
                HistoryItem(index=index, action=decision.action, thought=decision.thought, observation=obs)
            )
            action = decision.action
            rule = decide_step(
                counts,
                rules,
                action,
                hierarchy=_parse_hierarchy(obs) if boundary and action is not None else None,
                boundary=boundary,
                screen=(obs.screenshot.width, obs.screenshot.height),
                delivers_boundary=target.delivers_boundary,
            )
            result.format_errors = counts.format_errors
            if rule.answer is not None:
                result.answer = rule.answer
            if rule.boundary is not None:
                step.boundary = rule.boundary
            if rule.withheld:
                withheld = action
            if rule.send and action is not None:
                if rule.boundary is not None:
                    _act(device, action, step)
                else:
                    try:
                        _act(device, action, step)
                    except BoundaryBlocked as exc:
                        # The farm's interlock saw a commit control on the fresh screen: nothing was sent.
                        step.boundary = f"interlock: {exc.control or exc.message}"
                        withheld = action
                        end = EndReason.BOUNDARY
                        break
            if rule.end is not None:
                end = rule.end
                break
        final = device.observe()
        result.final_screenshot = final.screenshot.data
        result.final_image_format = final.screenshot.format
        result.final_hierarchy = final.hierarchy
        verify_at_boundary = getattr(target, "verify_at_boundary", None)
        if withheld is not None and callable(verify_at_boundary):
            # The commit tap was withheld; a target that can tell what it would have done says so.
            verdict = verify_at_boundary(instance, result.answer, withheld)
        else:
            verdict = target.verify(instance, result.answer)
    except (DeviceError, ModelError) as exc:
        # Infrastructure, not the agent: an unscored abort that the runner reruns.
        log.warning("episode %s seed %d aborted: %s", task.id, instance.seed, exc.message)
        result.error = f"{type(exc).__name__}: {exc.message}"
        result.end_reason = EndReason.ABORT
        result.outcome = Outcome.ENV_INVALID
        result.finished = time.time()
        return result
    result.end_reason = end
    if verdict is not None:
        result.verdicts.append(verdict)
    result.outcome = decide_outcome(end, verdict)
    result.finished = time.time()
    return result


def _act(device: Any, action: Action, step: StepRecord) -> None:
    t = time.perf_counter()
    if isinstance(action, Wait):
        time.sleep(action.seconds)
    else:
        device.act(action)
    step.t_act_s = time.perf_counter() - t
