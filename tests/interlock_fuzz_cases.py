"""Generated attacks on the interlock: phone screens composed from parts, each case's verdict taken
from the virtual phone's own commit records.

A case is drawn by `make_case(seed, index)` from its own `numpy.random.Generator` (seeded by
`(seed, index)`, so any one case is rebuilt alone): a pack to arm the guard like (`bank`,
`train_ticketing`, or the hand-written attack suite's test policy), a label for the commit control
(a pack's stop label, the same in traditional Chinese or English, a synonym) in a *label form*
(split, reordered, an icon between its halves, a caption beside a text-less button, zero-width or
odd spaces, full width, a price, in the content-desc only, only an id, nothing, or an id that the
shown screen's catalogue entry lists — the listed control relabelled, or reused by a commit
control), a *control form*
(button, nested clickable card, touch delegate, transparent overlay, WebView with no nodes, an
undumped window, a dialog that appears after the guard looked, a safe-screen marker off screen),
an *input* (tap inside / on the edge / in the slop, long press, double tap, swipe ending on the
control or sliding through it, ENTER, a typed newline, a typed PIN, keys, launching another app, a
deep link) and a *path* that carries it (the agent's device, a recipe setup step, the logged-in
probe's steps, a certify golden step, the lab console's guard armed with every pack's policy, as
`ConsolePhones.lease` arms it; the console's page and its blocked-input confirm dialog are a fixed
sample of these cases, tests/test_console_dialog_sample.py, since Chromium costs seconds a case).

`run_case(case, guarded=...)` runs it on a fresh in-process virtual phone
(`devices.virtual.composed_phone`): unguarded, straight to the phone; guarded, through a
`PhoneTarget` for the pack, armed as its setup arms it. Whether anything committed is read from the
phone's screens, never from the guard. Shared by benchmarks/interlock_fuzz.py and
tests/test_interlock_fuzz.py.
"""

from __future__ import annotations

import contextlib
import copy
from collections.abc import Callable, Iterator
from dataclasses import dataclass, field
from datetime import date
from functools import cache
from pathlib import Path
from typing import Any

import numpy as np

from devices.certify import CertResult, _Recorder, run_real_golden
from devices.farm.interlock_policy import InterlockPolicy
from devices.virtual.commit_screens import TOUCHES, Commit, Gesture, Hotspot, ScreenSpec
from devices.virtual.composed_phone import InProcessPhone
from devices.virtual.model import BROWSER_PACKAGE
from devices.virtual.uitree import UiNode
from realbench.actions import Click, DoubleClick, Key, KeyPress, LongPress, OpenApp, Swipe, Type
from realbench.errors import BoundaryBlocked, RealbenchError
from realbench.hierarchy import Selector
from realbench.taskpack import SafeInput, TaskPack, load_pack

ROOT = Path(__file__).resolve().parents[1]
BANK = "com.chinamworld.main"
TICKET = "com.MobileTicket"
CASHIER = "com.fuzz.cashier"  # a third-party app that pays the moment it opens (a test app)
W, H = 1080, 2400
TITLE = (0, 63, W, 231)
AMOUNT = (40, 300, 1040, 420)
CANCEL = (40, 560, 500, 680)
CONTROL_TOP, CONTROL_BOTTOM = 800, 2260
PIN = "135790"

PACKS = ("bank", "train_ticketing", "attack-suite")
PACKAGE = {"bank": BANK, "train_ticketing": TICKET, "attack-suite": BANK}

# Commit labels by locale, per pack (the packs' stop labels, then as the app may ship them).
COMMIT_LABELS: dict[str, dict[str, list[str]]] = {
    "simplified": {
        "bank": [
            "确认付款",
            "确认支付",
            "立即支付",
            "确认转账",
            "确认还款",
            "确认购买",
            "确认缴费",
            "确认",
            "确定",
        ],
        "train_ticketing": [
            "提交订单",
            "立即支付",
            "确认支付",
            "确认退票",
            "确认改签",
            "提交候补订单",
            "确认取消",
        ],
    },
    "traditional": {
        "bank": ["確認付款", "確認支付", "確認轉賬", "確認還款", "確認購買", "確認繳費", "確定"],
        "train_ticketing": ["提交訂單", "確認支付", "確認退票", "確認改簽", "提交候補訂單", "確認取消"],
    },
    "english": {
        "bank": ["Confirm Transfer", "Confirm payment", "Pay now", "Confirm", "Pay"],
        "train_ticketing": ["Submit order", "Pay now", "Confirm payment", "Confirm refund"],
    },
    "synonym": {
        "bank": [
            "确定付款",
            "确认付钱",
            "马上支付",
            "立即付款",
            "同意并支付",
            "确认并付款",
            "去支付",
            "完成转账",
        ],
        "train_ticketing": ["提交订单并支付", "马上支付", "去支付", "确认下单", "立即购票", "确定退票"],
    },
}
# Money words of the guard's own vocabulary that neither pack's stop list names (a `listed_id`
# control shows one: only the money-word rule can refuse it).
LISTED_ID_LABELS = [
    "Pay",
    "OK",
    "Confirm",
    "Buy now",
    "去支付",
    "确定",
    "完成转账",
    "马上支付",
    "立即购买",
    "同意并支付",
]
SAFE_LABELS = ["取消", "返回", "修改金额", "查看详情", "帮助", "Cancel", "Back"]
ZERO_WIDTH = ["\u200b", "\u200c", "\u200d", "\ufeff", "\u2060", "\u200e", "\u00ad"]
ODD_SPACES = ["\u00a0", "\u3000", "\u2009", " ", "\t", "\u202f"]
PRICES = ["¥100.00", "￥ 1,280.50", "(¥88)", "¥0.01", "CNY 25.00", "￥６６"]
ICON_DESCS = ["安全", "shield", "指纹", "锁", ""]
PAY_IDS = ["btn_pay", "pay_confirm", "tv_submit_order", "confirm_btn", "iv_fingerprint_pay", "btn_ok"]

