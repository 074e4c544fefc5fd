"""Train the element policy on clones, browser-free, with group-relative policy gradients.

Each update: for a batch of the training tasks, one task instance each, `group` episodes from
the same start state (a branch of one snapshot: the same deep-copied start state), actions
sampled from the current policy (numpy forward, seeded). The episode reward comes from the
clone's verifier (`devices.rl.policy_env.reward_of`: 1 for a verified success without side
effects, else 0.3 × the verifier's progress). Advantages are group-relative (GRPO: reward minus
the group's mean, over the group's standard deviation); the loss is the advantage-weighted
log-probability of the episode's actions with GRPO/PPO's clipped importance ratio (``epochs``
passes over each update's rollouts, ratio clipped to 1 ± ``clip``) minus a small entropy bonus,
minimised with ``torch.optim.Adam``.

Why not TRL's GRPOTrainer or TorchRL's ClipPPOLoss: the first is built around a language model's
token generation; the second wants TorchRL and tensordict (not installed) for a loss that, with
a categorical policy over a screen's candidates, is the few lines below. The optimiser, the log-softmax and the
embedding bags are torch's.
"""

from __future__ import annotations

import json
import logging
import math
import shlex
import time
from collections.abc import Iterator, Sequence
from contextlib import contextmanager
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import numpy as np
import torch
from pydantic import BaseModel, ConfigDict, Field
from torch import nn
from tqdm import tqdm

import clones.registry  # noqa: F401  (registers the clones and their state samplers)
from clones.base import Clone, State, get_clone
from clones.dom_plan import initial_state, instantiate
from clones.drift import Drift, drift_profile
from devices.rl.config import resolve_pack
from devices.rl.policy_env import FreeEpisode, FreeResult
from devices.rl.policy_prefix import Curriculum, replay_prefix
from realbench.agents.policy_features import Kind, Memory, Step, build_step
from realbench.agents.policy_net import (
    PARAM_NAMES,
    PolicyCard,
    PolicyShape,
    init_params,
    probabilities,
    save_checkpoint,
    weights_hash,
)
from realbench.errors import ConfigError
from realbench.machine import cpu_model
from realbench.taskpack import AnswerType, Task, TaskInstance, TaskPack, load_pack

log = logging.getLogger(__name__)

STATE_FILE = "train_state.pt"
CURVE_JSON = "curve.json"
CURVE_PNG = "curve.png"
EVAL_SEEDS = (0, 1)  # instance seeds of the greedy evaluations (the default of --eval-seeds)


class TrainConfig(BaseModel):
    model_config = ConfigDict(extra="forbid")

    pack: str
    tasks: list[str] = Field(default_factory=list)
    heldout: list[str] = Field(default_factory=list)
    updates: int = Field(default=30, ge=0)
    group: int = Field(default=8, ge=2, description="episodes per task instance (the GRPO group)")
    batch_tasks: int = Field(default=8, ge=1, description="task instances per update")
    seed: int = 0
    drift_randomise: list[str] = Field(default_factory=list)
    lr: float = Field(default=0.02, gt=0)
    epochs: int = Field(default=4, ge=1, description="optimiser passes over each update's rollouts")
    clip: float = Field(default=0.2, gt=0, description="the PPO/GRPO ratio clip")
    entropy: float = Field(default=0.01, ge=0)
    entropy_all: bool = Field(
        default=False,
        description="the entropy bonus over every sampled step, not only those of groups with a reward spread",
    )
    temperature: float = Field(
        default=1.0, gt=0, description="sampling temperature of the rollouts (the trained distribution)"
    )
    eval_seeds: list[int] = Field(default_factory=lambda: list(EVAL_SEEDS))
    max_steps: int = Field(default=10, ge=1, description="cap on each episode's step budget")
    eval_every: int = Field(default=5, ge=1)
    prefix_starts: float = Field(
        default=0.0,
        ge=0,
        le=1,
        description="share of groups started where the task's reverse curriculum stands (a prefix of the golden plan)",
    )
    prefix_temperature: float | None = Field(
        default=None,
        gt=0,
        description="sampling temperature of the curriculum's groups (default: temperature)",
    )
    shape: PolicyShape = Field(default_factory=PolicyShape)
    name: str = "element"


