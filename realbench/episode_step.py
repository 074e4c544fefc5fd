"""The rules of one episode step, shared by the study's episode loop (`realbench.episode.run_episode`)
and the RL environments (`devices.rl.core`), so an episode scored in a study and an RL episode end
the same way by construction.

A step is one agent output. In order:

1. no usable action (unparseable output): a format error; ``max_format_errors`` of them in a row
   end the episode (``format_errors``);
2. ``answer`` or ``terminate``: the episode ends there, nothing is sent to the device;
3. an action that would activate a commit-boundary control ends the episode (``boundary``); it is
   sent only where the target delivers boundary actions (clones do, real apps do not);
4. otherwise the action is sent, and the episode ends when the step budget is used up
   (``step_budget``, counting format errors as steps).
"""

from __future__ import annotations

from dataclasses import dataclass

from realbench.actions import Action, Answer, Terminate
from realbench.boundary import boundary_hit
from realbench.hierarchy import Hierarchy, Selector
from realbench.outcome import EndReason


@dataclass(frozen=True)
class StepRules:
    max_steps: int
    max_format_errors: int


@dataclass
class StepCounts:
    """What the rules count over an episode (restored with an environment snapshot)."""

    steps: int = 0
    format_errors: int = 0
    consecutive_format_errors: int = 0


@dataclass(frozen=True)
class StepDecision:
    action: Action | None
    send: bool  # deliver the action to the device
    end: EndReason | None  # the episode ends with this step (after sending, where `send`)
    answer: str | None = None
    boundary: str | None = None  # the boundary control the action would activate, described
    format_error: bool = False

    @property
    def withheld(self) -> bool:
        """The action crossed the commit boundary and is not delivered."""
        return self.end is EndReason.BOUNDARY and not self.send


def decide_step(
    counts: StepCounts,
    rules: StepRules,
    action: Action | None,
    *,
    hierarchy: Hierarchy | None,
    boundary: list[Selector],
    screen: tuple[int, int],
    delivers_boundary: bool,
) -> StepDecision:
    """Count the step in `counts` and decide what happens to `action` (None: unparseable output)."""
    counts.steps += 1
    budget_spent = counts.steps >= rules.max_steps
    if action is None:
        counts.format_errors += 1
        counts.consecutive_format_errors += 1
        if counts.consecutive_format_errors >= rules.max_format_errors:
            return StepDecision(None, send=False, end=EndReason.FORMAT_ERRORS, format_error=True)
        return StepDecision(
            None, send=False, end=EndReason.STEP_BUDGET if budget_spent else None, format_error=True
        )
    counts.consecutive_format_errors = 0
    if isinstance(action, Answer):
        return StepDecision(action, send=False, end=EndReason.ANSWER, answer=action.text)
    if isinstance(action, Terminate):
        return StepDecision(action, send=False, end=EndReason.TERMINATE)
    hit = boundary_hit(action, hierarchy, boundary, screen)
    if hit is not None:
        return StepDecision(action, send=delivers_boundary, end=EndReason.BOUNDARY, boundary=hit.describe())
    return StepDecision(action, send=True, end=EndReason.STEP_BUDGET if budget_spent else None)