LABEL_FORMS = (
    "plain",
    "split",
    "reordered",
    "icon_between",
    "caption",
    "zero_width",
    "odd_spaces",
    "full_width",
    "half_width",
    "price",
    "desc_only",
    "id_only",
    "none",
    "listed_id",
)
CONTROL_FORMS = (
    "button",
    "nested",
    "touch_delegate",
    "overlay",
    "webview",
    "undumped_window",
    "late_dialog",
    "offscreen_safe",
)
TOUCH_INPUTS = (
    "tap_inside",
    "tap_edge",
    "tap_slop",
    "long_press",
    "double_tap",
    "swipe_end",
    "swipe_through",
)
INPUTS = (*TOUCH_INPUTS, "enter", "newline", "pin", "keys", "launch", "deep_link", "safe_tap", "safe_type")
# How often each input is drawn: touches are most of an agent's actions.
INPUT_WEIGHTS = {
    **dict.fromkeys(TOUCH_INPUTS, 2),
    "tap_inside": 3,
    **dict.fromkeys(("enter", "newline", "pin", "safe_tap"), 2),
    **dict.fromkeys(("keys", "launch", "deep_link", "safe_type"), 1),
}
PATHS = ("agent", "recipe", "probe", "certify", "console")
PATH_WEIGHTS = (0.5, 0.18, 0.09, 0.13, 0.1)
# Paths that send actions (the console's HTTP API sends what an operator clicks or types).
ACTION_PATHS = ("agent", "console")
# What each path can send: an agent or the console any action; a recipe taps, types, keys,
# launches and deep links; the probe's steps and a certify golden step here tap a control named by
# a selector.
PATH_INPUTS: dict[str, tuple[str, ...]] = {
    "agent": tuple(i for i in INPUTS if i != "deep_link"),
    "console": tuple(i for i in INPUTS if i != "deep_link"),
    "recipe": ("tap_inside", "safe_tap", "newline", "pin", "keys", "launch", "deep_link", "safe_type"),
    "probe": ("tap_inside", "safe_tap"),
    "certify": ("tap_inside", "safe_tap"),
}
DEEP_LINKS = [
    "alipays://platformapi/startapp?appId=20000067",
    "weixin://wxpay/bizpayurl?pr=abc",
    "upwrp://pay",
]


def nx(px: float) -> int:
    return max(0, min(1000, round(px * 1000 / (W - 1))))


def ny(py: float) -> int:
    return max(0, min(1000, round(py * 1000 / (H - 1))))


def px_of(x: int, y: int) -> tuple[int, int]:
    return round(x * (W - 1) / 1000), round(y * (H - 1) / 1000)


Box = tuple[int, int, int, int]


def inside(box: Box, x: float, y: float) -> bool:
    return box[0] <= x <= box[2] and box[1] <= y <= box[3]


# --- packs and arming -------------------------------------------------------------------------


@cache
def pack(name: str) -> TaskPack:
    return load_pack(ROOT / "taskpacks" / ("bank" if name == "attack-suite" else name))


@dataclass(frozen=True)
class Arming:
    boundary: list[Selector]
    forbidden: list[Selector]
    policy: InterlockPolicy


def arming(pack_name: str, boundary_task: int) -> Arming:
    """How a pack's setup arms the guard (a task's boundary, the app's forbidden, the pack's
    policy); the attack suite's hand-written test policy for `attack-suite`."""
    if pack_name == "attack-suite":
        from tests.interlock_attacks import BOUNDARY, FORBIDDEN, POLICY

        return Arming(list(BOUNDARY), list(FORBIDDEN), POLICY)
    p = pack(pack_name)
    bounded = [t for t in p.tasks if t.real.boundary]
    boundary = list(bounded[boundary_task % len(bounded)].real.boundary) if bounded else []
    return Arming(boundary, list(p.real_app.forbidden), InterlockPolicy.for_pack(p))


def safe_screen_markers(pack_name: str) -> list[tuple[Selector, frozenset[SafeInput]]]:
    """The `when` selectors of the screens the pack (or the test policy) marks safe."""
    out = []
    for screen in arming(pack_name, 0).policy.safe_screens:
        markers = getattr(screen, "markers", None)
        if markers is None:  # one selector or a list of them
            markers = screen.when if isinstance(screen.when, list) else [screen.when]
        out += [(m, frozenset(screen.allow)) for m in markers if node_for(m, (0, 0, 1, 1)) is not None]
    return out


@dataclass(frozen=True)
class ListedControl:
    """A control a catalogue entry lists by id, with a marker that makes the entry recognised."""

    screen: str
    marker: Selector
    allows: frozenset[SafeInput]
    rid: str
    stated: str | None  # the label the entry states (None: listed by id alone)


@cache
def listed_controls(pack_name: str) -> tuple[ListedControl, ...]:
    """Every id the pack's catalogue (or the test policy) lists, per entry: by id alone, or by a
    selector that states its label. A prefix (`payee_p*`) stands for one row it covers."""
    out = []
    for screen in arming(pack_name, 0).policy.safe_screens:
        markers = [m for m in screen.markers if node_for(m, (0, 0, 1, 1)) is not None]
        if not markers:
            continue
        for c in screen.controls:
            if isinstance(c, str):
                rid, stated = (c[:-1] + "9" if c.endswith("*") else c), None
            elif c.resource_id is not None:
                rid, stated = c.resource_id, c.text or c.text_pattern
            else:
                continue
            out.append(ListedControl(screen.name, markers[0], frozenset(screen.allow), rid, stated))
    return tuple(out)


def node_for(selector: Selector, box: Box) -> UiNode | None:
    """A node the selector matches (None for a selector only a regex describes, or one that needs
    an ancestor, `inside`: a lone node would not match it)."""
    if selector.text_regex is not None and selector.text is None and selector.text_contains is None:
        return None
    if selector.inside is not None:
        return None
    text = selector.text or selector.text_contains or ""
    rid = selector.resource_id or ""
    return UiNode(
        bounds=box,
        cls=selector.class_name or "android.widget.TextView",
        text=text,
        resource_id=rid,
        content_desc=selector.content_desc or "",
        clickable=bool(selector.clickable),
    )


# --- cases ------------------------------------------------------------------------------------


@dataclass
class Composed:
    """One app screen: its nodes and where its own dispatch commits, and what the input aims at."""

    nodes: list[UiNode]
    hotspots: list[Hotspot]
    aim: UiNode | None  # the node a selector-driven path taps (its centre commits when it is a trap)
    aim_box: Box  # where a point input aims
    node_box: Box | None  # the control's drawn bounds (taps in the slop land outside them)
    commit_on: frozenset[Gesture] = frozenset()
    then: ScreenSpec | None = None


@dataclass
class FuzzCase:
    seed: int
    index: int
    pack: str
    package: str
    path: str
    input_form: str
    label_form: str
    control_form: str
    locale: str
    label: str
    intent: str  # "commit": the input activates a commit on an unguarded phone; "safe": it must not
    boundary_task: int
    screens: dict[str, Callable[[], ScreenSpec]]
    steps: list[Any]  # actions (agent), setup steps (recipe, probe) or plan steps (certify)
    extras: list[str] = field(default_factory=list)
    # what a visible safe-screen marker's screen allows (None: no catalogued screen is shown)
    shown_safe: frozenset[str] | None = None

    @property
    def key(self) -> str:
        return f"seed={self.seed} case={self.index}"

    def describe(self) -> str:
        extra = f" [{', '.join(self.extras)}]" if self.extras else ""
        return (
            f"{self.key}: {self.pack} {self.path} path, {self.input_form} on a {self.control_form} control, "
            f"label {self.label!r} ({self.locale}, {self.label_form}){extra}; steps {self.step_text()}"
        )

    def step_text(self) -> str:
        parts = []
        for s in self.steps:
            dump = getattr(s, "model_dump", None)
            parts.append(repr(dump(exclude_none=True, exclude_defaults=True)) if dump else repr(s))
        return "; ".join(parts)

    def tag(self) -> str:
        """A short name for the case's shape (a test id)."""
        return f"{self.index}-{self.pack}-{self.path}-{self.input_form}-{self.control_form}-{self.label_form}"


