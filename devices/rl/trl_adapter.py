"""Clone environments for TRL's `GRPOTrainer`: a dataset of clone states whose prompts come from
realbench's own prompt builder (`realbench.agents.prompt.build_messages`, the one `realbench run`
uses), and two ways to score a group of completions on live clone environments:

- `CloneEpisodeRollout`, GRPOTrainer's ``rollout_func`` hook: each rollout is a whole episode.
  Every step is prompted by `build_messages` with that step's screenshot and history, exactly as
  `realbench run` prompts it, sampled from the trainer's model, and played on the clone until the
  episode ends or `max_steps`; its return is the GRPO reward (`episode_return_reward`).
- `CloneStepReward`, a plain reward function: one completion played as one step.

What GRPO's loss sees of an episode: TRL 1.16's rollout hook returns one (prompt, completion)
token sequence per row, and the trainer's forward pass conditions it on the row's own dataset
images only. Called by a plain GRPOTrainer, the hook therefore returns the first step's tokens and
credits them with the whole episode's return (later steps are played on-policy but not trained
on). `devices.rl.trl_trainer.EpisodeGRPOTrainer` puts every step into the loss: it plays the
episodes through `play_row` and has the trainer score one row per step (that step's prompt and
screenshots), each with its episode's advantage.

GRPO samples a group of completions per prompt; each is played on the clone from the same state
and earns the environment's reward (the verifier's progress and success, minus the format-error
penalty), so the group's advantages compare actions by what they did to the app.

    states = clone_states(pack="train_ticketing", task_id="book-ticket", seeds=range(8), fmt="qwen-mobile")
    rollout = CloneEpisodeRollout(states, pack="train_ticketing", fmt="qwen-mobile", max_steps=4)
    trainer = EpisodeGRPOTrainer(model=..., processing_class=processor, train_dataset=states.dataset(),
                                 reward_funcs=[episode_return_reward], rollout_func=rollout, args=...)
"""

from __future__ import annotations

import hashlib
import io
import logging
from collections.abc import Callable, Iterable
from dataclasses import dataclass, field
from typing import Any

from devices.rl.config import RewardConfig
from devices.rl.gym_env import RealbenchEnv
from realbench.agents.formats import get_format
from realbench.agents.images import ImagePolicy, PreparedImage, prepare_image
from realbench.agents.prompt import PromptStep, build_messages
from realbench.errors import ConfigError
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


def prompt_key(prompt: list[dict[str, Any]], images: Iterable[Any]) -> str:
    """What identifies a start state to the rollout hook, which receives only prompts: the
    prompt's text parts and its images' pixels."""
    digest = hashlib.sha256()
    for message in prompt:
        digest.update(str(message["role"]).encode())
        content = message["content"]
        for part in [content] if isinstance(content, str) else content:
            text = part if isinstance(part, str) else part.get("text")
            digest.update(b"T" + str(text).encode() if text is not None else b"I")
    for image in images:
        digest.update(f"{image.size}".encode())
        digest.update(image.tobytes())
    return digest.hexdigest()


