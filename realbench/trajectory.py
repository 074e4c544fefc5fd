"""A typed, read-only view of one episode's trajectory, for judges and checks.

Built from an `EpisodeResult` (in memory) or from a run store episode (on disk); both give the
same `content_hash`, which keys judge caches: a trajectory judged once is never paid for twice.
"""

from __future__ import annotations

import hashlib
import json
from pathlib import Path
from typing import TYPE_CHECKING, Any

from pydantic import BaseModel, ConfigDict, Field

from realbench.outcome import EndReason, Outcome

if TYPE_CHECKING:
    from realbench.episode import EpisodeResult
    from realbench.store import RunStore


class TrajectoryStep(BaseModel):
    model_config = ConfigDict(frozen=True)

    index: int
    action: dict[str, Any] | None = None
    thought: str | None = None
    raw: str = ""
    error: str | None = None
    screenshot: bytes | None = Field(default=None, repr=False)
    hierarchy: str | None = Field(default=None, repr=False)
    boundary: str | None = None


class Trajectory(BaseModel):
    model_config = ConfigDict(frozen=True)

    episode_id: str | None = None
    task_id: str
    instruction: str
    params: dict[str, Any] = Field(default_factory=dict)
    agent: str = ""
    target: str = ""
    steps: list[TrajectoryStep] = Field(default_factory=list)
    outcome: Outcome | None = None
    end_reason: EndReason | None = None
    answer: str | None = None
    final_screenshot: bytes | None = Field(default=None, repr=False)
    final_hierarchy: str | None = Field(default=None, repr=False)

    @property
    def screenshots(self) -> list[bytes]:
        """Every screenshot in order, the final screen last."""
        shots = [s.screenshot for s in self.steps if s.screenshot is not None]
        if self.final_screenshot is not None:
            shots.append(self.final_screenshot)
        return shots

    @property
    def last_hierarchy(self) -> str | None:
        if self.final_hierarchy is not None:
            return self.final_hierarchy
        return next((s.hierarchy for s in reversed(self.steps) if s.hierarchy is not None), None)

    def content_hash(self) -> str:
        """Identifies what a judge sees: instruction, actions, thoughts, answer, end and pixels.
        Independent of where the trajectory is stored (and of the agent's name)."""

        def digest(data: bytes | str | None) -> str | None:
            if data is None:
                return None
            raw = data.encode() if isinstance(data, str) else data
            return hashlib.sha256(raw).hexdigest()

        doc = {
            "task": self.task_id,
            "instruction": self.instruction,
            "answer": self.answer,
            "end": str(self.end_reason) if self.end_reason else None,
            "steps": [
                [s.index, s.action, s.thought, s.error, digest(s.screenshot), s.boundary] for s in self.steps
            ],
            "final": digest(self.final_screenshot),
            "final_xml": digest(self.final_hierarchy),
        }
        return hashlib.sha256(json.dumps(doc, sort_keys=True, ensure_ascii=False).encode()).hexdigest()

    @classmethod
    def from_result(cls, result: EpisodeResult, episode_id: str | None = None) -> Trajectory:
        return cls(
            episode_id=episode_id,
            task_id=result.task_id,
            instruction=result.instruction,
            params=result.params,
            agent=result.agent,
            target=result.target,
            steps=[
                TrajectoryStep(
                    index=s.index,
                    action=s.action,
                    thought=s.thought,
                    raw=s.raw,
                    error=s.error,
                    screenshot=s.screenshot,
                    hierarchy=s.hierarchy,
                    boundary=s.boundary,
                )
                for s in result.steps
            ],
            outcome=result.outcome,
            end_reason=result.end_reason,
            answer=result.answer,
            final_screenshot=result.final_screenshot,
            final_hierarchy=result.final_hierarchy,
        )

    @classmethod
    def from_store(cls, store: RunStore, episode_id: str) -> Trajectory:
        row = store.episode(episode_id)
        folder = store.episode_dir(episode_id)

        def read_bytes(name: str | None) -> bytes | None:
            return (folder / name).read_bytes() if name and (folder / name).exists() else None

        def read_text(name: str | None) -> str | None:
            return (folder / name).read_text(encoding="utf-8") if name and (folder / name).exists() else None

        steps = [
            TrajectoryStep(
                index=s["index"],
                action=s.get("action"),
                thought=s.get("thought"),
                raw=s.get("raw") or "",
                error=s.get("error"),
                screenshot=read_bytes(s.get("screenshot")),
                hierarchy=read_text(s.get("hierarchy")),
                boundary=s.get("boundary"),
            )
            for s in store.steps(episode_id)
        ]
        final_shot = next(
            (p for p in sorted(Path(folder).glob("final.*")) if p.suffix in (".jpg", ".png")), None
        )
        return cls(
            episode_id=episode_id,
            task_id=row["task"],
            instruction=row["instruction"] or "",
            params=json.loads(row["params"] or "{}"),
            agent=row["agent"] or "",
            target=row["target"] or "",
            steps=steps,
            outcome=Outcome(row["outcome"]) if row["outcome"] else None,
            end_reason=EndReason(row["end_reason"]) if row["end_reason"] else None,
            answer=row["answer"],
            final_screenshot=final_shot.read_bytes() if final_shot else None,
            final_hierarchy=read_text("final.xml"),
        )
