"""The golden-plan agent: executes a task's selector-based plan against the live hierarchy.

Plan steps name controls by text / resource-id / content-desc, never by coordinates, so the same
plan runs on the clone and on a phone; each step is resolved into a normalised Action when it is
executed, against whatever the screen shows then.
"""

from __future__ import annotations

import logging
from collections import deque

from realbench.actions import (
    Action,
    Answer,
    Click,
    KeyPress,
    LongPress,
    OpenApp,
    Swipe,
    Terminate,
    TerminateStatus,
    Type,
    Wait,
)
from realbench.agent import AgentStep, HistoryItem
from realbench.errors import RealbenchError
from realbench.hierarchy import Hierarchy, Node, Selector, read_as_shown
from realbench.observation import Observation
from realbench.taskpack import PlanStep, ReadAnswer, SwipeDirection, TaskInstance, TypeStep
from realbench.templating import render

log = logging.getLogger(__name__)

# How often a step whose control is not on screen yet is retried (the screen may still be settling).
MISSING_RETRIES = 2
MISSING_WAIT_S = 0.25


def to_normalised(px: float, py: float, width: int, height: int) -> tuple[int, int]:
    return (
        max(0, min(1000, round(px * 1000 / max(1, width - 1)))),
        max(0, min(1000, round(py * 1000 / max(1, height - 1)))),
    )


def swipe_for(direction: SwipeDirection, distance: float) -> Swipe:
    """A finger swipe through the middle of the screen; `up` moves the finger up (content scrolls down)."""
    half = round(distance * 500)
    if direction is SwipeDirection.UP:
        return Swipe(x=500, y=500 + half, x2=500, y2=500 - half)
    if direction is SwipeDirection.DOWN:
        return Swipe(x=500, y=500 - half, x2=500, y2=500 + half)
    if direction is SwipeDirection.LEFT:
        return Swipe(x=500 + half, y=500, x2=500 - half, y2=500)
    return Swipe(x=500 - half, y=500, x2=500 + half, y2=500)


class PlanError(RealbenchError):
    """A golden plan cannot continue on the current screen."""


