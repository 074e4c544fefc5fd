"""Synthetic data for the analysis tests: tidy tables and small run stores.

Everything here is synthetic and says so: models are named ``synthetic:*`` and the device side of
the stores is a ``virtual-phone``.
"""

from __future__ import annotations

import io
from pathlib import Path

import numpy as np
import pandas as pd
from PIL import Image, ImageDraw

from realbench.episode import EpisodeResult, StepRecord
from realbench.observation import ImageFormat
from realbench.outcome import EndReason, Outcome, Verdict, VerdictSource
from realbench.store import EpisodeKey, RunStore

BASE = "synthetic:base"
TRAINED = "synthetic:trained"


def retention_frame(n_tasks: int = 40, runs: int = 3, true_r: float = 0.8, seed: int = 0) -> pd.DataFrame:
    """task, stratum, model, env, run, success with a known mean-gain ratio (see simulate_gains)."""
    rng = np.random.default_rng(seed)
    b = rng.beta(2, 5, n_tasks)
    gamma = rng.beta(2, 2, n_tasks) * (1 - b)
    tau = np.clip(rng.normal(true_r, 0.1, n_tasks), 0, 1)
    probs = {
        (BASE, "clone"): b,
        (TRAINED, "clone"): b + gamma,
        (BASE, "real"): b,
        (TRAINED, "real"): b + tau * gamma,
    }
    strata = np.where(gamma > 0.25, "gain", "mixed")
    rows = []
    for (model, env), p in probs.items():
        outcomes = rng.random((n_tasks, runs)) < p[:, None]
        for t in range(n_tasks):
            for r in range(runs):
                rows.append((f"task{t:03d}", strata[t], model, env, r, bool(outcomes[t, r])))
    return pd.DataFrame(rows, columns=["task", "stratum", "model", "env", "run", "success"])


def selection_frame(seed: int = 0) -> pd.DataFrame:
    """Clone runs (5 per model) with tasks of every stratum, by construction."""
    rng = np.random.default_rng(seed)
    spec = (
        [("gain", 0.1, 0.95)] * 12
        + [("loss", 0.9, 0.05)] * 4
        + [("both-pass", 1.0, 1.0)] * 10
        + [("both-fail", 0.0, 0.0)] * 15
        + [("mixed", 0.5, 0.6)] * 8
    )
    rows = []
    for i, (_, pb, pr) in enumerate(spec):
        for model, p in ((BASE, pb), (TRAINED, pr)):
            for r in range(5):
                rows.append((f"t{i:02d}", model, "clone", r, bool(rng.random() < p), 60.0 + 10 * (i % 3)))
    return pd.DataFrame(rows, columns=["task", "model", "env", "run", "success", "duration_s"])


def judged_table(
    rng: np.random.Generator,
    probs: dict[tuple[str, str], np.ndarray],
    se: float,
    sp: float,
    runs: int,
    *,
    real_scored_by_judge: bool = False,
    success_source: str | None = None,
) -> pd.DataFrame:
    """Episodes of every (model, env) in `probs` (per-task success probabilities), each with its
    truth and the verdict of a synthetic judge of sensitivity `se` and specificity `sp`. With
    `real_scored_by_judge` the real side's `success` is the judge's verdict, as when no verifier
    can read the phone."""
    frames = []
    for (model, env), prob in probs.items():
        n_tasks = len(prob)
        truth = rng.random((runs, n_tasks)) < prob
        judged = np.where(truth, rng.random(truth.shape) < se, rng.random(truth.shape) > sp)
        scored = judged if real_scored_by_judge and env == "real" else truth
        columns = {
            "task": np.tile(np.arange(n_tasks), runs).astype(str),
            "stratum": "all",
            "model": model,
            "env": env,
            "run": np.repeat(np.arange(runs), n_tasks),
            "success": scored.ravel(),
            "judged": judged.ravel(),
        }
        if success_source is not None:
            columns["success_source"] = success_source
        frames.append(pd.DataFrame(columns))
    return pd.concat(frames)


def audit_frame(n_tasks: int = 60, seed: int = 0) -> pd.DataFrame:
    """Two judges, two models, 2 runs per task; judge 'strict' misses successes, 'lenient' accepts failures."""
    rng = np.random.default_rng(seed)
    rows = []
    for t in range(n_tasks):
        app = "bank" if t % 2 else "train"
        for model, p in ((BASE, 0.3), (TRAINED, 0.6)):
            for r in range(2):
                truth = bool(rng.random() < p)
                steps = int(rng.integers(3, 30))
                for judge, se, sp in (("strict", 0.7, 0.98), ("lenient", 0.97, 0.8)):
                    verdict = bool(rng.random() < se) if truth else bool(rng.random() > sp)
                    rows.append((f"t{t:02d}", model, judge, truth, verdict, steps, app, f"t{t}-{model}-{r}"))
    return pd.DataFrame(
        rows, columns=["task", "model", "judge", "truth", "verdict", "steps", "app", "episode"]
    )


