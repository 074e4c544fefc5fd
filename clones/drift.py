"""Drift: the ways a real app differs from its clone on a given day, applied on top of a clone.

A drifted clone stands in for the real app before phones are used: launch ads with a countdown,
an update dialog, a notification permission prompt, relabelled controls, a shifted layout, slower
responses and different world data. Overlays are rendered by the server on top of the clone's
screen and dismissed by tapping; the clone's own state never sees them, so verifiers are unaffected.

A session without drift (or with the ``none`` profile) renders exactly what the clone renders.
"""

from __future__ import annotations

import html
import math
import re
import time
from dataclasses import dataclass, field
from enum import StrEnum
from typing import TYPE_CHECKING, Any

import numpy as np
from pydantic import BaseModel, ConfigDict, Field

from clones.flow_interruptions import FlowInterruption, FlowScreen, flow_interruptions_of
from clones.interruptions import Interruption, interruptions_of
from realbench.errors import UnknownNameError

if TYPE_CHECKING:
    from clones.base import Clone

# The event the overlays post; its argument names the overlay being dismissed.
DRIFT_EVENT = "__drift__"


class Overlay(StrEnum):
    """Pop-ups a drifted app shows, in the order a real app shows them after launch."""

    LAUNCH_AD = "launch_ad"
    UPDATE_DIALOG = "update_dialog"
    NOTIFICATION_PROMPT = "notification_prompt"


class Drift(BaseModel):
    """How a session departs from the plain clone. All fields default to "no drift"."""

    model_config = ConfigDict(extra="forbid", frozen=True)

    name: str = "custom"
    seed: int = 0
    launch_ad: bool = False
    ad_countdown_s: int = Field(default=3, ge=1, le=30)
    update_dialog: bool = False
    notification_prompt: bool = False
    relabel: dict[str, str] = Field(default_factory=dict)
    layout_shift_px: int = Field(default=0, ge=0, le=400)
    # the real app's own pop-ups (clones/interruptions.py), by name, shown after the generic ones
    interruptions: list[str] = Field(default_factory=list)
    # the real app's interruptions that answer a step (clones/flow_interruptions.py), by name
    flow: list[str] = Field(default_factory=list)
    latency_ms: int = Field(default=0, ge=0, le=10_000)
    data_seed: int | None = None

    @property
    def is_none(self) -> bool:
        """True when the drift changes nothing (the session renders the plain clone)."""
        return self.model_dump(exclude={"name", "seed"}) == Drift().model_dump(exclude={"name", "seed"})

    def overlays(self) -> list[str]:
        out: list[str] = []
        if self.launch_ad:
            out.append(Overlay.LAUNCH_AD)
        if self.update_dialog:
            out.append(Overlay.UPDATE_DIALOG)
        if self.notification_prompt:
            out.append(Overlay.NOTIFICATION_PROMPT)
        return out + list(self.interruptions)


# --- named profiles ----------------------------------------------------------------------------

DRIFT_PROFILES: tuple[str, ...] = (
    "none",
    "mild",
    "heavy",
    "relabel",
    "layout",
    "ads",
    "interruptions",
    "flow",
)
# One kind of drift each (relabel, layout, ads): what fidelity measurement must tell apart.
LAYOUT_SHIFT_PX = 48
ADS_COUNTDOWN_S = 30


def _clone_relabels(clone: Clone | None) -> dict[str, str]:
    return dict(getattr(clone, "drift_relabels", {}) or {}) if clone is not None else {}


def _subset(relabels: dict[str, str], rng: np.random.Generator, fraction: float) -> dict[str, str]:
    if not relabels:
        return {}
    keys = sorted(relabels)
    count = max(1, math.ceil(len(keys) * fraction))
    chosen = rng.choice(len(keys), size=count, replace=False)
    return {keys[int(i)]: relabels[keys[int(i)]] for i in sorted(chosen)}