def split_trainer_prompt(prompt: list[dict[str, Any]]) -> tuple[list[dict[str, Any]], list[Any]]:
    """A prompt as GRPOTrainer hands it to the rollout hook (images inlined as
    ``{"type": "image", "image": PIL}``) → (placeholder prompt, images in order)."""
    out: list[dict[str, Any]] = []
    images: list[Any] = []
    for message in prompt:
        content = message["content"]
        if isinstance(content, str):
            out.append({"role": message["role"], "content": [{"type": "text", "text": content}]})
            continue
        parts = []
        for part in content:
            if part.get("type") == "image":
                images.append(part["image"])
                parts.append({"type": "image"})
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

    def start(self, key: str) -> dict[str, Any]:
        """The row whose prompt has this `prompt_key`."""
        for row in self.rows:
            if row["key"] == key:
                return row
        raise ConfigError(
            "the rollout was given a prompt that is not one of these clone states",
            hint="build the trainer's train_dataset with the same CloneStates the rollout holds",
        )

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
            pictures = [_pil(prepared)] * count
            key = prompt_key(prompt, pictures)
            if any(row["key"] == key for row in states.rows):
                # the hook sees only the prompt: two seeds that look alike would be one state to it
                log.info("seed %s starts where an earlier seed does; left out", seed)
                continue
            states.rows.append(
                {
                    "prompt": prompt,
                    "images": pictures,
                    "seed": int(seed),
                    "task_id": info["task_id"],
                    "image_size": [prepared.size.width, prepared.size.height],
                    "key": key,
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


@dataclass
class PlayedEpisode:
    """One rollout as the clone saw it (kept for logs, examples and tests)."""

    seed: int
    task_id: str
    texts: list[str]
    rewards: list[float]
    format_errors: int
    success: bool
    outcome: str | None

    @property
    def episode_return(self) -> float:
        return sum(self.rewards)


@dataclass
class Sample:
    """One sampled step: prompt token ids, completion token ids with their log-probs, and text."""

    ids: list[int]
    completion: list[int]
    logprobs: list[float]
    text: str


@dataclass
class PlayedStep:
    """One step of a played episode as the model saw it: its prompt (image placeholders), the
    prompt's images in order, and what was sampled."""

    prompt: list[dict[str, Any]]
    images: list[Any]
    sample: Sample

    @property
    def key(self) -> str:
        return prompt_key(self.prompt, self.images)


# (trainer, placeholder prompt, its images in order) -> the sampled step
Sampler = Callable[[Any, list[dict[str, Any]], list[Any]], Sample]


class CloneEpisodeRollout:
    """GRPOTrainer's ``rollout_func``: each prompt row is played as a whole episode on a live
    clone (see the module docstring for what the loss sees of it)."""

    def __init__(
        self,
        states: CloneStates,
        *,
        pack: str,
        fmt: str,
        max_steps: int = 4,
        short_side: int = 448,
        reward: RewardConfig = DEFAULT_REWARD,
        images: ImagePolicy | None = None,
        text_history: int = 30,
        sampler: Sampler | None = None,
    ) -> None:
        if max_steps < 1:
            raise ConfigError("max_steps must be at least 1")
        self.states = states
        self.fmt = get_format(fmt)
        self.policy = images or self.fmt.image_policy()
        self.max_steps = max_steps
        self.image_window = self.fmt.default_image_window()
        self.text_history = text_history
        self.env = RealbenchEnv(
            pack=pack,
            short_side=short_side,
            image="png",
            hierarchy=False,
            action_format=fmt,
            action_max_pixels=images.max_pixels if images is not None else None,
            reward=reward,
            max_steps=max_steps,
        )
        self.episodes: list[PlayedEpisode] = []
        self.sampler: Sampler = sampler or sample_from_trainer
        # Set by `EpisodeGRPOTrainer`: steps already played, which the hook then answers with (one
        # row per step) instead of playing episodes.
        self.replay: list[tuple[PlayedStep, PlayedEpisode]] | None = None

    def __call__(self, prompts: list[Any], trainer: Any) -> dict[str, Any]:
        if self.replay is not None:
            return self._answer_replay(prompts)
        out: dict[str, list[Any]] = {name: [] for name in ROLLOUT_COLUMNS}
        for prompt in prompts:
            placeholders, pictures = split_trainer_prompt(prompt)
            row = self.states.start(prompt_key(placeholders, pictures))
            episode, steps = self.play_row(row, trainer)
            self.episodes.append(episode)
            _append_row(out, steps[0].sample, episode)
        return out

    def _answer_replay(self, prompts: list[Any]) -> dict[str, Any]:
        replay = self.replay or []
        if len(prompts) != len(replay):
            raise ConfigError(f"the trainer asked for {len(prompts)} step rows; {len(replay)} were played")
        out: dict[str, list[Any]] = {name: [] for name in ROLLOUT_COLUMNS}
        for prompt, (step, episode) in zip(prompts, replay, strict=True):
            if prompt_key(*split_trainer_prompt(prompt)) != step.key:
                raise ConfigError("a step row's prompt is not the prompt that step was sampled with")
            _append_row(out, step.sample, episode)
        return out

    def play_row(self, row: dict[str, Any], trainer: Any) -> tuple[PlayedEpisode, list[PlayedStep]]:
        """Play one episode from a dataset row's state: the episode and each step as sampled."""
        return self._play(row, trainer)

    def _play(self, row: dict[str, Any], trainer: Any) -> tuple[PlayedEpisode, list[PlayedStep]]:
        obs, info = self.env.reset(seed=int(row["seed"]), options={"task_id": row["task_id"]})
        instruction = info["instruction"]
        earlier: list[PromptStep] = []
        pictures: dict[str, Any] = {}
        episode = PlayedEpisode(int(row["seed"]), str(row["task_id"]), [], [], 0, False, None)
        steps: list[PlayedStep] = []
        for index in range(self.max_steps):
            current = prepare_image(Screenshot.from_bytes(bytes(obs["screenshot"])), self.policy)
            pictures.setdefault(current.data_url, _pil(current))
            messages = build_messages(
                self.fmt,
                instruction,
                earlier,
                current,
                image_window=self.image_window,
                text_history=self.text_history,
            )
            prompt, _ = trl_prompt(messages)
            images = [
                pictures[part["image_url"]["url"]]
                for message in messages
                if not isinstance(message["content"], str)
                for part in message["content"]
                if part.get("type") == "image_url"
            ]
            if index == 0 and prompt_key(prompt, images) != row["key"]:
                raise ConfigError(
                    f"seed {row['seed']} no longer starts at the state its dataset row shows",
                    hint="rebuild the dataset with clone_states() for this clone and format",
                )
            sample = self.sampler(trainer, prompt, images)
            steps.append(PlayedStep(prompt, images, sample))
            text = sample.text
            obs, reward, terminated, truncated, info = self.env.step(text)
            episode.texts.append(text)
            episode.rewards.append(float(reward))
            episode.format_errors += info.get("format_error") is not None
            parsed = self.fmt.parse(text, current.size)
            earlier.append(
                PromptStep(
                    index=index, action=parsed.action, thought=parsed.thought, image=current, said=text
                )
            )
            if terminated or truncated:
                break
        episode.success = bool(info.get("success"))
        episode.outcome = info.get("outcome")
        return episode, steps

    def close(self) -> None:
        self.env.close()


def sample_from_trainer(trainer: Any, prompt: list[dict[str, Any]], images: list[Any]) -> Sample:
    """One completion from the trainer's model for a prompt, with each sampled token's log-prob
    under the distribution it was drawn from (after temperature / top-k / top-p)."""
    import torch

    processor = trainer.processing_class
    model = trainer.accelerator.unwrap_model(trainer.model)
    args = trainer.args
    text = processor.apply_chat_template(prompt, add_generation_prompt=True, tokenize=False)
    encoded = processor(text=[text], images=images or None, return_tensors="pt").to(model.device)
    tokenizer = processor.tokenizer
    # The trainer's own sampling settings (temperature, top-p/k, min-p, repetition penalty, the
    # image token suppressed, its EOS ids), so an episode samples as GRPO's own generation would.
    config = getattr(trainer, "generation_config", None)
    if config is None:  # a trainer set up for vLLM keeps no transformers generation config
        from transformers import GenerationConfig

        config = GenerationConfig(
            do_sample=True,
            max_new_tokens=args.max_completion_length,
            temperature=args.temperature,
            top_p=args.top_p,
            top_k=args.top_k or 0,
            pad_token_id=tokenizer.pad_token_id,
        )
    with torch.no_grad():
        generated = model.generate(
            **encoded, generation_config=config, return_dict_in_generate=True, output_scores=True
        )
    start = encoded["input_ids"].shape[1]
    completion = [int(t) for t in generated.sequences[0, start:]]
    logprobs = [
        float(torch.log_softmax(scores[0].float(), dim=-1)[token])
        for scores, token in zip(generated.scores, completion, strict=False)
    ]
    text = tokenizer.decode(completion, skip_special_tokens=True)
    return Sample([int(t) for t in encoded["input_ids"][0]], completion, logprobs, text)


def episode_return_reward(
    completions: list[Any], episode_return: list[float], **_: Any
) -> list[float | None]:
    """GRPO's reward for a `CloneEpisodeRollout` row: the return of the episode it started."""
    return [float(r) for r in episode_return]


# The columns the rollout hook returns to GRPOTrainer: the sampled tokens, and the episode's
# figures as extra fields (TRL passes them to the reward functions).
ROLLOUT_COLUMNS = (
    "prompt_ids",
    "completion_ids",
    "logprobs",
    "episode_return",
    "episode_steps",
    "episode_success",
)


def _append_row(out: dict[str, list[Any]], sample: Any, episode: PlayedEpisode) -> None:
    out["prompt_ids"].append(sample.ids)
    out["completion_ids"].append(sample.completion)
    out["logprobs"].append(sample.logprobs)
    out["episode_return"].append(episode.episode_return)
    out["episode_steps"].append(len(episode.texts))
    out["episode_success"].append(episode.success)
