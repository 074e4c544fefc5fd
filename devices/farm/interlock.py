"""The safety interlock: nothing that would cross a commit boundary reaches a real app.

The episode loop already stops when an action's point lands on a boundary control of the screen
the agent saw. The interlock is the second, independent layer, and sits in front of the phone
itself, so it holds whatever calls the device (the loop, a golden plan, a recipe's setup and probe
steps, certify, the console, a bug). Its threat model: the agent, the operator and every recipe
step are adversaries that do not know they are ones. `InterlockedDevice` is the one way to a phone:
checked operations and read-only queries only, no attribute pass-through; `launch` / `deep_link`
outside the pack's packages and URL schemes are refused.

- A money-moving app is default-deny (`devices.farm.interlock_policy`): input goes through only
  while a screen of the pack's safe-screen catalogue is recognised by a marker that is on screen,
  and only to what that screen positively allows: a control its entry lists, or an unlisted one
  that shows a label (a control with no label is refused unless listed). The guard's own money
  words (`devices.farm.stop_labels.MONEY_PHRASE` / `MONEY_WORDS`: 去支付, 完成转账, Pay, a bare 确定
  …) are stop controls there unless the entry lists the control with the label it expects
  (`{resource_id: continue_pay, text: 去支付}`) and the control shows that label and no other money
  words; an id alone never vouches (an app may reuse a listed id for a pay button).
- The task's boundary selectors AND the app profile's always-forbidden controls (pay, confirm
  transfer, submit order…) are armed together, on every screen. Labels are read as a person reads
  them (`devices.farm.stop_labels`): widths, traditional Chinese, invisible characters and a few
  synonyms folded, a subtree in reading order, a caption naming the text-less button beside it.
- Every touch, key and text entry is decided on a FRESH hierarchy, read again right before the
  input is sent: the decision is redone on every dump until two consecutive dumps agree.
- Taps, long presses and double taps are blocked when the pixel lies in a stop control's touch
  area (its bounds, its clickable ancestor's, plus a slop margin — widened to a 48 dp target for
  small controls, which apps enlarge with touch delegates); when the tapped target's text names a
  stop control; when the tapped target's bounds overlap a stop control; and when any node drawn
  above a stop control (an overlay, a sibling) contains the pixel and overlaps it.
- Swipes are tested at their start, their end and along the path (a drag across a slide-to-
  confirm control); a scroll that starts elsewhere in the same scrollable container only passes
  over in-content controls and is let through.
- ENTER is blocked while a stop control is focused, or while any stop control is on screen and
  the focus is an editable field or unknown; text is blocked when it would submit (a newline,
  under the ENTER rule), when it goes into a focused stop control, or into a password / SMS-code
  field of a screen that shows a stop control.
- A money-moving app also refuses, even on a catalogued screen: ENTER and typed newlines (unless
  the screen allows them), typing (unless it allows text), taps into WebView / canvas regions that
  expose no text (unless it allows WebView taps and lists every other control on screen), sideways
  drags in them, swipes that do not start in a view that scrolls, long presses, touches where the
  dump shows no control, PINs (digits with unknown focus, into a WebView, with a PIN pad or a password / code
  prompt on screen, any text into a secret field, digit keys of a PIN pad while a secret is asked
  for), `OpenApp`, and any touch or text that lands in another package.

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

from devices.farm.interlock_policy import InterlockPolicy, Recognised, screen_name
from devices.farm.stop_labels import (
    LabelTexts,
    captioned,
    money_reading,
    names_stop,
    normalise,
    subtree_text,
)
from realbench.actions import (
    Action,
    Answer,
    Click,
    DoubleClick,
    Key,
    KeyPress,
    LongPress,
    OpenApp,
    Swipe,
    Terminate,
    Type,
    Wait,
)
from realbench.boundary import boundary_hit
from realbench.device import DeviceKind
from realbench.errors import BoundaryBlocked, DeviceError, RealbenchError
from realbench.golden import to_normalised
from realbench.hierarchy import Bounds, Hierarchy, Node, Selector
from realbench.observation import Observation
from realbench.taskpack import Popup, SafeInput

log = logging.getLogger(__name__)

MARGIN_PX = 3  # touch slop around a control's edge still counts as the control
TOUCH_TARGET_DP = 48  # Android's minimum touch target: apps widen smaller controls to it (TouchDelegate)
TOUCH_SLOP_DP = 8  # Android's touch slop, added around a widened control
# px per dp is taken as the short side / 360 dp: on every common phone this overestimates it, so
# the widened areas err on the large side.
NARROWEST_DP = 360
PATH_STEP_PX = 6  # spacing of the points tested along a swipe
TAP_SLOP_PX = 24  # a swipe shorter than this is a tap at its start
SETTLE_S = 0.25
SETTLE_DUMPS = 3  # kept for callers; the re-read loop below is bounded by MAX_DUMPS
MAX_DUMPS = 4  # re-reads before an input when the screen keeps changing; every dump is decided
# A field is secret when a word of its id, text or description names a password or a code. Ids
# are split into words (snake_case, camelCase, digits), so `et_pay_pass`, `payPwd`, `pin_input`
# and `smsCode` are secret while `passenger_name` and `pinyin` are not.
SECRET_WORDS = frozenset(
    {"pass", "passwd", "password", "passcode", "pwd", "pin", "pincode", "otp", "sms", "code"}
    | {"vcode", "smscode", "captcha", "verify", "verification", "cvv", "cvn", "paypass", "paypwd"}
)
SECRET_TEXT = re.compile(r"密码|验证码|校验码|动态码|短信|口令|交易码|支付码")
# A prompt on screen that asks for a password, PIN or code: digits typed now are a secret. A text
# asks when it names a secret and either asks for input (请输入支付密码, Enter PIN) or is little more
# than a field's label (支付密码, 短信验证码：); a sentence that mentions one (修改限额需完成短信及密码
# 验证) asks for nothing.
SECRET_PROMPT = re.compile(
    r"密码|口令|验证码|校验码|动态码|\bpin\b|passcode|password|verification code|security code",
    re.IGNORECASE,
)
ASKING = re.compile(r"输入|请填写|enter|type|input", re.IGNORECASE)
PROMPT_LABEL_CHARS = 10  # a label, not a sentence: at most this many characters, spaces dropped
PROMPT_LABEL_WORDS = 3  # … or, in a Latin-script text, this many words
KEYPAD_DIGITS = frozenset("0123456789")  # a custom keypad draws every digit as a key; a calendar has no 0
EDITABLE_CLASSES = ("EditText", "AutoCompleteTextView", "SearchView", "TextInput")
# Views whose content the hierarchy does not describe: an H5 page, a canvas, a GL surface.
OPAQUE_VIEW_CLASSES = (
    "WebView",
    "XWalkView",
    "SurfaceView",
    "TextureView",
    "Canvas",
    "FlutterView",
    "GLSurfaceView",
)
PASS_THROUGH = (Wait, Answer, Terminate)


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
    MONEY_WORD = "money-word"  # the guard's own vocabulary (devices.farm.stop_labels.MONEY_PHRASE)


@dataclass(frozen=True)
class StopControl:
    """A control on screen that must never be activated, and the areas that activate it."""

    selector: Selector
    origin: str
    node: Node
    regions: tuple[Bounds, ...]  # the control's and its clickable ancestor's bounds
    reach: tuple[Bounds, ...] = ()  # the regions widened by slop / touch-delegate margins

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


def _page_host(node: Node, activator: Node) -> bool:
    """Whether `activator` is the WebView / canvas that hosts `node` (or one of its ancestors)."""
    host = next((a for a in node.ancestors() if _opaque(a)), None)
    return host is not None and (activator is host or activator in host.ancestors())


def px_per_dp(screen: tuple[int, int]) -> float:
    short = min(screen) if min(screen) > 0 else 1080
    return short / NARROWEST_DP


def touch_reach(b: Bounds, margin: int, dp: float) -> Bounds:
    """Where a touch still activates a control with bounds `b`: a slop margin, and a small control
    widened to the minimum touch target plus slop on each side (what a touch delegate does)."""
    target, slop = TOUCH_TARGET_DP * dp, TOUCH_SLOP_DP * dp
    ex = margin + (max(0.0, (target - b.width) / 2) + slop if b.width < target else 0.0)
    ey = margin + (max(0.0, (target - b.height) / 2) + slop if b.height < target else 0.0)
    return Bounds(
        math.floor(b.left - ex), math.floor(b.top - ey), math.ceil(b.right + ex), math.ceil(b.bottom + ey)
    )


def stop_controls(
    hierarchy: Hierarchy,
    boundary: list[Selector],
    forbidden: list[Selector],
    *,
    screen: tuple[int, int] | None = None,
    margin_px: int = MARGIN_PX,
) -> list[StopControl]:
    """Every control on screen a stop selector names, innermost first: a container whose joined
    text names it only because a descendant does is left to the tapped-target rule."""
    dp = px_per_dp(screen or (hierarchy.screen.right, hierarchy.screen.bottom))
    out: list[StopControl] = []
    texts = LabelTexts()
    for origin, selectors in ((StopOrigin.BOUNDARY, boundary), (StopOrigin.FORBIDDEN, forbidden)):
        for sel in selectors:
            matched = [n for n in hierarchy.nodes if names_stop(sel, n, subtree=True, texts=texts)]
            ids = {id(n) for n in matched}
            for node in matched:
                if any(id(d) in ids for d in node.descendants()):
                    continue
                regions = _activation_regions(node)
                if not regions:
                    continue
                reach = tuple(touch_reach(r, margin_px, dp) for r in regions)
                out.append(StopControl(sel, origin, node, tuple(regions), reach))
    return out


def _activation_regions(node: Node) -> list[Bounds]:
    """Where a touch activates the control `node` labels: its own bounds, its clickable ancestor's,
    or (for a caption) the text-less buttons it names."""
    # A zero-size or off-screen label still names its clickable parent.
    regions = [] if node.bounds.empty else [node.bounds]
    parent = _activator(node)
    if parent is not None and _page_host(node, parent):
        parent = None  # a WebView passes a touch to the page element, not to itself
    if parent is not None and not parent.bounds.empty:
        regions.append(parent.bounds)
    if parent is None:
        # a caption beside a text-less button (a fingerprint or icon pay button)
        regions += [c.bounds for c in captioned(node) if not c.bounds.empty]
    return regions


def money_word_controls(
    hierarchy: Hierarchy,
    vouched: Callable[[Node], bool],
    *,
    screen: tuple[int, int] | None = None,
    margin_px: int = MARGIN_PX,
) -> list[StopControl]:
    """The controls of a money-moving app whose label names a money act by the guard's own
    vocabulary (any locale, whatever the pack lists), innermost first, except those `vouched` for
    (themselves or their clickable ancestor) by the recognised screen's catalogue entry: one that
    states the label it expects, shown as stated (`InterlockPolicy`'s `vouches`; an id-only
    listing never vouches for money words).
    Only a control (clickable) or a leaf is read: a container's joined text is not a label."""
    dp = px_per_dp(screen or (hierarchy.screen.right, hierarchy.screen.bottom))
    texts = LabelTexts()
    matched: list[tuple[Node, str]] = []
    for n in hierarchy.nodes:
        if n.children and not (n.clickable or n.long_clickable):
            continue
        reading = money_reading((*texts.own(n), *texts.subtree(n)))
        if reading is not None:
            matched.append((n, reading))
    ids = {id(n) for n, _ in matched}
    out: list[StopControl] = []
    for node, reading in matched:
        if any(id(d) in ids for d in node.descendants()):
            continue
        if vouched(node) or any(vouched(a) for a in node.ancestors() if a.clickable or a.long_clickable):
            continue
        regions = _activation_regions(node)
        if not regions:
            continue
        reach = tuple(touch_reach(r, margin_px, dp) for r in regions)
        out.append(StopControl(Selector(text=reading), StopOrigin.MONEY_WORD, node, tuple(regions), reach))
    return out


