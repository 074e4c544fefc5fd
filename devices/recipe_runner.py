"""Runs a task's typed real-side setup (see `realbench.recipes`) on a phone.

Every input goes through the interlock, armed with the task's boundary and the app's forbidden
controls, so a setup step can never cross a commit boundary; a `launch` of another package and a
`deep_link` go through it too (refused outside the pack's packages and URL schemes). Each step's `expect` checks must hold
(within their timeout) before the next step; a step whose control is missing or whose check fails
raises `SetupFailed`, a `DeviceError`: the episode is an unscored abort (env_invalid), never the
agent's failure. Each step is recorded (selector matches, screenshot, hierarchy) for `certify`.
"""

from __future__ import annotations

import logging
import time
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any

from devices.farm.interlock import InterlockedDevice
from realbench.actions import Click, Key, KeyPress, Type
from realbench.errors import DeviceError, RealbenchError
from realbench.golden import swipe_for, to_normalised
from realbench.hierarchy import Hierarchy, Node, Selector
from realbench.recipes import (
    BackStep,
    DeepLinkStep,
    Expect,
    ExpectState,
    HomeStep,
    LaunchStep,
    ScrollStep,
    TapStep,
    TypeTextStep,
    WaitForStep,
    activity_matches,
)
from realbench.taskpack import SwipeDirection
from realbench.templating import render, render_value

log = logging.getLogger(__name__)

POLL_S = 0.2


class SetupFailed(DeviceError):
    """A setup step could not run or its checks did not hold; nothing of the task was attempted."""

    def __init__(self, message: str, *, step: int, selector: str = "", hint: str | None = None) -> None:
        super().__init__(message, hint=hint or "the phone is not where the task starts: the episode is rerun")
        self.step = step
        self.selector = selector


@dataclass
class StepRecord:
    """What one recipe step met on the phone."""

    phase: str  # "setup" | "golden"
    index: int
    kind: str
    selector: str = ""
    matches: int | None = None  # nodes the selector matched on the screen it acted on
    ok: bool = True
    detail: str = ""
    screenshot: bytes | None = field(default=None, repr=False)
    hierarchy: str | None = field(default=None, repr=False)

    @property
    def found(self) -> bool | None:
        return None if self.matches is None else self.matches > 0

    @property
    def unique(self) -> bool | None:
        return None if self.matches is None else self.matches == 1


def render_step(step: Any, params: dict[str, Any]) -> Any:
    """A copy of the step with `{param}` placeholders filled in."""
    data = render_value(step.model_dump(mode="json", exclude_none=True), params)
    return type(step).model_validate(data)


