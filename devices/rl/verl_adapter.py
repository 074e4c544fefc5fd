"""Clone environments as a verl agent loop (``AgentLoopBase``): one episode per sample, played on
the rollout service through the async client, prompted by realbench's own prompt builder.

Per turn: the messages come from `realbench.agents.prompt.build_messages` (what `realbench run`
sends), the verl server manager generates from their token ids (the processor expands the image
tokens), the reply goes to the environment as raw model text in the format's syntax, and the
environment's next screenshot becomes the next user turn. The tokens the model wrote have mask 1,
the environment's turns mask 0, and the episode's return is the sample's reward score.

Only the UI-TARS layout (one growing conversation, `PromptLayout.TURNS`) makes an episode one
token sequence; the Qwen mobile_use layout rebuilds its prompt every step, so with it a sample is
one step (``max_turns=1``).

verl itself needs Ray, a GPU inference server and its own config tree; where it is not installed,
`AgentLoopBase` and `AgentLoopOutput` below are stand-ins with verl's documented shapes (labelled
as such), so the episode logic can run and be tested on a CPU against a scripted server manager.

verl config (the ``realbench`` block is read by `RealbenchAgentLoop`):

    actor_rollout_ref.rollout.agent.agent_loop_config_path: examples/verl_agent_loop.yaml
    realbench: {service_url: http://127.0.0.1:8770, format: ui-tars, max_turns: 8, short_side: 448}
"""

from __future__ import annotations

import io
import logging
from dataclasses import dataclass, field
from typing import Any
from uuid import uuid4

from pydantic import BaseModel

from devices.rl.async_client import AsyncRemoteEnv, AsyncRolloutClient
from realbench.agents.formats import ActionFormat, get_format
from realbench.agents.formats.base import PromptLayout
from realbench.agents.images import ImagePolicy, PreparedImage, prepare_image
from realbench.agents.prompt import PromptStep, build_messages
from realbench.errors import ConfigError
from realbench.observation import Screenshot

log = logging.getLogger(__name__)

try:  # pragma: no cover - exercised only where verl is installed (GPU machines)
    from verl.experimental.agent_loop.agent_loop import AgentLoopBase, AgentLoopOutput, register

    VERL_AVAILABLE = True
except ImportError:
    VERL_AVAILABLE = False

    class AgentLoopOutput(BaseModel):  # type: ignore[no-redef]
        """STAND-IN for verl's AgentLoopOutput (verl is not installed here): the fields this adapter fills."""

        prompt_ids: list[int]
        response_ids: list[int]
        response_mask: list[int]
        response_logprobs: list[float] | None = None
        multi_modal_data: dict[str, Any] | None = None
        reward_score: float | None = None
        num_turns: int = 0
        metrics: dict[str, Any] = {}
        extra_fields: dict[str, Any] = {}

    class AgentLoopBase:  # type: ignore[no-redef]
        """STAND-IN for verl's AgentLoopBase (verl is not installed here)."""

        def __init__(self, *args: Any, **kwargs: Any) -> None:
            pass

    def register(name: str) -> Any:  # type: ignore[no-redef]
        def keep(cls: Any) -> Any:
            return cls

        return keep


@dataclass
class EpisodeSettings:
    service_url: str
    format: str = "ui-tars"
    max_turns: int = 8
    short_side: int = 448
    images: ImagePolicy | None = None


@dataclass
class _Turns:
    """The growing token sequence of one episode."""

    prompt_ids: list[int] = field(default_factory=list)
    response_ids: list[int] = field(default_factory=list)
    response_mask: list[int] = field(default_factory=list)
    logprobs: list[float] = field(default_factory=list)


def _pil(image: PreparedImage) -> Any:
    from PIL import Image

    with Image.open(io.BytesIO(image.data)) as img:
        return img.convert("RGB")


def _processor_messages(messages: list[dict[str, Any]]) -> list[dict[str, Any]]:
    """Image URLs as processor image placeholders (the PIL images travel beside them)."""
    out = []
    for m in messages:
        content = m["content"]
        if isinstance(content, list):
            content = [{"type": "image"} if p.get("type") == "image_url" else p for p in content]
        out.append({"role": m["role"], "content": content})
    return out