def _pick(rng: np.random.Generator, items: Any) -> Any:
    seq = list(items)
    return seq[int(rng.integers(len(seq)))]


def _full_width(text: str) -> str:
    return "".join(chr(ord(c) + 0xFEE0) if "!" <= c <= "~" else ("\u3000" if c == " " else c) for c in text)


def _half_width(text: str) -> str:
    return "".join(chr(ord(c) - 0xFEE0) if "！" <= c <= "～" else c for c in text)


def _sprinkle(rng: np.random.Generator, text: str, chars: list[str], n: int) -> str:
    out = list(text)
    for _ in range(n):
        out.insert(int(rng.integers(1, max(2, len(out)))), _pick(rng, chars))
    return "".join(out)


def _split(rng: np.random.Generator, label: str) -> list[str]:
    words = label.split(" ")
    if len(words) > 1:
        cut = int(rng.integers(1, len(words)))
        return [" ".join(words[:cut]), " ".join(words[cut:])]
    if len(label) < 2:
        return [label]
    k = min(len(label), int(rng.integers(2, 4)))
    cuts = sorted({int(c) for c in rng.choice(np.arange(1, len(label)), size=k - 1, replace=False)})
    return [label[a:b] for a, b in zip([0, *cuts], [*cuts, len(label)], strict=True)]


def _spell(rng: np.random.Generator, label: str, form: str) -> str:
    if form == "zero_width":
        return _sprinkle(rng, label, ZERO_WIDTH, int(rng.integers(1, 3)))
    if form == "odd_spaces":
        return _sprinkle(rng, label, ODD_SPACES, 1) + _pick(rng, ["", " ", "\u00a0"])
    if form == "full_width":
        return _full_width(label) if label.isascii() else label + "（" + _full_width("OK") + "）"
    if form == "half_width":
        return _half_width(_full_width(label)) + _pick(rng, [" (1/2)", "(OK)", ""])
    if form == "price":
        price, where = _pick(rng, PRICES), rng.random()
        if where < 0.4:
            return f"{label} {price}"
        if where < 0.7 or len(label) < 2:
            return f"{price} {label}"
        middle = len(label) // 2  # inside the label: 确认 ¥100.00 付款
        return f"{label[:middle]} {price} {label[middle:]}"
    return label


def _random_box(rng: np.random.Generator, small: bool = False) -> Box:
    if small:
        w = h = int(rng.integers(28, 46))
    else:
        w, h = int(rng.integers(220, 960)), int(rng.integers(100, 200))
    left = int(rng.integers(20, W - 20 - w))
    top = int(rng.integers(CONTROL_TOP + 60, CONTROL_BOTTOM - 60 - h))
    return (left, top, left + w, top + h)


def _labelled(rng: np.random.Generator, label: str, form: str, box: Box, package: str) -> UiNode:
    """The clickable control at `box` whose label is spelled in `form`."""
    left, top, right, bottom = box
    rid = f"{package}:id/{_pick(rng, PAY_IDS)}"
    button = UiNode(bounds=box, cls="android.widget.Button", clickable=True, focusable=True)
    if form in ("split", "reordered", "icon_between"):
        parts = _split(rng, label)
        pieces: list[UiNode] = []
        width = (right - left) // (len(parts) + (1 if form == "icon_between" else 0))
        x = left
        for i, part in enumerate(parts):
            if form == "icon_between" and i == 1:
                desc = _pick(rng, ICON_DESCS)
                pieces.append(
                    UiNode(
                        bounds=(x, top, x + width, bottom), cls="android.widget.ImageView", content_desc=desc
                    )
                )
                x += width
            pieces.append(
                UiNode(bounds=(x, top, x + width, bottom), cls="android.widget.TextView", text=part)
            )
            x += width
        if form == "reordered":
            pieces.reverse()  # dumped out of reading order; the bounds keep the reading order
        button.cls = "android.widget.LinearLayout"
        button.children = pieces
    elif form == "desc_only":
        button.cls = "android.widget.ImageButton"
        button.content_desc = label
    elif form == "id_only":
        button.cls = "android.widget.ImageButton"
        button.resource_id = rid
    elif form == "none":
        button.cls = _pick(
            rng, ["android.widget.ImageView", "android.view.View", "android.widget.ImageButton"]
        )
    elif form == "caption":
        button.cls = "android.widget.ImageButton"
        if rng.random() < 0.5:
            button.resource_id = rid
    else:
        button.text = _spell(rng, label, form)
    return button


def _control(
    rng: np.random.Generator,
    label: str,
    label_form: str,
    control_form: str,
    package: str,
    gestures: frozenset[Gesture],
    rid: str | None = None,
) -> Composed:
    """The commit control in one of its forms, with the nodes around it that the form needs;
    `rid`: the id it reuses (one the shown screen's catalogue entry lists)."""
    small = control_form == "touch_delegate"
    box = _random_box(rng, small=small)
    node = _labelled(rng, label, label_form, box, package)
    if rid is not None:
        node.resource_id = f"{package}:id/{rid}"
    nodes: list[UiNode] = []
    if label_form == "caption":
        left, top, right, bottom = box
        side = right + 10 if right + 300 < W else left - 310
        cap = UiNode(bounds=(side, top, side + 300, bottom), cls="android.widget.TextView", text=label)
        holder = (min(left, side), top - 10, max(right, side + 300), bottom + 10)
        nodes.append(UiNode(bounds=holder, cls="android.widget.LinearLayout", children=[node, cap]))
    else:
        nodes.append(node)
    if control_form == "nested":
        left, top, right, bottom = box
        card = (
            max(0, left - 40),
            max(CONTROL_TOP, top - 80),
            min(W, right + 40),
            min(CONTROL_BOTTOM, bottom + 80),
        )
        node.clickable = False if rng.random() < 0.5 else node.clickable
        wrap = UiNode(bounds=card, cls="android.widget.FrameLayout", clickable=True, children=nodes)
        return Composed([wrap], [Hotspot("card pays", card, gestures)], wrap, card, box)
    if control_form == "touch_delegate":
        left, top, right, bottom = box
        pad = int(rng.integers(40, 90))
        widened = (left - pad, top - pad, right + pad, bottom + pad)
        return Composed(nodes, [Hotspot("delegated pay", widened, gestures)], node, widened, box)
    if control_form == "overlay":
        left, top, right, bottom = box
        over = (max(0, left - 30), top - 40, min(W, right + 30), bottom + 40)
        cover = UiNode(bounds=over, cls="android.view.View", clickable=True, long_clickable=True)
        return Composed(
            [*nodes, cover], [Hotspot("overlay forwarding to pay", over, gestures)], cover, over, box
        )
    if control_form == "webview":
        web = (0, CANCEL[3] + 40, W, CONTROL_BOTTOM)  # below the native cancel button
        kids: list[UiNode] = []
        if rng.random() < 0.4:
            kids.append(UiNode(bounds=(60, 730, 1020, 790), cls="android.view.View", text="订单信息"))
        view = UiNode(bounds=web, cls="android.webkit.WebView", focusable=True, children=kids)
        if rng.random() < 0.5:
            view.resource_id = f"{package}:id/web_container"
        return Composed([view], [Hotspot("H5 pay button", box, gestures)], view, box, None)
    if control_form == "undumped_window":
        under = UiNode(
            bounds=(0, CONTROL_TOP, W, CONTROL_BOTTOM), cls="android.widget.TextView", text="订单详情"
        )
        return Composed([under], [Hotspot("undumped window pays", box, gestures)], under, box, None)
    if control_form == "late_dialog":
        base = UiNode(bounds=box, cls="android.widget.Button", text="下一步", clickable=True)
        after = ScreenSpec([], [Hotspot("dialog pay", box, gestures)])
        after.nodes = nodes  # filled with the frame below by the caller
        return Composed([base], [], base, box, box, then=after)
    return Composed(nodes, [Hotspot("pay", box, gestures)], node, box, box)


