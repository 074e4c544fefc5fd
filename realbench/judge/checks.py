"""Deterministic checks that decide an episode without a model, when they can.

Run before any judge is called (cheap, exact, free). Each rule either decides (a `Verdict` with
source=checks) or passes the episode on to the judges (None):

1. unscored aborts (env_invalid) are never judged: an abstaining verdict says so;
2. an agent that gave up (terminate failure) or produced only unparseable output failed;
3. a task with a commit boundary succeeds only by reaching it: not reached → failure; reached →
   the real-side checks on the boundary screen decide, if the task has any;
4. a task that expects an answer fails without one; with a known expected answer, the typed
   match (`realbench.answers.match_answer`) decides;
5. otherwise, when the agent declared success and the task has real-side checks, they decide.
"""

from __future__ import annotations

import logging
from typing import Any

from realbench.answers import match_answer
from realbench.errors import RealbenchError
from realbench.hierarchy import Hierarchy
from realbench.outcome import EndReason, Outcome, Verdict, VerdictSource
from realbench.taskpack import AnswerType, CheckExpect, Task
from realbench.trajectory import Trajectory

log = logging.getLogger(__name__)

CHECKS_NAME = "checks"


def _verdict(success: bool, reason: str, *, abstained: bool = False) -> Verdict:
    return Verdict(
        success=success,
        reason=reason,
        source=VerdictSource.CHECKS,
        name=CHECKS_NAME,
        abstained=abstained,
        progress=1.0 if success else 0.0,
    )


def real_checks(task: Task, params: dict[str, Any], xml: str | None) -> tuple[bool, list[str]] | None:
    """Evaluate the task's real-side checks on a hierarchy: (all passed, failed descriptions), or
    None when there are no checks or no readable hierarchy."""
    if not task.real.checks or not xml:
        return None
    try:
        hierarchy = Hierarchy(xml)
    except RealbenchError:
        log.warning("final hierarchy of a %s episode is not valid XML; checks cannot decide", task.id)
        return None
    failed: list[str] = []
    for check in task.real.checks:
        selector = check.selector.format(params)
        present = bool(hierarchy.find(selector))
        if present != (check.expect is CheckExpect.EXISTS):
            failed.append(check.description or f"{check.expect.value} {selector}")
    return (not failed, failed)


def _boundary_screen(traj: Trajectory) -> str | None:
    """The screen on which the agent reached the commit boundary. On a clone the boundary tap is
    delivered, so the final screen is the one after it; the checks describe the one before."""
    at = next((s for s in reversed(traj.steps) if s.boundary is not None), None)
    if at is not None and at.hierarchy is not None:
        return at.hierarchy
    return traj.last_hierarchy


def _terminated_with(traj: Trajectory, status: str) -> bool:
    last = traj.steps[-1].action if traj.steps else None
    return bool(last and last.get("type") == "terminate" and last.get("status") == status)


def deterministic_verdict(task: Task, traj: Trajectory, *, expected_answer: Any = None) -> Verdict | None:
    """A checks verdict, or None when only a judge can decide."""
    if traj.outcome is Outcome.ENV_INVALID or traj.end_reason is EndReason.ABORT:
        return _verdict(False, "env_invalid: an unscored abort is not judged", abstained=True)
    if traj.end_reason is EndReason.FORMAT_ERRORS:
        return _verdict(False, "the episode ended on repeated unparseable model output")
    if _terminated_with(traj, "failure"):
        return _verdict(False, "the agent declared the task failed")

    if task.real.boundary:
        if traj.end_reason is not EndReason.BOUNDARY:
            return _verdict(False, f"the commit boundary was never reached (ended by {traj.end_reason})")
        checked = real_checks(task, traj.params, _boundary_screen(traj))
        if checked is None:
            return None
        ok, failed = checked
        return _verdict(
            ok, "boundary reached; real-side checks passed" if ok else f"boundary reached; failed: {failed}"
        )

    if task.answer.type is not AnswerType.NONE:
        if traj.answer is None or not traj.answer.strip():
            return _verdict(False, "the task asks for an answer and none was given")
        if expected_answer is not None:
            ok = match_answer(task.answer, traj.answer, expected_answer)
            return _verdict(
                ok, f"answer {traj.answer!r} {'matches' if ok else 'does not match'} {expected_answer!r}"
            )
        return None

    if traj.end_reason is EndReason.TERMINATE and _terminated_with(traj, "success"):
        checked = real_checks(task, traj.params, traj.last_hierarchy)
        if checked is not None:
            ok, failed = checked
            return _verdict(ok, "real-side checks passed" if ok else f"real-side checks failed: {failed}")
    return None
