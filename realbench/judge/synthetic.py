"""A synthetic judge for demos and pipeline tests — not a model, and named ``synthetic:*`` everywhere.

It reads each episode's ground truth (the clone verifier's verdict: on clones, and on virtual phones,
whose apps are verifiable clones) and reports it with errors drawn at a set sensitivity and
specificity, seeded per episode. Its use is to exercise the judge audit and the Rogan–Gladen
correction against a judge whose true error rates are known; a study with a real VLM judge uses
`realbench judge` instead.
"""

from __future__ import annotations

import hashlib
from dataclasses import dataclass
from pathlib import Path

import numpy as np

from realbench.errors import ConfigError
from realbench.outcome import Verdict, VerdictSource
from realbench.store import RunStore


@dataclass(frozen=True)
class SyntheticJudge:
    name: str = "synthetic:judge"
    sensitivity: float = 0.9
    specificity: float = 0.85
    seed: int = 0

    def __post_init__(self) -> None:
        if not self.name.startswith("synthetic:"):
            raise ConfigError(f"a synthetic judge must be named synthetic:*, not {self.name!r}")
        for label, value in (("sensitivity", self.sensitivity), ("specificity", self.specificity)):
            if not 0.0 <= value <= 1.0:
                raise ConfigError(f"{label} must be in [0, 1], got {value}")

    def _rng(self, episode_id: str) -> np.random.Generator:
        digest = hashlib.sha256(f"{self.name}:{self.seed}:{episode_id}".encode()).digest()
        return np.random.default_rng(int.from_bytes(digest[:8], "little"))

    def verdict(self, episode_id: str, truth: bool) -> Verdict:
        u = float(self._rng(episode_id).random())
        correct = u < (self.sensitivity if truth else self.specificity)
        said = truth if correct else not truth
        return Verdict(
            success=said,
            source=VerdictSource.JUDGE,
            name=self.name,
            confidence=None,
            reason=(
                f"synthetic judge (Se={self.sensitivity:.2f}, Sp={self.specificity:.2f}): "
                f"{'agrees with' if correct else 'contradicts'} the verifier"
            ),
        )

    def judge_store(self, path: str | Path) -> dict[str, int]:
        """Add this judge's verdict to every scored episode of a store that has a verifier verdict."""
        counts = {"judged": 0, "skipped_no_truth": 0, "said_success": 0}
        store = RunStore(path, create=False, writer="synthetic judge")
        try:
            frame = store.episodes_frame()
            for row in frame.itertuples(index=False):
                if not row.scored:
                    continue
                truth = [v for v in store.verdicts(row.episode_id) if v.source is VerdictSource.VERIFIER]
                if not truth:
                    counts["skipped_no_truth"] += 1
                    continue
                v = self.verdict(row.episode_id, truth[-1].success)
                store.add_verdict(row.episode_id, v)
                counts["judged"] += 1
                counts["said_success"] += int(v.success)
        finally:
            store.close()
        return counts
