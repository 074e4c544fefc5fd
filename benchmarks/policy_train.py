"""Element-policy throughput and learning.

`speed`: episodes per minute of the same policy (random init, actions sampled, seeded) on the
browser-free path (clones/dom_plan.py's hierarchy, what training uses) and on the browser env
(devices/rl RealbenchEnv: Chromium renders, the agent reads the dumped hierarchy and clicks bounds
centres), on the same tasks and instances.

`learn`: `realbench train`'s function on a pack's tasks for each seed (seeds in parallel with
--jobs, one process each); prints the greedy clone success of the untrained base (the same network
at update 0) and of the trained policy per task, held-out tasks included, the mean gain over the
training tasks and its task-level 95% intervals (paired t over tasks, and bootstrap with tasks
resampled; seeds averaged within a task).

Machine and load are printed with the figures (the machine may be shared: say so with them).

    .venv/bin/python benchmarks/policy_train.py speed --pack bank --episodes 20
    .venv/bin/python benchmarks/policy_train.py learn --pack bank --tasks 6 --seeds 0,1,2 --updates 20
    .venv/bin/python benchmarks/policy_train.py learn --pack train_ticketing --task-ids A,B,... \\
        --heldout C,D --seeds 0,1,2 --jobs 2 --updates 12 --group 4 --batch-tasks 10 --temperature 0.5
"""

from __future__ import annotations

import argparse
import json
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

import numpy as np

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

from machine_info import machine_facts, machine_line  # noqa: E402

import clones.registry  # noqa: E402,F401
from devices.rl.config import resolve_pack  # noqa: E402
from devices.rl.policy_train import Roller, TrainConfig, train, train_command, trainable  # noqa: E402
from realbench.agents.policy_net import PolicyShape, init_params  # noqa: E402
from realbench.taskpack import load_pack  # noqa: E402


def speed(pack_name: str, episodes: int, tasks_n: int) -> dict[str, Any]:
    import devices.rl  # noqa: F401
    from devices.rl.gym_env import RealbenchEnv
    from realbench.agents.policy import PolicyAgent
    from realbench.agents.policy_net import PolicyCard, save_checkpoint
    from realbench.observation import ImageFormat, Observation, Screenshot

    pack = load_pack(resolve_pack(pack_name))
    tasks = [t for t in pack.tasks if trainable(t)][:tasks_n]
    params = init_params(PolicyShape(), np.random.default_rng(0))
    roller = Roller(pack, TrainConfig(pack=pack_name))
    plays = [(tasks[i % len(tasks)], i) for i in range(episodes)]
    roller.play(params, plays[0][0], 0, np.random.default_rng(0))  # warm the template caches
    t0 = time.perf_counter()
    free_steps = 0
    for task, i in plays:
        free_steps += roller.play(params, task, i, np.random.default_rng(i)).result.steps
    free_s = time.perf_counter() - t0

    with tempfile.TemporaryDirectory() as tmp:
        save_checkpoint(Path(tmp), params, PolicyCard())
        agent = PolicyAgent(tmp, sample=True)
        envs = {t.id: RealbenchEnv(pack_name, t.id, max_steps=10) for t in tasks}
        try:
            envs[tasks[0].id].reset(seed=0)  # start the browser outside the timing
            t0 = time.perf_counter()
            browser_steps = 0
            for task, i in plays:
                env = envs[task.id]
                obs, info = env.reset(seed=i)
                agent.reset(roller.start(task, i, None)[0])
                done = False
                while not done:
                    h, w = obs["screenshot"].shape[:2]
                    step = agent.act(
                        Observation(Screenshot(b"", w, h, ImageFormat.PNG), hierarchy=obs["hierarchy"]), []
                    )
                    assert step.action is not None
                    obs, _, term, trunc, _ = env.step(step.action.model_dump_json())
                    browser_steps += 1
                    done = term or trunc
            browser_s = time.perf_counter() - t0
        finally:
            for env in envs.values():
                env.close()
    return {
        "pack": pack_name,
        "tasks": [t.id for t in tasks],
        "episodes": episodes,
        "browser_free": {"episodes_per_min": round(episodes / free_s * 60, 1), "steps": free_steps},
        "browser": {"episodes_per_min": round(episodes / browser_s * 60, 1), "steps": browser_steps},
        "machine": machine_facts(),
    }


def _train_seed(cfg: TrainConfig, folder: str) -> dict[str, Any]:
    """One seed's training (a worker process's job): greedy success per task before and after."""
    outcome = train(cfg, Path(folder), progress=False)
    return {
        "seed": cfg.seed,
        "base": outcome.per_task_start,
        "trained": outcome.per_task,
        "seconds": outcome.seconds,
        "episodes": outcome.episodes,
        "sampled": outcome.sampled,
        "curriculum": outcome.curriculum,
        "points": [p.model_dump() for p in outcome.curve],
    }


