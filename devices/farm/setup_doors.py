"""The decisions behind the two setup inputs an agent never makes: tapping away a pop-up drawn by
another package, and typing the rig account's credentials.

Every other setup input (a pack pop-up's dismiss tap, a login recipe's taps) is an ordinary input
through the armed interlock, decided exactly as an agent's. These two would be refused by the
pack's policy (a touch in another package; text into a password field of a money-moving app), so
each has a narrow door on `InterlockedDevice` that decides with the rules below, on fresh dumps:

- a ROM pop-up (a permission prompt, an ANR dialog): its dismiss control belongs to the package
  that drew the pop-up, which is not one of the pack's, and is what the tap activates; its label
  does not read as a commit / money word, and it overlaps no stop control nor any control whose
  label does (`dismiss_refusal`, which the pack-less health check uses too);
- credentials: only on the pack's declared login screen (`real_app.login_screen`, a catalogue
  entry positively recognised by a marker on screen), only into the field the recipe names, which
  is focused and which that entry lists, with no stop control, PIN pad or newline in sight.
"""

from __future__ import annotations

from devices.farm.interlock import (
    Block,
    Interlock,
    StopControl,
    _editable,
    _keypad_on_screen,
    money_word_controls,
)
from devices.farm.interlock_policy import listed
from devices.farm.stop_labels import LabelTexts, money_reading
from realbench.hierarchy import Bounds, Hierarchy, Node, Selector


def _overlap(a: Bounds, b: Bounds) -> bool:
    return a.left < b.right and b.left < a.right and a.top < b.bottom and b.top < a.bottom


def dismiss_refusal(hierarchy: Hierarchy, button: Node, stops: list[StopControl] | None = None) -> str | None:
    """Why a pop-up's dismiss control must not be tapped where no pack catalogue vouches for it:
    its label reads as a commit / money word by the guard's own vocabulary, or it overlaps a stop
    control (`stops`) or a control whose label does. None: it may be tapped."""
    texts = LabelTexts()
    reading = money_reading((*texts.own(button), *texts.subtree(button)))
    if reading is not None:
        return f"its dismiss control reads {reading!r} (a commit / money word)"
    others = [*(stops or []), *money_word_controls(hierarchy, lambda n: False)]
    for c in others:
        if any(_overlap(button.bounds, r) for r in c.regions):
            return f"its dismiss control overlaps {c.label()!r} ({c.origin})"
    return None


def foreign_popup_block(
    interlock: Interlock, hierarchy: Hierarchy, when: Selector, button: Node, point: tuple[float, float]
) -> Block | None:
    """The decision on a ROM pop-up's dismiss tap at pixel `point` (see the module docstring)."""
    policy = interlock.policy
    shown = hierarchy.find_one(when)
    if shown is None:
        return Block(None, f"pop-up marker {when} is no longer on screen")
    package = shown.package
    if not package or not policy.foreign(package) or button.package != package:
        return Block(None, f"pop-up drawn by {package or 'an unknown package'}: not another app's dialog")
    taken = hierarchy.target_at(*point)
    if taken is None or taken.package != package or not (taken is button or taken in button.ancestors()):
        what = taken.package if taken is not None else "no control"
        return Block(None, f"the dismiss tap would land in {what}, not on the pop-up's control")
    reason = dismiss_refusal(hierarchy, button, interlock.controls(hierarchy))
    return Block(None, f"pop-up dismissal refused: {reason}") if reason else None


def credential_block(
    interlock: Interlock,
    hierarchy: Hierarchy,
    screen: tuple[int, int],
    *,
    text: str,
    into: Selector,
    login_screen: str,
) -> Block | None:
    """The decision on typing a credential (see the module docstring)."""
    if "\n" in text or "\r" in text:
        return Block(None, "a credential with a newline (it would submit the form)")
    entry = next((s for s in interlock.policy.safe_screens if s.name == login_screen), None)
    if entry is None:
        return Block(None, f"the pack's catalogue has no login screen {login_screen!r}")
    display = Bounds(0, 0, screen[0], screen[1])
    recognised = interlock.policy.recognise(hierarchy, display)
    if not any(s is entry for s, _ in recognised.screens):
        return Block(None, f"credential typing off the pack's login screen {login_screen!r}")
    field = hierarchy.find_one(into)
    if field is None or not _editable(field):
        return Block(None, f"the login field {into} is not on screen")
    if interlock.policy.foreign(field.package):
        return Block(None, f"the login field {into} belongs to {field.package}, outside the pack")
    if not any(listed(c, field) for c in entry.controls):
        return Block(None, f"the login field {into} is not a control the {login_screen!r} entry lists")
    focused = hierarchy.focused()
    if focused is None or not (
        focused is field or field in focused.ancestors() or focused in field.ancestors()
    ):
        return Block(None, f"the focus is not on the login field {into}")
    controls = interlock.controls(hierarchy, screen)
    if controls:
        return Block(controls[0], "credential typing on a screen that shows a stop control")
    if _keypad_on_screen(hierarchy):
        return Block(None, "credential typing while a PIN pad is on screen")
    return None