def drift_profile(name: str, *, seed: int = 0, clone: Clone | None = None) -> Drift:
    """A named, seeded drift profile. Relabels come from the clone's ``drift_relabels`` map."""
    rng = np.random.default_rng(seed)
    relabels = _clone_relabels(clone)
    if name == "none":
        return Drift(name=name, seed=seed)
    if name == "relabel":
        return Drift(name=name, seed=seed, relabel=relabels)
    if name == "layout":
        return Drift(name=name, seed=seed, layout_shift_px=LAYOUT_SHIFT_PX)
    if name == "interruptions":
        names = [i.name for i in interruptions_of(clone.name).values()] if clone is not None else []
        return Drift(name=name, seed=seed, interruptions=names)
    if name == "flow":
        flow = list(flow_interruptions_of(clone.name)) if clone is not None else []
        return Drift(name=name, seed=seed, flow=flow)
    if name == "ads":
        # a long countdown, so the ad is still up when a screen is captured or observed
        return Drift(name=name, seed=seed, launch_ad=True, ad_countdown_s=ADS_COUNTDOWN_S)
    if name == "mild":
        return Drift(
            name=name,
            seed=seed,
            launch_ad=True,
            ad_countdown_s=3,
            relabel=_subset(relabels, rng, 0.5),
            layout_shift_px=int(rng.integers(8, 25)),
            latency_ms=int(rng.integers(30, 81)),
        )
    if name == "heavy":
        return Drift(
            name=name,
            seed=seed,
            launch_ad=True,
            ad_countdown_s=5,
            update_dialog=True,
            notification_prompt=True,
            relabel=relabels,
            layout_shift_px=int(rng.integers(24, 65)),
            latency_ms=int(rng.integers(150, 301)),
            data_seed=1000 + seed,
        )
    raise UnknownNameError("drift profile", name, list(DRIFT_PROFILES))


def resolve_drift(spec: Drift | str | dict[str, Any] | None, clone: Clone | None = None) -> Drift | None:
    """A Drift from a profile name, ``{"profile": name, "seed": n}``, a Drift's JSON, or None."""
    if spec is None or isinstance(spec, Drift):
        return spec
    if isinstance(spec, str):
        return drift_profile(spec, clone=clone)
    if "profile" in spec:
        return drift_profile(str(spec["profile"]), seed=int(spec.get("seed", 0)), clone=clone)
    return Drift.model_validate(spec)


# --- per-session overlay state and rendering ---------------------------------------------------


