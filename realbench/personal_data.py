"""Personal data a task would put into a real app, found in the task's own text.

A real-allowed task may only type ID numbers whose check character is wrong (no person holds such a
number) — a checksum-valid mainland resident ID (GB 11643-1999) could be a real person's. Mobile
numbers have no reserved fictional range in mainland China, so any mobile number makes a task
clone-only until the number comes from the lab's own account fixture.
"""

from __future__ import annotations

import re
from collections.abc import Iterator
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from realbench.taskpack import Task

_ID_WEIGHTS = (7, 9, 10, 5, 8, 4, 2, 1, 6, 3, 7, 9, 10, 5, 8, 4, 2)
_ID_CHECK = "10X98765432"
_ID_NUMBER = re.compile(r"(?<![0-9A-Za-z])(\d{17}[\dXx])(?![0-9A-Za-z])")
_MOBILE = re.compile(r"(?<!\d)(1[3-9]\d{9})(?!\d)")


def id_check_char(first17: str) -> str:
    """The ISO 7064 MOD 11-2 check character of a resident ID's first 17 digits."""
    total = sum(int(d) * w for d, w in zip(first17, _ID_WEIGHTS, strict=True))
    return _ID_CHECK[total % 11]


def id_checksum_valid(id_no: str) -> bool:
    s = id_no.strip()
    return bool(re.fullmatch(r"\d{17}[\dXx]", s)) and id_check_char(s[:17]) == s[17].upper()


@dataclass(frozen=True)
class PersonalDatum:
    kind: str  # "id_number" | "mobile"
    value: str
    where: str


def _strings(value: Any, where: str) -> Iterator[tuple[str, str]]:
    if isinstance(value, str):
        yield value, where
    elif isinstance(value, list | tuple):
        for i, v in enumerate(value):
            yield from _strings(v, f"{where}.{i}")
    elif isinstance(value, dict):
        for k, v in value.items():
            yield from _strings(v, f"{where}.{k}")
    elif isinstance(value, int) and not isinstance(value, bool):
        yield str(value), where


def submitted_text(task: Task) -> Iterator[tuple[str, str]]:
    """Every string a run of the task could put into the app: its instruction, its parameter values,
    the text its golden plan types."""
    yield task.instruction, "instruction"
    for name, spec in task.params.items():
        yield from _strings(spec.model_dump(), f"params.{name}")
    for i, step in enumerate(task.golden):
        if step.type is not None:
            yield (step.type if isinstance(step.type, str) else step.type.text), f"golden.{i}.type"


def personal_data(task: Task) -> list[PersonalDatum]:
    """Checksum-valid ID numbers and mobile numbers in what the task would submit."""
    found: list[PersonalDatum] = []
    for text, where in submitted_text(task):
        for m in _ID_NUMBER.finditer(text):
            if id_checksum_valid(m.group(1)):
                found.append(PersonalDatum("id_number", m.group(1), where))
        for m in _MOBILE.finditer(text):
            found.append(PersonalDatum("mobile", m.group(1), where))
    return found