def _inside(b: Bounds, x: float, y: float, margin: int = 0) -> bool:
    return b.left - margin <= x <= b.right + margin and b.top - margin <= y <= b.bottom + margin


def _overlap(a: Bounds, b: Bounds) -> bool:
    """A positive-area intersection (touching edges do not count)."""
    return a.left < b.right and b.left < a.right and a.top < b.bottom and b.top < a.bottom


def _hit(controls: list[StopControl], x: float, y: float) -> StopControl | None:
    for c in controls:
        if any(_inside(r, x, y) for r in c.reach or c.regions):
            return c
    return None


def _scroll_container(node: Node) -> Node | None:
    return next((a for a in node.ancestors() if a.scrollable), None)


def _editable(node: Node) -> bool:
    return any(k in node.class_name for k in EDITABLE_CLASSES)


def _opaque(node: Node) -> bool:
    return any(k in node.class_name for k in OPAQUE_VIEW_CLASSES)


def _words(text: str) -> set[str]:
    spaced = re.sub(r"([a-z])([A-Z])", r"\1 \2", text)
    return {w.lower() for w in re.split(r"[^A-Za-z]+", spaced) if w}


def _is_secret_field(node: Node) -> bool:
    if node.password:
        return True
    if SECRET_TEXT.search(" ".join((node.resource_id, node.text, node.content_desc))):
        return True
    return bool(_words(f"{node.short_id} {node.text} {node.content_desc}") & SECRET_WORDS)


