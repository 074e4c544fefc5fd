"""The safety interlock: nothing that would cross a commit boundary reaches a real app.

The episode loop already stops when an action's point lands on a boundary control of the
screen the agent saw. The interlock is the second, independent layer, and sits in front of the
phone itself, so it holds whatever calls the device (the loop, a golden plan, a replay, a bug):

- the task's boundary selectors AND the app profile's always-forbidden controls (pay, confirm
  transfer, submit order…) are armed together;
- every touch, key and text entry is hit-tested against a FRESH hierarchy dumped right before
  it would be sent — not the screen the agent saw, which may be stale;
- taps, long presses and double taps are tested at the exact pixel that would be sent, with a
  small margin, against the control, its label/icon children and the clickable ancestor that a
  tap on a label activates;
- swipes are tested at their start (touch-down lands there), their end, and along the path (a
  drag across a slide-to-confirm control); a scroll gesture that starts elsewhere in the same
  scrollable container only passes over in-content controls and is let through;
- ENTER is blocked while a stop control is focused, or while any stop control is on screen and
  the focus is an editable field or unknown (the IME action would submit the form);
- text is blocked when it would submit (a newline, under the ENTER rule) or when it goes into a
  password / SMS-code field of a screen that shows a stop control;
- if the stop controls on screen differ from those of the screen the agent last observed (the
  screen changed under the agent), the interlock dumps again until two dumps agree and tests
  every dump it saw.

A blocked action raises `BoundaryBlocked` with the control, the hierarchy and a screenshot; the
loop records it as `boundary_reached`.
"""

from __future__ import annotations

import logging
import math
import re
import time
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any, Protocol

from realbench.actions import Action, Click, DoubleClick, Key, KeyPress, LongPress, Swipe, Type
from realbench.boundary import boundary_hit
from realbench.device import DeviceKind
from realbench.errors import BoundaryBlocked, DeviceError, RealbenchError
from realbench.hierarchy import Bounds, Hierarchy, Node, Selector
from realbench.observation import Observation

log = logging.getLogger(__name__)

MARGIN_PX = 3  # touch slop around a control's edge still counts as the control
PATH_STEP_PX = 6  # spacing of the points tested along a swipe
TAP_SLOP_PX = 24  # a swipe shorter than this is a tap at its start
SETTLE_S = 0.25
SETTLE_DUMPS = 3
SECRET_FIELD = re.compile(
    r"passw|passwd|pwd|pin\b|otp|sms|captcha|verif|code|密码|验证码|校验码|动态码|短信|口令|交易码",
    re.IGNORECASE,
)
EDITABLE_CLASSES = ("EditText", "AutoCompleteTextView", "SearchView", "TextInput")


class GuardedPhone(Protocol):
    """What the interlock needs from the device it guards (PhoneDevice provides it)."""

    @property
    def kind(self) -> DeviceKind: ...

    @property
    def serial(self) -> str: ...

    def hierarchy(self) -> str: ...

    def screenshot(self) -> bytes: ...

    def to_pixels(self, x: int, y: int) -> tuple[int, int]: ...

    def size(self) -> tuple[int, int]: ...

    def observe(self) -> Observation: ...

    def act(self, action: Action) -> None: ...

    def start_app(self, app: str) -> None: ...

    def stop_app(self, app: str) -> None: ...

    def close(self) -> None: ...


class StopOrigin:
    BOUNDARY = "boundary"
    FORBIDDEN = "forbidden"


@dataclass(frozen=True)
class StopControl:
    """A control on screen that must never be activated, and the areas that activate it."""

    selector: Selector
    origin: str
    node: Node
    regions: tuple[Bounds, ...]

    def label(self) -> str:
        return self.node.all_text() or self.node.resource_id or self.node.class_name

    def key(self) -> tuple[str, tuple[str, ...]]:
        return (self.label(), tuple(str(r) for r in self.regions))

    def describe(self) -> str:
        return f"{self.origin} control {self.label()!r} ({self.selector})"


@dataclass(frozen=True)
class Block:
    control: StopControl | None
    reason: str

    def describe(self) -> str:
        return f"{self.reason}: {self.control.describe()}" if self.control else self.reason


def _activator(node: Node) -> Node | None:
    """The node a tap on `node` activates when `node` itself is not clickable."""
    if node.clickable or node.long_clickable:
        return None
    return next((a for a in node.ancestors() if a.clickable or a.long_clickable), None)


def stop_controls(
    hierarchy: Hierarchy, boundary: list[Selector], forbidden: list[Selector]
) -> list[StopControl]:
    out: list[StopControl] = []
    for origin, selectors in ((StopOrigin.BOUNDARY, boundary), (StopOrigin.FORBIDDEN, forbidden)):
        for sel in selectors:
            for node in hierarchy.nodes:
                if node.bounds.empty or not sel.matches(node):
                    continue
                regions = [node.bounds]
                parent = _activator(node)
                if parent is not None and not parent.bounds.empty:
                    regions.append(parent.bounds)
                out.append(StopControl(sel, origin, node, tuple(regions)))
    return out


