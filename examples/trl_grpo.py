"""Two GRPO steps with TRL on live clone environments, on a CPU.

GRPOTrainer's rollout hook (`rollout_func`) is `devices.rl.trl_adapter.CloneEpisodeRollout`:
each rollout is a multi-step episode on a live clone, every step prompted by realbench's own
prompt builder with that step's screenshot, and the episode's return is GRPO's reward. The trainer
is `devices.rl.trl_trainer.EpisodeGRPOTrainer`, so every step of every episode enters the loss
(conditioned on that step's own prompt and screenshots), with its episode's advantage.

The policy is a tiny randomly initialised Qwen2-VL built on the spot (examples/tiny_vlm.py; no
download), so its completions are noise and nearly all are format errors: this shows the loop
runs end to end — realbench's prompts and screenshots in, episodes played on the clone, the
environment's returns back into GRPO's loss — not that anything is learned. Swap in a real
checkpoint for training.

    python examples/trl_grpo.py [--pack taskpacks/train_ticketing] [--format qwen-mobile] [--steps 2]
"""

from __future__ import annotations

import argparse
import logging
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parent))
sys.path.insert(0, str(Path(__file__).resolve().parents[1]))


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--pack", default="taskpacks/train_ticketing")
    parser.add_argument("--task", default=None, help="task id (default: one per seed, from the pack)")
    parser.add_argument("--format", default="qwen-mobile")
    parser.add_argument("--steps", type=int, default=2)
    parser.add_argument("--short-side", type=int, default=224, help="screenshot short side (small on a CPU)")
    parser.add_argument("--max-new-tokens", type=int, default=24)
    parser.add_argument("--episode-steps", type=int, default=3, help="most steps per rollout episode")
    args = parser.parse_args(argv)
    logging.basicConfig(level=logging.WARNING)
    started = time.perf_counter()

    import torch
    from tiny_vlm import build_tiny_qwen2_vl
    from transformers import TrainerCallback
    from trl import GRPOConfig

    from devices.rl.trl_adapter import CloneEpisodeRollout, clone_states, episode_return_reward
    from devices.rl.trl_trainer import EpisodeGRPOTrainer
    from realbench.agents.formats import get_format

    torch.set_num_threads(2)
    policy = get_format(args.format).image_policy()
    states = clone_states(
        pack=args.pack, task_id=args.task, seeds=range(4), fmt=args.format, short_side=args.short_side
    )
    # the processor's limits are the prompt's: it never resizes the screenshot the prompt sized
    processor, model = build_tiny_qwen2_vl(max_pixels=policy.max_pixels, min_pixels=policy.min_pixels)
    rollout = CloneEpisodeRollout(
        states, pack=args.pack, fmt=args.format, max_steps=args.episode_steps, short_side=args.short_side
    )
    losses: list[float] = []

    class PrintLoss(TrainerCallback):  # type: ignore[misc]
        def on_log(self, args: Any, state: Any, control: Any, **kwargs: Any) -> None:
            logs = kwargs.get("logs")
            if logs and "loss" in logs:
                losses.append(float(logs["loss"]))
                print(
                    f"step {state.global_step}: loss {logs['loss']:.6f}  "
                    f"reward {logs.get('reward', float('nan')):.3f}",
                    flush=True,
                )

    with tempfile.TemporaryDirectory(prefix="realbench-grpo-") as out:
        config = GRPOConfig(
            output_dir=out,
            max_steps=args.steps,
            per_device_train_batch_size=2,
            num_generations=2,
            max_completion_length=args.max_new_tokens,
            learning_rate=1e-4,
            beta=0.0,
            logging_steps=1,
            save_strategy="no",
            report_to=[],
            use_cpu=True,
            bf16=False,
            seed=0,
            temperature=1.0,
        )
        trainer = EpisodeGRPOTrainer(
            model=model,
            processing_class=processor,
            reward_funcs=[episode_return_reward],
            rollout_func=rollout,
            args=config,
            train_dataset=states.dataset(),
            callbacks=[PrintLoss()],
        )
        trainer.train()
    rollout.close()
    played = rollout.episodes
    steps = sum(len(e.texts) for e in played)
    errors = sum(e.format_errors for e in played)
    print(
        f"{len(losses)} GRPO steps, {len(played)} episodes played on the clone "
        f"({steps} steps, {errors} format errors, {trainer.rows_scored} step rows in the loss), "
        f"{time.perf_counter() - started:.0f} s",
        flush=True,
    )
    return 0 if len(losses) == args.steps else 1


if __name__ == "__main__":
    sys.exit(main())