@dataclass
class DriftScreen:
    """Which overlays a session still has to show; re-armed on every reset (an app launch)."""

    drift: Drift
    pending: list[str] = field(default_factory=list)
    ad_shown_at: float | None = None
    catalogue: dict[str, Interruption] = field(default_factory=dict)
    flow_catalogue: dict[str, FlowInterruption] = field(default_factory=dict)
    flow: FlowScreen | None = None

    def __post_init__(self) -> None:
        unknown = [n for n in self.drift.interruptions if n not in self.catalogue]
        if unknown:
            raise UnknownNameError("interruption", unknown[0], sorted(self.catalogue))
        unknown = [n for n in self.drift.flow if n not in self.flow_catalogue]
        if unknown:
            raise UnknownNameError("flow interruption", unknown[0], sorted(self.flow_catalogue))
        if self.drift.flow:
            self.flow = FlowScreen(list(self.drift.flow), self.flow_catalogue)

    def arm(self) -> None:
        self.pending = self.drift.overlays()
        self.ad_shown_at = None
        if self.flow is not None:
            self.flow.arm()

    @property
    def active(self) -> str | None:
        if self.pending:
            return self.pending[0]
        return self.flow.active(time.monotonic()) if self.flow is not None else None

    def intercepts(self, event: str) -> bool:
        """True when a flow interruption answers `event` in its place (the clone must not receive it)."""
        return self.flow is not None and not self.pending and self.flow.intercepts(event)

    def after(self, event: str, route: str) -> None:
        """The clone handled `event` and shows `route`: a flow interruption waiting for that comes up."""
        if self.flow is not None:
            self.flow.after(event, route)

    def dismiss(self, which: str | None = None) -> bool:
        """Close the front overlay (or the named one). Returns False when nothing was open."""
        if not self.pending:
            return self.flow.dismiss(which) if self.flow is not None else False
        if which is None or which == self.pending[0]:
            self.pending.pop(0)
        else:
            self.pending = [o for o in self.pending if o != which]
        return True

    def ad_remaining(self, now: float | None = None) -> int:
        """Seconds left on the launch ad's countdown; the clock starts when it is first shown."""
        now = time.monotonic() if now is None else now
        if self.ad_shown_at is None:
            self.ad_shown_at = now
        return max(0, self.drift.ad_countdown_s - int(now - self.ad_shown_at))

    def overlay_html(self, app_title: str, now: float | None = None) -> str:
        """The HTML of the front overlay ('' when none), expiring the ad when its countdown is over."""
        while self.pending and self.pending[0] == Overlay.LAUNCH_AD and self.ad_remaining(now) == 0:
            self.dismiss(Overlay.LAUNCH_AD)
        overlay = self.pending[0] if self.pending else None
        if overlay is None:
            flow = self.flow.active(time.monotonic() if now is None else now) if self.flow else None
            return self.flow_catalogue[flow].markup if flow is not None else ""
        if overlay in self.catalogue:
            return self.catalogue[overlay].markup
        if overlay == Overlay.LAUNCH_AD:
            left = self.ad_remaining(now)
            return (
                '<div class="modal rb-drift-ad" id="rb_launch_ad">'
                '<div class="rb-ad-art" aria-label="广告"><div class="rb-ad-title">春季出行季</div>'
                '<div class="rb-ad-sub">精选优惠 限时抢购</div></div>'
                f'<button class="rb-ad-skip" id="rb_ad_skip" data-ev="{DRIFT_EVENT}" data-arg="launch_ad" '
                f'data-countdown="{left}">跳过 {left}</button>'
                "</div>"
            )
        if overlay == Overlay.UPDATE_DIALOG:
            return _dialog(
                "rb_update_dialog",
                "发现新版本",
                "新版本已发布，优化了使用体验并修复了已知问题。",
                [("以后再说", "update_dialog"), ("立即更新", "update_dialog")],
            )
        title = html.escape(app_title)
        return _dialog(
            "rb_notification_prompt",
            f"允许“{title}”发送通知吗？",
            "通知可能包括提醒、声音和图标标记。",
            [("不允许", "notification_prompt"), ("允许通知", "notification_prompt")],
        )


def _dialog(dom_id: str, title: str, body: str, buttons: list[tuple[str, str]]) -> str:
    btns = "".join(
        f'<button class="btn dialog-btn" data-ev="{DRIFT_EVENT}" data-arg="{arg}">{label}</button>'
        for label, arg in buttons
    )
    return (
        f'<div class="modal" id="{dom_id}"><div class="dialog" role="dialog">'
        f'<div class="dialog-title">{title}</div><div class="dialog-body">{body}</div>'
        f'<div class="dialog-actions">{btns}</div></div></div>'
    )


# Text between tags, plus the two attributes a user reads (placeholder, aria-label).
_TEXT = re.compile(r">([^<]+)<")
_ATTR = re.compile(r'((?:placeholder|aria-label)=")([^"]*)(")')


def relabel_html(markup: str, relabel: dict[str, str]) -> str:
    """Replace labels in the visible text of `markup`, never in event names or other attributes."""
    if not relabel:
        return markup
    # Longest first, so a label that contains another is replaced whole.
    pairs = sorted(relabel.items(), key=lambda kv: -len(kv[0]))

    def swap(text: str, *, in_attribute: bool = False) -> str:
        for old, new in pairs:
            # inside an attribute value a quote in the new label would end the attribute
            text = text.replace(html.escape(old, quote=False), html.escape(new, quote=in_attribute))
        return text

    markup = _TEXT.sub(lambda m: ">" + swap(m.group(1)) + "<", markup)
    return _ATTR.sub(lambda m: m.group(1) + swap(m.group(2), in_attribute=True) + m.group(3), markup)


def shift_html(px: int) -> str:
    """A spacer that pushes the app's screen down, as a taller header or banner would."""
    return f'<div class="rb-drift-shift" style="height:{px}px" aria-hidden="true"></div>' if px else ""
