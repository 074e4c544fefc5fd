"""Money as integer fen (1/100 yuan): parsing what a user types and formatting what a screen shows."""

from __future__ import annotations

import re

from realbench.errors import CloneError

_AMOUNT = re.compile(r"^\s*[¥￥]?\s*(\d{1,12})(?:\.(\d{1,2}))?\s*(元)?\s*$")


def parse_yuan(text: str | None, *, field: str = "金额") -> int:
    """'1,234.5' -> 123450 fen. Refuses what the real app's amount keyboard cannot produce."""
    raw = (text or "").replace(",", "").replace("，", "")
    m = _AMOUNT.match(raw)
    if not m:
        raise CloneError(f"请输入正确的{field}", hint="amounts are digits with at most two decimals")
    whole, frac = m.group(1), (m.group(2) or "").ljust(2, "0")
    return int(whole) * 100 + int(frac)


def yuan(fen: int, *, sign: bool = False, grouping: bool = True) -> str:
    """123450 -> '1,234.50' (with a leading +/- when `sign`)."""
    neg = fen < 0
    whole, frac = divmod(abs(int(fen)), 100)
    body = f"{whole:,}" if grouping else str(whole)
    text = f"{body}.{frac:02d}"
    if sign:
        return ("-" if neg else "+") + text
    return ("-" if neg else "") + text


def masked_card(number: str) -> str:
    """'6217001234567890123' -> '6217 **** **** 0123' as bank apps show card numbers."""
    return f"{number[:4]} **** **** {number[-4:]}"


def tail(number: str) -> str:
    return number[-4:]
