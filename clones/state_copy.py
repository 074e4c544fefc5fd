"""`copy_tree`: `copy.deepcopy` for the JSON-shaped values a clone's state holds, several times faster.

Copying the mutable part of a state is what a crawl does for every control of every screen and what
the clone server does for every event (a handler works on a copy), and `copy.deepcopy`'s generality
(a dispatch per value, the memo's keep-alive list) was most of a conformance crawl's time. Dicts and
lists are copied here directly; strings, numbers, booleans and None are shared, as deepcopy shares
them; any other value (a tuple, a set, a date, a dict subclass) goes through `copy.deepcopy` with the
same memo. Like deepcopy, an object reached twice is copied once, so a state whose parts share a
sub-object shares the copy of it too.
"""

from __future__ import annotations

import copy
from typing import Any, TypeVar

T = TypeVar("T")

_SHARED = frozenset({str, int, float, bool, type(None)})


def copy_tree(value: T) -> T:
    """A deep copy of `value` (see the module's docstring)."""
    return _copy(value, {})  # type: ignore[no-any-return]


def _copy(value: Any, memo: dict[int, Any]) -> Any:
    kind = type(value)
    if kind in _SHARED:
        return value
    seen = memo.get(id(value))
    if seen is not None:
        return seen
    if kind is dict:
        out: Any = {}
        memo[id(value)] = out
        for key, item in value.items():
            out[key] = item if type(item) in _SHARED else _copy(item, memo)
        return out
    if kind is list:
        out = []
        memo[id(value)] = out
        out.extend(item if type(item) in _SHARED else _copy(item, memo) for item in value)
        return out
    return copy.deepcopy(value, memo)