def _inside(b: Bounds, x: float, y: float, margin: int) -> bool:
    return b.left - margin <= x <= b.right + margin and b.top - margin <= y <= b.bottom + margin


def _hit(controls: list[StopControl], x: float, y: float, margin: int) -> StopControl | None:
    for c in controls:
        if any(_inside(r, x, y, margin) for r in c.regions):
            return c
    return None


def _scroll_container(node: Node) -> Node | None:
    return next((a for a in node.ancestors() if a.scrollable), None)


def _editable(node: Node) -> bool:
    return any(k in node.class_name for k in EDITABLE_CLASSES)


def _is_secret_field(node: Node) -> bool:
    if node.password:
        return True
    return bool(SECRET_FIELD.search(" ".join((node.resource_id, node.text, node.content_desc))))


def _related(a: Node, b: Node) -> bool:
    return a is b or b in a.ancestors() or a in b.ancestors()


class Interlock:
    """The decision: would this action, on this hierarchy, activate a stop control?"""

    def __init__(
        self, boundary: list[Selector], forbidden: list[Selector], *, margin_px: int = MARGIN_PX
    ) -> None:
        self.boundary = list(boundary)
        self.forbidden = list(forbidden)
        self.margin_px = margin_px

    def controls(self, hierarchy: Hierarchy) -> list[StopControl]:
        return stop_controls(hierarchy, self.boundary, self.forbidden)

    def check(
        self,
        action: Action,
        hierarchy: Hierarchy,
        to_pixels: Any,
        screen: tuple[int, int],
    ) -> Block | None:
        controls = self.controls(hierarchy)
        if not controls:
            return None
        # The episode loop's own rule, applied to the fresh screen, as a floor.
        same = boundary_hit(action, hierarchy, self.boundary + self.forbidden, screen)
        if same is not None:
            origin = StopOrigin.BOUNDARY if same.selector in self.boundary else StopOrigin.FORBIDDEN
            return Block(StopControl(same.selector, origin, same.node, (same.node.bounds,)), same.reason)
        m = self.margin_px
        if isinstance(action, Click | DoubleClick | LongPress):
            px, py = to_pixels(action.x, action.y)
            c = _hit(controls, px, py, m)
            return Block(c, f"{action.type} at pixel ({px},{py})") if c else None
        if isinstance(action, Swipe):
            return self._check_swipe(action, hierarchy, controls, to_pixels)
        if isinstance(action, KeyPress) and action.key is Key.ENTER:
            return self._check_enter(hierarchy, controls)
        if isinstance(action, Type):
            if "\n" in action.text or "\r" in action.text:
                b = self._check_enter(hierarchy, controls)
                if b is not None:
                    return Block(b.control, f"text with a newline: {b.reason}")
            focused = hierarchy.focused()
            if focused is not None:
                c = next((c for c in controls if _related(focused, c.node)), None)
                if c is not None:
                    return Block(c, "text into a focused stop control")
                if _is_secret_field(focused):
                    return Block(
                        controls[0], "text into a password / verification-code field on a commit screen"
                    )
        return None

    def _check_swipe(
        self, action: Swipe, hierarchy: Hierarchy, controls: list[StopControl], to_pixels: Any
    ) -> Block | None:
        m = self.margin_px
        fx, fy = to_pixels(action.x, action.y)
        tx, ty = to_pixels(action.x2, action.y2)
        c = _hit(controls, fx, fy, m)
        if c:
            return Block(c, f"swipe starting at pixel ({fx},{fy})")
        c = _hit(controls, tx, ty, m)
        if c:
            return Block(c, f"swipe ending at pixel ({tx},{ty})")
        length = math.hypot(tx - fx, ty - fy)
        n = max(1, math.ceil(length / PATH_STEP_PX))
        start_under = hierarchy.at(fx, fy)
        for i in range(1, n):
            x, y = fx + (tx - fx) * i / n, fy + (ty - fy) * i / n
            c = _hit(controls, x, y, m)
            if c is None:
                continue
            container = _scroll_container(c.node)
            scrolls_over = container is not None and length > TAP_SLOP_PX and container in start_under
            if not scrolls_over:
                return Block(c, f"swipe path through pixel ({round(x)},{round(y)})")
        return None

    def _check_enter(self, hierarchy: Hierarchy, controls: list[StopControl]) -> Block | None:
        focused = hierarchy.focused()
        if focused is None:
            return Block(controls[0], "enter with no known focus on a screen showing a stop control")
        c = next((c for c in controls if _related(focused, c.node)), None)
        if c is not None:
            return Block(c, "enter while a stop control is focused")
        if _editable(focused) or focused.focusable and not focused.clickable:
            return Block(controls[0], "enter in a field of a form that a stop control submits")
        return None


