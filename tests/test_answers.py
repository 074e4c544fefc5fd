from datetime import date

import pytest

from realbench.answers import match_answer, normalise_text, parse_date, parse_number
from realbench.taskpack import AnswerSpec

NUM = AnswerSpec(type="number", tolerance=0.01)


@pytest.mark.parametrize(
    ("given", "expected", "ok"),
    [
        ("¥553.50", 553.5, True),
        ("553.5元", "553.5", True),
        ("票价是 1,234.00 元", 1234, True),
        ("553", 553.5, False),
        ("553.5 或 600", 553.5, False),
        ("没有", 553.5, False),
        ("1.2万", 12000, True),
    ],
)
def test_numbers(given, expected, ok):
    assert match_answer(NUM, given, expected) is ok


def test_dates_text_choice():
    d = AnswerSpec(type="date")
    assert match_answer(d, "3月9日", date(2026, 3, 9))
    assert match_answer(d, "2026-03-09", "2026年3月9日")
    assert match_answer(d, "03/09", date(2026, 3, 9))
    assert not match_answer(d, "3月10日", date(2026, 3, 9))
    assert parse_date("2月30日", default_year=2026) is None
    t = AnswerSpec(type="text")
    assert match_answer(t, " g 101。", "G101")
    assert not match_answer(t, "G102", "G101")
    c = AnswerSpec(type="choice", choices=["一等座", "二等座"])
    assert match_answer(c, "二等座", "二等座")
    assert not match_answer(c, "商务座", "商务座")  # not one of the choices
    assert not match_answer(t, None, "G101")
    assert normalise_text("Ａ Ｂ") == "ab"
    assert parse_number("共 3 趟") == 3
