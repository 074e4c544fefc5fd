"""What the interlock refuses beyond the stop controls themselves, per pack.

A money-moving app (`policy.money_moving` in the pack) is **default-deny**: an input reaches it only
while a screen of the pack's catalogue (`real_app.safe_screens`) is recognised, i.e. one of the
screen's `when` markers is a node that is on screen — non-empty bounds inside the display, inside
the bounds of every ancestor (a ViewPager's off-screen page lies outside them), and not marked
invisible to the user. A recognised screen allows touches on its native controls and what its
`allow` lists (text, ENTER, WebView taps); a WebView tap needs the marker inside the tapped
WebView's own container. On top of that, a money-moving app refuses `OpenApp`, any touch or
text that lands in another package, and PIN / code entry (devices.farm.interlock).

Launches and deep links are refused everywhere unless the package is one of the pack's and the
URL's scheme one of `real_app.url_schemes`.
"""

from __future__ import annotations

from collections.abc import Callable, Iterable
from dataclasses import dataclass, field

from devices.farm.stop_labels import match_form, money_reading, reading_order
from realbench.hierarchy import Bounds, Hierarchy, Node, Selector, compile_pattern, strip_spacing
from realbench.taskpack import SafeInput, SafeScreen, TaskPack, url_scheme

SCREEN_NAME_TEXTS = 3  # texts quoted to name an unrecognised screen


def on_screen(node: Node, display: Bounds) -> bool:
    """Whether a reader can see `node`: it has an area, lies inside the display and inside every
    ancestor's bounds (what a ViewPager does to its other pages, or a scroll view to rows out of
    view), and the dump does not mark it invisible."""
    b = node.bounds
    if b.empty or not node.visible:
        return False
    if b.left < display.left or b.top < display.top or b.right > display.right or b.bottom > display.bottom:
        return False
    for a in node.ancestors():
        if not a.visible:
            return False
        ab = a.bounds
        if ab.empty:
            continue  # a dump's root may carry no bounds
        if b.left < ab.left or b.top < ab.top or b.right > ab.right or b.bottom > ab.bottom:
            return False
    return True


def screen_name(hierarchy: Hierarchy, display: Bounds) -> str:
    """A short name for a screen nobody catalogued: its first visible texts, top to bottom."""
    texts = [
        n.text.strip()
        for n in sorted(hierarchy.nodes, key=lambda n: (n.bounds.top, n.bounds.left))
        if n.text.strip() and on_screen(n, display)
    ]
    name = " / ".join(list(dict.fromkeys(texts))[:SCREEN_NAME_TEXTS])
    return name or "(a screen without text)"


def control_matches(pattern: str, rid: str) -> bool:
    """A catalogue control: an exact short id, or a prefix ending in `*`."""
    return rid.startswith(pattern[:-1]) if pattern.endswith("*") else rid == pattern


def listed(entry: str | Selector, node: Node) -> bool:
    """Whether a catalogue entry's control is `node`: by its id, or, for a selector, the node the
    selector picks on this screen (its `nth` match in reading order over the whole dump)."""
    if isinstance(entry, str):
        return bool(node.short_id) and control_matches(entry, node.short_id)
    root = node
    while root.parent is not None:
        root = root.parent
    matches = [n for n in (root, *root.descendants()) if entry.matches(n)]
    try:
        return matches[entry.nth] is node
    except IndexError:
        return False


def states_label(entry: str | Selector) -> bool:
    """Whether a catalogue entry says what its control reads (`text` or `text_pattern`)."""
    return isinstance(entry, Selector) and (entry.text is not None or entry.text_pattern is not None)


def _label_fits(entry: Selector) -> Callable[[str], bool]:
    """Whether a reading (in `match_form`) is the label the entry states."""
    if entry.text is not None:
        expected = match_form(entry.text)
        return lambda reading: reading == expected
    assert entry.text_pattern is not None
    loose = compile_pattern("*".join(match_form(p) for p in entry.text_pattern.split("*")))
    return lambda reading: loose.fullmatch(reading) is not None


def _plain_readings(node: Node) -> set[str]:
    """The node's subtree read apart: its texts, and its descriptions, each in reading order and
    in document order (in `match_form`). Unlike `subtree_readings`, texts and descriptions are
    not joined, so a money word hidden in one of them cannot ride on the other's label."""
    members = [node, *node.descendants()]
    out: set[str] = set()
    for order in (reading_order(members), members):
        out.add(match_form("".join(n.text for n in order if n.text)))
        out.add(match_form("".join(n.content_desc for n in order if n.content_desc)))
    return out - {""}