class GoldenAgent:
    """Runs a task's golden plan. Name: ``golden``."""

    def __init__(self, name: str = "golden", *, real_side: bool = False) -> None:
        self._name = name
        # On a real app the task's real golden plan (the real app's selectors) runs where it has one.
        self.real_side = real_side
        self._instance: TaskInstance | None = None
        self._steps: deque[PlanStep] = deque()
        self._pending: deque[Action] = deque()
        self._missing = 0
        self._swipes = 0

    @property
    def name(self) -> str:
        return self._name

    def reset(self, instance: TaskInstance) -> None:
        self._instance = instance
        plan = (
            instance.task.real.golden
            if self.real_side and instance.task.real.golden
            else instance.task.golden
        )
        self._steps = deque(plan)
        self._pending.clear()
        self._missing = 0
        self._swipes = 0

    @property
    def params(self) -> dict[str, object]:
        return self._instance.params if self._instance else {}

    @property
    def remaining(self) -> int:
        return len(self._steps) + len(self._pending)

    def act(self, observation: Observation, history: list[HistoryItem]) -> AgentStep:
        try:
            action = self.next_action(observation)
        except PlanError as exc:
            log.info("golden plan stopped: %s", exc.message)
            return AgentStep(action=Terminate(status=TerminateStatus.FAILURE), raw="", error=exc.message)
        return AgentStep(action=action, raw="")

    def next_action(self, observation: Observation) -> Action:
        """The plan's next Action for this screen. Raises PlanError when the plan can't go on."""
        if self._pending:
            return self._pending.popleft()
        if not self._steps:
            return Terminate(status=TerminateStatus.SUCCESS)
        hierarchy = Hierarchy(observation.hierarchy) if observation.hierarchy else None
        size = (observation.screenshot.width, observation.screenshot.height)
        while self._steps:
            step = self._steps[0]
            action = self._resolve(step, hierarchy, size)
            if action is None:  # a scroll_to whose target is already visible: nothing to do
                self._steps.popleft()
                continue
            if not isinstance(action, Wait) or step.wait is not None:
                self._steps.popleft()
                self._missing = 0
            return action
        return Terminate(status=TerminateStatus.SUCCESS)

    def _find(self, selector: Selector, hierarchy: Hierarchy | None) -> Node | None:
        if hierarchy is None:
            raise PlanError("the device gave no UI hierarchy; golden plans need one")
        return hierarchy.find_one(selector.format(self.params))

    def _locate(self, selector: Selector, hierarchy: Hierarchy | None) -> Node | Wait:
        node = self._find(selector, hierarchy)
        if node is not None:
            return node
        if self._missing < MISSING_RETRIES:
            self._missing += 1
            return Wait(seconds=MISSING_WAIT_S)
        raise PlanError(f"no control matches {selector.format(self.params)} on this screen")

    def _tap_point(self, node: Node, size: tuple[int, int]) -> tuple[int, int]:
        cx, cy = node.bounds.center
        return to_normalised(cx, cy, *size)

    def _resolve(self, step: PlanStep, hierarchy: Hierarchy | None, size: tuple[int, int]) -> Action | None:
        if step.tap is not None or step.long_press is not None:
            selector = step.tap or step.long_press
            assert selector is not None
            found = self._locate(selector, hierarchy)
            if isinstance(found, Wait):
                return found
            x, y = self._tap_point(found, size)
            return Click(x=x, y=y) if step.tap is not None else LongPress(x=x, y=y)
        if step.type is not None:
            spec = step.type if isinstance(step.type, TypeStep) else TypeStep(text=step.type)
            text = render(spec.text, self.params)
            if spec.into is None:
                return Type(text=text)
            found = self._locate(spec.into, hierarchy)
            if isinstance(found, Wait):
                return found
            x, y = self._tap_point(found, size)
            self._pending.append(Type(text=text))
            return Click(x=x, y=y)
        if step.scroll_to is not None:
            node = self._find(step.scroll_to.selector, hierarchy)
            if node is not None and self._fully_visible(node, size):
                self._swipes = 0
                return None
            if self._swipes >= step.scroll_to.max_swipes:
                raise PlanError(f"scrolled {self._swipes} times without finding {step.scroll_to.selector}")
            self._swipes += 1
            # Keep the step at the head of the plan: it is re-evaluated after the swipe.
            self._steps.appendleft(step)
            return swipe_for(step.scroll_to.direction, 0.4)
        if step.swipe is not None:
            return swipe_for(step.swipe.direction, step.swipe.distance)
        if step.key is not None:
            return KeyPress(key=step.key)
        if step.wait is not None:
            return Wait(seconds=step.wait)
        if step.open_app is not None:
            return OpenApp(app=render(step.open_app, self.params))
        if step.answer is not None:
            return Answer(text=self._answer_text(step.answer, hierarchy))
        if step.terminate is not None:
            return Terminate(status=step.terminate)
        raise PlanError(f"unsupported plan step {step.kind!r}")

    @staticmethod
    def _fully_visible(node: Node, size: tuple[int, int]) -> bool:
        width, height = size
        b = node.bounds
        # Leave a margin for fixed headers/footers that overlay the list edges.
        return b.top >= 0.08 * height and b.bottom <= 0.92 * height and b.left >= 0 and b.right <= width

    def _answer_text(self, spec: str | ReadAnswer, hierarchy: Hierarchy | None) -> str:
        if isinstance(spec, str):
            return render(spec, self.params)
        node = self._find(spec.read, hierarchy)
        if node is None:
            raise PlanError(f"no control matches {spec.read.format(self.params)} to read the answer from")
        text = read_as_shown(node.text or node.content_desc, spec.regex)
        if text is None:
            raise PlanError(f"answer text {node.text or node.content_desc!r} does not match {spec.regex!r}")
        return text