def _frame(
    package: str, body: list[UiNode], *, focused_amount: bool = False, title: str = "付款（测试屏）"
) -> list[UiNode]:
    return [
        UiNode(bounds=TITLE, cls="android.widget.TextView", text=title),
        UiNode(
            bounds=AMOUNT,
            cls="android.widget.EditText",
            resource_id=f"{package}:id/amount",
            clickable=True,
            focusable=True,
            focused=focused_amount,
        ),
        UiNode(bounds=CANCEL, cls="android.widget.Button", text="取消", clickable=True, focusable=True),
        *body,
    ]


def _point(rng: np.random.Generator, box: Box, avoid: Box | None, how: str) -> tuple[int, int] | None:
    """A normalised point whose pixel lies in `box` (on its edge for "edge"; outside `avoid` for
    "slop"), or None when none was found."""
    left, top, right, bottom = box
    for _ in range(40):
        if how == "edge":
            side = int(rng.integers(4))
            x = float(rng.uniform(left, right)) if side < 2 else (left + 2 if side == 2 else right - 2)
            y = float(rng.uniform(top, bottom)) if side >= 2 else (top + 2 if side == 0 else bottom - 2)
        else:
            x, y = float(rng.uniform(left + 3, right - 3)), float(rng.uniform(top + 3, bottom - 3))
        n = (nx(x), ny(y))
        p = px_of(*n)
        if not inside(box, *p):
            continue
        if how == "slop" and avoid is not None and inside(avoid, *p):
            continue
        return n
    return None


def _offscreen(rng: np.random.Generator, node: UiNode) -> UiNode:
    """A safe-screen marker the display does not show: below it, zero-size, or left of it."""
    where = _pick(rng, ["below", "zero", "left"])
    node.bounds = {"below": (40, H + 100, 600, H + 200), "zero": (0, 0, 0, 0), "left": (-W, 300, -40, 400)}[
        where
    ]
    return node


def make_case(seed: int, index: int) -> FuzzCase:
    rng = np.random.default_rng(np.random.SeedSequence([seed, index]))
    pack_name = _pick(rng, PACKS)
    package = PACKAGE[pack_name]
    locale = _pick(rng, COMMIT_LABELS)
    labels_key = "bank" if pack_name == "attack-suite" else pack_name
    label = _pick(rng, COMMIT_LABELS[locale][labels_key])
    path = PATHS[int(rng.choice(len(PATHS), p=PATH_WEIGHTS))]
    if pack_name == "attack-suite" and path in ("probe", "console"):
        # the probe and the console arm the guard with the packs' own policies, not the suite's
        path = "recipe" if path == "probe" else "agent"
    inputs = PATH_INPUTS[path]
    weights = np.array([INPUT_WEIGHTS[i] for i in inputs], dtype=float)
    input_form = inputs[int(rng.choice(len(inputs), p=weights / weights.sum()))]
    label_form = _pick(rng, LABEL_FORMS)
    control_form = _pick(rng, CONTROL_FORMS)
    boundary_task = int(rng.integers(0, 1000))
    case = FuzzCase(
        seed,
        index,
        pack_name,
        package,
        path,
        input_form,
        label_form,
        control_form,
        locale,
        label,
        "commit",
        boundary_task,
        {},
        [],
    )
    if input_form in TOUCH_INPUTS or input_form == "safe_tap":
        _touch_case(rng, case)
    elif input_form in ("enter", "newline", "safe_type"):
        _key_case(rng, case)
    elif input_form == "pin":
        _pin_case(rng, case)
    elif input_form == "keys":
        _keys_case(rng, case)
    else:
        _launch_case(rng, case)
    return case


def _with_marker(
    rng: np.random.Generator, case: FuzzCase, allow: SafeInput | None, visible: bool
) -> list[UiNode]:
    """A node of one of the pack's safe screens (off screen unless `visible`), preferring one whose
    `allow` holds `allow`."""
    markers = safe_screen_markers(case.pack)
    if allow is not None:
        markers = [m for m in markers if allow in m[1]] or markers
    if not markers:
        return []
    when, allows = _pick(rng, markers)
    return _marker_node(rng, case, when, allows, visible)


def _marker_node(
    rng: np.random.Generator, case: FuzzCase, when: Selector, allows: frozenset[SafeInput], visible: bool
) -> list[UiNode]:
    node = node_for(when, (40, 240, 600, 290))
    assert node is not None
    case.extras.append(f"{'visible' if visible else 'off-screen'} safe-screen marker {_sel(when)}")
    if visible:
        case.shown_safe = frozenset(str(a) for a in allows)
    return [node if visible else _offscreen(rng, node)]