def reads_as_stated(entry: Selector, node: Node) -> bool:
    """Whether `node` shows the label the entry states, and no other money words: one of its
    readings is that label, and every reading that names a money act is it. A `text_pattern` must
    also match the text as written (its digits and punctuation, which the folded form drops: a
    row's `2026-02-26 20:45 · 转账`, not a button's `确认转账`)."""
    fits = _label_fits(entry)
    readings = _plain_readings(node)
    if not any(fits(r) for r in readings):
        return False
    if entry.text_pattern is not None:
        written = compile_pattern(entry.text_pattern)
        texts = (node.text, "".join(n.text for n in reading_order([node, *node.descendants()]) if n.text))
        if not any(written.fullmatch(strip_spacing(t)) for t in texts if t):
            return False
    return all(fits(r) for r in readings if money_reading([r]) is not None)


def vouches(entry: str | Selector, node: Node) -> bool:
    """Whether a catalogue entry vouches for the money words `node` shows (lifts the guard's own
    money-word refusal for it). Only an entry that states the label it expects does, and only while
    the node reads as that label: the entry's other criteria (id, class, `inside`) with the label
    read over the node's subtree pick it, among controls and leaves (with `nth` given, its `nth`
    match in document order over the whole dump; without, any match: rows of a list). An
    id alone names a control, not what it does: an app that reuses a listed id for a pay button,
    or relabels it, is not vouched for by the listing."""
    if isinstance(entry, str) or not states_label(entry):
        return False
    if not reads_as_stated(entry, node):
        return False
    others = entry.model_copy(update={"text": None, "text_pattern": None})

    def picks(n: Node) -> bool:  # a control or a label, not a layout
        return (n.clickable or n.long_clickable or not n.children) and others.matches(n)

    if "nth" not in entry.model_fields_set:
        return picks(node)
    root = node
    while root.parent is not None:
        root = root.parent
    matches = [n for n in (root, *root.descendants()) if picks(n) and reads_as_stated(entry, n)]
    try:
        return matches[entry.nth] is node
    except IndexError:
        return False


def _strangers(screen: SafeScreen, markers: tuple[Node, ...], webview: Node, display: Bounds) -> bool:
    """Whether a control the catalogue entry does not list takes input on screen beside `webview`."""
    root = webview
    while root.parent is not None:
        root = root.parent
    for n in (root, *root.descendants()):
        if not (n.clickable or n.long_clickable or "EditText" in n.class_name):
            continue
        if n is webview or webview in n.ancestors() or n in webview.ancestors() or n in markers:
            continue
        if not on_screen(n, display):
            continue
        if any(listed(c, n) for c in screen.controls):
            continue
        return True
    return False


@dataclass(frozen=True)
class Recognised:
    """The catalogued screens shown now, with the markers that are on screen for each."""

    screens: tuple[tuple[SafeScreen, tuple[Node, ...]], ...] = ()

    @property
    def any(self) -> bool:
        return bool(self.screens)

    def allows(self, what: SafeInput) -> bool:
        return any(what in s.allow for s, _ in self.screens)

    def allows_webview_tap(self, webview: Node, display: Bounds | None = None) -> bool:
        """A WebView tap: a screen allowing it must have a marker inside the tapped WebView's
        container (its parent's subtree), not in some other part of the window, and must account
        for every native control shown: a tap into a WebView is blind (the page's elements are not
        in the dump), so it is lifted only while nothing on screen but the catalogued page's own
        controls takes input — no field, button or sheet the entry does not list beside it."""
        container = webview.parent or webview
        for screen, markers in self.screens:
            if SafeInput.WEBVIEW_TAPS not in screen.allow:
                continue
            if not any(m is container or container in m.ancestors() for m in markers):
                continue
            if display is not None and _strangers(screen, markers, webview, display):
                continue
            return True
        return False

    def names(self) -> str:
        return ", ".join(s.name for s, _ in self.screens)

    def allows_enter_into(self, focused: Node | None) -> bool:
        """ENTER (or a typed newline) only into the field a screen allowing it is known for: one of
        its markers, or one of its listed controls. A form elsewhere on the screen may submit."""
        if focused is None:
            return False
        for screen, markers in self.screens:
            if SafeInput.ENTER not in screen.allow:
                continue
            if any(m is focused for m in markers):
                return True
            if any(listed(c, focused) for c in screen.controls):
                return True
        return False

    def lists_control(self, node: Node) -> bool:
        """Whether a recognised screen's catalogue entry names `node` (by its id or a selector)."""
        return any(listed(c, node) or vouches(c, node) for s, _ in self.screens for c in s.controls)

    def vouches_for(self, node: Node) -> bool:
        """Whether a recognised screen's entry vouches for the money words `node` shows: it states
        the label it expects and the node reads as it (`vouches`). An id-only listing never does."""
        return any(vouches(c, node) for s, _ in self.screens for c in s.controls)

    def knows_control(self, node: Node) -> bool:
        """Whether a tapped control is one the recognised screens allow. Default-deny: a control the
        catalogue lists by id is allowed; a control that shows no label (no text or description in
        its subtree: an icon, an image, an id) is refused unless listed, since nothing on screen
        says what it does; a labelled control is allowed when it has no id, or when some
        recognised screen lists no controls, and the stop labels judge it."""
        if self.lists_control(node):
            return True
        if not any(n.text.strip() or n.content_desc.strip() for n in (node, *node.descendants())):
            return False
        lists = [s.controls for s, _ in self.screens if s.controls]
        if not lists or len(lists) < len(self.screens):
            return True
        return not node.short_id