class CurvePoint(BaseModel):
    update: int
    reward: float | None = None  # mean reward of the update's sampled rollouts
    sampled_success: float | None = None
    train_success: float | None = None  # greedy, EVAL_SEEDS instances of every training task
    heldout_success: float | None = None
    episodes: int = 0
    seconds: float = 0.0
    # the weights after this update: a longer run is checked against a shorter rerun of its command
    # (the same draws up to there) without repeating the whole run
    weights_sha256: str | None = None


class TrainOutcome(BaseModel):
    out: str
    card: PolicyCard
    curve: list[CurvePoint]
    episodes: int
    seconds: float
    per_task: dict[str, float] = Field(default_factory=dict)  # greedy, at the end (train + held-out)
    per_task_start: dict[str, float] = Field(default_factory=dict)  # the same at update 0
    # task -> [successful, all] sampled training rollouts: a task none of whose rollouts ever
    # succeeded gave the update no success to reinforce
    sampled: dict[str, list[int]] = Field(default_factory=dict)
    # task -> golden steps its curriculum start replays at the end (with --prefix-starts)
    curriculum: dict[str, int] = Field(default_factory=dict)


# --- the torch twin of realbench.agents.policy_net ---------------------------------------------


class TorchPolicy(nn.Module):
    """The same network as `realbench.agents.policy_net.logits`, batched over many steps."""

    def __init__(self, params: dict[str, np.ndarray]) -> None:
        super().__init__()
        for name in PARAM_NAMES:
            setattr(self, name, nn.Parameter(torch.tensor(params[name])))

    def numpy_params(self) -> dict[str, np.ndarray]:
        return {n: getattr(self, n).detach().cpu().numpy().astype(np.float32).copy() for n in PARAM_NAMES}

    def _bags(self, bags: list[list[int]]) -> torch.Tensor:
        flat = [i for bag in bags for i in bag]
        offsets = np.cumsum([0] + [len(b) for b in bags[:-1]])
        return nn.functional.embedding_bag(
            torch.tensor(flat, dtype=torch.long),
            self.emb,
            torch.tensor(offsets, dtype=torch.long),
            mode="mean",
        )

    def log_probs(
        self, steps: Sequence[Step], temperature: float | Sequence[float] = 1.0
    ) -> tuple[torch.Tensor, torch.Tensor]:
        """Log-probabilities of every candidate at `temperature` (one, or one per step), padded:
        (steps, max candidates), and the mask."""
        dim = self.emb.shape[1]
        n_cands = [len(s.candidates) for s in steps]
        n_query = [len(s.query) for s in steps]
        cands = [c for s in steps for c in s.candidates]
        step_of = torch.tensor(np.repeat(np.arange(len(steps)), n_cands), dtype=torch.long)
        kinds = torch.tensor([int(c.kind) for c in cands], dtype=torch.long)
        a = self._bags([c.a for c in cands])
        b_bag = self._bags([c.b for c in cands])
        q_flat = self._bags([ids for s in steps for ids in s.query])
        kmax = max(n_query)
        q = q_flat.new_zeros((len(steps), kmax, dim))
        q_mask = torch.zeros((len(steps), kmax), dtype=torch.bool)
        pos = 0
        for i, k in enumerate(n_query):
            q[i, :k] = q_flat[pos : pos + k]
            q_mask[i, :k] = True
            pos += k
        q_mean = q.sum(1) / q_mask.sum(1, keepdim=True)
        qc = q[step_of]  # (C, K, H)
        scores = torch.einsum("ch,ckh->ck", a, qc) / math.sqrt(dim)
        scores = scores.masked_fill(~q_mask[step_of], float("-inf"))
        ctx = (torch.softmax(scores, dim=1).unsqueeze(-1) * qc).sum(1)
        click = (kinds == int(Kind.CLICK)).unsqueeze(1)
        typing = (kinds == int(Kind.TYPE)).unsqueeze(1)
        b = torch.where(click, ctx, torch.where(typing, b_bag, q_mean[step_of]))
        f = torch.tensor(np.stack([c.f for c in cands]), dtype=torch.float32)
        x = torch.cat([a, b, a * b, f], dim=1)
        z = torch.relu(x @ self.w1 + self.b1) @ self.w2 + self.b2[0] + f @ self.u
        cmax = max(n_cands)
        mask = torch.zeros((len(steps), cmax), dtype=torch.bool)
        col = torch.cat([torch.arange(n) for n in n_cands])
        mask[step_of, col] = True
        padded = z.new_full((len(steps), cmax), float("-inf"))
        temps = torch.as_tensor(temperature, dtype=torch.float32).expand(len(steps))
        padded[step_of, col] = z / temps[step_of]
        return torch.log_softmax(padded, dim=1), mask


