"""Clone environments as a verl agent loop: `RealbenchAgentLoop` subclasses verl's own
``AgentLoopBase``, is registered with verl's ``register`` as ``realbench_clone`` and returns verl's
``AgentLoopOutput``, one episode per sample, played on the rollout service through the async
client and prompted by realbench's own prompt builder.

Per turn: the messages come from `realbench.agents.prompt.build_messages` (what `realbench run`
sends); verl's Continuous Token builder turns the first prompt into token ids through the
processor (image tokens expanded) and appends each later environment turn as a token delta, so the
model's own tokens are kept exactly as generated. verl's server manager generates; the reply goes
to the environment as raw model text in the format's syntax, and the environment's next screenshot
becomes the next user turn. Model tokens have mask 1, the environment's turns mask 0, and the
episode's return is the sample's reward score.

Only the UI-TARS layout (one growing conversation, `PromptLayout.TURNS`) makes an episode one
token sequence; the Qwen mobile_use layout rebuilds its prompt every step, so with it a sample is
one step (``max_turns=1``).

Settings (`EpisodeSettings`) come from the ``realbench`` key of the agent-loop registry entry
(examples/verl_agent_loop.yaml) or, failing that, a ``realbench`` block of the trainer config;
each dataset row's ``extra_info`` names ``pack`` and optionally ``task_id`` and ``seed``.

    actor_rollout_ref.rollout.agent.agent_loop_config_path: examples/verl_agent_loop.yaml
"""

from __future__ import annotations

import io
import logging
from typing import Any
from uuid import uuid4

from omegaconf import DictConfig, OmegaConf
from pydantic import BaseModel, ConfigDict
from verl.experimental.agent_loop.agent_loop import (
    AgentLoopBase,
    AgentLoopMetrics,
    AgentLoopOutput,
    register,
)
from verl.utils.profiler import simple_timer

from devices.rl.async_client import AsyncRemoteEnv, AsyncRolloutClient
from realbench.agents.formats import ActionFormat, get_format
from realbench.agents.formats.base import PromptLayout
from realbench.agents.images import ImagePolicy, PreparedImage, prepare_image
from realbench.agents.prompt import PromptStep, build_messages
from realbench.errors import ConfigError
from realbench.observation import Screenshot

log = logging.getLogger(__name__)

AGENT_NAME = "realbench_clone"


class EpisodeSettings(BaseModel):
    """How `RealbenchAgentLoop` plays an episode; unknown keys are refused so a typo in the verl
    config fails at start-up rather than silently falling back to a default."""

    model_config = ConfigDict(extra="forbid", arbitrary_types_allowed=True)

    service_url: str
    format: str = "ui-tars"
    max_turns: int = 8
    short_side: int = 448
    images: ImagePolicy | None = None


class _Pictures:
    """PIL images by data URL: the same screenshot is the same object in every message list, so
    the append-only check compares identities instead of decoding pixels again."""

    def __init__(self) -> None:
        self._by_url: dict[str, Any] = {}

    def get(self, image: PreparedImage) -> Any:
        url = image.data_url
        if url not in self._by_url:
            from PIL import Image

            with Image.open(io.BytesIO(image.data)) as img:
                self._by_url[url] = img.convert("RGB")
        return self._by_url[url]

    def messages(self, messages: list[dict[str, Any]]) -> list[dict[str, Any]]:
        """OpenAI image_url parts as verl's image blocks (the PIL image inside the block)."""
        out = []
        for m in messages:
            content = m["content"]
            if isinstance(content, list):
                content = [self._part(p) for p in content]
            out.append({"role": m["role"], "content": content})
        return out

    def _part(self, part: dict[str, Any]) -> dict[str, Any]:
        if part.get("type") != "image_url":
            return part
        url = part["image_url"]["url"]
        return {"type": "image", "image": self._by_url[url]}


def _settings(block: Any, trainer_config: Any) -> EpisodeSettings:
    if block is None and trainer_config is not None and hasattr(trainer_config, "get"):
        block = trainer_config.get("realbench")
    if block is None:
        raise ConfigError(
            "verl config has no `realbench` settings",
            hint="give the agent-loop entry a `realbench:` mapping (examples/verl_agent_loop.yaml)",
        )
    if isinstance(block, EpisodeSettings):
        return block
    if isinstance(block, DictConfig):
        block = OmegaConf.to_container(block, resolve=True)
    return EpisodeSettings.model_validate(dict(block))


def _extra_info(kwargs: dict[str, Any]) -> dict[str, Any]:
    raw = kwargs.get("extra_info")
    container: Any = OmegaConf.to_container(raw, resolve=True) if isinstance(raw, DictConfig) else raw
    extra: dict[str, Any] = dict(container or {})
    if "pack" not in extra:
        raise ConfigError(
            "a realbench_clone dataset row needs extra_info.pack",
            hint="rows: agent_name=realbench_clone, extra_info={pack, task_id, seed}",
        )
    return extra