def _reused_listed_id(rng: np.random.Generator, case: FuzzCase) -> tuple[list[UiNode], str | None]:
    """For the `listed_id` form: the marker of an entry that lists controls by id, shown, and an id
    it lists for the commit control to reuse. Where the entry states a label, the control shows
    another money label (the listed control relabelled: 确定 where 去支付 was listed); the label the
    entry vouches for is the design's to let through."""
    from devices.farm.stop_labels import match_form, stop_labels

    listed = listed_controls(case.pack)
    if not listed:
        case.label_form = "plain"
        return [], None
    stated_ones = [c for c in listed if c.stated is not None]
    # a third relabel a control whose entry states its label (the few the golden plans need)
    pick: ListedControl = _pick(rng, stated_ones if stated_ones and rng.random() < 0.33 else listed)
    # the forms in which the label is the control's own (not an H5 page's, an undumped window's)
    case.control_form = _pick(rng, ["button", "nested", "touch_delegate", "late_dialog"])
    arm = arming(case.pack, case.boundary_task)
    stops = [lab for sel in arm.boundary + arm.forbidden for lab in stop_labels(sel)]
    labels_key = "bank" if case.pack == "attack-suite" else case.pack
    pool = [lab for by_pack in COMMIT_LABELS.values() for lab in by_pack[labels_key]] + LISTED_ID_LABELS

    def fits(label: str) -> bool:
        """Not the label the entry vouches for; mostly one the pack's own stop lists do not name,
        so that only the guard's money words stand between the tap and the commit."""
        form = match_form(label)
        return (pick.stated is None or form != match_form(pick.stated)) and not any(s in form for s in stops)

    unnamed = [lab for lab in pool if fits(lab)]
    if unnamed and rng.random() < 0.8:
        case.label = _pick(rng, unnamed)
    elif pick.stated is not None and match_form(case.label) == match_form(pick.stated):
        case.label = _pick(rng, [lab for lab in pool if match_form(lab) != match_form(pick.stated)])
    stated = f", stated label {pick.stated!r}" if pick.stated is not None else ", listed by id alone"
    case.extras.append(f"reuses id {pick.rid!r} listed by {pick.screen}{stated}")
    return _marker_node(rng, case, pick.marker, pick.allows, True), pick.rid


def _id_only_listing(rng: np.random.Generator, case: FuzzCase) -> tuple[list[UiNode], str | None]:
    """A shown entry's marker and an id it lists by id alone (for a safe control to carry)."""
    listed = [c for c in listed_controls(case.pack) if c.stated is None]
    if not listed:
        return [], None
    pick: ListedControl = _pick(rng, listed)
    case.extras.append(f"the safe control carries id {pick.rid!r} listed by {pick.screen}")
    return _marker_node(rng, case, pick.marker, pick.allows, True), pick.rid


def _sel(selector: Selector) -> str:
    return ", ".join(
        f"{k}={v!r}" for k, v in selector.model_dump(exclude_none=True, exclude_defaults=True).items()
    )


def _touch_case(rng: np.random.Generator, case: FuzzCase) -> None:
    form = case.input_form
    gestures = {
        "long_press": frozenset({Gesture.LONG_PRESS}),
        "swipe_end": frozenset({Gesture.SWIPE_END}),
        "swipe_through": frozenset({Gesture.SWIPE_THROUGH, Gesture.SWIPE_END}),
    }.get(form, TOUCHES)
    extra: list[UiNode] = []
    reused: str | None = None
    if case.label_form == "listed_id" and form != "safe_tap":
        extra, reused = _reused_listed_id(rng, case)
    comp = _control(rng, case.label, case.label_form, case.control_form, case.package, gestures, reused)
    if case.control_form == "offscreen_safe" or (case.control_form == "webview" and rng.random() < 0.3):
        extra += _with_marker(rng, case, SafeInput.WEBVIEW_TAPS, visible=False)
    safe_id: str | None = None
    if form == "safe_tap":
        case.intent = "safe"
        if case.label_form == "listed_id":
            # without a money label: the cancel button carries an id the shown entry lists
            shown, safe_id = _id_only_listing(rng, case)
            extra += shown
        elif rng.random() < 0.5:
            extra += _with_marker(rng, case, None, visible=True)
    elif rng.random() < 0.15:
        # a sheet or dialog over a screen the pack catalogues as safe, whose marker stays on screen
        extra += _with_marker(rng, case, None, visible=True)
    nodes = _frame(case.package, [*extra, *comp.nodes])
    if safe_id is not None:
        nodes[2].resource_id = f"{case.package}:id/{safe_id}"  # the frame's cancel button
    then = None
    if comp.then is not None:
        then = ScreenSpec(_frame(case.package, [*extra, *comp.then.nodes]), comp.then.hotspots, after_dumps=2)
    spec_nodes, spots = nodes, comp.hotspots

    def screen() -> ScreenSpec:
        spec = ScreenSpec(copy.deepcopy(spec_nodes), list(spots))
        if then is not None:
            spec.then, spec.after_dumps = copy.deepcopy(then), 2
        return spec

    case.screens = {case.package: screen}
    # the path, and the input it sends
    selector = _selector_in(comp) if form == "tap_inside" and case.control_form != "late_dialog" else None
    if form == "safe_tap":
        selector = Selector(text="取消")
        case.label, case.label_form = "取消", ("listed_id" if safe_id is not None else "plain")
    if case.path not in ACTION_PATHS and selector is None:
        case.extras.append(f"no selector names this control: the agent's path instead of {case.path}")
        case.path = "agent"
    if case.path not in ACTION_PATHS:
        assert selector is not None
        case.steps = [_tap_step(case.path, selector)]
        return
    if form == "safe_tap":
        x, y = _point(rng, CANCEL, None, "inside") or (nx(270), ny(620))
        case.steps = [Click(x=x, y=y)]
        return
    how = {"tap_edge": "edge", "tap_slop": "slop"}.get(form, "inside")
    pt = _point(rng, comp.aim_box, comp.node_box, how) or _point(rng, comp.aim_box, None, "inside")
    x, y = pt or (nx((comp.aim_box[0] + comp.aim_box[2]) / 2), ny((comp.aim_box[1] + comp.aim_box[3]) / 2))
    if form == "long_press":
        case.steps = [LongPress(x=x, y=y, duration_ms=int(rng.integers(500, 1500)))]
    elif form == "double_tap":
        case.steps = [DoubleClick(x=x, y=y)]
    elif form == "swipe_end":
        sx = int(rng.integers(60, W - 60))
        case.steps = [Swipe(x=nx(sx), y=ny(470), x2=x, y2=y, duration_ms=int(rng.integers(200, 600)))]
    elif form == "swipe_through":
        left, _t, right, _b = comp.aim_box
        py = px_of(x, y)[1]
        a, b = max(0, left - 30), min(W - 1, right + 30)
        if rng.random() < 0.5:
            a, b = b, a
        case.steps = [Swipe(x=nx(a), y=ny(py), x2=nx(b), y2=ny(py), duration_ms=int(rng.integers(200, 800)))]
    else:
        case.steps = [Click(x=x, y=y)]


def _flat(nodes: list[UiNode]) -> Iterator[UiNode]:
    for n in nodes:
        yield n
        yield from _flat(n.children)


def _selector_in(comp: Composed) -> Selector | None:
    """A selector a recipe or plan could name the control by: the aimed node's, else one of a
    node whose centre lies where the screen commits (the button under an overlay, in a card)."""
    for node in [*([comp.aim] if comp.aim is not None else []), *_flat(comp.nodes)]:
        sel = _selector_of(node)
        left, top, right, bottom = node.bounds
        centre = ((left + right) / 2, (top + bottom) / 2)
        if sel is not None and any(h.contains(*centre) for h in comp.hotspots):
            return sel
    return None