# --- tasks and episodes -----------------------------------------------------------------------


def trainable(task: Task) -> bool:
    """Tasks the element policy can finish: no typed answer to give (it has no answer action)."""
    return task.answer.type is AnswerType.NONE


def pick_tasks(pack: TaskPack, wanted: list[str]) -> list[Task]:
    by_id = {t.id: t for t in pack.tasks}
    unknown = [t for t in wanted if t not in by_id]
    if unknown:
        raise ConfigError(f"unknown task(s) {unknown} in pack {pack.clone!r}")
    return [by_id[t] for t in wanted]


@dataclass
class Rollout:
    task_id: str
    steps: list[Step]
    chosen: list[int]
    old_logp: list[float]
    result: FreeResult
    temperature: float = 1.0


class Roller:
    """Plays episodes of a pack's tasks on the browser-free path, caching start states."""

    def __init__(self, pack: TaskPack, cfg: TrainConfig) -> None:
        self.pack = pack
        self.cfg = cfg
        self.clone: Clone = get_clone(pack.clone)
        self._states: dict[tuple[str, int, int | None], State] = {}

    def start(self, task: Task, seed: int, drift: Drift | None) -> tuple[TaskInstance, State]:
        instance = instantiate(task, seed)
        data_seed = drift.data_seed if drift is not None else None
        key = (task.id, seed, data_seed)
        if key not in self._states:
            if data_seed is None:
                self._states[key] = initial_state(self.clone, instance)
            else:
                setup = task.clone.setup
                setup = setup.model_copy(update={"data": {**setup.data, "data_seed": data_seed}})
                self._states[key] = self.clone.build_state(setup, instance.params)
        return instance, self._states[key]

    def play(
        self,
        params: dict[str, np.ndarray],
        task: Task,
        seed: int,
        rng: np.random.Generator | None,
        drift: Drift | None = None,
        prefix: int = 0,
        temperature: float | None = None,
    ) -> Rollout:
        """One episode; `rng` None plays greedily. `prefix` golden steps are replayed first (not
        trained on; see devices.rl.policy_prefix). Sampled at `temperature` (default: the config's)."""
        temperature = temperature or self.cfg.temperature
        instance, state = self.start(task, seed, drift)
        episode = FreeEpisode(self.clone, instance, state, drift, context=self.cfg.shape.context)
        memory = Memory()
        if prefix:
            replay_prefix(episode, memory, instance, prefix)
        budget = min(task.max_steps, self.cfg.max_steps)
        shape = self.cfg.shape
        steps: list[Step] = []
        chosen: list[int] = []
        old_logp: list[float] = []
        while not episode.done and episode.steps < budget:
            step = build_step(
                instance.instruction, episode.views(), memory, shape.buckets, budget, context=shape.context
            )
            p = probabilities(params, step, temperature)
            index = int(rng.choice(len(p), p=p)) if rng is not None else int(np.argmax(p))
            cand = step.candidates[index]
            steps.append(step)
            chosen.append(index)
            old_logp.append(float(np.log(max(p[index], 1e-12))))
            if cand.kind is Kind.CLICK:
                assert cand.node is not None
                memory.record_click(cand.node, instance.instruction)
                episode.act(Kind.CLICK, cand.node.ref)
            elif cand.kind is Kind.TYPE:
                memory.record(Kind.TYPE, text=cand.text)
                episode.act(Kind.TYPE, text=cand.text)
            else:
                memory.record(cand.kind)
                episode.act(cand.kind)
        return Rollout(task.id, steps, chosen, old_logp, episode.result(), temperature)


def evaluate(
    roller: Roller, params: dict[str, np.ndarray], tasks: list[Task], seeds: Sequence[int] | None = None
) -> dict[str, float]:
    """Greedy success rate per task over the instances `seeds` (no drift)."""
    out: dict[str, float] = {}
    for task in tasks:
        wins = [
            roller.play(params, task, s, None).result.verdict.success
            for s in (roller.cfg.eval_seeds if seeds is None else seeds)
        ]
        out[task.id] = float(np.mean(wins))
    return out