@dataclass(frozen=True)
class InterlockPolicy:
    money_moving: bool = False
    # The packages actions may touch; empty means "not restricted" (no pack known).
    packages: frozenset[str] = field(default_factory=frozenset)
    safe_screens: tuple[SafeScreen, ...] = ()
    url_schemes: frozenset[str] = field(default_factory=frozenset)
    # The packages each safe screen belongs to (aligned with `safe_screens`; empty: any package).
    # A policy for several packs (the console) must not recognise one app's screen by the marker
    # id of another pack's catalogue.
    screen_packages: tuple[frozenset[str], ...] = ()

    @classmethod
    def for_pack(cls, pack: TaskPack) -> InterlockPolicy:
        packages = {pack.real_app.package} | {t.real.package for t in pack.tasks if t.real.package}
        return cls(
            money_moving=pack.policy.money_moving,
            packages=frozenset(packages),
            safe_screens=tuple(pack.real_app.safe_screens),
            url_schemes=frozenset(s.lower() for s in pack.real_app.url_schemes),
            screen_packages=tuple(frozenset(packages) for _ in pack.real_app.safe_screens),
        )

    @classmethod
    def for_packs(cls, packs: Iterable[TaskPack]) -> InterlockPolicy:
        """One policy for a phone that shows several packs' apps (the console): money-moving if any
        pack is, the union of their packages, catalogues and schemes."""
        parts = [cls.for_pack(p) for p in packs]
        return cls(
            money_moving=any(p.money_moving for p in parts),
            packages=frozenset().union(*(p.packages for p in parts)),
            safe_screens=tuple(s for p in parts for s in p.safe_screens),
            url_schemes=frozenset().union(*(p.url_schemes for p in parts)),
            screen_packages=tuple(p.packages_of(i) for p in parts for i in range(len(p.safe_screens))),
        )

    def packages_of(self, index: int) -> frozenset[str]:
        """The packages safe screen `index` belongs to (empty: any)."""
        return self.screen_packages[index] if index < len(self.screen_packages) else frozenset()

    def recognise(self, hierarchy: Hierarchy, display: Bounds | None = None) -> Recognised:
        """The catalogued screens whose markers are on screen now."""
        shown = display if display is not None and not display.empty else hierarchy.screen
        found: list[tuple[SafeScreen, tuple[Node, ...]]] = []
        # markers are mostly ids: look them up instead of testing every node against each
        by_id: dict[str, list[Node]] = {}
        for n in hierarchy.nodes:
            if n.resource_id:
                by_id.setdefault(n.short_id, []).append(n)
        for index, screen in enumerate(self.safe_screens):
            apps = self.packages_of(index)
            markers = tuple(
                n
                for sel in screen.markers
                for n in (
                    by_id.get(sel.resource_id.rsplit("/", 1)[-1].split(":id/")[-1], [])
                    if sel.resource_id
                    else hierarchy.nodes
                )
                if sel.matches(n) and on_screen(n, shown) and (not apps or not n.package or n.package in apps)
            )
            if markers:
                found.append((screen, markers))
        return Recognised(tuple(found))

    def allowed_here(self, hierarchy: Hierarchy, display: Bounds | None = None) -> frozenset[SafeInput]:
        """The inputs the catalogued screens shown now allow (beyond touches on native controls)."""
        allowed: set[SafeInput] = set()
        for screen, _ in self.recognise(hierarchy, display).screens:
            allowed |= set(screen.allow)
        return frozenset(allowed)

    def foreign(self, package: str) -> bool:
        """Whether a node of `package` belongs to an app outside the pack."""
        return bool(self.packages) and bool(package) and package not in self.packages

    def may_launch(self, package: str) -> bool:
        """Launches: only the pack's own packages (with no pack known, nothing)."""
        return package in self.packages

    def may_deep_link(self, url: str) -> bool:
        scheme = url_scheme(url)
        return bool(scheme) and scheme in self.url_schemes
