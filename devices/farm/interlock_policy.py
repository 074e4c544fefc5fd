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

from collections.abc import Iterable
from dataclasses import dataclass, field

from realbench.hierarchy import Bounds, Hierarchy, Node
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


@dataclass(frozen=True)
class Recognised:
    """The catalogued screens shown now, with the markers that are on screen for each."""

    screens: tuple[tuple[SafeScreen, tuple[Node, ...]], ...] = ()

    @property
    def any(self) -> bool:
        return bool(self.screens)

    def allows(self, what: SafeInput) -> bool:
        return any(what in s.allow for s, _ in self.screens)

    def allows_webview_tap(self, webview: Node) -> bool:
        """A WebView tap: a screen allowing it must have a marker inside the tapped WebView's
        container (its parent's subtree), not in some other part of the window."""
        container = webview.parent or webview
        for screen, markers in self.screens:
            if SafeInput.WEBVIEW_TAPS not in screen.allow:
                continue
            if any(m is container or container in m.ancestors() for m in markers):
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
            if focused.short_id and any(control_matches(c, focused.short_id) for c in screen.controls):
                return True
        return False

    def knows_control(self, node: Node) -> bool:
        """Whether a tapped control is one the recognised screens list (screens that list none
        accept any control). A control without an id is accepted when it shows text: the stop
        labels judge it."""
        lists = [s.controls for s, _ in self.screens if s.controls]
        if not lists or len(lists) < len(self.screens):
            return True
        rid = node.short_id
        if not rid:
            return any(n.text.strip() or n.content_desc.strip() for n in (node, *node.descendants()))
        return any(control_matches(c, rid) for controls in lists for c in controls)


@dataclass(frozen=True)
class InterlockPolicy:
    money_moving: bool = False
    # The packages actions may touch; empty means "not restricted" (no pack known).
    packages: frozenset[str] = field(default_factory=frozenset)
    safe_screens: tuple[SafeScreen, ...] = ()
    url_schemes: frozenset[str] = field(default_factory=frozenset)

    @classmethod
    def for_pack(cls, pack: TaskPack) -> InterlockPolicy:
        packages = {pack.real_app.package} | {t.real.package for t in pack.tasks if t.real.package}
        return cls(
            money_moving=pack.policy.money_moving,
            packages=frozenset(packages),
            safe_screens=tuple(pack.real_app.safe_screens),
            url_schemes=frozenset(s.lower() for s in pack.real_app.url_schemes),
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
        )

    def recognise(self, hierarchy: Hierarchy, display: Bounds | None = None) -> Recognised:
        """The catalogued screens whose markers are on screen now."""
        shown = display if display is not None and not display.empty else hierarchy.screen
        found: list[tuple[SafeScreen, tuple[Node, ...]]] = []
        # markers are mostly ids: look them up instead of testing every node against each
        by_id: dict[str, list[Node]] = {}
        for n in hierarchy.nodes:
            if n.resource_id:
                by_id.setdefault(n.short_id, []).append(n)
        for screen in self.safe_screens:
            markers = tuple(
                n
                for sel in screen.markers
                for n in (
                    by_id.get(sel.resource_id.rsplit("/", 1)[-1].split(":id/")[-1], [])
                    if sel.resource_id
                    else hierarchy.nodes
                )
                if sel.matches(n) and on_screen(n, shown)
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