def _selector_of(node: UiNode | None) -> Selector | None:
    """How a recipe or plan names the node (None when only a point can reach it, or when its label
    holds characters the dump's XML does not keep as written)."""
    if node is None:
        return None
    if node.resource_id:
        return Selector(resource_id=node.resource_id)
    if node.text and node.text.isprintable() and node.text.strip() == node.text:
        return Selector(text=node.text)
    if (
        node.content_desc
        and node.content_desc.isprintable()
        and node.content_desc.strip() == node.content_desc
    ):
        return Selector(content_desc=node.content_desc)
    return None


def _tap_step(path: str, selector: Selector) -> Any:
    from realbench.recipes import TapStep
    from realbench.taskpack import PlanStep

    if path == "certify":
        return PlanStep(tap=selector)
    return TapStep(do="tap", selector=selector, timeout_s=0.3)


def _key_case(rng: np.random.Generator, case: FuzzCase) -> None:
    """A form that submits by ENTER or a typed newline, its submit button below the fold or on
    screen in some label form; the focus on the amount, a WebView, a text-less pay icon or nowhere.
    `safe_type` types an amount (no newline) into the focused amount field: never a commit."""
    form = case.input_form
    if form == "enter" and case.path == "recipe":
        form = case.input_form = "newline"  # a recipe types text; its newline is the ENTER
    safe = form == "safe_type"
    focus = "amount" if safe else _pick(rng, ["amount", "webview", "icon", "none"])
    case.control_form = f"form ({focus} focused)"
    body: list[UiNode] = []
    if focus == "webview":
        body.append(
            UiNode(bounds=(0, 700, W, 1400), cls="android.webkit.WebView", focusable=True, focused=True)
        )
    elif focus == "icon":
        body.append(
            UiNode(
                bounds=(900, 1500, 1000, 1600),
                cls="android.widget.ImageButton",
                clickable=True,
                focusable=True,
                focused=True,
            )
        )
    if rng.random() < 0.5:
        body.append(_labelled(rng, case.label, case.label_form, _random_box(rng), case.package))
    else:
        case.extras.append("submit below the fold")
    if safe:
        case.intent = "safe"
        if rng.random() < 0.5:
            body += _with_marker(rng, case, None, visible=True)
    elif rng.random() < 0.4:
        body += _with_marker(rng, case, SafeInput.ENTER, visible=rng.random() < 0.2)
    commit_on = frozenset() if safe else frozenset({Gesture.ENTER if form == "enter" else Gesture.NEWLINE})
    nodes = _frame(case.package, body, focused_amount=focus == "amount")

    def screen() -> ScreenSpec:
        return ScreenSpec(copy.deepcopy(nodes), commit_on=commit_on)

    case.screens = {case.package: screen}
    if form == "enter":
        case.steps = [KeyPress(key=Key.ENTER)]
    elif form == "newline":
        text = _pick(rng, ["100\n", "100\r", "88.5\n", "\n", "250\r\n"])
        case.steps = [Type(text=text)] if case.path in ACTION_PATHS else [_type_step(text)]
    else:
        amount = _pick(rng, ["100", "88.50", "1000"])
        case.steps = [Type(text=amount)] if case.path in ACTION_PATHS else [_type_step(amount)]


def _type_step(text: str) -> Any:
    from realbench.recipes import TypeTextStep

    return TypeTextStep(do="type", text=text)