class SetupRunner:
    """Runs setup steps: the screen is read on `phone`; every input, launch and deep link goes
    through `guarded` (an `InterlockedDevice`; tests that prove a trap pass the raw phone)."""

    def __init__(
        self,
        phone: Any,
        guarded: Any,
        *,
        package: str,
        relaunch: Callable[[str], None],
        record: bool = False,
        settle_s: float = 0.05,
    ) -> None:
        self.phone = phone
        self.guarded = guarded
        self.package = package
        self.relaunch = relaunch
        self.record = record
        self.settle_s = settle_s
        self.records: list[StepRecord] = []
        # The dump recorded after a step is the screen the next step starts from: its first look
        # uses it instead of dumping again (input is still checked on a fresh dump by the interlock).
        self._recorded: str | None = None

    # --- screen helpers ---------------------------------------------------------------------

    def _hierarchy(self) -> Hierarchy | None:
        xml, self._recorded = self._recorded, None
        # right after a step's input settled, the settle's own last dump is the screen now
        fresh = getattr(self.phone, "settled_hierarchy", None) or self.phone.hierarchy
        try:
            return Hierarchy(xml if xml is not None else fresh())
        except RealbenchError:
            return None

    def _matches(self, selector: Selector) -> list[Node]:
        h = self._hierarchy()
        return h.find(selector) if h is not None else []

    def _wait(self, selector: Selector, timeout: float, *, present: bool = True) -> list[Node]:
        deadline = time.monotonic() + timeout
        while True:
            nodes = self._matches(selector)
            if bool(nodes) == present or time.monotonic() >= deadline:
                return nodes
            time.sleep(POLL_S)

    def _tap(self, node: Node) -> None:
        w, h = self.phone.size()
        x, y = to_normalised(*node.bounds.center, w, h)
        self.guarded.act(Click(x=x, y=y))

    def _snapshot(self, rec: StepRecord) -> None:
        if not self.record:
            return
        try:
            rec.hierarchy = (getattr(self.phone, "settled_hierarchy", None) or self.phone.hierarchy)()
            rec.screenshot = self.phone.screenshot()
            self._recorded = rec.hierarchy
        except RealbenchError as exc:
            rec.detail = rec.detail or f"no screenshot: {exc.message}"

    # --- steps ------------------------------------------------------------------------------

    def run(self, steps: list[Any], params: dict[str, Any]) -> list[StepRecord]:
        for i, raw in enumerate(steps):
            step = render_step(raw, params)
            rec = StepRecord(phase="setup", index=i, kind=step.do)
            self.records.append(rec)
            try:
                self._one(i, step, rec)
                self._recorded = None  # the step acted: the recorded screen is gone
                time.sleep(self.settle_s)
                for check in step.expect:
                    self._expect(i, check, rec)
            except SetupFailed as exc:
                rec.ok = False
                rec.detail = exc.message
                self._snapshot(rec)
                raise
            self._snapshot(rec)
        return self.records

    def _need(self, i: int, kind: str, selector: Selector, timeout: float, rec: StepRecord) -> Node:
        nodes = self._wait(selector, timeout)
        rec.selector = str(selector)
        rec.matches = len(nodes)
        if not nodes:
            raise SetupFailed(
                f"setup step {i} ({kind}): no control matches {selector}", step=i, selector=str(selector)
            )
        return nodes[0]

    def _one(self, i: int, step: Any, rec: StepRecord) -> None:
        if isinstance(step, LaunchStep):
            if isinstance(self.guarded, InterlockedDevice):
                # another package (a wallet, a cashier) can commit: the guard decides
                self.guarded.launch(step.package or self.package, cold_start=self.relaunch)
            else:
                self.relaunch(step.package or self.package)
        elif isinstance(step, DeepLinkStep):
            if isinstance(self.guarded, InterlockedDevice):
                self.guarded.deep_link(step.url)
            else:
                self.phone.shell(["am", "start", "-a", "android.intent.action.VIEW", "-d", step.url])
        elif isinstance(step, TapStep):
            self._tap(self._need(i, "tap", step.selector, step.timeout_s, rec))
        elif isinstance(step, TypeTextStep):
            if step.into is not None:
                self._tap(self._need(i, "type", step.into, 5.0, rec))
            self.guarded.act(Type(text=render(step.text, {})))
        elif isinstance(step, ScrollStep):
            rec.selector = str(step.selector)
            w, h = self.phone.size()
            for _ in range(step.max_swipes + 1):
                nodes = self._matches(step.selector)
                visible = [n for n in nodes if n.bounds.top >= 0.08 * h and n.bounds.bottom <= 0.92 * h]
                if visible:
                    rec.matches = len(nodes)
                    return
                self.guarded.act(swipe_for(SwipeDirection(step.direction), 0.4))
            raise SetupFailed(
                f"setup step {i} (scroll): {step.selector} never came on screen",
                step=i,
                selector=str(step.selector),
            )
        elif isinstance(step, WaitForStep) and step.activity is not None:
            self._wait_activity(i, step.activity, step.timeout_s, rec)
        elif isinstance(step, WaitForStep) and step.selector is not None:
            self._need(i, "wait_for", step.selector, step.timeout_s, rec)
        elif isinstance(step, BackStep):
            self.guarded.act(KeyPress(key=Key.BACK))
        elif isinstance(step, HomeStep):
            self.guarded.act(KeyPress(key=Key.HOME))
        else:  # pragma: no cover - the schema admits no other kind
            raise SetupFailed(f"setup step {i}: unknown kind {step!r}", step=i)

    def _wait_activity(self, i: int, wanted: str, timeout: float, rec: StepRecord) -> None:
        current_activity = getattr(self.phone, "current_activity", None)
        rec.selector = f"activity={wanted!r}"
        if current_activity is None:
            raise SetupFailed(
                f"setup step {i} (wait_for): this device reports no activity to wait for",
                step=i,
                hint="wait for a control instead, or run the recipe on a phone",
            )
        deadline = time.monotonic() + timeout
        current: str | None = None
        while True:
            current = current_activity()
            if activity_matches(wanted, current, self.package):
                rec.detail = f"in front: {current}"
                return
            if time.monotonic() >= deadline:
                raise SetupFailed(
                    f"setup step {i} (wait_for): activity {wanted} never came to the front (in front: {current})",
                    step=i,
                    selector=rec.selector,
                )
            time.sleep(POLL_S)

    def _expect(self, i: int, check: Expect, rec: StepRecord) -> None:
        present = check.state is ExpectState.EXISTS
        nodes = self._wait(check.selector, check.timeout_s, present=present)
        if bool(nodes) != present:
            what = "is not on screen" if present else "is still on screen"
            raise SetupFailed(
                f"setup step {i}: expected {check.selector} {check.state.value}, but it {what}",
                step=i,
                selector=str(check.selector),
            )