def task_level_interval(gains: np.ndarray) -> dict[str, list[float]]:
    """95% intervals of the mean gain with tasks as the unit: paired t, and bootstrap over tasks."""
    from scipy import stats

    n = len(gains)
    sem = float(gains.std(ddof=1) / np.sqrt(n)) if n > 1 else float("nan")
    half = float(stats.t.ppf(0.975, n - 1)) * sem if n > 1 else float("nan")
    rng = np.random.default_rng(0)
    boots = [gains[rng.integers(n, size=n)].mean() for _ in range(5000)]
    return {
        "paired_t": [float(gains.mean() - half), float(gains.mean() + half)],
        "bootstrap": [float(np.percentile(boots, 2.5)), float(np.percentile(boots, 97.5))],
    }


def learn(
    pack_name: str,
    tasks: list[str],
    heldout: list[str],
    seeds: list[int],
    options: dict[str, Any],
    jobs: int,
    save: Path | None = None,
    keep: Path | None = None,
) -> dict[str, Any]:
    """Train one policy per seed (up to `jobs` seeds at once, each in its own process) and compare
    each task's greedy success before (the same network at update 0) and after. With `save`, the
    summary over the seeds finished so far is rewritten as each seed finishes; with `keep`, each
    seed's checkpoint and its curve stay in `keep/seedS`."""
    from concurrent.futures import ProcessPoolExecutor, as_completed
    from multiprocessing import get_context

    pack = load_pack(resolve_pack(pack_name))
    configs = [
        TrainConfig(pack=pack_name, tasks=tasks, heldout=heldout, seed=seed, **options) for seed in seeds
    ]
    t0 = time.perf_counter()
    runs: list[dict[str, Any]] = []
    result: dict[str, Any] = {}
    # spawn, not fork: each worker starts torch afresh, single-threaded (devices/rl/policy_train.py)
    with (
        tempfile.TemporaryDirectory() as scratch,
        ProcessPoolExecutor(max_workers=max(1, jobs), mp_context=get_context("spawn")) as pool,
    ):
        folder = keep if keep is not None else Path(scratch)
        futures = [pool.submit(_train_seed, cfg, str(folder / f"seed{cfg.seed}")) for cfg in configs]
        for future in as_completed(futures):
            runs.append(future.result())
            runs.sort(key=lambda r: int(r["seed"]))
            result = _summary(pack.clone, tasks, heldout, runs, options, configs[0])
            result["seeds_asked"] = seeds
            result["wall_seconds"] = round(time.perf_counter() - t0, 1)
            if save is not None:
                save.write_text(json.dumps(result, indent=2, ensure_ascii=False) + "\n", encoding="utf-8")
    return result


def _summary(
    pack: str,
    tasks: list[str],
    heldout: list[str],
    runs: list[dict[str, Any]],
    options: dict[str, Any],
    cfg: TrainConfig,
) -> dict[str, Any]:
    every = tasks + heldout
    base = {t: float(np.mean([r["base"][t] for r in runs])) for t in every}
    trained = {t: float(np.mean([r["trained"][t] for r in runs])) for t in every}
    gains = np.array([trained[t] - base[t] for t in tasks])
    out: dict[str, Any] = {
        "pack": pack,
        "tasks": tasks,
        "heldout": heldout,
        "seeds": [r["seed"] for r in runs],
        "options": options,
        "command": train_command(cfg, Path("DIR")),
        "base": base,
        "trained": trained,
        "per_seed": [{"seed": r["seed"], "base": r["base"], "trained": r["trained"]} for r in runs],
        # sampled training rollouts that succeeded, over all seeds: [successful, all]
        "sampled": {t: [sum(r["sampled"][t][i] for r in runs) for i in (0, 1)] for t in tasks},
        # per seed: golden steps each task's curriculum start still replayed at the end
        "curriculum": [r.get("curriculum", {}) for r in runs],
        "gain": float(gains.mean()),
        "gain_ci95": task_level_interval(gains),
        "train_seconds": round(sum(r["seconds"] for r in runs), 1),
        "episodes": sum(r["episodes"] for r in runs),
        "curves": [{"seed": r["seed"], "points": r["points"]} for r in runs],
        "machine": machine_facts(),
    }
    if heldout:
        out["heldout_gain"] = float(np.mean([trained[t] - base[t] for t in heldout]))
    return out


