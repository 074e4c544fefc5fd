"""An agent backed by any OpenAI-compatible chat endpoint (vLLM serving a Qwen-VL-class model).

Base and trained checkpoints go through exactly the same path: the same format adapter, image
policy, history window and generation settings. A hash of all of these (not of the model name or
URL) is recorded with every step, so two runs can be checked to have been treated alike. The
messages come from `realbench.agents.prompt.build_messages`, which the trainer adapters share.
"""

from __future__ import annotations

import contextlib
import hashlib
import json
import logging
from collections import deque
from typing import Any

from pydantic import BaseModel, ConfigDict, Field

from realbench.actions import Action
from realbench.agent import AgentStep, HistoryItem
from realbench.agents.client import ChatClient, ChatEndpoint, ChatResult
from realbench.agents.formats import ActionFormat, get_format
from realbench.agents.images import ImagePolicy, ImageSize, PreparedImage, prepare_image
from realbench.agents.prompt import PromptStep, build_messages
from realbench.errors import ConfigError
from realbench.observation import Observation, Screenshot
from realbench.taskpack import TaskInstance

log = logging.getLogger(__name__)


class OpenAIAgentConfig(BaseModel):
    model_config = ConfigDict(extra="forbid", frozen=True)

    endpoint: ChatEndpoint
    format: str = "qwen-mobile"
    images: ImagePolicy | None = Field(default=None, description="None: the format's own policy")
    image_window: int | None = Field(
        default=None,
        ge=1,
        le=20,
        description="screenshots per request, the current one included; None: the format's default",
    )
    text_history: int = Field(default=30, ge=0, description="older steps kept as text lines")
    label: str | None = Field(default=None, description="agent name override; default openai:<model>")


