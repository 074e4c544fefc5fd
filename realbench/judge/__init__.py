"""Judging episodes: deterministic checks first, VLM judges only where the checks cannot decide.

    verdicts = judge_trajectory(task, trajectory, [VLMJudge(...), ...], expected_answer=...)

Returns one `checks` verdict when the checks decide (no model is called), otherwise one verdict
per judge (each named; several judges per run are normal, e.g. to audit them against each other).
"""

from __future__ import annotations

import asyncio
from typing import Any

from realbench.judge.cache import JudgeCache
from realbench.judge.checks import deterministic_verdict, real_checks
from realbench.judge.vlm import ImageSampling, JudgeReply, VLMJudge, VLMJudgeConfig, parse_reply
from realbench.outcome import Verdict
from realbench.taskpack import Task
from realbench.trajectory import Trajectory


async def ajudge_trajectory(
    task: Task,
    traj: Trajectory,
    judges: list[VLMJudge],
    *,
    expected_answer: Any = None,
    judge_decided: bool = False,
) -> list[Verdict]:
    """Checks first; judges where the checks cannot decide. `judge_decided` also asks the judges
    about episodes the checks decided (for auditing judges against checks and verifiers)."""
    decided = deterministic_verdict(task, traj, expected_answer=expected_answer)
    if decided is not None and (decided.abstained or not judge_decided):
        return [decided]
    verdicts = list(await asyncio.gather(*(j.ajudge(task, traj) for j in judges)))
    return ([decided] if decided is not None else []) + verdicts


def judge_trajectory(
    task: Task,
    traj: Trajectory,
    judges: list[VLMJudge],
    *,
    expected_answer: Any = None,
    judge_decided: bool = False,
) -> list[Verdict]:
    return asyncio.run(
        ajudge_trajectory(task, traj, judges, expected_answer=expected_answer, judge_decided=judge_decided)
    )


__all__ = [
    "ImageSampling",
    "JudgeCache",
    "JudgeReply",
    "VLMJudge",
    "VLMJudgeConfig",
    "ajudge_trajectory",
    "deterministic_verdict",
    "judge_trajectory",
    "parse_reply",
    "real_checks",
]