def group_advantages(rewards: np.ndarray) -> np.ndarray:
    """GRPO's group-relative advantage; a group whose rewards are all equal teaches nothing."""
    std = rewards.std()
    if std < 1e-8:
        return np.zeros_like(rewards)
    return (rewards - rewards.mean()) / (std + 1e-6)


# --- the loop ---------------------------------------------------------------------------------


def _mean(values: dict[str, float]) -> float | None:
    return float(np.mean(list(values.values()))) if values else None


@contextmanager
def deterministic_torch(seed: int) -> Iterator[None]:
    """Torch seeded, on one thread, with deterministic kernels, for the duration of a training.

    Why one thread: a float sum split over threads adds in an order that depends on the thread count
    (and BLAS libraries may pick it by load), and with Adam such last-bit differences compound into
    different weights after a few updates. A training's tensors are small, so one thread costs little."""
    threads = torch.get_num_threads()
    was_deterministic = torch.are_deterministic_algorithms_enabled()
    torch.set_num_threads(1)
    torch.use_deterministic_algorithms(True)
    torch.manual_seed(seed)
    try:
        yield
    finally:
        torch.set_num_threads(threads)
        torch.use_deterministic_algorithms(was_deterministic)


def train(cfg: TrainConfig, out: Path, *, command: str | None = None, progress: bool = True) -> TrainOutcome:
    """Train (or resume) into `out`; the final checkpoint is written to `out` itself.

    The same configuration gives the same weights, bit for bit, on the same machine type: every
    draw comes from one generator seeded by `cfg.seed` (saved and restored on resume), torch runs
    single-threaded with deterministic kernels, and tasks keep the order they are listed in."""
    with deterministic_torch(cfg.seed):
        return _train(cfg, out, command=command, progress=progress)