def _screen(text: str, colour: tuple[int, int, int]) -> bytes:
    img = Image.new("RGB", (120, 240), colour)
    ImageDraw.Draw(img).text((8, 8), text, fill=(0, 0, 0))
    buf = io.BytesIO()
    img.save(buf, format="PNG")
    return buf.getvalue()


def write_store(
    root: Path,
    *,
    env: str,
    n_tasks: int = 4,
    repeats: int = 2,
    seed: int = 0,
    judge: bool = True,
    label: bool = False,
    abort_every: int = 0,
) -> Path:
    """A run store with episodes of both synthetic models on ``env`` (clone: headless clone with a
    verifier verdict; real: a virtual phone with judge verdicts only)."""
    rng = np.random.default_rng(seed)
    store = RunStore(root)
    kind = "headless-clone" if env == "clone" else "virtual-phone"
    serial = "clone-0" if env == "clone" else "vphone-5555"
    for model, base_p in ((BASE, 0.3), (TRAINED, 0.75)):
        run_id = f"{model}@{env}"
        store.ensure_run(run_id, pack="synthetic", app="bank", agent=model, target=env, config={})
        n = 0
        for t in range(n_tasks):
            for r in range(repeats):
                n += 1
                aborted = abort_every and n % abort_every == 0
                ok = bool(rng.random() < base_p + 0.05 * t)
                steps = [
                    StepRecord(
                        index=i,
                        action={"type": "click", "x": 200 + 100 * i, "y": 300 + 50 * i},
                        raw=f'{{"type": "click", "x": {200 + 100 * i}, "y": {300 + 50 * i}}}',
                        thought=f"{model} on {env}: step {i} of task{t}",
                        screenshot=_screen(
                            f"{env} t{t} s{i}", (230, 240, 255) if env == "clone" else (255, 240, 220)
                        ),
                        image_format=ImageFormat.PNG,
                        width=120,
                        height=240,
                        app="com.example.bank",
                    )
                    for i in range(3)
                ]
                if env == "clone":  # the agent's last word, which a replay on a faithful clone reproduces
                    status = "success" if ok else "failure"
                    steps.append(
                        StepRecord(
                            index=3,
                            action={"type": "terminate", "status": status},
                            raw=status,
                            thought="done",
                        )
                    )
                verdicts = []
                if env == "clone" and not aborted:
                    verdicts.append(
                        Verdict(
                            success=ok, source=VerdictSource.VERIFIER, name="verifier", reason="state check"
                        )
                    )
                result = EpisodeResult(
                    task_id=f"task{t}",
                    seed=r,
                    instruction=f"do task {t}",
                    params={},
                    agent=model,
                    target=env,
                    device={"kind": kind, "serial": serial, "virtual": env != "clone"},
                    outcome=_outcome(aborted, ok, env),
                    end_reason=EndReason.ABORT if aborted else EndReason.TERMINATE,
                    verdicts=verdicts,
                    steps=steps,
                    started=1000.0 + n,
                    finished=1030.0 + n,
                )
                eid = store.write_episode(run_id, EpisodeKey(f"task{t}", r, r), 0, "bank", result)
                if judge and not aborted:  # judges run after the episode, as `realbench judge` does
                    judged = ok if rng.random() < 0.85 else not ok
                    store.add_verdict(
                        eid,
                        Verdict(
                            success=judged,
                            source=VerdictSource.JUDGE,
                            name="vlm-judge",
                            reason=f"judged {judged}",
                        ),
                    )
                if label and env != "clone" and not aborted:
                    store.add_label(eid, "annotator", ok)
    store.close()
    return root


def _outcome(aborted: bool, ok: bool, env: str) -> Outcome:
    if aborted:
        return Outcome.ENV_INVALID
    if env != "clone":
        return Outcome.BOUNDARY_REACHED  # real apps: nothing programmatic decides
    return Outcome.SUCCESS if ok else Outcome.FAILURE


def fake_replayer_factory():  # loaded by `realbench select --replayer tests.analysis_fixtures:fake_replayer_factory`
    """FAKE replayer for CLI tests: replays reproduce each trace's final terminate status, except
    task1, whose verdict flips at random (seeded)."""
    from analysis.fakes import FakeFlakyReplayer

    return FakeFlakyReplayer({}, flaky={"task1"}, flip_p=0.5, seed=1)
