"""Chromium feature switches that survive Playwright's own.

Chromium keeps only the last ``--disable-features=`` on its command line, and Playwright puts its
own list (features that make automation flaky) before the caller's arguments: a caller's switch
would silently switch all of those back on. `launch_args` folds every ``--disable-features`` of the
caller's into one switch that also carries Playwright's list, and every ``--enable-features``
likewise (Playwright enables a newer screenshot path).
"""

from __future__ import annotations

import functools
import logging
import os
import re
from pathlib import Path

log = logging.getLogger(__name__)

DISABLE = "--disable-features="
ENABLE = "--enable-features="

# After a tap that asks for a frame, Chromium defers the page's other tasks (timers, network
# messages) until that frame is drawn: in headless, up to a 60 Hz frame interval. The clone's
# answer to a tap arrives on its WebSocket 1–2 ms after the tap and then waited ~15 ms for a frame
# nobody looks at (docs/benchmarks.md, "A tap waited for a frame").
CLONE_DISABLED_FEATURES = ("DeferRendererTasksAfterInput",)

# Playwright's bundled driver declares its lists as `disabledFeatures = [ "Name", // comment ... ]`
# and `enabledFeatures = () => [ process.env.X ? "" : "Name", // comment ... "Name" ]`
_LISTS = {
    "disabled": re.compile(r"\bdisabledFeatures\s*=\s*\[(.*?)\]", re.S),
    "enabled": re.compile(r"\benabledFeatures\s*=\s*\(\)\s*=>\s*\[(.*?)\]", re.S),
}
_COMMENT = re.compile(r"//[^\n]*")
# an entry the driver leaves out when an environment variable is set
_UNLESS = re.compile(r"process\.env\.(\w+)\s*\?\s*[\"']{2}\s*:\s*[\"']([A-Za-z0-9_]+)[\"']")
_NAME = re.compile(r"[\"']([A-Za-z0-9_]+)[\"']")


def _driver_sources() -> list[Path]:
    import playwright

    package = Path(playwright.__file__).parent / "driver" / "package" / "lib"
    return [
        s for s in sorted(package.rglob("*.js")) if "chromium" in s.name.lower() or s.name == "coreBundle.js"
    ]


def _entries(block: str) -> tuple[str, ...]:
    block = _COMMENT.sub("", block)
    left_out = {name for variable, name in _UNLESS.findall(block) if os.environ.get(variable)}
    return tuple(n for n in dict.fromkeys(_NAME.findall(block)) if n not in left_out)


@functools.cache
def playwright_features(kind: str) -> tuple[str, ...] | None:
    """The features (`kind` "disabled" or "enabled") Playwright's driver sets in every Chromium it
    launches, read from the driver's own source; None when they cannot be found (another layout of
    the driver)."""
    pattern = _LISTS[kind]
    for source in _driver_sources():
        try:
            text = source.read_text(encoding="utf-8", errors="replace")
        except OSError:
            continue
        found = pattern.search(text)
        if found:
            names = _entries(found.group(1))
            if names:
                return names
    log.warning("Playwright's list of %s Chromium features not found", kind)
    return None


def playwright_disabled_features() -> tuple[str, ...] | None:
    return playwright_features("disabled")


def _names(args: tuple[str, ...] | list[str], switch: str) -> list[str]:
    return [n for a in args if a.startswith(switch) for n in a[len(switch) :].split(",") if n]


def _folded(args: tuple[str, ...] | list[str], switch: str, kind: str) -> str | None:
    """One `switch` with Playwright's `kind` features and the caller's; None when the caller has
    none, or when Playwright's cannot be read (the caller's then dropped, with a warning)."""
    wanted = _names(args, switch)
    if not wanted:
        return None
    defaults = playwright_features(kind)
    if defaults is None:
        log.warning("not passing %s%s: it would switch Playwright's %s features back", switch, wanted, kind)
        return None
    return switch + ",".join(dict.fromkeys((*defaults, *wanted)))


def launch_args(args: tuple[str, ...] | list[str]) -> list[str]:
    """`args` with every ``--enable-features=`` and every ``--disable-features=`` folded into one
    each, last, that keeps Playwright's list too (Playwright puts its own first, and Chromium reads
    the last). Without Playwright's list, the caller's features are dropped (with a warning):
    Playwright's are what keep automated pages steady, the caller's only make them faster."""
    rest = [a for a in args if not a.startswith((DISABLE, ENABLE))]
    folded = [_folded(args, ENABLE, "enabled"), _folded(args, DISABLE, "disabled")]
    return [*rest, *(f for f in folded if f is not None)]
