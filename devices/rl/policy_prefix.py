"""Start an episode part-way along the task's golden plan (a reverse curriculum for training).

A 6-step task whose verifier gives no credit for partial work is never solved by a policy that
samples its way from the home screen, so every group on it scores the same and a group-relative
update learns nothing. Clones can be reset to any state, so training may start a group from the
state the golden plan reaches after its first k steps: the last steps are learned first (a short
suffix is found by sampling), then earlier starts connect to screens the policy already finishes
from (Florensa et al. 2017, "Reverse curriculum generation"; Salimans & Chen 2018, "Learning
Montezuma's Revenge from a single demonstration"). `Curriculum` keeps, per task, the start in use:
it begins one step before the end and moves one step back once a group from it succeeds often
enough, so the groups sit at the frontier of what the policy can finish (drawing k uniformly
spent most of them on starts already mastered or still hopeless: docs/benchmarks.md).

The plan is used only to build the start: its steps are replayed through the episode's own
actions and recorded in the policy's memory as if the policy had taken them (the memory is part of
what the policy sees), and they are not trained on. Greedy evaluation always starts at step 0.
"""

from __future__ import annotations

import logging
from dataclasses import dataclass, field

from clones.dom_plan import PlanStepError
from devices.rl.policy_env import FreeEpisode
from realbench.actions import Key
from realbench.agents.policy_features import Kind, Memory
from realbench.taskpack import PlanStep, Task, TaskInstance, TypeStep
from realbench.templating import render

log = logging.getLogger(__name__)


def _replayable(step: PlanStep) -> bool:
    """A step the element policy could itself have taken (its four kinds of action)."""
    if step.tap is not None or step.key is Key.BACK:
        return True
    if step.type is not None:
        text = step.type if isinstance(step.type, str) else step.type.text
        return "\n" not in text
    return False


def prefix_limit(task: Task) -> int:
    """How many leading golden steps a start may replay: those the policy could take, stopping one
    before the last, so that at least the final step is always the policy's own."""
    n = 0
    for step in task.golden:
        if step.scroll_to is not None or step.swipe is not None or step.wait is not None:
            n += 1  # layout-only on the browser-free path: replayed as nothing
            continue
        if not _replayable(step):
            break
        n += 1
    return max(0, min(n, len(task.golden) - 1))


def _find(episode: FreeEpisode, instance: TaskInstance, step: PlanStep) -> int:
    selector = step.tap if step.tap is not None else step.type.into  # type: ignore[union-attr]
    assert selector is not None
    sel = selector.format(instance.params)
    hits = [i for i, d in enumerate(episode.tappable) if sel.matches(d.node)]
    index = sel.nth if sel.nth >= 0 else len(hits) + sel.nth
    if not 0 <= index < len(hits):
        raise PlanStepError(f"no node matches {sel}")
    return hits[index]


def replay_prefix(episode: FreeEpisode, memory: Memory, instance: TaskInstance, k: int) -> int:
    """Replay the first `k` golden steps on `episode`; returns how many were replayed (fewer when a
    step does not apply, e.g. a drift variant relabelled its target)."""
    done = 0
    for step in instance.task.golden[:k]:
        if episode.done:
            break
        try:
            if step.tap is not None:
                ref = _find(episode, instance, step)
                memory.record_click(episode.views()[ref], instance.instruction)
                episode.act(Kind.CLICK, ref)
            elif step.type is not None:
                if isinstance(step.type, TypeStep) and step.type.into is not None:
                    ref = _find(episode, instance, step)
                    episode.focused = episode.tappable[ref].attrs.get("name")
                text = render(step.type if isinstance(step.type, str) else step.type.text, instance.params)
                memory.record(Kind.TYPE, text=text)
                episode.act(Kind.TYPE, text=text)
            elif step.key is Key.BACK:
                memory.record(Kind.BACK)
                episode.act(Kind.BACK)
        except PlanStepError as exc:
            log.debug("golden prefix of %s stops at step %d: %s", instance.task.id, done, exc)
            break
        done += 1
    return done


# Group success at the current start that moves it one step back (Salimans & Chen use a threshold
# near the demonstrator's return; half of a small group keeps the walk moving without skipping
# starts the policy finishes only by luck).
ADVANCE_AT = 0.5


@dataclass
class Curriculum:
    """Per task, how many golden steps a curriculum start replays (saved with the training state)."""

    starts: dict[str, int] = field(default_factory=dict)

    def start(self, task: Task) -> int:
        return self.starts.setdefault(task.id, prefix_limit(task))

    def record(self, task: Task, k: int, success_rate: float) -> None:
        """A group started after `k` steps had this success rate; move back when it was enough."""
        if k == self.start(task) and k > 0 and success_rate >= ADVANCE_AT:
            self.starts[task.id] = k - 1