class CloneEpisodeRunner:
    """One episode on the rollout service, generated through a verl-style server manager."""

    def __init__(self, settings: EpisodeSettings, server_manager: Any, processor: Any) -> None:
        self.settings = settings
        self.fmt: ActionFormat = get_format(settings.format)
        if self.fmt.layout is not PromptLayout.TURNS and settings.max_turns > 1:
            raise ConfigError(
                f"format {settings.format} rebuilds its prompt every step, so an episode is not one token sequence",
                hint="use max_turns=1 with it (one step per sample), or a UI-TARS format for whole episodes",
            )
        self.policy = settings.images or self.fmt.image_policy()
        self.server_manager = server_manager
        self.processor = processor

    def _ids(
        self, messages: list[dict[str, Any]], images: list[Any], *, generation_prompt: bool
    ) -> list[int]:
        text = self.processor.apply_chat_template(
            _processor_messages(messages), add_generation_prompt=generation_prompt, tokenize=False
        )
        encoded = self.processor(text=[text], images=images or None, return_tensors=None)
        ids = encoded["input_ids"][0]
        return [int(i) for i in ids]

    async def run(
        self, *, sampling_params: dict[str, Any], task_id: str | None, seed: int, pack: str
    ) -> AgentLoopOutput:
        async with AsyncRolloutClient(self.settings.service_url, image="bytes") as client:
            env = await client.make(
                pack=pack,
                task_id=task_id,
                action_format=self.settings.format,
                short_side=self.settings.short_side,
            )
            try:
                return await self._episode(env, sampling_params, seed)
            finally:
                await env.close()

    async def _episode(
        self, env: AsyncRemoteEnv, sampling_params: dict[str, Any], seed: int
    ) -> AgentLoopOutput:
        obs, info = await env.reset(seed=seed)
        instruction = info["instruction"]
        earlier: list[PromptStep] = []
        pictures: list[Any] = []
        turns = _Turns()
        episode_return, done, n = 0.0, False, 0
        window = max(self.settings.max_turns + 1, self.fmt.default_image_window())
        while not done and n < self.settings.max_turns:
            current = prepare_image(Screenshot.from_bytes(bytes(obs["screenshot"])), self.policy)
            pictures.append(_pil(current))
            messages = build_messages(self.fmt, instruction, earlier, current, image_window=window)
            ids = self._ids(messages, pictures, generation_prompt=True)
            if not turns.prompt_ids:
                turns.prompt_ids = ids
            else:
                # what the environment added since the model's last token: masked out of the loss
                seen = turns.prompt_ids + turns.response_ids
                if ids[: len(seen)] != seen:
                    raise ConfigError("the conversation did not grow by appending; cannot form one sequence")
                added = ids[len(seen) :]
                turns.response_ids += added
                turns.response_mask += [0] * len(added)
                turns.logprobs += [0.0] * len(added)
            output = await self.server_manager.generate(
                request_id=uuid4().hex, prompt_ids=ids, sampling_params=sampling_params, image_data=pictures
            )
            reply_ids = list(output.token_ids)
            turns.response_ids += reply_ids
            turns.response_mask += [1] * len(reply_ids)
            turns.logprobs += list(output.log_probs or [0.0] * len(reply_ids))
            text = self.processor.tokenizer.decode(reply_ids, skip_special_tokens=True)
            obs, reward, terminated, truncated, info = await env.step(text)
            episode_return += float(reward)
            earlier.append(PromptStep(index=n, action=None, image=current, said=text))
            done = bool(terminated or truncated)
            n += 1
        return AgentLoopOutput(
            prompt_ids=turns.prompt_ids,
            response_ids=turns.response_ids,
            response_mask=turns.response_mask,
            response_logprobs=turns.logprobs,
            multi_modal_data={"images": pictures},
            reward_score=episode_return,
            num_turns=2 * n,
            metrics={},
            extra_fields={"outcome": info.get("outcome"), "steps": n, "success": bool(info.get("success"))},
        )


@register("realbench_clone")
class RealbenchAgentLoop(AgentLoopBase):
    """verl's agent loop over realbench clone environments (see the module docstring)."""

    def __init__(self, *args: Any, server_manager: Any = None, processor: Any = None, **kwargs: Any) -> None:
        settings = kwargs.pop("realbench", None)
        super().__init__(*args, server_manager=server_manager, processor=processor, **kwargs)
        if settings is None:
            config = getattr(self, "config", None)
            block = config.get("realbench") if config is not None and hasattr(config, "get") else None
            if block is None:
                raise ConfigError(
                    "verl config has no `realbench` block", hint="see devices/rl/verl_adapter.py"
                )
            settings = dict(block)
        if not isinstance(settings, EpisodeSettings):
            settings = EpisodeSettings(**dict(settings))
        self.runner = CloneEpisodeRunner(settings, server_manager, processor)

    async def run(self, sampling_params: dict[str, Any], **kwargs: Any) -> AgentLoopOutput:
        extra = dict(kwargs.get("extra_info") or {})
        return await self.runner.run(
            sampling_params=sampling_params,
            task_id=extra.get("task_id"),
            seed=int(extra.get("seed", kwargs.get("index", 0))),
            pack=str(extra["pack"]),
        )