class OpenAIAgent:
    """The `Agent` protocol over a chat endpoint; `act` for threads, `aact` for event loops."""

    def __init__(self, config: OpenAIAgentConfig, *, client: ChatClient | None = None) -> None:
        self.config = config
        self.fmt: ActionFormat = get_format(config.format)
        self.images: ImagePolicy = config.images or self.fmt.image_policy()
        self.image_window: int = config.image_window or self.fmt.default_image_window()
        self.client = client or ChatClient(config.endpoint)
        self._owns_client = client is None
        self._instruction: str | None = None
        self._images: dict[bytes, PreparedImage] = {}
        # the model's own text per step index, and the steps taken from a queue without a call
        self._said: dict[int, str] = {}
        self._followup_steps: set[int] = set()
        self._queue: deque[Action] = deque()
        self.prompt_hash = self._prompt_hash()

    @property
    def name(self) -> str:
        return self.config.label or f"openai:{self.config.endpoint.model}"

    def settings(self) -> dict[str, Any]:
        """Everything except the model's identity that decides what the model sees and how its
        output is read."""
        probe = ImageSize(1000, 2000)
        return {
            "format": self.fmt.settings(),
            "system_prompt": self.fmt.system_prompt(probe),
            "task_text": self.fmt.task_text("{instruction}", ["{step}"]),
            "images": self.images.model_dump(mode="json"),
            "image_window": self.image_window,
            "text_history": self.config.text_history,
            "generation": self.config.endpoint.generation_settings(),
        }

    def _prompt_hash(self) -> str:
        blob = json.dumps(self.settings(), sort_keys=True, ensure_ascii=False).encode()
        return hashlib.sha256(blob).hexdigest()[:16]

    def reset(self, instance: TaskInstance) -> None:
        self.start(instance.instruction)

    def start(self, instruction: str) -> None:
        """Set the instruction directly (for drivers that have no TaskInstance)."""
        self._instruction = instruction
        self._images.clear()
        self._said.clear()
        self._followup_steps.clear()
        self._queue.clear()

    # --- prompt ----------------------------------------------------------------------------

    def _prepared(self, shot: Screenshot) -> PreparedImage:
        cached = self._images.get(shot.data)
        if cached is None:
            cached = prepare_image(shot, self.images)
            if len(self._images) > 4 * self.image_window:
                self._images.clear()
            self._images[shot.data] = cached
        return cached

    def build_request(
        self, observation: Observation, history: list[HistoryItem]
    ) -> tuple[list[dict[str, Any]], list[dict[str, Any]] | None, PreparedImage]:
        if self._instruction is None:
            raise ConfigError("the agent was not reset with a task", hint="call reset(instance) before act()")
        current = self._prepared(observation.screenshot)
        earlier: list[PromptStep] = []
        for item in history:
            if item.index in self._followup_steps:
                continue  # taken from the model's previous output, which the prompt already shows
            image = None
            if item.observation is not None:
                # only the last few are drawn; older ones cost nothing when never prepared
                image = (
                    self._prepared(item.observation.screenshot)
                    if len(history) - item.index < self.image_window
                    else None
                )
            earlier.append(
                PromptStep(
                    index=item.index,
                    action=item.action,
                    thought=item.thought,
                    image=image,
                    said=self._said.get(item.index),
                )
            )
        messages = build_messages(
            self.fmt,
            self._instruction,
            earlier,
            current,
            image_window=self.image_window,
            text_history=self.config.text_history,
        )
        return messages, self.fmt.tools(current.size), current

    # --- acting ----------------------------------------------------------------------------

    def act(self, observation: Observation, history: list[HistoryItem]) -> AgentStep:
        queued = self._take_queued(history)
        if queued is not None:
            return queued
        messages, tools, current = self.build_request(observation, history)
        result = self.client.complete(messages, tools=tools)
        return self._step(result, current, len(history))

    async def aact(self, observation: Observation, history: list[HistoryItem]) -> AgentStep:
        queued = self._take_queued(history)
        if queued is not None:
            return queued
        messages, tools, current = self.build_request(observation, history)
        result = await self.client.acomplete(messages, tools=tools)
        return self._step(result, current, len(history))

    def _take_queued(self, history: list[HistoryItem]) -> AgentStep | None:
        if not self._queue:
            return None
        if history and history[-1].action is None:
            self._queue.clear()  # the step that asked for these failed
            return None
        self._followup_steps.add(len(history))
        return AgentStep(
            action=self._queue.popleft(),
            raw="",
            extra={
                "model": self.config.endpoint.model,
                "format": self.fmt.name,
                "followup": True,
                "prompt_hash": self.prompt_hash,
            },
        )

    def _step(self, result: ChatResult, current: PreparedImage, index: int) -> AgentStep:
        raw = result.text
        for call in result.tool_calls:
            args = call.get("arguments")
            # arguments that are not JSON stay text: the parser reports them
            with contextlib.suppress(json.JSONDecodeError):
                args = json.loads(args) if isinstance(args, str) else args
            raw += (
                "\n<tool_call>\n"
                + json.dumps({"name": call["name"], "arguments": args}, ensure_ascii=False)
                + "\n</tool_call>"
            )
        parsed = self.fmt.parse(raw, current.size)
        if parsed.error:
            log.info("%s: unparseable output (%s)", self.name, parsed.error)
        else:
            self._queue.extend(parsed.then)
        self._said[index] = raw
        thought = parsed.thought or result.reasoning
        return AgentStep(
            action=parsed.action,
            raw=raw,
            thought=thought,
            error=parsed.error,
            tokens_in=result.tokens_in,
            tokens_out=result.tokens_out,
            latency_s=result.latency_s,
            extra={
                "model": self.config.endpoint.model,
                "format": self.fmt.name,
                "prompt_hash": self.prompt_hash,
                "image_size": [current.size.width, current.size.height],
                "attempts": result.attempts,
                "finish_reason": result.finish_reason,
                **({"reasoning": result.reasoning} if result.reasoning else {}),
            },
        )

    def close(self) -> None:
        if self._owns_client:
            self.client.close()
