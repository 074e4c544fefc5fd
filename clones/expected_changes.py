"""The generic side-effect check: the whole state diffed against an allow-list of expected changes.

Named side-effect checks guard what a task's author thought of; this one catches what nobody
anticipated. A clone lists, per verifier, the state paths a task graded by it may change (globs over
JSON-pointer paths: ``*`` is one segment, ``**`` any number, none included). Everything else that
changes in ``world`` or ``user`` is reported, except the UI, the virtual clock, the id counter and
the clone's device-local keys (search history), which are no account facts.
"""

from __future__ import annotations

import re
from collections.abc import Iterable
from functools import cache
from typing import Any

ALWAYS_ALLOWED: tuple[str, ...] = ("/ui/**", "/clock", "/user/seq")


@cache
def _compile(pattern: str) -> re.Pattern[str]:
    out = []
    for part in pattern.strip("/").split("/"):
        if part == "**":
            out.append(r"(?:/[^/]+)*")
        elif part == "*":
            out.append(r"/[^/]+")
        else:
            out.append("/" + re.escape(part))
    return re.compile("".join(out) + r"\Z")


def path_allowed(path: str, patterns: Iterable[str]) -> bool:
    return any(_compile(p).match(path) for p in patterns)


def unexpected_changes(
    changes: list[dict[str, Any]], allowed: Iterable[str], device_local: Iterable[str] = ()
) -> list[str]:
    """What changed outside `allowed`, as readable lines (`op path`), from `clones.base.diff`."""
    patterns = (*ALWAYS_ALLOWED, *allowed, *(f"/user/{key}/**" for key in device_local))
    return [
        f"unexpected change: {c['op']} {c['path']}" for c in changes if not path_allowed(c["path"], patterns)
    ]