def _train(cfg: TrainConfig, out: Path, *, command: str | None, progress: bool) -> TrainOutcome:
    pack = load_pack(resolve_pack(cfg.pack))
    tasks = pick_tasks(pack, cfg.tasks) if cfg.tasks else [t for t in pack.tasks if trainable(t)][:8]
    heldout = pick_tasks(pack, cfg.heldout)
    if not tasks:
        raise ConfigError(f"pack {pack.clone!r} has no task the element policy can train on")
    cfg = cfg.model_copy(update={"tasks": [t.id for t in tasks]})
    clone = get_clone(pack.clone)
    drifts = [drift_profile(name, seed=0, clone=clone) for name in cfg.drift_randomise]  # fails fast
    del drifts
    roller = Roller(pack, cfg)
    out.mkdir(parents=True, exist_ok=True)
    rng = np.random.default_rng(cfg.seed)
    model = TorchPolicy(init_params(cfg.shape, np.random.default_rng(cfg.seed)))
    optim = torch.optim.Adam(model.parameters(), lr=cfg.lr)
    curve: list[CurvePoint] = []
    sampled: dict[str, list[int]] = {}
    curriculum = Curriculum()
    start = 0
    episodes = 0
    elapsed = 0.0
    state_file = out / STATE_FILE
    if state_file.is_file():
        saved = torch.load(state_file, weights_only=False)
        if saved["config"] != cfg.model_dump(exclude={"updates"}):
            raise ConfigError(
                f"{state_file} was written by a different training configuration",
                hint="use a fresh --out folder, or the same options as the run being resumed",
            )
        model.load_state_dict(saved["model"])
        optim.load_state_dict(saved["optim"])
        rng.bit_generator.state = saved["rng"]
        curve = [CurvePoint.model_validate(p) for p in saved["curve"]]
        start, episodes, elapsed = saved["update"], saved["episodes"], saved["seconds"]
        sampled = saved.get("sampled", sampled)
        curriculum = Curriculum(dict(saved.get("curriculum", {})))
        log.info("resuming %s at update %d", out, start)
    command = command or train_command(cfg, out)

    evaluated: dict[int, dict[str, float]] = {}  # update -> greedy success per task (train + held-out)

    def point(update: int, **fields: Any) -> CurvePoint:
        params = model.numpy_params()
        on_train, on_heldout = evaluate(roller, params, tasks), evaluate(roller, params, heldout)
        evaluated[update] = {**on_train, **on_heldout}
        return CurvePoint(
            update=update,
            train_success=_mean(on_train),
            heldout_success=_mean(on_heldout),
            episodes=episodes,
            seconds=round(elapsed, 2),
            weights_sha256=weights_hash(params),
            **fields,
        )

    if not curve:
        curve.append(point(0))
    bar = tqdm(
        range(start, cfg.updates),
        desc="train",
        unit="update",
        disable=not progress,
        initial=start,
        total=cfg.updates,
    )
    for update in bar:
        t0 = time.perf_counter()
        params = model.numpy_params()
        batch = [tasks[int(i)] for i in rng.permutation(len(tasks))[: cfg.batch_tasks]]
        rollouts: list[Rollout] = []
        advantages: list[float] = []
        for task in batch:
            seed = int(rng.integers(2**31))
            prefix = 0
            temperature = cfg.temperature
            # drawn only when asked for, so that older configurations draw the same numbers
            if cfg.prefix_starts and rng.random() < cfg.prefix_starts:
                # a curriculum group, at the task's frontier (the start itself once the walk is back)
                prefix = curriculum.start(task)
                temperature = cfg.prefix_temperature or cfg.temperature
            group: list[Rollout] = []
            for _ in range(cfg.group):
                drift = None
                if cfg.drift_randomise:
                    name = cfg.drift_randomise[int(rng.integers(len(cfg.drift_randomise)))]
                    drift = drift_profile(name, seed=int(rng.integers(2**31)), clone=clone)
                group.append(roller.play(params, task, seed, rng, drift, prefix, temperature))
            rewards = np.array([r.result.reward for r in group])
            if prefix:
                curriculum.record(task, prefix, float(np.mean([r.result.verdict.success for r in group])))
            advantages += list(group_advantages(rewards))
            rollouts += group
        episodes += len(rollouts)
        for r in rollouts:
            tally = sampled.setdefault(r.task_id, [0, 0])
            tally[0] += int(r.result.verdict.success)
            tally[1] += 1
        # a group whose rewards are all equal has no gradient of its own; with `entropy_all` its
        # steps still carry the entropy bonus, so that a screen where every group fails does not
        # sharpen into one wrong choice through the weights it shares with other tasks
        live = [
            (r, a)
            for r, a in zip(rollouts, advantages, strict=True)
            if r.steps and (a != 0.0 or cfg.entropy_all)
        ]
        if live:
            steps = [s for r, _ in live for s in r.steps]
            chosen = torch.tensor([c for r, _ in live for c in r.chosen], dtype=torch.long)
            adv = torch.tensor([a for r, a in live for _ in r.steps], dtype=torch.float32)
            old = torch.tensor([x for r, _ in live for x in r.old_logp], dtype=torch.float32)
            # each step is trained at the temperature it was sampled at (the ratio's old policy)
            temps = [r.temperature for r, _ in live for _ in r.steps]
            for _ in range(cfg.epochs):
                logp, mask = model.log_probs(steps, temps)
                picked = logp[torch.arange(len(steps)), chosen]
                ratio = torch.exp(picked - old)
                surrogate = torch.minimum(ratio * adv, torch.clamp(ratio, 1 - cfg.clip, 1 + cfg.clip) * adv)
                p = logp.exp().masked_fill(~mask, 0.0)
                entropy = -(p * logp.masked_fill(~mask, 0.0)).sum(1)
                loss = -surrogate.sum() / len(rollouts) - cfg.entropy * entropy.mean()
                optim.zero_grad()
                loss.backward()
                optim.step()
        elapsed += time.perf_counter() - t0
        reward = float(np.mean([r.result.reward for r in rollouts]))
        wins = float(np.mean([r.result.verdict.success for r in rollouts]))
        done = update + 1
        if done % cfg.eval_every == 0 or done == cfg.updates:
            curve.append(point(done, reward=reward, sampled_success=wins))
        else:
            curve.append(
                CurvePoint(
                    update=done,
                    reward=reward,
                    sampled_success=wins,
                    episodes=episodes,
                    seconds=round(elapsed, 2),
                    weights_sha256=weights_hash(model.numpy_params()),
                )
            )
        bar.set_postfix(reward=f"{reward:.2f}", success=f"{wins:.2f}")
        torch.save(
            {
                "config": cfg.model_dump(exclude={"updates"}),
                "model": model.state_dict(),
                "optim": optim.state_dict(),
                "rng": rng.bit_generator.state,
                "curve": [c.model_dump() for c in curve],
                "update": done,
                "episodes": episodes,
                "seconds": elapsed,
                "sampled": sampled,
                "curriculum": curriculum.starts,
            },
            state_file,
        )
    params = model.numpy_params()
    card = PolicyCard(
        name=cfg.name,
        shape=cfg.shape,
        description=(
            f"a small element policy trained by RL on the clone, {cfg.updates} updates, seed {cfg.seed}"
            + (f", drift-randomised ({', '.join(cfg.drift_randomise)})" if cfg.drift_randomise else "")
            if cfg.updates
            else f"a small element policy, untrained (heuristic start, random weights, seed {cfg.seed})"
        ),
        pack=pack.clone,
        tasks=[t.id for t in tasks],
        updates=cfg.updates,
        seed=cfg.seed,
        drift_randomise=cfg.drift_randomise,
        command=command,
        cpu=cpu_model(),
    )
    card = save_checkpoint(out, params, card)
    write_curve(out, cfg, curve)
    # the last curve point's evaluation is the final one when this call made it (not on a resume
    # that had nothing left to do)
    per_task = evaluated.get(cfg.updates) or evaluate(roller, params, tasks + heldout)
    return TrainOutcome(
        out=str(out),
        card=card,
        curve=curve,
        episodes=episodes,
        seconds=elapsed,
        per_task=per_task,
        per_task_start=evaluated.get(0, {}),
        sampled={t.id: sampled.get(t.id, [0, 0]) for t in tasks},
        curriculum=dict(curriculum.starts),
    )


