"""Relative dates ("next Monday", "the Friday after next") resolved against a target's clock.

Expressions are written in a small English code in packs and rendered as the Chinese phrase the
real apps' users would read:

  today · tomorrow · day_after_tomorrow · +Nd (N days from now)
  this:mon … this:sun   (this calendar week, Monday first; may be in the past)
  next:mon …            (next calendar week: 下周一)
  after_next:fri …      (the week after next: 下下周五)
  weekday:sat           (the first such day strictly after today)
"""

from __future__ import annotations

import re
from dataclasses import dataclass
from datetime import date, timedelta

from realbench.errors import ConfigError

WEEKDAYS = ("mon", "tue", "wed", "thu", "fri", "sat", "sun")
WEEKDAY_ZH = ("一", "二", "三", "四", "五", "六", "日")
_OFFSET = re.compile(r"^\+(\d{1,3})d$")


@dataclass(frozen=True)
class ResolvedDate:
    expr: str
    phrase: str
    date: date

    @property
    def iso(self) -> str:
        return self.date.isoformat()

    @property
    def month_day(self) -> str:
        return f"{self.date.month}月{self.date.day}日"


def _weekday(code: str, expr: str) -> int:
    try:
        return WEEKDAYS.index(code)
    except ValueError:
        raise ConfigError(
            f"bad relative date {expr!r}: unknown weekday {code!r}", hint=f"use one of {', '.join(WEEKDAYS)}"
        ) from None


def validate_expr(expr: str) -> None:
    resolve(expr, date(2026, 1, 1))


def resolve(expr: str, today: date) -> ResolvedDate:
    """Resolve an expression against `today` (the target's clock)."""
    e = expr.strip().lower()
    if e == "today":
        return ResolvedDate(expr, "今天", today)
    if e == "tomorrow":
        return ResolvedDate(expr, "明天", today + timedelta(days=1))
    if e == "day_after_tomorrow":
        return ResolvedDate(expr, "后天", today + timedelta(days=2))
    m = _OFFSET.match(e)
    if m:
        n = int(m.group(1))
        return ResolvedDate(expr, f"{n}天后", today + timedelta(days=n))
    if ":" in e:
        kind, code = e.split(":", 1)
        wd = _weekday(code, expr)
        monday = today - timedelta(days=today.weekday())
        zh = WEEKDAY_ZH[wd]
        if kind == "this":
            return ResolvedDate(expr, f"本周{zh}", monday + timedelta(days=wd))
        if kind == "next":
            return ResolvedDate(expr, f"下周{zh}", monday + timedelta(days=7 + wd))
        if kind == "after_next":
            return ResolvedDate(expr, f"下下周{zh}", monday + timedelta(days=14 + wd))
        if kind == "weekday":
            ahead = (wd - today.weekday()) % 7 or 7
            return ResolvedDate(expr, f"周{zh}", today + timedelta(days=ahead))
    raise ConfigError(
        f"bad relative date {expr!r}",
        hint="use today, tomorrow, day_after_tomorrow, +Nd, this:DAY, next:DAY, after_next:DAY or weekday:DAY",
    )
