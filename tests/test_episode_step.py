"""The shared step rules (`realbench.episode_step`): what both the study's episode loop and the RL
environments apply to every agent output."""

from __future__ import annotations

from realbench.actions import Answer, Click, Terminate, TerminateStatus
from realbench.episode_step import StepCounts, StepRules, decide_step
from realbench.hierarchy import Hierarchy
from realbench.outcome import EndReason
from tests.test_hierarchy_boundary import SCREEN, SUBMIT, XML

RULES = StepRules(max_steps=4, max_format_errors=2)
ON_SUBMIT = Click(x=500, y=950)
ELSEWHERE = Click(x=500, y=50)


def _step(counts: StepCounts, action, *, delivers: bool = True, rules: StepRules = RULES):
    return decide_step(
        counts,
        rules,
        action,
        hierarchy=Hierarchy(XML),
        boundary=SUBMIT,
        screen=SCREEN,
        delivers_boundary=delivers,
    )


def test_consecutive_format_errors_end_the_episode_and_a_good_action_resets_the_run() -> None:
    counts = StepCounts()
    first = _step(counts, None)
    assert first.format_error and first.end is None and not first.send
    assert _step(counts, ELSEWHERE).end is None and counts.consecutive_format_errors == 0
    _step(counts, None)
    last = _step(counts, None)
    assert last.end is EndReason.FORMAT_ERRORS
    assert (counts.steps, counts.format_errors) == (4, 3)


def test_answer_and_terminate_end_without_sending() -> None:
    answered = _step(StepCounts(), Answer(text="G101"))
    assert answered.end is EndReason.ANSWER and answered.answer == "G101" and not answered.send
    stopped = _step(StepCounts(), Terminate(status=TerminateStatus.SUCCESS))
    assert stopped.end is EndReason.TERMINATE and not stopped.send


def test_boundary_is_delivered_only_where_the_target_delivers_it() -> None:
    clone = _step(StepCounts(), ON_SUBMIT, delivers=True)
    assert clone.end is EndReason.BOUNDARY and clone.send and not clone.withheld
    assert clone.boundary is not None and "提交订单" in clone.boundary
    phone = _step(StepCounts(), ON_SUBMIT, delivers=False)
    assert phone.end is EndReason.BOUNDARY and not phone.send and phone.withheld


def test_step_budget_counts_format_errors_and_sends_the_last_action() -> None:
    counts = StepCounts()
    rules = StepRules(max_steps=3, max_format_errors=5)
    assert _step(counts, None, rules=rules).end is None
    assert _step(counts, ELSEWHERE, rules=rules).end is None
    last = _step(counts, ELSEWHERE, rules=rules)
    assert last.end is EndReason.STEP_BUDGET and last.send
    # an answer on the last step is an answer, not a truncation
    assert _step(StepCounts(steps=2), Answer(text="x"), rules=rules).end is EndReason.ANSWER