def train_command(cfg: TrainConfig, out: Path) -> str:
    """The `realbench train` command line that reproduces `cfg` (every option spelled out)."""
    args = ["realbench", "train", "--pack", cfg.pack, "--tasks", ",".join(cfg.tasks)]
    if cfg.heldout:
        args += ["--heldout", ",".join(cfg.heldout)]
    args += ["--updates", str(cfg.updates), "--envs", str(cfg.group), "--batch-tasks", str(cfg.batch_tasks)]
    args += ["--seed", str(cfg.seed), "--lr", repr(cfg.lr), "--max-steps", str(cfg.max_steps)]
    args += ["--eval-every", str(cfg.eval_every)]
    # options left at their defaults are not spelled out, so older cards' commands stay exact
    defaults = TrainConfig(pack=cfg.pack)
    for option, name in (
        ("--epochs", "epochs"),
        ("--entropy", "entropy"),
        ("--temperature", "temperature"),
        ("--prefix-starts", "prefix_starts"),
        ("--prefix-temperature", "prefix_temperature"),
    ):
        if getattr(cfg, name) != getattr(defaults, name):
            args += [option, repr(getattr(cfg, name))]
    if cfg.eval_seeds != defaults.eval_seeds:
        args += ["--eval-seeds", ",".join(str(s) for s in cfg.eval_seeds)]
    if cfg.entropy_all:
        args += ["--entropy-all"]
    if cfg.shape.context:
        args += ["--row-context"]
    if cfg.drift_randomise:
        args += ["--drift-randomise", ",".join(cfg.drift_randomise)]
    return shlex.join([*args, "--out", str(out)])


def write_curve(out: Path, cfg: TrainConfig, curve: list[CurvePoint]) -> None:
    """The learning curve as JSON and as a PNG (matplotlib, headless)."""
    payload = {
        "pack": cfg.pack,
        "seed": cfg.seed,
        "tasks": cfg.tasks,
        "heldout": cfg.heldout,
        "drift_randomise": cfg.drift_randomise,
        "points": [c.model_dump() for c in curve],
    }
    (out / CURVE_JSON).write_text(json.dumps(payload, indent=2, ensure_ascii=False) + "\n", encoding="utf-8")
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    fig, ax = plt.subplots(figsize=(6, 3.5))
    for key, label in (
        ("sampled_success", "sampled rollouts (train)"),
        ("train_success", "greedy, train tasks"),
        ("heldout_success", "greedy, held-out tasks"),
    ):
        xs = [c.update for c in curve if getattr(c, key) is not None]
        ys = [getattr(c, key) for c in curve if getattr(c, key) is not None]
        if xs:
            ax.plot(xs, ys, marker="o" if key != "sampled_success" else None, label=label)
    ax.set_xlabel("update")
    ax.set_ylabel("clone success rate")
    ax.set_ylim(-0.02, 1.02)
    ax.set_title(f"element policy on {cfg.pack}, seed {cfg.seed}")
    ax.legend(loc="best", fontsize=8)
    fig.tight_layout()
    fig.savefig(out / CURVE_PNG, dpi=100)
    plt.close(fig)