def _asks_for_secret(text: str) -> bool:
    if not text:
        return False
    folded = normalise(text)  # traditional characters, widths and spaces folded (請輸入支付密碼)
    spaced = _t2s_spaced(text)
    if not (SECRET_PROMPT.search(folded) or SECRET_PROMPT.search(spaced)):
        return False
    if ASKING.search(folded):
        return True
    if re.search(r"[a-z]", folded):
        return len(spaced.split()) <= PROMPT_LABEL_WORDS
    return len(folded) <= PROMPT_LABEL_CHARS


def _t2s_spaced(text: str) -> str:
    """The text with widths and traditional characters folded but its spaces kept (for `\bpin\b`)."""
    return " ".join(normalise(w) for w in text.split())


def _digit_key(node: Node) -> bool:
    return node.text.strip() in KEYPAD_DIGITS and len(node.text.strip()) == 1


def _keypad_on_screen(hierarchy: Hierarchy) -> bool:
    """A PIN pad drawn by the app: every digit is a key of its own (the keys are nodes)."""
    shown = {n.text.strip() for n in hierarchy.nodes if _digit_key(n) and not n.bounds.empty}
    return shown >= KEYPAD_DIGITS


def _secret_prompt(hierarchy: Hierarchy) -> Node | None:
    """A node asking for a password / PIN / code, or a secret field, on screen."""
    for n in hierarchy.nodes:
        if n.bounds.empty:
            continue
        if _asks_for_secret(n.text) or _asks_for_secret(n.content_desc):
            return n
        if _editable(n) and _is_secret_field(n):
            return n
    return None


def _related(a: Node, b: Node) -> bool:
    return a is b or b in a.ancestors() or a in b.ancestors()


def _is_touch(action: Action) -> bool:
    return isinstance(action, Click | DoubleClick | LongPress)


@dataclass
class _FoundControls:
    hierarchy: Hierarchy
    screen: tuple[int, int] | None
    boundary: list[Selector]
    forbidden: list[Selector]
    margin_px: int
    controls: list[StopControl]

    def same_question(self, other: _FoundControls) -> bool:
        return (
            self.hierarchy is other.hierarchy  # identity: the same parse, so the same nodes
            and self.screen == other.screen
            and self.margin_px == other.margin_px
            and self.boundary == other.boundary
            and self.forbidden == other.forbidden
        )


