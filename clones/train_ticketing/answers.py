"""Typed answer matching for the train-ticketing verifiers.

Numbers, dates and plain text go through the shared matcher (`realbench.answers`) so an answer is
graded the same way on every target; train numbers, clock times and station names, which the
shared normalisation would blur ("8:10" vs "08:10", "南京南站"), have their own rules here.
"""

from __future__ import annotations

import re
import unicodedata
from datetime import date
from enum import StrEnum

from realbench.answers import match_answer, normalise_text
from realbench.taskpack import AnswerSpec, AnswerType


class AnswerKind(StrEnum):
    TRAIN = "train"
    TIME = "time"
    NUMBER = "number"
    DATE = "date"
    STATION = "station"
    TEXT = "text"


_TIME = re.compile(r"(\d{1,2})\s*[:：点时]\s*(\d{1,2})?")


def parse_time(text: str) -> tuple[int, int] | None:
    m = _TIME.search(unicodedata.normalize("NFKC", text))
    if not m:
        return None
    return int(m.group(1)), int(m.group(2) or 0)


def matches(kind: AnswerKind | str, truth: object, answer: str | None, tolerance: float = 0.01) -> bool:
    """Whether ``answer`` states ``truth``: a str (train, "HH:MM", station, text), a number or a date."""
    if answer is None or not answer.strip():
        return False
    kind = AnswerKind(kind)
    if kind is AnswerKind.TRAIN:
        return normalise_text(answer).upper().removesuffix("次") == str(truth).upper()
    if kind is AnswerKind.TIME:
        got = parse_time(answer)
        return got is not None and got == parse_time(str(truth))
    if kind is AnswerKind.STATION:
        return normalise_text(answer).removesuffix("站") == normalise_text(str(truth)).removesuffix("站")
    if kind is AnswerKind.NUMBER:
        return match_answer(AnswerSpec(type=AnswerType.NUMBER, tolerance=tolerance), answer, truth)
    if kind is AnswerKind.DATE:
        assert isinstance(truth, date)
        return match_answer(AnswerSpec(type=AnswerType.DATE), answer, truth)
    return match_answer(AnswerSpec(type=AnswerType.TEXT), answer, truth)
