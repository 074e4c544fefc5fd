"""Typed answer matching: is the agent's answer the expected one, per the task's AnswerSpec?

Shared by clone verifiers (truth from state) and the judge's deterministic checks, so an answer is
graded the same way on every target.
"""

from __future__ import annotations

import re
import unicodedata
from datetime import date
from typing import Any

from realbench.taskpack import AnswerSpec, AnswerType

_NUMBER = re.compile(r"[-+]?\d+(?:\.\d+)?")
_PUNCT = re.compile(r"[\s\.,;:!?，。；：！？、'\"“”‘’()（）\[\]【】]+")
_CJK_DATE = re.compile(r"(?:(\d{4})\s*年\s*)?(\d{1,2})\s*月\s*(\d{1,2})\s*[日号]?")
_ISO_DATE = re.compile(r"(\d{4})[-/.](\d{1,2})[-/.](\d{1,2})")
_MD_DATE = re.compile(r"^(\d{1,2})[-/.](\d{1,2})$")


def normalise_text(text: str) -> str:
    """NFKC, case-folded, without spaces and punctuation: '  G 101。' == 'g101'."""
    return _PUNCT.sub("", unicodedata.normalize("NFKC", text)).casefold()


def parse_number(text: str) -> float | None:
    """The single number in an answer like '¥1,234.50', '1234.5元', '共 3 趟'; None if zero or several."""
    cleaned = unicodedata.normalize("NFKC", text).replace(",", "").replace("，", "")
    found = _NUMBER.findall(cleaned)
    if len(found) != 1:
        return None
    value = float(found[0])
    if "万" in cleaned:
        value *= 10_000
    return value


def parse_date(text: str, *, default_year: int | None = None) -> date | None:
    t = unicodedata.normalize("NFKC", text).strip()
    try:
        m = _ISO_DATE.search(t)
        if m:
            return date(int(m.group(1)), int(m.group(2)), int(m.group(3)))
        m = _CJK_DATE.search(t)
        if m:
            year = int(m.group(1)) if m.group(1) else default_year
            return date(year, int(m.group(2)), int(m.group(3))) if year else None
        m = _MD_DATE.match(t)
        if m and default_year:
            return date(default_year, int(m.group(1)), int(m.group(2)))
    except ValueError:
        return None
    return None


def match_answer(spec: AnswerSpec, given: str | None, expected: Any) -> bool:
    """True when `given` is `expected` under the spec's type (a number within tolerance, a date in
    any common format, a choice or text after normalisation)."""
    if given is None:
        return False
    if spec.type is AnswerType.NONE:
        return True
    if spec.type is AnswerType.NUMBER:
        value = parse_number(given)
        try:
            want = float(expected)
        except (TypeError, ValueError):
            want_parsed = parse_number(str(expected))
            if want_parsed is None:
                return False
            want = want_parsed
        return value is not None and abs(value - want) <= spec.tolerance + 1e-9
    if spec.type is AnswerType.DATE:
        want_date = expected if isinstance(expected, date) else parse_date(str(expected))
        if want_date is None:
            return False
        return parse_date(given, default_year=want_date.year) == want_date
    if spec.type is AnswerType.CHOICE:
        norm = normalise_text(given)
        choices = [normalise_text(c) for c in spec.choices or []]
        if norm not in choices:
            return False
        return norm == normalise_text(str(expected))
    return normalise_text(given) == normalise_text(str(expected))