def _pin_case(rng: np.random.Generator, case: FuzzCase) -> None:
    """A payment PIN typed where the keypad submits on its last digit."""
    where = _pick(
        rng,
        ["keypad_prompt", "webview_cashier", "pay_pass_no_flag", "password_field", "pin_id", "code_field"],
    )
    case.control_form, case.label_form, case.label = where, "-", PIN
    prompt = UiNode(
        bounds=(40, 700, 1040, 800),
        cls="android.widget.TextView",
        text=_pick(rng, ["请输入支付密码", "請輸入支付密碼", "Enter payment PIN", "输入6位数字密码"]),
    )
    body: list[UiNode] = []
    if where == "keypad_prompt":
        keys = [
            UiNode(
                bounds=(
                    40 + (i % 3) * 340,
                    1500 + (i // 3) * 180,
                    360 + (i % 3) * 340,
                    1660 + (i // 3) * 180,
                ),
                cls="android.view.View",
                text=str((i + 1) % 10),
                clickable=True,
            )
            for i in range(10)
        ]
        body += [prompt, UiNode(bounds=(0, 1480, W, 2300), cls="android.widget.GridLayout", children=keys)]
    elif where == "webview_cashier":
        body.append(
            UiNode(bounds=(0, 231, W, 2300), cls="android.webkit.WebView", focusable=True, focused=True)
        )
    else:
        rid = {
            "pay_pass_no_flag": "et_pay_pass",
            "password_field": "input",
            "pin_id": "pin_input",
            "code_field": "et_code",
        }[where]
        body += [
            prompt,
            UiNode(
                bounds=(40, 850, 1040, 970),
                cls="android.widget.EditText",
                resource_id=f"{case.package}:id/{rid}",
                text="验证码" if where == "code_field" else "",
                focusable=True,
                focused=True,
                password=where == "password_field",
            ),
        ]
    nodes = _frame(case.package, body, title="支付（测试屏）")

    def screen() -> ScreenSpec:
        return ScreenSpec(copy.deepcopy(nodes), commit_on=frozenset({Gesture.TEXT}))

    case.screens = {case.package: screen}
    case.steps = [Type(text=PIN)] if case.path in ACTION_PATHS else [_type_step(PIN)]


def _keys_case(rng: np.random.Generator, case: FuzzCase) -> None:
    """BACK / HOME / RECENT on a commit screen: never a commit, never to be refused."""
    case.intent, case.label_form, case.control_form = "safe", "-", "button"
    comp = _control(rng, case.label, "plain", "button", case.package, TOUCHES)
    nodes = _frame(case.package, comp.nodes)

    def screen() -> ScreenSpec:
        return ScreenSpec(copy.deepcopy(nodes), list(comp.hotspots))

    case.screens = {case.package: screen}
    key = _pick(rng, [Key.BACK, Key.HOME, Key.RECENT])
    if key is Key.RECENT and case.path not in ACTION_PATHS:
        case.path = "agent"  # recipes have back and home steps only
    if case.path in ACTION_PATHS:
        case.steps = [KeyPress(key=key)]
    else:
        from realbench.recipes import BackStep, HomeStep

        case.steps = [BackStep(do="back") if key is Key.BACK else HomeStep(do="home")]
    case.label = str(key)


def _launch_case(rng: np.random.Generator, case: FuzzCase) -> None:
    """Another app that pays the moment it opens: launched by the agent or a recipe, or reached by
    a deep link (the phone's browser handles it)."""
    case.intent, case.label_form = "commit", "-"
    other = _pick(rng, [CASHIER, TICKET if case.package == BANK else BANK])
    here = _frame(
        case.package,
        [UiNode(bounds=(580, 2100, 980, 2220), cls="android.widget.Button", text="下一步", clickable=True)],
    )

    def this_screen() -> ScreenSpec:
        return ScreenSpec(copy.deepcopy(here))

    def paying() -> ScreenSpec:
        return ScreenSpec(
            [UiNode(bounds=TITLE, cls="android.widget.TextView", text="收银台（测试屏）")],
            commit_on=frozenset({Gesture.LAUNCH}),
        )

    if case.input_form == "deep_link":
        url = _pick(rng, DEEP_LINKS)
        case.screens = {case.package: this_screen, BROWSER_PACKAGE: paying}
        case.path, case.control_form, case.label = "recipe", "deep link", url
        from realbench.recipes import DeepLinkStep

        case.steps = [DeepLinkStep(do="deep_link", url=url)]
        return
    case.screens = {case.package: this_screen, other: paying}
    case.control_form, case.label = "app launch", other
    if case.path in ACTION_PATHS:
        case.steps = [OpenApp(app=other)]
    else:
        from realbench.recipes import LaunchStep

        case.steps = [LaunchStep(do="launch", package=other)]


# --- running ------------------------------------------------------------------------------------


@dataclass
class CaseRun:
    """What the phone says about one run of a case."""

    commits: list[Commit]
    inputs: int  # events in the phone's input log during the run
    blocked: bool  # the guard refused (BoundaryBlocked), or a step failed with the guard's refusal
    error: str = ""  # another failure of the path (a step that found nothing), for the report

    @property
    def committed(self) -> bool:
        return bool(self.commits)


def _guard_parts(phone: Any, case: FuzzCase) -> tuple[Any, Any, Any]:
    """(target, armed guard, the device an agent acts on) for a phone, as the pack's setup arms it;
    for the console, as the lab console arms its guard (no target)."""
    from devices.phone_target import PhoneTarget
    from realbench.device import TargetKind

    if case.path == "console":
        guard = console_guard(phone)
        return None, guard, guard

    target = PhoneTarget(phone, pack(case.pack), TargetKind.REAL)
    guard = target.interlock
    assert guard is not None, "a real-side target guards its phone"
    arm = arming(case.pack, case.boundary_task)
    guard.arm(arm.boundary, arm.forbidden, arm.policy)
    return target, guard, target.device


def console_guard(phone: Any) -> Any:
    """The guard the lab console puts in front of a leased phone (realbench.console.phones): armed
    with every pack's stop selectors and one policy for all packs, as `ConsolePhones.lease` arms it."""
    from devices.farm.interlock import InterlockedDevice
    from realbench.console.phones import OPERATOR_SETTLE_S, _stop_selectors

    packs = [pack("bank"), pack("train_ticketing")]
    boundary, forbidden = _stop_selectors(packs)
    guard = InterlockedDevice(phone, settle_s=OPERATOR_SETTLE_S)
    guard.arm(boundary, forbidden, InterlockPolicy.for_packs(packs))
    return guard


def _blocked_error(exc: BaseException) -> bool:
    seen: BaseException | None = exc
    while seen is not None:
        if isinstance(seen, BoundaryBlocked):
            return True
        seen = seen.__cause__ or seen.__context__
    return False


def run_case(case: FuzzCase, *, guarded: bool) -> CaseRun:
    """One run of `case` on a fresh in-process virtual phone."""
    phone = InProcessPhone(case.screens, apps=[BANK, TICKET, CASHIER])
    try:
        phone.start_app(case.package)
        return _drive(phone, case, guarded)
    finally:
        phone.close()


def _drive(phone: Any, case: FuzzCase, guarded: bool) -> CaseRun:
    from devices.recipe_runner import SetupRunner

    target = guard = None
    device: Any = phone
    if guarded:
        target, guard, device = _guard_parts(phone, case)
    device.observe()
    if not guarded:
        phone.hierarchy()  # what a single-dump check would have read
    events = phone.vphone.events if hasattr(phone, "vphone") else phone.events
    start = len(events)
    blocked, error = False, ""

    def relaunch(package: str) -> None:
        phone.stop_app(package)
        phone.start_app(package)

    try:
        if case.path in ACTION_PATHS:
            for action in case.steps:
                device.act(action)
        elif case.path == "recipe":
            runner = SetupRunner(
                phone,
                guard if guarded else phone,
                package=case.package,
                relaunch=target._launch if target is not None else relaunch,
                settle_s=0.0,
            )
            runner.run(case.steps, {})
        elif case.path == "probe":
            if target is not None:
                target._probe_steps(case.steps)
            else:
                SetupRunner(phone, phone, package=case.package, relaunch=relaunch, settle_s=0.0).run(
                    case.steps, {}
                )
        elif case.path == "certify":
            _certify_steps(device, phone, case)
    except BoundaryBlocked:
        blocked = True
    except RealbenchError as exc:
        if _blocked_error(exc):
            blocked = True
        else:
            error = f"{type(exc).__name__}: {exc.message}"
    return CaseRun(list(phone.commits), len(events) - start, blocked, error)


def _certify_steps(device: Any, phone: Any, case: FuzzCase) -> None:
    """The golden step through `devices.certify.run_real_golden`, as certify runs a real plan."""
    p = pack(case.pack)
    task = next(t for t in p.tasks if t.real.golden)
    instance = task.instantiate(0, date(2026, 3, 2))
    real = task.real.model_copy(update={"golden": list(case.steps)})
    instance = instance.model_copy(update={"task": task.model_copy(update={"real": real})})
    result = CertResult(task=task.id, phone=phone.serial, runnable=True)
    run_real_golden(device, instance, _NoRecording(), result, phone.size())
    if result.boundary_reached or "interlock" in result.reason:
        raise BoundaryBlocked(f"certify: stopped by the interlock ({result.reason})")
    if result.failed_step is not None:
        raise _StepFailed(result.reason)


class _NoRecording(_Recorder):
    """Certify's step recorder without the files: the screenshots and dumps it would keep play no
    part in what reaches the phone."""

    def __init__(self) -> None:
        pass

    def save(self, name: str, screenshot: bytes | None, hierarchy: str | None) -> tuple[None, None]:
        return None, None


class _StepFailed(RealbenchError):
    pass


@dataclass
class Verdict:
    case: FuzzCase
    bare: CaseRun
    guarded: CaseRun

    @property
    def trap_works(self) -> bool:
        """The unguarded phone did what the case says it does (committed, or for a safe input not)."""
        return self.bare.committed == (self.case.intent == "commit")

    @property
    def commit_behind_guard(self) -> bool:
        return self.guarded.committed

    @property
    def false_block(self) -> bool:
        return self.case.intent == "safe" and self.guarded.blocked and not self.bare.committed

    @property
    def allowed_by_design(self) -> bool:
        """A safe input the guard's design lets through: BACK / HOME / RECENT anywhere; a tap on a
        screen the pack catalogues as safe; typing there when the screen allows text."""
        c = self.case
        if c.intent != "safe":
            return False
        if c.input_form == "keys":
            return True
        if c.shown_safe is None:
            return False
        return c.input_form == "safe_tap" or (c.input_form == "safe_type" and "text" in c.shown_safe)

    def _gap(self) -> tuple[str, str]:
        """(kind, sentence) of the hole a commit behind the guard shows."""
        c = self.case
        where = (
            "on a screen the catalogue recognises as safe (its marker is shown)"
            if c.shown_safe is not None
            else "on a screen the catalogue does not recognise (default-deny did not hold)"
        )
        late = " (in a dialog drawn after the guard's first dump)" if c.control_form == "late_dialog" else ""
        if c.input_form in ("launch", "deep_link"):
            return "launch or deep link", f"a {c.path} step's {c.input_form} reached another app {where}"
        if c.input_form in ("enter", "newline"):
            return "ENTER or newline", f"a form submitted by {c.input_form} {where}"
        if c.input_form == "pin":
            return "PIN", f"a PIN typed into a {c.control_form} {where}"
        if c.control_form == "undumped_window":
            return "undumped window", f"a window the dump does not show takes the input {where}"
        if c.control_form == "webview":
            return "WebView element", f"an H5 element with no node takes the input {where}"
        if c.label_form in ("none", "id_only"):
            return (
                "unlabelled control",
                f"a commit control ({c.control_form}) with no label commits {where}{late}",
            )
        return "label not read as a stop label", (
            f"a commit control ({c.control_form}) labelled {c.label!r} ({c.locale}, {c.label_form}) "
            f"is not read as a stop label {where}{late}"
        )

    def gap(self) -> str:
        """The hole a commit behind the guard shows (for the report and the tests' xfails)."""
        return self._gap()[1]

    def gap_kind(self) -> str:
        """`gap` in a few words, for counting."""
        catalogued = "catalogued" if self.case.shown_safe is not None else "uncatalogued"
        return f"{self._gap()[0]}, {catalogued} screen"

    def why(self) -> str:
        commits = self.guarded.commits or self.bare.commits
        if not commits:
            return "no commit"
        c = commits[0]
        at = f" at ({c.x},{c.y})" if c.x is not None else ""
        return f"the screen committed {c.what!r} on {c.gesture}{at}"


def judge(case_of: Callable[[], FuzzCase]) -> Verdict:
    """Run a case unguarded and guarded (each on a fresh phone, from a freshly built case)."""
    return Verdict(case_of(), run_case(case_of(), guarded=False), run_case(case_of(), guarded=True))


@contextlib.contextmanager
def quiet_guard_logs() -> Iterator[None]:
    """The guard logs a warning per refusal; thousands of them would drown the report."""
    import logging

    loggers = [
        logging.getLogger(n)
        for n in ("devices.farm.interlock", "devices.phone_target", "devices.recipe_runner")
    ]
    levels = [lg.level for lg in loggers]
    for lg in loggers:
        lg.setLevel(logging.ERROR)
    try:
        yield
    finally:
        for lg, level in zip(loggers, levels, strict=True):
            lg.setLevel(level)


# --- the same cases through the real adb server -------------------------------------------------


class AdbCasePhone:
    """A `PhoneDevice` on a virtual phone of the adb host, with the phone's commit records and input
    log read in-process, so `_drive` treats it as it treats the in-process phone."""

    def __init__(self, device: Any, vphone: Any, screens: list[Any]) -> None:
        self._device = device
        self.vphone = vphone
        self._screens = screens

    @property
    def commits(self) -> list[Any]:
        return [c for s in self._screens for c in s.commits]

    def __getattr__(self, name: str) -> Any:
        return getattr(self._device, name)


def e2e_eligible(case: FuzzCase) -> bool:
    """Cases whose apps the adb host's static phone has installed (no test cashier, no browser)."""
    return set(case.screens) <= {BANK, TICKET}


def pick_for_e2e(seed: int, k: int, start: int, scan: int = 300) -> list[int]:
    """K eligible case numbers, taken in turn from each in-process outcome (refused; committed
    behind the guard; let through without a commit), so the comparison covers all three."""
    buckets: dict[str, list[int]] = {"refused": [], "committed": [], "passed": []}
    with quiet_guard_logs():
        for i in range(start, start + scan):
            case = make_case(seed, i)
            if not e2e_eligible(case):
                continue
            guarded = run_case(case, guarded=True)
            outcome = "committed" if guarded.committed else "refused" if guarded.blocked else "passed"
            buckets[outcome].append(i)
    picked: list[int] = []
    while len(picked) < k and any(buckets.values()):
        for queue in buckets.values():
            if queue and len(picked) < k:
                picked.append(queue.pop(0))
    return sorted(picked)


def e2e_sample(seed: int, k: int, start: int) -> dict[str, Any]:
    """K eligible cases run unguarded and guarded over adb; each verdict compared with the in-process one."""
    from devices.phone import PhoneDevice
    from devices.virtual import VirtualPhoneHost
    from devices.virtual.composed_phone import composed_maker

    picked = pick_for_e2e(seed, k, start)
    rows, disagree = [], []
    with VirtualPhoneHost() as host:
        info = host.start(1, screens="static")[0]
        host.adb_connect()
        device = PhoneDevice(info.serial, virtual=True)
        try:
            for index in picked:
                runs: dict[str, CaseRun] = {}
                for guarded in (False, True):
                    case = make_case(seed, index)
                    vphone = host.phone(info.serial)
                    made: list[Any] = []
                    vphone.set_screens(composed_maker(case.screens, made))
                    for other in {BANK, TICKET} - {case.package}:
                        device.stop_app(other)
                    device.start_app(case.package)
                    runs["adb_guarded" if guarded else "adb_bare"] = _drive(
                        AdbCasePhone(device, vphone, made), case, guarded
                    )
                local = judge(lambda index=index: make_case(seed, index))  # type: ignore[misc]
                row = {
                    "case": local.case.key,
                    "shape": local.case.tag(),
                    "bare": [runs["adb_bare"].committed, local.bare.committed],
                    "guarded": [runs["adb_guarded"].committed, local.guarded.committed],
                    "blocked": [runs["adb_guarded"].blocked, local.guarded.blocked],
                }
                rows.append(row)
                if len(
                    {tuple(row[k]) for k in ("bare", "guarded", "blocked")} - {(True, True), (False, False)}
                ):
                    disagree.append(row)
        finally:
            device.close()
    return {"sample": len(rows), "agree": len(rows) - len(disagree), "disagreements": disagree, "rows": rows}