@register(AGENT_NAME)
class RealbenchAgentLoop(AgentLoopBase):
    """verl's agent loop over realbench clone environments (see the module docstring)."""

    def __init__(self, *args: Any, realbench: Any = None, **kwargs: Any) -> None:
        super().__init__(*args, **kwargs)
        self.settings = _settings(realbench, self.config)
        self.fmt: ActionFormat = get_format(self.settings.format)
        if self.fmt.layout is not PromptLayout.TURNS and self.settings.max_turns > 1:
            raise ConfigError(
                f"format {self.settings.format} rebuilds its prompt every step, so an episode is not one token sequence",
                hint="use max_turns=1 with it (one step per sample), or a UI-TARS format for whole episodes",
            )
        self.policy = self.settings.images or self.fmt.image_policy()
        self.response_length = int(self.rollout_config.response_length)

    async def run(self, sampling_params: dict[str, Any], **kwargs: Any) -> AgentLoopOutput:
        extra = _extra_info(kwargs)
        task_id = extra.get("task_id")
        seed = int(extra.get("seed", kwargs.get("index", 0)))
        async with AsyncRolloutClient(self.settings.service_url, image="bytes") as client:
            env = await client.make(
                pack=str(extra["pack"]),
                task_id=None if task_id is None else str(task_id),
                action_format=self.settings.format,
                short_side=self.settings.short_side,
            )
            try:
                return await self._episode(env, sampling_params, seed)
            finally:
                await env.close()

    def _screen(self, obs: dict[str, Any]) -> PreparedImage:
        return prepare_image(Screenshot.from_bytes(bytes(obs["screenshot"])), self.policy)

    async def _episode(
        self, env: AsyncRemoteEnv, sampling_params: dict[str, Any], seed: int
    ) -> AgentLoopOutput:
        obs, info = await env.reset(seed=seed)
        instruction = info["instruction"]
        window = max(self.settings.max_turns + 1, self.fmt.default_image_window())
        pictures = _Pictures()
        earlier: list[PromptStep] = []
        current = self._screen(obs)
        images = [pictures.get(current)]
        messages = pictures.messages(
            build_messages(self.fmt, instruction, earlier, current, image_window=window)
        )
        self._assert_mm_supported(True)
        prompt_ids = await self.ct_build_initial_tokens(messages, images=list(images))

        # one request id per episode: verl routes every turn to the same server (prefix cache)
        request_id = uuid4().hex
        runtime = list(prompt_ids)
        mask: list[int] = []
        logprobs: list[float] | None = None
        timing: dict[str, float] = {}
        turn_scores: list[float] = []
        env_turns, steps, stopped_by = 0, 0, "max_turns"
        while steps < self.settings.max_turns:
            with simple_timer("generate_sequences", timing):
                output = await self.server_manager.generate(
                    request_id=request_id,
                    prompt_ids=runtime,
                    sampling_params=sampling_params,
                    image_data=list(images),
                    mm_processor_kwargs=self._get_mm_processor_kwargs(),
                )
            if steps == 0 and output.log_probs:
                logprobs = []
            merged, mask, logprobs = await self.ct_merge_assistant_token(
                runtime,
                list(output.token_ids),
                mask,
                logprobs,
                assistant_logprobs=list(output.log_probs) if logprobs is not None else None,
            )
            runtime = merged.token_ids
            text = self.tokenizer.decode(output.token_ids, skip_special_tokens=True)
            with simple_timer("tool_calls", timing):
                obs, reward, terminated, truncated, info = await env.step(text)
            turn_scores.append(float(reward))
            earlier.append(PromptStep(index=steps, action=None, image=current, said=text))
            steps += 1
            if terminated or truncated:
                stopped_by = "environment"
                break
            if len(mask) >= self.response_length:
                stopped_by = "response_length"
                break
            if steps >= self.settings.max_turns:
                break
            # the environment's turn: its tokens go in with mask 0
            current = self._screen(obs)
            pictures.get(current)
            updated = pictures.messages(
                build_messages(self.fmt, instruction, earlier, current, image_window=window)
            )
            if updated[: len(messages)] != messages:
                raise ConfigError(
                    "the conversation did not grow by appending; cannot form one token sequence",
                    hint="the image window must keep every screenshot of the episode",
                )
            merged, new_mask, new_logprobs = await self.ct_merge_context_msg(
                updated[: len(messages) + 1], updated, runtime, mask, logprobs
            )
            if len(new_mask) >= self.response_length:
                # a screenshot cannot be cut in half: stop before the turn that does not fit
                stopped_by = "response_length"
                break
            runtime, mask, logprobs, messages = merged.token_ids, new_mask, new_logprobs, updated
            images.append(pictures.get(current))
            env_turns += 1

        response_ids = runtime[len(prompt_ids) :]
        cut = self.response_length
        log.debug("episode of %d steps ended by %s", steps, stopped_by)
        return AgentLoopOutput(
            prompt_ids=prompt_ids,
            response_ids=response_ids[:cut],
            response_mask=mask[:cut],
            response_logprobs=logprobs[:cut] if logprobs is not None else None,
            multi_modal_data={"images": images},
            mm_processor_kwargs=self._get_mm_processor_kwargs(),
            reward_score=sum(turn_scores),
            # the first user turn, each reply and each environment turn
            num_turns=1 + steps + env_turns,
            metrics=AgentLoopMetrics(
                generate_sequences=timing.get("generate_sequences", 0.0),
                tool_calls=timing.get("tool_calls", 0.0),
            ),
            extra_fields={
                # verl keeps these two keys in every batch, whichever loop made a sample
                "turn_scores": turn_scores,
                "tool_rewards": [],
                "outcome": info.get("outcome"),
                "steps": steps,
                "success": bool(info.get("success")),
                "stopped_by": stopped_by,
            },
        )
