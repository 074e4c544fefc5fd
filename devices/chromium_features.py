"""Chromium feature switches that survive Playwright's own.

Chromium keeps only the last ``--disable-features=`` on its command line, and Playwright puts its
own list (features that make automation flaky) before the caller's arguments: a caller's switch
would silently switch all of those back on. `launch_args` folds every ``--disable-features`` of the
caller's into one switch that also carries Playwright's list.
"""

from __future__ import annotations

import functools
import logging
import re
from pathlib import Path

log = logging.getLogger(__name__)

DISABLE = "--disable-features="

# After a tap that asks for a frame, Chromium defers the page's other tasks (timers, network
# messages) until that frame is drawn: in headless, up to a 60 Hz frame interval. The clone's
# answer to a tap arrives on its WebSocket 1–2 ms after the tap and then waited ~15 ms for a frame
# nobody looks at (docs/benchmarks.md, "A tap waited for a frame").
CLONE_DISABLED_FEATURES = ("DeferRendererTasksAfterInput",)

# Playwright's bundled driver declares its list as `disabledFeatures = [ "Name", // comment ... ]`
_LIST = re.compile(r"\bdisabledFeatures\s*=\s*\[(.*?)\]", re.S)
_NAME = re.compile(r"^\s*[\"']([A-Za-z0-9_]+)[\"']", re.M)


@functools.cache
def playwright_disabled_features() -> tuple[str, ...] | None:
    """The features Playwright's driver disables in every Chromium it launches, read from the
    driver's own source; None when it cannot be found (another layout of the driver)."""
    import playwright

    package = Path(playwright.__file__).parent / "driver" / "package" / "lib"
    for source in sorted(package.rglob("*.js")):
        if "chromium" not in source.name.lower() and source.name != "coreBundle.js":
            continue
        try:
            text = source.read_text(encoding="utf-8", errors="replace")
        except OSError:
            continue
        found = _LIST.search(text)
        if found:
            names = tuple(_NAME.findall(found.group(1)))
            if names:
                return names
    log.warning("Playwright's list of disabled Chromium features not found under %s", package)
    return None


def launch_args(args: tuple[str, ...] | list[str]) -> list[str]:
    """`args` with every ``--disable-features=`` folded into one, last, that keeps Playwright's
    list too. Without Playwright's list, the caller's switches are dropped (with a warning):
    Playwright's are what keep automated pages steady, the caller's only make them faster."""
    rest = [a for a in args if not a.startswith(DISABLE)]
    wanted = [name for a in args if a.startswith(DISABLE) for name in a[len(DISABLE) :].split(",") if name]
    if not wanted:
        return rest
    defaults = playwright_disabled_features()
    if defaults is None:
        log.warning("not disabling %s: it would switch Playwright's disabled features back on", wanted)
        return rest
    return [*rest, DISABLE + ",".join(dict.fromkeys((*defaults, *wanted)))]
