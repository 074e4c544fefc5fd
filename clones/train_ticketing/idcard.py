"""Mainland resident ID numbers (GB 11643-1999): 17 digits and an ISO 7064 MOD 11-2 check character."""

from __future__ import annotations

import re
from datetime import date

from realbench.personal_data import id_check_char

_SHAPE = re.compile(r"^\d{17}[\dXx]$")


def check_char(first17: str) -> str:
    """The check character (one rule for the app's validation and check-pack's personal-data rule)."""
    return id_check_char(first17)


def birth_date(id_no: str) -> date | None:
    try:
        return date(int(id_no[6:10]), int(id_no[10:12]), int(id_no[12:14]))
    except ValueError:
        return None


def id_problem(id_no: str, today: date | None = None) -> str | None:
    """Why an ID number is invalid (the message the app shows), or None when it is valid."""
    s = id_no.strip()
    if not _SHAPE.match(s):
        return "证件号码应为18位，请检查"
    born = birth_date(s)
    if born is None or (today is not None and born > today) or born.year < 1900:
        return "证件号码中的出生日期有误"
    if check_char(s[:17]) != s[17].upper():
        return "证件号码校验位错误，请核对"
    return None


def is_valid(id_no: str, today: date | None = None) -> bool:
    return id_problem(id_no, today) is None


def make_id(region: str, born: date, sequence: int) -> str:
    """A checksum-valid number for invented passengers: 6-digit region, birth date, 3-digit sequence."""
    body = f"{region}{born:%Y%m%d}{sequence:03d}"
    return body + check_char(body)


def age_on(id_no: str, on: date) -> int | None:
    born = birth_date(id_no)
    if born is None:
        return None
    return on.year - born.year - ((on.month, on.day) < (born.month, born.day))


def mask(id_no: str) -> str:
    return id_no[:4] + "*" * 10 + id_no[-4:] if len(id_no) == 18 else id_no