class InterlockedDevice:
    """A phone behind the interlock. Implements `realbench.device.Device`; observation passes
    through, every action is checked on a fresh hierarchy first."""

    def __init__(
        self,
        inner: GuardedPhone,
        *,
        margin_px: int = MARGIN_PX,
        settle_s: float = SETTLE_S,
        screen_check: Callable[[Hierarchy], None] | None = None,
    ) -> None:
        self.inner = inner
        # Shown every fresh screen too: a target can refuse to act on a broken environment (the
        # app's login screen, say) by raising DeviceError.
        self.screen_check = screen_check
        self.interlock = Interlock([], [], margin_px=margin_px)
        self.settle_s = settle_s
        self.blocked: list[Block] = []
        self.checked = 0
        self.armed = False
        self._seen_controls: set[tuple[str, tuple[str, ...]]] | None = None

    def arm(self, boundary: list[Selector], forbidden: list[Selector]) -> None:
        """Set the controls of the coming episode (a task may have none; the app's forbidden list
        still applies). Until armed, every touch, key and text is refused."""
        self.interlock = Interlock(boundary, forbidden, margin_px=self.interlock.margin_px)
        self.armed = True
        self._seen_controls = None

    def disarm(self) -> None:
        self.interlock = Interlock([], [], margin_px=self.interlock.margin_px)
        self.armed = False
        self._seen_controls = None

    # Device protocol -------------------------------------------------------------------------

    @property
    def kind(self) -> DeviceKind:
        return self.inner.kind

    @property
    def serial(self) -> str:
        return self.inner.serial

    def size(self) -> tuple[int, int]:
        return self.inner.size()

    def observe(self) -> Observation:
        obs = self.inner.observe()
        self._seen_controls = self._control_keys(obs.hierarchy)
        return obs

    def start_app(self, app: str) -> None:
        self.inner.start_app(app)

    def stop_app(self, app: str) -> None:
        self.inner.stop_app(app)

    def close(self) -> None:
        self.inner.close()

    def __getattr__(self, name: str) -> Any:
        # Queries (hierarchy, info, app_version…) pass through; only `act` is guarded.
        return getattr(self.inner, name)

    def act(self, action: Action) -> None:
        if not isinstance(action, Click | DoubleClick | LongPress | Swipe | KeyPress | Type):
            self.inner.act(action)
            return
        if not self.armed:
            # A setup bug, not a boundary: unscored, and nothing is sent.
            raise DeviceError(
                f"interlock on {self.inner.serial} is not armed; refusing {action.type}",
                hint="PhoneTarget.setup arms it with the task's boundary and the app's forbidden controls",
            )
        if isinstance(action, KeyPress) and action.key is not Key.ENTER:
            self.inner.act(action)  # back / home / recent cannot commit anything
            return
        if isinstance(action, DoubleClick):
            # The first tap may open a dialog whose commit button lies under the second one:
            # each tap is checked against the screen it will land on.
            single = Click(x=action.x, y=action.y)
            self._guard(action, self._fresh_screens())
            self.inner.act(single)
            self._guard(action, self._fresh_screens(settle=False))
            self.inner.act(single)
            return
        self._guard(action, self._fresh_screens())
        self.inner.act(action)

    def _guard(self, action: Action, screens: list[tuple[str, Hierarchy]]) -> None:
        self.checked += 1
        screen = self.inner.size()
        for xml, hierarchy in screens:
            block = self.interlock.check(action, hierarchy, self.inner.to_pixels, screen)
            if block is not None:
                self.blocked.append(block)
                log.warning(
                    "interlock on %s blocked %s: %s", self.inner.serial, action.type, block.describe()
                )
                raise BoundaryBlocked(
                    f"interlock blocked {action.type} on {self.inner.serial}: {block.describe()}",
                    control=block.control.describe() if block.control else "",
                    hierarchy=xml,
                    screenshot=self._screenshot_or_none(),
                )

    def _control_keys(self, xml: str | None) -> set[tuple[str, tuple[str, ...]]] | None:
        if not xml:
            return None
        try:
            return {c.key() for c in self.interlock.controls(Hierarchy(xml))}
        except RealbenchError:
            return None

    def _fresh_screens(self, *, settle: bool = True) -> list[tuple[str, Hierarchy]]:
        """Dumps taken now; more than one when the stop controls differ from what the agent saw."""
        out: list[tuple[str, Hierarchy]] = []
        previous = self._seen_controls
        dumps = SETTLE_DUMPS if settle else 1
        for _ in range(dumps):
            xml = self.inner.hierarchy()
            try:
                hierarchy = Hierarchy(xml)
            except RealbenchError as exc:
                raise DeviceError(
                    f"interlock on {self.inner.serial}: unreadable hierarchy ({exc.message}); nothing sent",
                    hint="the episode is an unscored abort and will be rerun",
                ) from None
            if self.screen_check is not None:
                self.screen_check(hierarchy)
            out.append((xml, hierarchy))
            keys = {c.key() for c in self.interlock.controls(hierarchy)}
            if previous is not None and keys == previous:
                break
            previous = keys
            if len(out) < dumps:
                time.sleep(self.settle_s)
        self._seen_controls = None  # after this action the screen is unknown again
        return out

    def _screenshot_or_none(self) -> bytes | None:
        try:
            return self.inner.screenshot()
        except DeviceError:
            return None
