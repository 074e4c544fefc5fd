"""Provenance of a real-side selector or step: how strongly public evidence backs it.

Every real-side step, check and boundary entry of a pack may say what backs it:

    evidence: {level: script, source: 'fs#26127499662'}

The levels are those of the evidence of record (docs/real-apps.md), strongest first, plus `clone`
for a selector that only the clone backs. A level stronger than `guess` names its source (a citation
as the evidence of record writes them: `fs#N`, `owner/repo:path`).
"""

from __future__ import annotations

from enum import StrEnum

from pydantic import BaseModel, ConfigDict, model_validator


class EvidenceLevel(StrEnum):
    DUMP = "dump"  # a hierarchy dump or screenshot of the real app
    SCRIPT = "script"  # a public script that drives the real app
    RULES = "rules"  # a public ad-skip rule set naming ids/texts/activities
    WEB = "web"  # a description written from real runs
    GUESS = "guess"  # indirect: a clone's comments, an inference
    CLONE = "clone"  # only the clone backs it

    @property
    def rank(self) -> int:
        """0 for the strongest level; larger is weaker."""
        return list(EvidenceLevel).index(self)

    def at_least(self, other: EvidenceLevel) -> bool:
        return self.rank <= other.rank


# Levels whose claim is only as good as the source it cites.
CITED = frozenset({EvidenceLevel.DUMP, EvidenceLevel.SCRIPT, EvidenceLevel.RULES, EvidenceLevel.WEB})


class Evidence(BaseModel):
    """What backs one real-side selector or step."""

    model_config = ConfigDict(extra="forbid", frozen=True)

    level: EvidenceLevel
    source: str = ""

    @model_validator(mode="after")
    def _cited(self) -> Evidence:
        if self.level in CITED and not self.source.strip():
            raise ValueError(
                f"evidence at level {self.level.value!r} names its source (e.g. 'fs#26127499662' or 'owner/repo:path')"
            )
        return self

    def __str__(self) -> str:
        return f"{self.level.value} ({self.source})" if self.source else self.level.value
