"""Small hand-built tables of the kinds that break naive retention and audit code.

Each table is written from per-task success counts, so every per-task rate is known exactly.
Models are ``synthetic:*``: these are synthetic data.
"""

from __future__ import annotations

import numpy as np
import pandas as pd

from tests.analysis_fixtures import BASE, TRAINED

# (clone base, clone trained, device base, device trained) successes out of `runs` per task.
Counts = tuple[int, int, int, int]


def table_from_counts(
    counts: dict[str, Counts],
    runs: int,
    strata: dict[str, str] | None = None,
    apps: dict[str, str] | None = None,
) -> pd.DataFrame:
    rows = []
    for task, (sb, sr, db, dr) in counts.items():
        for (model, env), k in zip(
            ((BASE, "clone"), (TRAINED, "clone"), (BASE, "real"), (TRAINED, "real")),
            (sb, sr, db, dr),
            strict=True,
        ):
            for r in range(runs):
                row = {
                    "task": task,
                    "stratum": (strata or {}).get(task, "all"),
                    "model": model,
                    "env": env,
                    "run": r,
                    "success": r < k,
                }
                if apps:
                    row["app"] = apps[task]
                rows.append(row)
    return pd.DataFrame(rows)


def noisy_clone_gain_table() -> pd.DataFrame:
    """Clone gains that cancel out (mean 0.1, spread 0.6) while device gains are clear: Fieller's
    g is far above 1, so R is not estimable."""
    counts = {
        "t0": (0, 4, 0, 3),
        "t1": (4, 0, 0, 3),
        "t2": (0, 4, 1, 4),
        "t3": (4, 0, 0, 2),
        "t4": (1, 3, 0, 3),
        "t5": (2, 1, 0, 2),
    }
    return table_from_counts(counts, runs=4)


def heavy_singleton_table() -> tuple[pd.DataFrame, dict[str, int]]:
    """Six gain tasks and one both-fail task; the population makes the lone both-fail task carry
    2/3 of the weight."""
    counts = {f"g{i}": (0, 3, 0, 2 + (i % 2)) for i in range(6)}
    counts["f0"] = (0, 0, 0, 3)  # a both-fail task that gains on the device
    strata = {t: ("both-fail" if t.startswith("f") else "gain") for t in counts}
    # vary the gain stratum so it has some spread
    counts["g0"] = (1, 3, 1, 2)
    counts["g3"] = (0, 2, 0, 1)
    return table_from_counts(counts, runs=3, strata=strata), {"gain": 10, "both-fail": 20}


def negative_gain_table() -> pd.DataFrame:
    """The trained model is worse on the clone and on the device: a ratio of losses."""
    counts = {f"t{i}": (3, 0 + (i % 2), 3, 1) for i in range(8)}
    return table_from_counts(counts, runs=3)


def identical_tasks_table() -> pd.DataFrame:
    """Every task identical (base always fails, trained always succeeds, both sides): zero variance."""
    return table_from_counts({f"t{i}": (0, 2, 0, 2) for i in range(6)}, runs=2)


def all_ties_table() -> pd.DataFrame:
    """Both models always agree on the clone: every clone gain is 0."""
    return table_from_counts({f"t{i}": (i % 3, i % 3, 0, 1) for i in range(6)}, runs=2)


def clustered_audit_table(n_tasks: int = 20, runs: int = 10, seed: int = 0) -> pd.DataFrame:
    """20 tasks × 10 runs; truth and the judge's verdict are constant within a task, so the 200
    episodes carry the information of 20."""
    rng = np.random.default_rng(seed)
    rows = []
    for t in range(n_tasks):
        truth = t % 2 == 0
        # half the positive tasks are called right, and most negative tasks are
        verdict = (t % 4 == 0) if truth else (t % 10 == 1)
        for r in range(runs):
            rows.append(
                {
                    "task": f"t{t:02d}",
                    "model": BASE if r % 2 else TRAINED,
                    "judge": "j",
                    "truth": truth,
                    "verdict": verdict,
                    "steps": int(rng.integers(3, 20)),
                    "env": "real",
                }
            )
    return pd.DataFrame(rows)