class Interlock:
    """The decision: would this action, on this hierarchy, activate a stop control?"""

    def __init__(
        self,
        boundary: list[Selector],
        forbidden: list[Selector],
        *,
        margin_px: int = MARGIN_PX,
        policy: InterlockPolicy | None = None,
    ) -> None:
        self.boundary = list(boundary)
        self.forbidden = list(forbidden)
        self.margin_px = margin_px
        self.policy = policy or InterlockPolicy()
        self.app_aliases: dict[str, str] = {}
        self._last: _FoundControls | None = None
        self._recognised = Recognised()  # the catalogued screens of the hierarchy being decided
        self._hierarchy: Hierarchy | None = None
        self._display: Bounds | None = None

    def controls(self, hierarchy: Hierarchy, screen: tuple[int, int] | None = None) -> list[StopControl]:
        """The stop controls of a parsed screen. The guard asks twice about its first dump (to
        decide, and to compare with what the agent saw); the last answer is kept for that parsed
        hierarchy object and these selectors, and found afresh for any other."""
        asked = _FoundControls(
            hierarchy, screen, list(self.boundary), list(self.forbidden), self.margin_px, []
        )
        last = self._last
        if last is not None and last.same_question(asked):
            return list(last.controls)
        asked.controls = stop_controls(
            hierarchy, self.boundary, self.forbidden, screen=screen, margin_px=self.margin_px
        )
        if self.policy.money_moving:
            display = Bounds(0, 0, screen[0], screen[1]) if screen else None
            vouched = self.policy.recognise(hierarchy, display).vouches_for
            asked.controls += money_word_controls(hierarchy, vouched, screen=screen, margin_px=self.margin_px)
        self._last = asked
        return list(asked.controls)

    def check(
        self,
        action: Action,
        hierarchy: Hierarchy,
        to_pixels: Any,
        screen: tuple[int, int],
    ) -> Block | None:
        if isinstance(action, OpenApp):
            return self.check_open_app(action)
        if isinstance(action, PASS_THROUGH):
            return None
        if isinstance(action, KeyPress) and action.key in (Key.BACK, Key.HOME, Key.RECENT):
            return None  # back / home / recent cannot commit anything
        controls = self.controls(hierarchy, screen)
        if controls:
            # The episode loop's own rule, applied to the fresh screen, as a floor.
            same = boundary_hit(action, hierarchy, self.boundary + self.forbidden, screen)
            if same is not None:
                origin = StopOrigin.BOUNDARY if same.selector in self.boundary else StopOrigin.FORBIDDEN
                node = same.node
                return Block(StopControl(same.selector, origin, node, (node.bounds,)), same.reason)
        display = Bounds(0, 0, screen[0], screen[1])
        recognised = self.policy.recognise(hierarchy, display) if self.policy.money_moving else Recognised()
        allowed = frozenset(a for s, _ in recognised.screens for a in s.allow)
        self._display = display
        block = self._decide(action, hierarchy, to_pixels, controls, allowed, recognised)
        if block is None and self.policy.money_moving and not recognised.any:
            # Default-deny: a money-moving app takes input only on a screen known to be safe.
            return Block(
                None,
                f"{action.type} on a screen not in the pack's safe-screen catalogue "
                f"(screen: {screen_name(hierarchy, display)})",
            )
        return block

    def _decide(
        self,
        action: Action,
        hierarchy: Hierarchy,
        to_pixels: Any,
        controls: list[StopControl],
        allowed: frozenset[SafeInput],
        recognised: Recognised,
    ) -> Block | None:
        self._recognised = recognised
        self._hierarchy = hierarchy
        if _is_touch(action):
            assert isinstance(action, Click | DoubleClick | LongPress)
            px, py = to_pixels(action.x, action.y)
            return self._check_touch(action.type, px, py, hierarchy, controls, allowed)
        if isinstance(action, Swipe):
            return self._check_swipe(action, hierarchy, controls, to_pixels, allowed)
        if isinstance(action, KeyPress):
            if action.key is Key.ENTER:
                return self._check_enter(hierarchy, controls, allowed)
            if self.policy.money_moving:
                return Block(None, f"key {action.key} in a money-moving app")
            return None
        if isinstance(action, Type):
            return self._check_type(action, hierarchy, controls, allowed)
        return None

    def check_open_app(self, action: OpenApp) -> Block | None:
        package = self.app_aliases.get(action.app, action.app)
        if self.policy.money_moving:
            return Block(None, f"open_app {package!r} in a money-moving app (another app can commit)")
        if self.policy.foreign(package):
            return Block(None, f"open_app {package!r}: not one of the pack's packages")
        return None

    # --- touches ----------------------------------------------------------------------------

    def _label_block(self, node: Node, why: str) -> Block | None:
        """A stop selector named by `node`'s own and its subtree's text (the tapped target)."""
        texts = LabelTexts()
        for origin, selectors in (
            (StopOrigin.BOUNDARY, self.boundary),
            (StopOrigin.FORBIDDEN, self.forbidden),
        ):
            for sel in selectors:
                if names_stop(sel, node, subtree=True, texts=texts):
                    return Block(StopControl(sel, origin, node, (node.bounds,)), why)
        if self.policy.money_moving and not self._recognised.vouches_for(node):
            reading = money_reading((*texts.own(node), *texts.subtree(node)))
            if reading is not None:
                sel = Selector(text=reading)
                return Block(StopControl(sel, StopOrigin.MONEY_WORD, node, (node.bounds,)), why)
        return None

    def _check_touch(
        self,
        kind: str,
        px: float,
        py: float,
        hierarchy: Hierarchy,
        controls: list[StopControl],
        allowed: frozenset[SafeInput],
    ) -> Block | None:
        where = f"{kind} at pixel ({round(px)},{round(py)})"
        c = _hit(controls, px, py)
        if c is not None:
            return Block(c, f"{where} in the control's touch area")
        target = hierarchy.target_at(px, py)
        under = hierarchy.at(px, py)
        opaque = next((n for n in under if _opaque(n)), None)
        if target is not None and opaque is not None and (target is opaque or target in opaque.ancestors()):
            # A WebView hands the touch to the page element under the finger, not to its whole
            # page: judge that element (when the page exposes one there).
            inside = [n for n in under if opaque in n.ancestors()]
            if inside:
                target = inside[0]
        if target is not None:
            block = self._label_block(target, f"{where}: the tapped target's text names a stop control")
            if block is not None:
                return block
            c = next((c for c in controls if any(_overlap(target.bounds, r) for r in c.regions)), None)
            if c is not None:
                return Block(c, f"{where}: the tapped target overlaps a stop control")
        if controls:
            order = {id(n): i for i, n in enumerate(hierarchy.nodes)}
            for node in under:
                if node is target or not (node.clickable or node.long_clickable or not node.children):
                    continue
                for c in controls:
                    above = order.get(id(node), -1) > order.get(id(c.node), -1)
                    if (
                        above
                        and not _related(node, c.node)
                        and any(_overlap(node.bounds, r) for r in c.regions)
                    ):
                        return Block(c, f"{where}: a view drawn over a stop control takes the touch")
        if self.policy.money_moving and not any(_opaque(n) for n in under):
            if target is not None and not self._recognised.knows_control(target):
                name = target.short_id or target.class_name
                return Block(
                    None,
                    f"{where}: {name!r} is not a control the catalogue lists for {self._recognised.names()}",
                )
            if kind == LongPress.model_fields["type"].default:
                # no golden plan long-presses; a long press is a commit gesture the labels cannot show
                return Block(None, f"{where}: long press in a money-moving app")
            if target is None and not any(_editable(n) or n.focusable for n in under):
                # nothing the dump shows takes a touch here: what does is a window it does not show
                return Block(
                    None, f"{where}: no control of the hierarchy is there (an undumped window may be)"
                )
        return self._policy_touch(where, under, target, allowed)

    def _policy_touch(
        self, where: str, under: list[Node], target: Node | None, allowed: frozenset[SafeInput]
    ) -> Block | None:
        policy = self.policy
        foreign = next((n for n in under if policy.foreign(n.package)), None)
        if foreign is not None:
            return Block(None, f"{where} lands in {foreign.package}, outside the pack's packages")
        if not policy.money_moving:
            return None
        opaque = next((n for n in under if _opaque(n)), None)
        if opaque is None:
            return self._digit_key_block(where, under, target)
        if self._recognised.allows_webview_tap(opaque, self._display):
            return None
        # Inside an H5 page / canvas: only what the hierarchy describes is known.
        inner = [n for n in under if n is opaque or opaque in n.ancestors()]
        known = target if target is not None and (target is opaque or opaque in target.ancestors()) else None
        readable = (
            subtree_text(known) if known is not None and known is not opaque else subtree_text(inner[0])
        )
        if inner[0] is opaque or not readable:
            return Block(
                None,
                f"{where} in a {opaque.class_name} region that exposes no text (not a screen marked safe)",
            )
        return None

    def _digit_key_block(self, where: str, under: list[Node], target: Node | None) -> Block | None:
        """A key of a PIN pad (a node whose text is one digit) while a password / code is asked for."""
        key = next((n for n in [*under, *([target] if target else [])] if _digit_key(n)), None)
        if key is None and target is not None:
            key = next((d for d in target.descendants() if _digit_key(d)), None)
        if key is None or self._hierarchy is None:
            return None
        if not _keypad_on_screen(self._hierarchy):
            return None
        prompt = _secret_prompt(self._hierarchy)
        if prompt is None:
            return None
        return Block(
            None,
            f"{where}: key {key.text.strip()!r} of a PIN pad while "
            f"{(prompt.text or prompt.content_desc or prompt.resource_id)!r} asks for a secret",
        )

    def _check_swipe(
        self,
        action: Swipe,
        hierarchy: Hierarchy,
        controls: list[StopControl],
        to_pixels: Any,
        allowed: frozenset[SafeInput],
    ) -> Block | None:
        fx, fy = to_pixels(action.x, action.y)
        tx, ty = to_pixels(action.x2, action.y2)
        length = math.hypot(tx - fx, ty - fy)
        if length <= TAP_SLOP_PX:
            return self._check_touch("tap-like swipe", fx, fy, hierarchy, controls, allowed)
        c = _hit(controls, fx, fy)
        if c:
            return Block(c, f"swipe starting at pixel ({fx},{fy})")
        c = _hit(controls, tx, ty)
        if c:
            return Block(c, f"swipe ending at pixel ({tx},{ty})")
        n = max(1, math.ceil(length / PATH_STEP_PX))
        start_under = hierarchy.at(fx, fy)
        for i in range(1, n):
            x, y = fx + (tx - fx) * i / n, fy + (ty - fy) * i / n
            c = _hit(controls, x, y)
            if c is None:
                continue
            container = _scroll_container(c.node)
            scrolls_over = container is not None and container in start_under
            if not scrolls_over:
                return Block(c, f"swipe path through pixel ({round(x)},{round(y)})")
        for x, y in ((fx, fy), (tx, ty)):
            foreign = next((n for n in hierarchy.at(x, y) if self.policy.foreign(n.package)), None)
            if foreign is not None:
                return Block(None, f"swipe through {foreign.package}, outside the pack's packages")
        if self.policy.money_moving:
            b = self._money_swipe(hierarchy, (fx, fy), (tx, ty), n)
            if b is not None:
                return b
        if abs(tx - fx) > abs(ty - fy):
            # A sideways drag in an H5 page or canvas may be a slide-to-pay the hierarchy cannot show.
            b = self._policy_touch(f"sideways swipe from pixel ({fx},{fy})", start_under, None, allowed)
            if b is not None:
                return b
        return None

    def _money_swipe(
        self, hierarchy: Hierarchy, start: tuple[float, float], end: tuple[float, float], steps: int
    ) -> Block | None:
        """A swipe in a money-moving app is a scroll: it starts in a scrollable view (or a WebView /
        canvas, judged by the WebView rules), it does not end in a WebView / canvas it did
        not start in (an H5 element under the finger at the end), and on a screen whose catalogue
        entry lists its controls it starts, ends and passes over only listed controls (a
        transparent overlay forwarding a drag to pay is none of them)."""
        fx, fy = start
        tx, ty = end
        if not any(n.scrollable or _opaque(n) for n in hierarchy.at(fx, fy)):
            # A swipe is a scroll here, and a scroll starts in a view that scrolls. Where the dump
            # shows none, what takes the drag is a view or a window the dump does not show.
            return Block(
                None,
                f"swipe starting at pixel ({round(fx)},{round(fy)}), where no view of the hierarchy "
                "scrolls (an undumped window may take the drag)",
            )
        op_start = next((n for n in hierarchy.at(fx, fy) if _opaque(n)), None)
        op_end = next((n for n in hierarchy.at(tx, ty) if _opaque(n)), None)
        if op_start is not None and abs(tx - fx) > abs(ty - fy):
            # webview_taps lifts taps, not drags: a sideways drag in a page may slide to pay
            return Block(
                None,
                f"sideways swipe from pixel ({round(fx)},{round(fy)}) in a {op_start.class_name} "
                "(a slide-to-pay the hierarchy cannot show)",
            )
        if op_end is not None and op_end is not op_start:
            return Block(
                None,
                f"swipe ending at pixel ({round(tx)},{round(ty)}) in a {op_end.class_name} it did not start in",
            )
        for i in range(0, steps + 1):
            x, y = fx + (tx - fx) * i / steps, fy + (ty - fy) * i / steps
            target = hierarchy.target_at(x, y)
            if target is not None and not _opaque(target) and not self._recognised.knows_control(target):
                name = target.short_id or target.class_name
                return Block(
                    None,
                    f"swipe over pixel ({round(x)},{round(y)}): {name!r} is not a control the catalogue "
                    f"lists for {self._recognised.names()}",
                )
        return None

    # --- keys and text ----------------------------------------------------------------------

    def _check_enter(
        self, hierarchy: Hierarchy, controls: list[StopControl], allowed: frozenset[SafeInput]
    ) -> Block | None:
        focused = hierarchy.focused()
        if controls:
            if focused is None:
                return Block(controls[0], "enter with no known focus on a screen showing a stop control")
            c = next((c for c in controls if _related(focused, c.node)), None)
            if c is not None:
                return Block(c, "enter while a stop control is focused")
            if _editable(focused) or focused.focusable and not focused.clickable:
                return Block(controls[0], "enter in a field of a form that a stop control submits")
        if focused is not None and self.policy.foreign(focused.package):
            return Block(None, f"enter into {focused.package}, outside the pack's packages")
        if self.policy.money_moving and not (
            SafeInput.ENTER in allowed and self._recognised.allows_enter_into(focused)
        ):
            return Block(
                None, "enter in a money-moving app: a form submits by key, even with its button off screen"
            )
        return None

    def _check_type(
        self, action: Action, hierarchy: Hierarchy, controls: list[StopControl], allowed: frozenset[SafeInput]
    ) -> Block | None:
        assert isinstance(action, Type)
        if "\n" in action.text or "\r" in action.text:
            b = self._check_enter(hierarchy, controls, allowed)
            if b is not None:
                return Block(b.control, f"text with a newline: {b.reason}")
        focused = hierarchy.focused()
        if focused is not None and self.policy.foreign(focused.package):
            return Block(None, f"text into {focused.package}, outside the pack's packages")
        if focused is not None:
            c = next((c for c in controls if _related(focused, c.node)), None)
            if c is not None:
                return Block(c, "text into a focused stop control")
            if _is_secret_field(focused):
                if controls:
                    return Block(
                        controls[0], "text into a password / verification-code field on a commit screen"
                    )
                if self.policy.money_moving:
                    # A payment keypad submits itself on the last digit, with no button to see.
                    return Block(None, "text into a password / verification-code field of a money-moving app")
        if not self.policy.money_moving:
            return None
        pin = self._pin_block(action.text, hierarchy, focused)
        if pin is not None:
            return pin
        if self._recognised.any and SafeInput.TEXT not in allowed:
            return Block(
                None, f"text on {self._recognised.names()}: the catalogue does not allow typing there"
            )
        return None

    def _pin_block(self, text: str, hierarchy: Hierarchy, focused: Node | None) -> Block | None:
        """Digits in a money-moving app where they may be a PIN: with no known focus (a custom
        keypad takes them), into a WebView (an H5 cashier), with a PIN pad or a password / code
        prompt on screen."""
        if not any(ch.isdigit() for ch in text):
            return None
        if focused is None:
            return Block(
                None, "digits typed with no known focus in a money-moving app (a PIN pad may take them)"
            )
        if _opaque(focused) or any(_opaque(a) for a in focused.ancestors()):
            return Block(None, f"digits typed into a {focused.class_name} (an H5 page may be a cashier)")
        if _keypad_on_screen(hierarchy):
            return Block(None, "digits typed while a PIN pad is on screen")
        prompt = _secret_prompt(hierarchy)
        if prompt is not None:
            what = prompt.text or prompt.content_desc or prompt.resource_id
            return Block(None, f"digits typed while {what!r} asks for a password / code")
        return None


