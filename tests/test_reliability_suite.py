"""The standing reliability suite (benchmarks/reliability.py) as a test tier: every case must
hold with nothing lost, done twice or leaked."""

from __future__ import annotations

import sys
from pathlib import Path

import pytest

sys.path.insert(0, str(Path(__file__).resolve().parent.parent / "benchmarks"))

from reliability import BROWSER_CASES, CASES, run_suite  # noqa: E402

FAST = [name for name in CASES if name not in BROWSER_CASES]


def _assert_held(name: str) -> None:
    (result,) = run_suite([name])
    assert result.ok, f"{name}: {result.details}"
    assert (result.lost, result.doubled, result.leaked) == (0, 0, 0), f"{name}: {result}"


@pytest.mark.slow
@pytest.mark.parametrize("name", FAST)
def test_reliability_case(name):
    _assert_held(name)


@pytest.mark.slow
@pytest.mark.browser
@pytest.mark.parametrize("name", BROWSER_CASES)
def test_reliability_case_with_browser(name):
    _assert_held(name)
