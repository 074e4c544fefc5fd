"""The real apps' interruptions that answer a step of a flow, for drift variants.

Launch pop-ups (clones/interruptions.py) appear when the app starts. The ones here answer what the
user just did: a dialog after 预订, a wait screen after 提交订单, an error dialog instead of the order.
Public scripts and run notes for the real 12306 app name their texts and, for the native 温馨提示
dialogs, the view ids (REAL_APPS.md, sections 1d, 1f and 1g); the rest of the markup is a guess.

Each is drift (`Drift.flow`, the `flow` profile), never the clone's default, and the clone's state
never sees it: a dialog shown *after* an event leaves the event's effect in place, and one shown
*instead of* an event (the error dialogs) keeps the event from reaching the clone at all, so no
order exists until the user submits again. Each shows once per app launch.
"""

from __future__ import annotations

import html
from dataclasses import dataclass, field
from enum import StrEnum

# The event the overlays post (kept equal to clones.drift.DRIFT_EVENT, which imports this module).
_DISMISS = "__drift__"


class When(StrEnum):
    AFTER = "after"  # shown once the clone has handled the event and reached `route`
    INSTEAD = "instead"  # shown in place of the event, which the clone never receives


@dataclass(frozen=True)
class FlowInterruption:
    name: str
    evidence: str  # what is known and where from; the rest of the markup is a guess
    markup: str
    events: tuple[str, ...]  # the clone's UI events that bring it up
    when: When
    route: str | None = None  # for AFTER: only when the event lands on this route
    expires_s: int | None = None  # a wait screen that closes on its own after this many seconds


def _native_tip(name: str, content: str) -> str:
    """The app's native 温馨提示 dialog: `title`, `content`, and `sure` 确定 (REAL_APPS.md 1g)."""
    return (
        f'<div class="modal" id="rb_{name}"><div class="dialog" role="dialog">'
        f'<div class="dialog-title" id="title">温馨提示</div>'
        f'<div class="dialog-body" id="content">{html.escape(content)}</div>'
        f'<div class="dialog-actions"><button class="btn dialog-btn" id="sure" data-ev="{_DISMISS}" '
        f'data-arg="{name}">确定</button></div></div></div>'
    )


QUIET_CARRIAGE_TEXT = "静音车厢"
QUEUE_TEXTS = ("订单处理中", "正在努力为您占座")
STALE_TEXT = "车票信息已过期(M0013)"
BUSY_TEXT = "系统忙，请稍后再试（C0001）"
QUEUE_S = 5  # the real queue takes 20-60 s (run notes); a short wait keeps episodes short

TRAIN_TICKETING: tuple[FlowInterruption, ...] = (
    FlowInterruption(
        "tt_quiet_carriage",
        "[web] a dialog about the 静音车厢 (quiet carriage) after 预订, confirmed by 选择 or 继续 "
        "(fs#61014897233, fs#60883061038); its body and which button does what are guesses",
        # an H5 layer of the booking page: no view ids, Buttons with text
        f'<div class="modal" id="rb_tt_quiet_carriage"><div class="dialog" role="dialog">'
        f'<div class="dialog-title">{QUIET_CARRIAGE_TEXT}</div>'
        f'<div class="dialog-body">本次列车设有静音车厢，请保持安静，可选择静音车厢席位。</div>'
        f'<div class="dialog-actions">'
        f'<button class="btn dialog-btn" data-ev="{_DISMISS}" data-arg="tt_quiet_carriage">选择</button>'
        f'<button class="btn dialog-btn" data-ev="{_DISMISS}" data-arg="tt_quiet_carriage">继续</button>'
        f"</div></div></div>",
        events=("book_seat", "book_leg"),
        when=When.AFTER,
        route="order_form",
    ),
    FlowInterruption(
        "tt_order_queue",
        "[script] after 提交订单 a View containing 正在努力为您占座 (fs#26127499662) and, on the current "
        "app, 订单处理中 for 20-60 s before 立即支付 (fs#61014897233); the layout is a guess",
        f'<div class="modal" id="rb_tt_order_queue"><div class="dialog" role="status">'
        f'<div class="dialog-title">{QUEUE_TEXTS[0]}</div>'
        f'<div class="dialog-body">{QUEUE_TEXTS[1]}，请耐心等待</div>'
        # the page ends the wait itself (runtime.js counts [data-countdown] down), as the app does
        # when the seat is held: a phone's page only asks the server for a screen after an input
        f'<span aria-hidden="true" data-countdown="{QUEUE_S}" data-ev="{_DISMISS}" '
        f'data-arg="tt_order_queue"></span></div></div>',
        events=("submit_order", "confirm_submit"),
        when=When.AFTER,
        route="order_pay",
        expires_s=QUEUE_S,
    ),
    FlowInterruption(
        "tt_stale_m0013",
        "[web] 提交订单 on a list left open too long answers 车票信息已过期(M0013), closed by 确定 "
        "(fs#61014897233); [script] the 温馨提示 dialog's ids title/content/sure (fs#26127499662)",
        _native_tip("tt_stale_m0013", STALE_TEXT),
        events=("submit_order",),
        when=When.INSTEAD,
    ),
    FlowInterruption(
        "tt_busy_c0001",
        "[script] 提交订单 answered by 温馨提示 系统忙，请稍后再试（C0001）, closed by sure 确定 "
        "(fs#26127499662, errorMaps and doClickTipWindow)",
        _native_tip("tt_busy_c0001", BUSY_TEXT),
        events=("submit_order",),
        when=When.INSTEAD,
    ),
)

CATALOGUE: dict[str, tuple[FlowInterruption, ...]] = {"train_ticketing": TRAIN_TICKETING}


def flow_interruptions_of(clone_name: str) -> dict[str, FlowInterruption]:
    return {i.name: i for i in CATALOGUE.get(clone_name, ())}


@dataclass
class FlowScreen:
    """Which flow interruptions a session still has to show, and the one showing now."""

    names: list[str]
    catalogue: dict[str, FlowInterruption]
    pending: list[str] = field(default_factory=list)
    showing: str | None = None
    shown_at: float | None = None

    def arm(self) -> None:
        self.pending = list(self.names)
        self.showing = None
        self.shown_at = None

    def _first(self, event: str, when: When, route: str | None = None) -> str | None:
        for name in self.pending:
            item = self.catalogue[name]
            if item.when is when and event in item.events and (item.route is None or item.route == route):
                return name
        return None

    def _show(self, name: str) -> None:
        self.pending.remove(name)
        self.showing = name
        self.shown_at = None

    def intercepts(self, event: str) -> bool:
        """True when an INSTEAD interruption takes this event (which must then not reach the clone)."""
        if self.showing is not None:
            return False
        name = self._first(event, When.INSTEAD)
        if name is None:
            return False
        self._show(name)
        return True

    def after(self, event: str, route: str) -> None:
        """The clone handled `event` and now shows `route`: bring up an AFTER interruption if one waits."""
        if self.showing is None:
            name = self._first(event, When.AFTER, route)
            if name is not None:
                self._show(name)

    def active(self, now: float) -> str | None:
        """The interruption on screen (None when none), expiring a wait screen whose time is up."""
        if self.showing is None:
            return None
        expires = self.catalogue[self.showing].expires_s
        if expires is not None:
            if self.shown_at is None:
                self.shown_at = now
            elif now - self.shown_at >= expires:
                self.showing = None
        return self.showing

    def dismiss(self, which: str | None = None) -> bool:
        if self.showing is None or (which is not None and which != self.showing):
            return False
        self.showing = None
        return True
