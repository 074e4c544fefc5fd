"""DEMONSTRATION, NOT A RESULT: a GRPO-style loop over the vectorised clone environments.

The policy is synthetic: a linear softmax over the screen's tappable controls (features: overlap
of the control's text with the instruction, its height on screen, a bias) plus "terminate". Each
update branches a group of rollouts from one snapshot (every environment starts from the same
state), scores them with the clone's verifier (shaped by verifier progress), and moves the
weights along group-relative advantages. It shows how a trainer wires `CloneVectorEnv`,
`snapshot`/`restore` and the verifier reward together; the numbers it prints say nothing about
any model.

    .venv/bin/python examples/rl_loop.py                       # train_ticketing, a booking task
    .venv/bin/python examples/rl_loop.py --toy --updates 5     # the tiny toy clone (clones/toy)
"""

from __future__ import annotations

import argparse
import json
import logging
import sys
from pathlib import Path
from typing import Any

import numpy as np

REPO = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(REPO))

from devices.rl.vector import CloneVectorEnv  # noqa: E402
from realbench.errors import RealbenchError  # noqa: E402
from realbench.hierarchy import Hierarchy, Node  # noqa: E402

log = logging.getLogger("rl_loop")

MAX_CANDIDATES = 48
TERMINATE = json.dumps({"type": "terminate", "status": "success"})
FEATURES = 4  # bias, text overlap with the instruction, height on screen, is-terminate


def candidates(hierarchy: str) -> list[Node]:
    tree = Hierarchy(hierarchy)
    screen = tree.screen
    nodes = [
        n
        for n in tree.nodes
        if n.clickable and n.enabled and not n.bounds.empty and screen.contains(*n.bounds.center)
    ]
    return nodes[:MAX_CANDIDATES]


def features(nodes: list[Node], instruction: str, height: int) -> np.ndarray:
    wanted = set(instruction)
    rows = []
    for n in nodes:
        text = set(n.all_text())
        overlap = len(text & wanted) / (len(text) + 1)
        rows.append([1.0, overlap, n.bounds.center[1] / max(1, height), 0.0])
    rows.append([1.0, 0.0, 0.0, 1.0])  # terminate
    return np.asarray(rows, dtype=np.float64)


class LinearPolicy:
    """Synthetic: softmax(features @ w) over the controls on screen plus terminate."""

    def __init__(self, rng: np.random.Generator) -> None:
        self.w = np.zeros(FEATURES)
        self.w[1] = 3.0  # a prior for controls that share characters with the instruction
        self.w[3] = -2.0  # and reluctance to give up
        self.rng = rng

    def act(self, hierarchy: str, instruction: str, size: tuple[int, int]) -> tuple[str, np.ndarray]:
        width, height = size
        nodes = candidates(hierarchy)
        f = features(nodes, instruction, height)
        logits = f @ self.w
        p = np.exp(logits - logits.max())
        p /= p.sum()
        choice = int(self.rng.choice(len(p), p=p))
        grad = f[choice] - p @ f  # d log pi(choice) / d w
        if choice == len(nodes):
            return TERMINATE, grad
        cx, cy = nodes[choice].bounds.center
        x = round(cx * 1000 / max(1, width - 1))
        y = round(cy * 1000 / max(1, height - 1))
        return json.dumps({"type": "click", "x": min(1000, x), "y": min(1000, y)}), grad


def rollout_group(
    venv: CloneVectorEnv, policy: LinearPolicy, seed: int, horizon: int
) -> tuple[np.ndarray, list[np.ndarray]]:
    """One group: env 0 is reset, snapshotted and restored into the others; all roll out."""
    n = venv.num_envs
    obs, infos = venv.reset(seed=seed)
    instruction = str(infos["instruction"][0])
    if n > 1:
        obs, _ = venv.branch(0, range(1, n))
    size = venv.single_observation_space["screenshot"].shape[1::-1]
    returns = np.zeros(n)
    grads = [np.zeros(FEATURES) for _ in range(n)]
    done = np.zeros(n, dtype=bool)
    for _ in range(horizon):
        actions: list[Any] = []
        for i in range(n):
            if done[i]:
                actions.append(None)
                continue
            action, grad = policy.act(obs["hierarchy"][i], instruction, size)
            grads[i] += grad
            actions.append(action)
        obs, rewards, terminated, truncated, _ = venv.step(actions)
        returns += rewards
        done |= terminated | truncated
        if done.all():
            break
    return returns, grads


def main() -> None:
    parser = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    parser.add_argument("--pack", default="train_ticketing")
    parser.add_argument("--task", default="book-earliest-g-second")
    parser.add_argument("--toy", action="store_true", help="the toy clone (clones/toy, a 3-tap task)")
    parser.add_argument("--group", type=int, default=4, help="rollouts per group (= environments)")
    parser.add_argument("--workers", type=int, default=1)
    parser.add_argument("--updates", type=int, default=3)
    parser.add_argument("--horizon", type=int, default=8)
    parser.add_argument("--lr", type=float, default=0.5)
    parser.add_argument("--seed", type=int, default=0)
    args = parser.parse_args()
    logging.basicConfig(level=logging.WARNING)

    imports: tuple[str, ...] = ()
    pack, task = args.pack, args.task
    if args.toy:
        pack, task = str(REPO / "taskpacks" / "toy"), "buy-item"
    rng = np.random.default_rng(args.seed)
    policy = LinearPolicy(rng)
    print("DEMONSTRATION with a synthetic linear policy; the numbers are not a result.")
    try:
        venv = CloneVectorEnv(
            args.group,
            pack,
            task,
            workers=args.workers,
            imports=imports,
            short_side=448,
            max_steps=args.horizon,
            reward={"shaped": True},
        )
    except RealbenchError as exc:
        sys.exit(f"error: {exc}")
    try:
        for update in range(args.updates):
            returns, grads = rollout_group(venv, policy, seed=args.seed + update, horizon=args.horizon)
            advantages = (returns - returns.mean()) / (returns.std() + 1e-6)
            step = sum(a * g for a, g in zip(advantages, grads, strict=True)) / len(grads)
            policy.w += args.lr * step
            print(
                f"update {update}: group returns {np.round(returns, 3).tolist()}  "
                f"mean {returns.mean():.3f}  weights {np.round(policy.w, 3).tolist()}"
            )
    finally:
        venv.close()


if __name__ == "__main__":
    main()
