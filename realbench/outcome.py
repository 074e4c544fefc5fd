"""How an episode ended, and typed verdicts from verifiers, checks and judges."""

from __future__ import annotations

from enum import StrEnum

from pydantic import BaseModel, ConfigDict, Field


class Outcome(StrEnum):
    SUCCESS = "success"
    FAILURE = "failure"
    BOUNDARY_REACHED = "boundary_reached"
    STEP_BUDGET = "step_budget"
    FORMAT_ERROR = "format_error"
    ENV_INVALID = "env_invalid"
    # Ended by answer/terminate where nothing programmatic can decide (a real app): real-side
    # checks, judges and human labels decide later. Distinct from `failure` so that no summary
    # counts an unjudged real-phone episode as an agent failure.
    UNVERIFIED = "unverified"
    # Stopped by the operator (Ctrl-C) mid-episode: neither an agent failure nor a device's abort;
    # it takes no attempt from the episode's budget and a plain rerun runs it again.
    INTERRUPTED = "interrupted"

    @property
    def scored(self) -> bool:
        """env_invalid episodes are unscored aborts: rerun, never counted as agent failures."""
        return self not in (Outcome.ENV_INVALID, Outcome.INTERRUPTED)


class EndReason(StrEnum):
    """Why the episode loop stopped (before any verdict is computed)."""

    TERMINATE = "terminate"
    ANSWER = "answer"
    BOUNDARY = "boundary"
    STEP_BUDGET = "step_budget"
    FORMAT_ERRORS = "format_errors"
    ABORT = "abort"


class VerdictSource(StrEnum):
    VERIFIER = "verifier"
    CHECKS = "checks"
    JUDGE = "judge"
    HUMAN = "human"


# Which verdict decides an episode when several exist: ground truth first, the judge last.
DECISION_ORDER = (VerdictSource.HUMAN, VerdictSource.VERIFIER, VerdictSource.CHECKS, VerdictSource.JUDGE)


class Verdict(BaseModel):
    """A decision on one episode. `abstained` marks a judge that could not decide (never guessed)."""

    model_config = ConfigDict(extra="forbid")

    success: bool
    progress: float = Field(default=0.0, ge=0.0, le=1.0)
    side_effects: list[str] = Field(default_factory=list)
    reason: str = ""
    source: VerdictSource = VerdictSource.VERIFIER
    name: str = ""
    abstained: bool = False
    confidence: float | None = Field(default=None, ge=0.0, le=1.0)
    raw: str | None = None
    tokens: int | None = None
    cost_usd: float | None = Field(default=None, ge=0.0)

    @classmethod
    def decide(cls, verdicts: list[Verdict]) -> Verdict | None:
        """The deciding verdict among several (see DECISION_ORDER); abstentions never decide."""
        for source in DECISION_ORDER:
            for v in reversed(verdicts):
                if v.source is source and not v.abstained:
                    return v
        return None

    @classmethod
    def fail(cls, reason: str, *, progress: float = 0.0, side_effects: list[str] | None = None) -> Verdict:
        return cls(success=False, progress=progress, side_effects=side_effects or [], reason=reason)

    @classmethod
    def ok(cls, reason: str = "", *, progress: float = 1.0) -> Verdict:
        return cls(success=True, progress=progress, reason=reason)
