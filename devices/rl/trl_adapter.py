"""Clone environments for TRL's `GRPOTrainer`: a dataset of clone states whose prompts come from
realbench's own prompt builder (`realbench.agents.prompt.build_messages`, the one `realbench run`
uses), and a reward function that executes each sampled completion, as raw model text in the
format's syntax, on a live clone environment reset to that state.

GRPO samples a group of completions per prompt; each is played on the clone from the same state
and earns the environment's reward (the verifier's progress and success, minus the format-error
penalty), so the group's advantages compare actions by what they did to the app.

    states = clone_states(pack="train_ticketing", task_id="book-ticket", seeds=range(8), fmt="qwen-mobile")
    trainer = GRPOTrainer(model=..., processing_class=processor, train_dataset=states.dataset(),
                          reward_funcs=[CloneStepReward(pack="train_ticketing", fmt="qwen-mobile")], args=...)

The reward function is TRL's documented hook for scoring rollouts; generation stays TRL's own
(transformers or vLLM), so images reach the policy exactly as the trainer's processor prepares them.
"""

from __future__ import annotations

import io
import logging
from collections.abc import Iterable
from dataclasses import dataclass, field
from typing import Any

from devices.rl.config import RewardConfig
from devices.rl.gym_env import RealbenchEnv
from realbench.agents.formats import get_format
from realbench.agents.images import ImagePolicy, PreparedImage, prepare_image
from realbench.agents.prompt import build_messages
from realbench.observation import Screenshot

log = logging.getLogger(__name__)

# What the reward function pays: success 1, progress shaping, a small penalty for text that does
# not parse in the format (so a group that formats better is preferred even before it succeeds).
DEFAULT_REWARD = RewardConfig(success_reward=1.0, shaped=True, format_error_penalty=0.1)


def trl_prompt(messages: list[dict[str, Any]]) -> tuple[list[dict[str, Any]], int]:
    """realbench's messages in TRL's conversational form: image parts become ``{"type": "image"}``
    placeholders (TRL fills them from the row's ``images``). Returns (messages, image count)."""
    out: list[dict[str, Any]] = []
    images = 0
    for message in messages:
        content = message["content"]
        if isinstance(content, str):
            out.append({"role": message["role"], "content": [{"type": "text", "text": content}]})
            continue
        parts = []
        for part in content:
            if part.get("type") == "image_url":
                parts.append({"type": "image"})
                images += 1
            else:
                parts.append({"type": "text", "text": part["text"]})
        out.append({"role": message["role"], "content": parts})
    return out, images


def _pil(image: PreparedImage) -> Any:
    from PIL import Image

    with Image.open(io.BytesIO(image.data)) as img:
        return img.convert("RGB")


@dataclass
class CloneStates:
    """Start states of clone episodes, as GRPO prompts."""

    rows: list[dict[str, Any]] = field(default_factory=list)

    def dataset(self) -> Any:
        """A `datasets.Dataset` with ``prompt``, ``images``, ``seed``, ``task_id`` and ``image_size``."""
        from datasets import Dataset

        return Dataset.from_list(self.rows)


def clone_states(
    *,
    pack: str,
    seeds: Iterable[int],
    fmt: str,
    task_id: str | None = None,
    short_side: int = 448,
    images: ImagePolicy | None = None,
) -> CloneStates:
    """One row per seed: the episode's first screen, prompted as `realbench run` would prompt it."""
    action_format = get_format(fmt)
    policy = images or action_format.image_policy()
    env = RealbenchEnv(pack=pack, task_id=task_id, short_side=short_side, image="png", hierarchy=False)
    states = CloneStates()
    try:
        for seed in seeds:
            obs, info = env.reset(seed=int(seed))
            shot = Screenshot.from_bytes(bytes(obs["screenshot"]))
            prepared = prepare_image(shot, policy)
            messages = build_messages(
                action_format, info["instruction"], [], prepared, image_window=1, text_history=0
            )
            prompt, count = trl_prompt(messages)
            states.rows.append(
                {
                    "prompt": prompt,
                    "images": [_pil(prepared)] * count,
                    "seed": int(seed),
                    "task_id": info["task_id"],
                    "image_size": [prepared.size.width, prepared.size.height],
                }
            )
    finally:
        env.close()
    return states


class CloneStepReward:
    """A TRL reward function: each completion played on a live clone from its row's state."""

    __name__ = "clone_env_reward"  # TRL logs rewards under the function's name

    def __init__(
        self,
        *,
        pack: str,
        fmt: str,
        short_side: int = 448,
        reward: RewardConfig = DEFAULT_REWARD,
        max_pixels: int | None = None,
    ) -> None:
        self.env = RealbenchEnv(
            pack=pack,
            short_side=short_side,
            image="png",
            hierarchy=False,
            action_format=fmt,
            action_max_pixels=max_pixels,
            reward=reward,
        )
        self.steps: list[dict[str, Any]] = []  # what each scored completion did (for examples/tests)

    def __call__(
        self,
        prompts: list[Any],
        completions: list[Any],
        seed: list[int],
        task_id: list[str],
        **_: Any,
    ) -> list[float]:
        rewards = []
        for completion, row_seed, row_task in zip(completions, seed, task_id, strict=True):
            text = completion[-1]["content"] if isinstance(completion, list) else str(completion)
            if isinstance(text, list):  # structured content blocks
                text = "".join(p.get("text") or "" for p in text)
            self.env.reset(seed=int(row_seed), options={"task_id": row_task})
            _, reward, terminated, truncated, info = self.env.step(text)
            self.steps.append(
                {
                    "text": text,
                    "reward": float(reward),
                    "format_error": info.get("format_error"),
                    "action": info.get("action"),
                }
            )
            rewards.append(float(reward))
        return rewards

    def close(self) -> None:
        self.env.close()