def clustered_two_sided_audit(n_tasks: int = 40, runs: int = 8, seed: int = 1) -> pd.DataFrame:
    """Clone and real episodes of two models. Success comes in clusters (a task is easy or hard for
    both models: task effects of sd 2 on the logit); the judge errs on 10 % of episodes at random.
    Real episodes of every fourth task are labelled; the rest are not."""
    rng = np.random.default_rng(seed)
    rows = []
    miss = 1 / (1 + np.exp(2.2))
    for t in range(n_tasks):
        difficulty = rng.normal(0, 2.0)
        for env in ("clone", "real"):
            for model, lift in ((BASE, -0.5), (TRAINED, 0.5)):
                for r in range(runs):
                    truth = bool(rng.random() < 1 / (1 + np.exp(-(difficulty + lift))))
                    verdict = (not truth) if rng.random() < miss else truth
                    labelled = env == "clone" or t % 4 == 0
                    rows.append(
                        {
                            "task": f"t{t:03d}",
                            "model": model,
                            "judge": "j",
                            "truth": truth if labelled else None,
                            "verdict": verdict,
                            "steps": int(rng.integers(3, 20)),
                            "env": env,
                            "episode": f"t{t}-{env}-{model}-{r}",
                        }
                    )
    return pd.DataFrame(rows)


# ---------------------------------------------------------------- label designs (judge audit)


def audit_rows(
    cells: list[tuple[str, str, bool | None, bool, int]], model: str = TRAINED, judge: str = "j"
) -> pd.DataFrame:
    """Rows from (task, side, truth, verdict, count) cells; truth None = unlabelled."""
    rows = []
    for task, side, truth, verdict, count in cells:
        for _ in range(count):
            rows.append(
                {
                    "task": task,
                    "model": model,
                    "judge": judge,
                    "truth": truth,
                    "verdict": verdict,
                    "steps": 5,
                    "env": side,
                }
            )
    df = pd.DataFrame(rows)
    df["episode"] = [f"e{i:04d}" for i in range(len(df))]
    return df


def crowded_task_table() -> tuple[pd.DataFrame, dict[str, bool]]:
    """Real judge-positives: task A holds 20 true positives, tasks B1–B5 one false accept each
    (PPV = 20/25 = 0.8); judge-negatives: ten tasks with one episode each, three of them true.
    Nothing is labelled; the hidden truth per episode is returned beside the table."""
    cells: list[tuple[str, str, bool | None, bool, int]] = [("A", "real", None, True, 20)]
    cells += [(f"B{i}", "real", None, True, 1) for i in range(1, 6)]
    cells += [(f"C{i}", "real", None, False, 1) for i in range(10)]
    df = audit_rows(cells)
    hidden = {}
    for row in df.itertuples():
        hidden[str(row.episode)] = row.task == "A" or (row.task in ("C0", "C1", "C2"))
    return df, hidden


def verdict_sampled_table() -> pd.DataFrame:
    """60 judge-positives (10 labelled: 8 true) and 40 judge-negatives (10 labelled: 7 true
    negatives), one episode per task. By hand: q = 0.6, PPV = 0.8, NPV = 0.7, p = 0.6;
    design-weighted Se = PPV·q/p = 0.8 and Sp = NPV(1 − q)/(1 − p) = 0.7; the raw labelled counts
    give Se = 8/11 and Sp = 7/9."""
    cells: list[tuple[str, str, bool | None, bool, int]] = []
    for i in range(60):
        truth = (i < 8) if i < 10 else None
        cells.append((f"p{i:02d}", "real", truth, True, 1))
    for i in range(40):
        truth = (i >= 7) if i < 10 else None  # 7 true negatives, 3 misses among the labelled
        cells.append((f"n{i:02d}", "real", truth, False, 1))
    return audit_rows(cells)