class InterlockedDevice:
    """A phone behind the interlock: the only way to a phone. Implements `realbench.device.Device`.

    It exposes checked operations only — `act`, `launch`, `start_app`, `deep_link`, the logged
    operator `override`, and setup's two doors, `dismiss_foreign_popup` and `type_credential`
    (`devices.farm.setup_doors`) — plus read-only queries (`observe`, `hierarchy`, `screenshot`, `size`,
    `current_app`, `app_version` …). There is no attribute pass-through: what a caller may do to
    the phone is what is written here. Raw access is `raw_phone_for_tests`, logged, for tests."""

    def __init__(
        self,
        inner: GuardedPhone,
        *,
        margin_px: int = MARGIN_PX,
        settle_s: float = SETTLE_S,
        screen_check: Callable[[Hierarchy], None] | None = None,
    ) -> None:
        self._phone = inner
        # Shown every fresh screen too: a target can refuse to act on a broken environment (the
        # app's login screen, say) by raising DeviceError.
        self.screen_check = screen_check
        self.interlock = Interlock([], [], margin_px=margin_px)
        self.settle_s = settle_s
        self.blocked: list[Block] = []
        self.checked = 0
        self.dumps = 0
        self.armed = False
        self._seen_controls: set[tuple[str, tuple[str, ...]]] | None = None
        self.last_dump_s: float | None = None  # perf_counter of the last dump's reply

    def arm(
        self, boundary: list[Selector], forbidden: list[Selector], policy: InterlockPolicy | None = None
    ) -> None:
        """Set the controls of the coming episode (a task may have none; the app's forbidden list
        still applies) and the pack's policy. Until armed, every touch, key and text is refused."""
        self.interlock = Interlock(boundary, forbidden, margin_px=self.interlock.margin_px, policy=policy)
        self.interlock.app_aliases = dict(getattr(self._phone, "app_aliases", {}) or {})
        self.armed = True
        self._seen_controls = None

    def disarm(self) -> None:
        self.interlock = Interlock([], [], margin_px=self.interlock.margin_px)
        self.armed = False
        self._seen_controls = None

    @property
    def policy(self) -> InterlockPolicy:
        return self.interlock.policy

    # Read-only queries ---------------------------------------------------------------------

    @property
    def kind(self) -> DeviceKind:
        return self._phone.kind

    @property
    def serial(self) -> str:
        return self._phone.serial

    @property
    def virtual(self) -> bool:
        return bool(getattr(self._phone, "virtual", False))

    @property
    def profile(self) -> Any:
        return getattr(self._phone, "profile", None)

    @property
    def app_aliases(self) -> dict[str, str]:
        return dict(getattr(self._phone, "app_aliases", {}) or {})

    def size(self) -> tuple[int, int]:
        return self._phone.size()

    def to_pixels(self, x: int, y: int) -> tuple[int, int]:
        return self._phone.to_pixels(x, y)

    def observe(self) -> Observation:
        obs = self._phone.observe()
        self._seen_controls = self._control_keys(obs.hierarchy)
        return obs

    def hierarchy(self) -> str:
        return self._phone.hierarchy()

    def settled_hierarchy(self) -> str:
        settled = getattr(self._phone, "settled_hierarchy", None)
        return str(settled()) if settled is not None else self._phone.hierarchy()

    def screenshot(self) -> bytes:
        return self._phone.screenshot()

    def current_app(self) -> str | None:
        return self._query("current_app")

    def current_activity(self) -> str | None:
        return self._query("current_activity")

    def app_version(self, package: str) -> str | None:
        return self._query("app_version", package)

    def recent_app_version(self, package: str) -> str | None:
        return self._query("recent_app_version", package)

    def describe(self) -> dict[str, Any]:
        info = self._query("describe")
        return dict(info) if isinstance(info, dict) else {"serial": self.serial}

    def _query(self, name: str, *args: Any) -> Any:
        method = getattr(self._phone, name, None)
        if method is None:
            raise DeviceError(f"{self.serial}: this device cannot answer {name}")
        return method(*args)

    def check(self, action: Action) -> Block | None:
        """What the guard would decide about `action` on a fresh dump now (nothing is sent)."""
        _, hierarchy = self._dump()
        return self.interlock.check(action, hierarchy, self._phone.to_pixels, self._phone.size())

    # Checked operations --------------------------------------------------------------------

    def start_app(self, app: str) -> None:
        """Start an app: only one of the armed pack's packages (the Device protocol's launch)."""
        self.launch(app)

    def stop_app(self, app: str) -> None:
        self._phone.stop_app(app)  # a force-stop commits nothing

    def launch(self, package: str, cold_start: Callable[[str], None] | None = None) -> None:
        """Start `package` — refused unless it is one of the armed pack's packages. `cold_start` is
        the caller's own stop / start / pop-up routine, run only once the launch is allowed."""
        package = self.interlock.app_aliases.get(package, package)
        self.checked += 1
        if not self.armed:
            raise DeviceError(
                f"interlock on {self.serial} is not armed; refusing the launch of {package}",
                hint="arm it with the pack's policy first",
            )
        if not self.interlock.policy.may_launch(package):
            self._refuse_plain(
                "launch", Block(None, f"launch of {package!r}: not one of the pack's packages")
            )
        log.info("interlock on %s: launching %s", self.serial, package)
        if cold_start is not None:
            cold_start(package)
        else:
            self._phone.stop_app(package)
            self._phone.start_app(package)

    def deep_link(self, url: str) -> None:
        """Open a deep link — refused unless its scheme is one the armed pack declares."""
        self.checked += 1
        if not self.armed:
            raise DeviceError(
                f"interlock on {self.serial} is not armed; refusing deep link {url}",
                hint="arm it with the pack's policy first",
            )
        if not self.interlock.policy.may_deep_link(url):
            self._refuse_plain(
                "deep_link",
                Block(None, f"deep link {url!r}: its scheme is not one of the pack's url_schemes"),
            )
        shell = getattr(self._phone, "shell", None)
        if shell is None:
            raise DeviceError(f"{self.serial}: this device cannot open a deep link")
        log.info("interlock on %s: deep link %s", self.serial, url)
        shell(["am", "start", "-a", "android.intent.action.VIEW", "-d", url])

    def override(self, action: Action, *, operator: str, reason: str) -> Block | None:
        """Send `action` without the checks, on an operator's explicit decision (the console's
        "send anyway"). Logged at WARNING with the operator, the reason, what the guard would
        have refused and the screen. Returns that refusal (None if the guard would have allowed it)."""
        if not operator.strip():
            raise DeviceError("an override needs the operator's name", hint="the console asks for it")
        xml, hierarchy = self._dump()
        size = self._phone.size()
        would = self.interlock.check(action, hierarchy, self._phone.to_pixels, size)
        log.warning(
            "interlock on %s OVERRIDDEN by operator %r (%s): %s; boundary: %s; screen: %s",
            self.serial,
            operator,
            reason,
            action.type,
            would.describe() if would else "none (the guard would have allowed it)",
            screen_name(hierarchy, Bounds(0, 0, size[0], size[1])),
        )
        self._phone.act(action)
        return would

    def dismiss_foreign_popup(self, popup: Popup) -> bool:
        """Tap away a pop-up drawn by a package outside the armed pack (a ROM permission prompt, an
        ANR dialog), which the pack's policy refuses as a touch in another app. Decided on fresh
        dumps by `devices.farm.setup_doors.foreign_popup_block`: the pop-up is still shown, the
        tap lands in its own package only, and its control neither reads as a commit / money word
        nor overlaps one. False when the pop-up is gone; BoundaryBlocked when refused."""
        from devices.farm.setup_doors import foreign_popup_block

        if not self.armed:
            raise DeviceError(
                f"interlock on {self.serial} is not armed; refusing to dismiss {popup.name!r}",
                hint="arm it with the pack's policy first",
            )
        try:
            hierarchy = Hierarchy(self._phone.hierarchy())
        except RealbenchError:
            return False
        button = hierarchy.find_one(popup.tap) if hierarchy.find_one(popup.when) is not None else None
        if button is None:
            return False
        w, h = self._phone.size()
        cx, cy = button.bounds.center
        nx, ny = to_normalised(cx, cy, w, h)
        click = Click(x=nx, y=ny)
        point = self._phone.to_pixels(click.x, click.y)

        def decide(fresh: Hierarchy, screen: tuple[int, int]) -> Block | None:
            now = fresh.find_one(popup.tap)
            if now is None or now.bounds != button.bounds:
                return Block(None, f"the dismiss control of {popup.name!r} moved or is gone")
            return foreign_popup_block(self.interlock, fresh, popup.when, now, point)

        self._guard(click, decide=decide)
        log.info("interlock on %s: dismissing %r (drawn by %s)", self.serial, popup.name, button.package)
        self._phone.act(click)
        return True

    def type_credential(self, text: str, *, into: Selector, login_screen: str, what: str) -> None:
        """The login door: type an account credential (`what`: "username", "password") into the
        login field `into`. The only way text reaches a money-moving app's password field: decided
        on fresh dumps by `devices.farm.setup_doors.credential_block` (the pack's login screen
        `login_screen` positively recognised, `into` listed by it and focused, no stop control or
        PIN pad shown). Logged with the field and the length, never the value."""
        from devices.farm.setup_doors import credential_block

        if not self.armed:
            raise DeviceError(
                f"interlock on {self.serial} is not armed; refusing to type the {what}",
                hint="arm it with the pack's policy first",
            )
        typed = Type(text=text)

        def decide(hierarchy: Hierarchy, screen: tuple[int, int]) -> Block | None:
            return credential_block(
                self.interlock, hierarchy, screen, text=text, into=into, login_screen=login_screen
            )

        # the refusal names Type, not the text: the secret never reaches a message or a log
        self._guard(Type(text="*"), decide=decide)
        log.info(
            "interlock on %s: login door: %d characters of the %s into %s on %r",
            self.serial,
            len(text),
            what,
            into,
            login_screen,
        )
        self._phone.act(typed)

    def close(self) -> None:
        self._phone.close()

    def raw_phone_for_tests(self, reason: str) -> GuardedPhone:
        """The unguarded phone. For tests that must prove a trap commits without the guard; no
        library or console code calls it. Every call is logged."""
        log.warning("interlock on %s: raw phone handed out (%s)", self.serial, reason)
        return self._phone

    def act(self, action: Action) -> None:
        if isinstance(action, PASS_THROUGH):
            self._phone.act(action)
            return
        if not self.armed:
            # A setup bug, not a boundary: unscored, and nothing is sent.
            raise DeviceError(
                f"interlock on {self._phone.serial} is not armed; refusing {action.type}",
                hint="PhoneTarget.setup arms it with the task's boundary and the app's forbidden controls",
            )
        if isinstance(action, KeyPress) and action.key in (Key.BACK, Key.HOME, Key.RECENT):
            self._phone.act(action)  # back / home / recent cannot commit anything
            return
        if isinstance(action, OpenApp):
            self.checked += 1
            block = self.interlock.check_open_app(action)
            if block is not None:
                self._refuse(action, block, self._dump_or_none())
            self._phone.act(action)
            return
        if isinstance(action, DoubleClick):
            # The first tap may open a dialog whose commit button lies under the second one:
            # each tap is checked against the screen it will land on.
            single = Click(x=action.x, y=action.y)
            self._guard(action)
            self._phone.act(single)
            self._guard(action, settle=False)
            self._phone.act(single)
            return
        self._guard(action)
        self._phone.act(action)

    def _guard(
        self,
        action: Action,
        *,
        settle: bool = True,
        decide: Callable[[Hierarchy, tuple[int, int]], Block | None] | None = None,
    ) -> None:
        """Decide on fresh dumps, and read again right before the input: the decision is redone
        on each dump until two consecutive dumps agree (or MAX_DUMPS were all decided). `decide`
        replaces the interlock's decision for a setup door (`devices.farm.setup_doors`)."""
        self.checked += 1
        screen = self._phone.size()
        seen = self._seen_controls
        self._seen_controls = None  # after this action the screen is unknown again
        previous: str | None = None
        for attempt in range(MAX_DUMPS):
            xml = self._read_dump()
            if xml == previous:
                # Byte for byte the dump just decided (the decision is a function of the dump):
                # the screen held still across the re-read, and the decision stands unparsed.
                return
            hierarchy = self._parse_dump(xml)
            if decide is not None:
                block = decide(hierarchy, screen)
            else:
                block = self.interlock.check(action, hierarchy, self._phone.to_pixels, screen)
            if block is not None:
                self._refuse(action, block, xml)
            changed_under_agent = (
                previous is None and seen is not None and self._keys(hierarchy, screen) != seen
            )
            if settle and attempt + 1 < MAX_DUMPS and (previous is not None or changed_under_agent):
                time.sleep(self.settle_s)  # the screen is moving: let it settle before the re-read
            previous = xml
        log.info(
            "interlock on %s: the screen changed on each of %d dumps; every one was checked",
            self._phone.serial,
            MAX_DUMPS,
        )

    def _dump(self) -> tuple[str, Hierarchy]:
        xml = self._read_dump()
        return xml, self._parse_dump(xml)

    def _read_dump(self) -> str:
        xml = self._phone.hierarchy()
        self.last_dump_s = time.perf_counter()
        self.dumps += 1
        return str(xml)

    def _parse_dump(self, xml: str) -> Hierarchy:
        try:
            hierarchy = Hierarchy(xml)
        except RealbenchError as exc:
            raise DeviceError(
                f"interlock on {self._phone.serial}: unreadable hierarchy ({exc.message}); nothing sent",
                hint="the episode is an unscored abort and will be rerun",
            ) from None
        if self.screen_check is not None:
            self.screen_check(hierarchy)
        return hierarchy

    def _refuse(self, action: Action, block: Block, xml: str | None) -> None:
        self.blocked.append(block)
        log.warning("interlock on %s blocked %s: %s", self._phone.serial, action.type, block.describe())
        raise BoundaryBlocked(
            f"interlock blocked {action.type} on {self._phone.serial}: {block.describe()}",
            control=block.control.describe() if block.control else block.reason,
            hierarchy=xml,
            screenshot=self._screenshot_or_none(),
        )

    def _refuse_plain(self, what: str, block: Block) -> None:
        """A refusal that is not about a screen (a launch, a deep link): nothing was sent."""
        self.blocked.append(block)
        log.warning("interlock on %s blocked %s: %s", self._phone.serial, what, block.describe())
        raise BoundaryBlocked(
            f"interlock blocked {what} on {self._phone.serial}: {block.describe()}",
            control=block.reason,
            hierarchy=self._dump_or_none(),
            screenshot=self._screenshot_or_none(),
        )

    def _keys(
        self, hierarchy: Hierarchy, screen: tuple[int, int] | None = None
    ) -> set[tuple[str, tuple[str, ...]]]:
        return {c.key() for c in self.interlock.controls(hierarchy, screen)}

    def _control_keys(self, xml: str | None) -> set[tuple[str, tuple[str, ...]]] | None:
        if not xml:
            return None
        try:
            return self._keys(Hierarchy(xml))
        except RealbenchError:
            return None

    def _dump_or_none(self) -> str | None:
        try:
            return self._phone.hierarchy()
        except DeviceError:
            return None

    def _screenshot_or_none(self) -> bytes | None:
        try:
            return self._phone.screenshot()
        except DeviceError:
            return None
