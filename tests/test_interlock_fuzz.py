"""A fixed-seed sample of the generated interlock attacks (tests/interlock_fuzz_cases.py).

Every case runs on a fresh in-process virtual phone, unguarded and then behind the guard armed as
the pack's setup arms it. The verdicts come from the phone's own commit records: unguarded, a trap
must commit and a safe input must not (the case is what it says); behind the guard nothing may
commit, and BACK / HOME / RECENT are never refused. No case is an expected failure: a case that
commits behind the guard fails, naming its gap. A small sample also runs through the real adb
server, whose verdicts must match the in-process ones.
"""

from __future__ import annotations

import pytest

from tests.interlock_fuzz_cases import (
    CONTROL_FORMS,
    INPUTS,
    LABEL_FORMS,
    PATHS,
    e2e_sample,
    judge,
    make_case,
    quiet_guard_logs,
)

SEED = 20261203
CASES = 300


@pytest.mark.parametrize("index", [pytest.param(i, id=f"case{i}") for i in range(CASES)])
def test_generated_case_never_commits_behind_the_guard(index: int) -> None:
    with quiet_guard_logs():
        v = judge(lambda: make_case(SEED, index))
    case = v.case
    assert v.trap_works, f"the case is not what it says unguarded: {case.describe()} -> {v.bare}"
    assert not v.guarded.committed, f"committed behind the guard: {case.describe()}; {v.why()}; {v.gap()}"
    if case.input_form == "keys":
        assert not v.guarded.blocked, f"back / home / recent refused: {case.describe()}"
        assert v.guarded.inputs >= 1, f"back / home / recent never reached the phone: {case.describe()}"
    # a guard that refuses everything is not the goal: a safe input on a catalogued screen passes
    if v.allowed_by_design:
        assert not v.guarded.blocked, f"false block of a safe input: {case.describe()}"


def test_the_generator_is_seeded_per_case_and_covers_every_part() -> None:
    first = [make_case(SEED, i) for i in range(CASES)]
    again = [make_case(SEED, i) for i in (0, 17, CASES - 1)]
    assert [c.describe() for c in again] == [first[i].describe() for i in (0, 17, CASES - 1)]
    assert make_case(SEED + 1, 0).describe() != first[0].describe()
    drawn_labels = {c.label_form for c in first}
    drawn_controls = {c.control_form for c in first}
    assert set(LABEL_FORMS) - {"-"} <= drawn_labels, set(LABEL_FORMS) - drawn_labels
    # control forms of touches are drawn as named; keys, PINs and launches name their own forms
    assert set(CONTROL_FORMS) <= drawn_controls, set(CONTROL_FORMS) - drawn_controls
    assert set(INPUTS) <= {c.input_form for c in first}
    assert set(PATHS) <= {c.path for c in first}
    assert {"commit", "safe"} == {c.intent for c in first}


@pytest.mark.farm
def test_the_in_process_phone_agrees_with_the_adb_path() -> None:
    with quiet_guard_logs():
        report = e2e_sample(SEED, 9, 0)
    assert report["sample"] == 9
    assert report["disagreements"] == [], report["disagreements"]