def main() -> None:
    parser = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    parser.add_argument("what", choices=["speed", "learn"])
    parser.add_argument("--pack", default="bank")
    parser.add_argument("--episodes", type=int, default=20)
    parser.add_argument("--tasks", type=int, default=4)
    parser.add_argument("--seeds", default="0,1,2")
    parser.add_argument("--updates", type=int, default=20)
    parser.add_argument("--group", type=int, default=8)
    parser.add_argument(
        "--task-ids", default="", help="comma-separated training tasks (instead of --tasks N)"
    )
    parser.add_argument("--heldout", default="", help="comma-separated held-out tasks")
    parser.add_argument("--batch-tasks", type=int, default=0, help="task instances per update (0: all)")
    parser.add_argument("--lr", type=float, default=0.02)
    parser.add_argument("--entropy", type=float, default=0.01)
    parser.add_argument("--temperature", type=float, default=1.0)
    parser.add_argument("--max-steps", type=int, default=10)
    parser.add_argument("--prefix-starts", type=float, default=0.0)
    parser.add_argument("--prefix-temperature", type=float, default=None)
    parser.add_argument("--entropy-all", action="store_true")
    parser.add_argument("--row-context", action="store_true")
    parser.add_argument("--eval-seeds", default="0,1")
    parser.add_argument("--jobs", type=int, default=1, help="seeds trained at once (one process each)")
    parser.add_argument("--json", action="store_true")
    parser.add_argument("--save", default="", help="also write the JSON result to this file")
    parser.add_argument("--keep", default="", help="keep each seed's checkpoint in this folder")
    args = parser.parse_args()
    if args.what == "speed":
        result = speed(args.pack, args.episodes, args.tasks)
    else:
        pack = load_pack(resolve_pack(args.pack))
        ids = [t for t in args.task_ids.split(",") if t] or [t.id for t in pack.tasks if trainable(t)][
            : args.tasks
        ]
        options = {
            "updates": args.updates,
            "group": args.group,
            "batch_tasks": args.batch_tasks or len(ids),
            "lr": args.lr,
            "entropy": args.entropy,
            "temperature": args.temperature,
            "max_steps": args.max_steps,
            "eval_every": max(1, args.updates),
            "eval_seeds": [int(s) for s in args.eval_seeds.split(",")],
            "prefix_starts": args.prefix_starts,
            "prefix_temperature": args.prefix_temperature,
            "entropy_all": args.entropy_all,
            "shape": {"context": True} if args.row_context else {},
        }
        heldout = [t for t in args.heldout.split(",") if t]
        seeds = [int(s) for s in args.seeds.split(",")]
        keep = Path(args.keep) if args.keep else None
        if keep is not None:
            keep.mkdir(parents=True, exist_ok=True)
        result = learn(
            args.pack, ids, heldout, seeds, options, args.jobs, Path(args.save) if args.save else None, keep
        )
    if args.save and args.what == "speed":
        Path(args.save).write_text(json.dumps(result, indent=2, ensure_ascii=False) + "\n", encoding="utf-8")
    if args.json:
        print(json.dumps(result, indent=2, ensure_ascii=False))
        return
    print(machine_line())
    if args.what == "speed":
        for path in ("browser_free", "browser"):
            r = result[path]
            print(
                f"{path:12s} {r['episodes_per_min']:8.1f} episodes/min ({r['steps']} steps, {args.episodes} episodes)"
            )
    else:
        print(result["command"])
        for t in result["tasks"] + result["heldout"]:
            mark = " (held out)" if t in result["heldout"] else ""
            won = result["sampled"].get(t)
            rollouts = f"  training rollouts won {won[0]}/{won[1]}" if won else ""
            starts = [c[t] for c in result["curriculum"] if t in c]
            at = f"  curriculum start per seed {starts}" if starts else ""
            print(
                f"{t:40s} base {result['base'][t]:.2f} trained {result['trained'][t]:.2f}{mark}{rollouts}{at}"
            )
        (tlo, thi), (blo, bhi) = result["gain_ci95"]["paired_t"], result["gain_ci95"]["bootstrap"]
        print(
            f"mean gain on {len(result['tasks'])} training tasks, {len(result['seeds'])} seeds: "
            f"{result['gain']:+.3f} (task-level 95% interval: paired t {tlo:+.3f} .. {thi:+.3f}, "
            f"bootstrap {blo:+.3f} .. {bhi:+.3f})"
        )
        if "heldout_gain" in result:
            print(f"mean gain on {len(result['heldout'])} held-out tasks: {result['heldout_gain']:+.3f}")
        print(
            f"{result['episodes']} training episodes, {result['train_seconds']} s of training "
            f"(summed over seeds), {result['wall_seconds']} s wall"
        )


if __name__ == "__main__":
    main()
