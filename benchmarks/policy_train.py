"""Element-policy throughput and learning.

`speed`: episodes per minute of the same policy (random init, actions sampled, seeded) on the
browser-free path (clones/dom_plan.py's hierarchy, what training uses) and on the browser env
(devices/rl RealbenchEnv: Chromium renders, the agent reads the dumped hierarchy and clicks bounds
centres), on the same tasks and instances.

`learn`: `realbench train`'s function on N tasks of a pack for each seed; prints the greedy clone
success of the untrained base and of the trained policy per task, the mean gain, and a task-level
95% bootstrap interval of the gain (tasks resampled; seeds averaged within a task).

Machine and load are printed with the figures (the machine may be shared: say so with them).

    .venv/bin/python benchmarks/policy_train.py speed --pack bank --episodes 20
    .venv/bin/python benchmarks/policy_train.py learn --pack bank --tasks 6 --seeds 0,1,2 --updates 20
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
from devices.rl.policy_train import Roller, TrainConfig, train, trainable  # noqa: E402
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


def learn(pack_name: str, tasks_n: int, seeds: list[int], updates: int, group: int) -> dict[str, Any]:
    pack = load_pack(resolve_pack(pack_name))
    tasks = [t.id for t in pack.tasks if trainable(t)][:tasks_n]
    base: dict[str, list[float]] = {t: [] for t in tasks}
    trained: dict[str, list[float]] = {t: [] for t in tasks}
    curves = []
    seconds = 0.0
    with tempfile.TemporaryDirectory() as tmp:
        for seed in seeds:
            cfg = TrainConfig(
                pack=pack_name,
                tasks=tasks,
                updates=updates,
                group=group,
                batch_tasks=len(tasks),
                seed=seed,
                eval_every=max(1, updates // 4),
            )
            outcome = train(cfg, Path(tmp) / f"seed{seed}", progress=False)
            seconds += outcome.seconds
            start = Roller(pack, cfg)
            from devices.rl.policy_train import evaluate

            before = evaluate(
                start,
                init_params(cfg.shape, np.random.default_rng(seed)),
                [t for t in pack.tasks if t.id in tasks],
            )
            for t in tasks:
                base[t].append(before[t])
                trained[t].append(outcome.per_task[t])
            curves.append({"seed": seed, "points": [p.model_dump() for p in outcome.curve]})
    gains = np.array([np.mean(trained[t]) - np.mean(base[t]) for t in tasks])
    rng = np.random.default_rng(0)
    boots = [gains[rng.integers(len(gains), size=len(gains))].mean() for _ in range(2000)]
    return {
        "pack": pack_name,
        "tasks": tasks,
        "seeds": seeds,
        "updates": updates,
        "group": group,
        "base": {t: float(np.mean(base[t])) for t in tasks},
        "trained": {t: float(np.mean(trained[t])) for t in tasks},
        "gain": float(gains.mean()),
        "gain_ci95": [float(np.percentile(boots, 2.5)), float(np.percentile(boots, 97.5))],
        "train_seconds": round(seconds, 1),
        "curves": curves,
        "machine": machine_facts(),
    }


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
    parser.add_argument("--json", action="store_true")
    args = parser.parse_args()
    if args.what == "speed":
        result = speed(args.pack, args.episodes, args.tasks)
    else:
        result = learn(
            args.pack, args.tasks, [int(s) for s in args.seeds.split(",")], args.updates, args.group
        )
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
        for t in result["tasks"]:
            print(f"{t:40s} base {result['base'][t]:.2f} trained {result['trained'][t]:.2f}")
        lo, hi = result["gain_ci95"]
        print(
            f"mean gain {result['gain']:+.3f} (task-level 95% bootstrap interval {lo:+.3f} .. {hi:+.3f}); "
            f"{result['train_seconds']} s of training"
        )


if __name__ == "__main__":
    main()
