"""What the interlock refuses beyond the stop controls themselves, per pack.

A money-moving app (`policy.money_moving` in the pack) gets the strict rules: no ENTER and no typed
newline (a form submits by key even when its submit button is below the fold), no tap into a
WebView / canvas region that exposes no text (an H5 pay button may not be in the hierarchy at
all), no `OpenApp`, and no touch or text into any package other than the pack's own. Screens the
pack marks safe (`real_app.safe_screens`) lift the WebView or ENTER rule while they are shown.
"""

from __future__ import annotations

from dataclasses import dataclass, field

from realbench.hierarchy import Hierarchy
from realbench.taskpack import SafeInput, SafeScreen, TaskPack


@dataclass(frozen=True)
class InterlockPolicy:
    money_moving: bool = False
    # The packages actions may touch; empty means "not restricted" (no pack known).
    packages: frozenset[str] = field(default_factory=frozenset)
    safe_screens: tuple[SafeScreen, ...] = ()

    @classmethod
    def for_pack(cls, pack: TaskPack) -> InterlockPolicy:
        packages = {pack.real_app.package} | {t.real.package for t in pack.tasks if t.real.package}
        return cls(
            money_moving=pack.policy.money_moving,
            packages=frozenset(packages),
            safe_screens=tuple(pack.real_app.safe_screens),
        )

    def allowed_here(self, hierarchy: Hierarchy) -> frozenset[SafeInput]:
        """The inputs the screens marked safe allow on this hierarchy."""
        allowed: set[SafeInput] = set()
        for screen in self.safe_screens:
            if hierarchy.find_one(screen.when) is not None:
                allowed |= set(screen.allow)
        return frozenset(allowed)

    def foreign(self, package: str) -> bool:
        """Whether a node of `package` belongs to an app outside the pack."""
        return bool(self.packages) and bool(package) and package not in self.packages
