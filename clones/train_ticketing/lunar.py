"""Chinese lunar dates for the date picker's day cells (the real picker's cells read `M月D日 … 农历…`).

The table holds the first day of each lunar month (Beijing time) from the 2025 Spring Festival to
the 2027 one, which covers the clone's clock and its pre-sale window; a day outside it gets no lunar
label. The dates follow the astronomical new moons (2025 has a leap sixth month).
"""

from __future__ import annotations

from datetime import date

# (first day of the month, month name); each month runs to the day before the next entry
MONTH_STARTS: tuple[tuple[date, str], ...] = (
    (date(2025, 1, 29), "正月"),
    (date(2025, 2, 28), "二月"),
    (date(2025, 3, 29), "三月"),
    (date(2025, 4, 28), "四月"),
    (date(2025, 5, 27), "五月"),
    (date(2025, 6, 25), "六月"),
    (date(2025, 7, 25), "闰六月"),
    (date(2025, 8, 23), "七月"),
    (date(2025, 9, 22), "八月"),
    (date(2025, 10, 21), "九月"),
    (date(2025, 11, 20), "十月"),
    (date(2025, 12, 20), "冬月"),
    (date(2026, 1, 19), "腊月"),
    (date(2026, 2, 17), "正月"),
    (date(2026, 3, 19), "二月"),
    (date(2026, 4, 17), "三月"),
    (date(2026, 5, 17), "四月"),
    (date(2026, 6, 15), "五月"),
    (date(2026, 7, 14), "六月"),
    (date(2026, 8, 13), "七月"),
    (date(2026, 9, 11), "八月"),
    (date(2026, 10, 10), "九月"),
    (date(2026, 11, 9), "十月"),
    (date(2026, 12, 9), "冬月"),
    (date(2027, 1, 8), "腊月"),
    (date(2027, 2, 6), "正月"),
)
_END = date(2027, 3, 8)  # the 2027 正月 has 30 days at most: no label past it
_DIGITS = "一二三四五六七八九十"


def day_name(n: int) -> str:
    """1 → 初一, 10 → 初十, 15 → 十五, 20 → 二十, 21 → 廿一, 30 → 三十."""
    if n <= 10:
        return "初" + _DIGITS[n - 1]
    if n < 20:
        return "十" + _DIGITS[n - 11]
    if n == 20:
        return "二十"
    if n < 30:
        return "廿" + _DIGITS[n - 21]
    return "三十"


def lunar_label(iso: str) -> str:
    """`农历正月十七` for a day the table covers, else an empty string."""
    d = date.fromisoformat(iso[:10])
    if d < MONTH_STARTS[0][0] or d >= _END:
        return ""
    start, name = next((s, n) for s, n in reversed(MONTH_STARTS) if s <= d)
    return f"农历{name}{day_name((d - start).days + 1)}"
