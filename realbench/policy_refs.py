"""Policies as a study runs them, records them and names them.

A checkpoint is run by its path (``policy:checkpoints/train_ticketing/trained``), recorded under the
name its agent gives (``policy:element@<hash>``), and named in tables and reports by the description
its card carries ("a small element policy trained by RL on the clone, N updates, seed S").
"""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path

from realbench.agents.policy import POLICY_PREFIX
from realbench.agents.policy_net import PolicyCard, load_checkpoint
from realbench.errors import ConfigError

ROOT = Path(__file__).resolve().parent.parent
# the element-policy checkpoints committed with the repository (checkpoints/README.md)
CHECKPOINTS = ROOT / "checkpoints" / "train_ticketing"


@dataclass(frozen=True)
class PolicyRef:
    """A checkpoint as a study runs it (spec), records it (agent) and names it (description)."""

    spec: str
    agent: str
    description: str
    card: PolicyCard | None = None

    @classmethod
    def of(cls, spec: str) -> PolicyRef:
        if not spec.startswith(POLICY_PREFIX):
            # synthetic policies name themselves; the study's tests use them
            return cls(spec=spec, agent=spec, description=spec)
        path = Path(spec[len(POLICY_PREFIX) :])
        try:
            _, card = load_checkpoint(path)
        except FileNotFoundError as exc:
            raise ConfigError(
                f"no policy checkpoint at {path} (train one with `realbench train --out {path}`)"
            ) from exc
        return cls(
            spec=spec,
            agent=f"{POLICY_PREFIX}{card.name}@{card.weights_sha256[:12]}",
            description=card.description,
            card=card,
        )


def committed(name: str) -> PolicyRef:
    """One of the committed checkpoints: ``base``, ``trained`` or ``trained-rand``."""
    return PolicyRef.of(f"{POLICY_PREFIX}{CHECKPOINTS / name}")
