"""An agent backed by any OpenAI-compatible chat endpoint (vLLM serving a Qwen-VL-class model).

Base and trained checkpoints go through exactly the same path: the same format adapter, image
policy, history window and generation settings. A hash of all of these (not of the model name or
URL) is recorded with every step, so two runs can be checked to have been treated alike.

Prompt layout, per step:
    system     the format's action space (and tool schema)
    user       the instruction + one text line per step older than the image window
    user/asst  for each of the last `image_window - 1` steps: its screenshot, then the action the
               model took, rendered in the format's own syntax (with its thought)
    user       the current screenshot
"""

from __future__ import annotations

import contextlib
import hashlib
import json
import logging
from typing import Any

from pydantic import BaseModel, ConfigDict, Field

from realbench.agent import AgentStep, HistoryItem
from realbench.agents.client import ChatClient, ChatEndpoint, ChatResult
from realbench.agents.formats import ActionFormat, get_format
from realbench.agents.images import ImagePolicy, ImageSize, PreparedImage, prepare_image
from realbench.errors import ConfigError
from realbench.observation import Observation, Screenshot
from realbench.taskpack import TaskInstance

log = logging.getLogger(__name__)

# What the prompt says for a step whose output could not be parsed.
_UNPARSED = "(the output of this step could not be parsed; no action was taken)"


class OpenAIAgentConfig(BaseModel):
    model_config = ConfigDict(extra="forbid", frozen=True)

    endpoint: ChatEndpoint
    format: str = "qwen-mobile"
    images: ImagePolicy = Field(default_factory=ImagePolicy)
    image_window: int = Field(
        default=3, ge=1, le=20, description="screenshots per request, the current one included"
    )
    text_history: int = Field(default=30, ge=0, description="older steps kept as text lines")
    label: str | None = Field(default=None, description="agent name override; default openai:<model>")


class OpenAIAgent:
    """The `Agent` protocol over a chat endpoint; `act` for threads, `aact` for event loops."""

    def __init__(self, config: OpenAIAgentConfig, *, client: ChatClient | None = None) -> None:
        self.config = config
        self.fmt: ActionFormat = get_format(config.format)
        self.client = client or ChatClient(config.endpoint)
        self._owns_client = client is None
        self._instruction: str | None = None
        self._images: dict[bytes, PreparedImage] = {}
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
            "images": self.config.images.model_dump(mode="json"),
            "image_window": self.config.image_window,
            "text_history": self.config.text_history,
            "generation": self.config.endpoint.generation_settings(),
        }

    def _prompt_hash(self) -> str:
        blob = json.dumps(self.settings(), sort_keys=True, ensure_ascii=False).encode()
        return hashlib.sha256(blob).hexdigest()[:16]

    def reset(self, instance: TaskInstance) -> None:
        self._instruction = instance.instruction
        self._images.clear()

    def start(self, instruction: str) -> None:
        """Set the instruction directly (for drivers that have no TaskInstance)."""
        self._instruction = instruction
        self._images.clear()

    # --- prompt ----------------------------------------------------------------------------

    def _prepared(self, shot: Screenshot) -> PreparedImage:
        cached = self._images.get(shot.data)
        if cached is None:
            cached = prepare_image(shot, self.config.images)
            if len(self._images) > 4 * self.config.image_window:
                self._images.clear()
            self._images[shot.data] = cached
        return cached

    def build_request(
        self, observation: Observation, history: list[HistoryItem]
    ) -> tuple[list[dict[str, Any]], list[dict[str, Any]] | None, PreparedImage]:
        if self._instruction is None:
            raise ConfigError("the agent was not reset with a task", hint="call reset(instance) before act()")
        current = self._prepared(observation.screenshot)
        window_size = self.config.image_window - 1
        window: list[HistoryItem] = []
        for item in reversed(history):
            if len(window) >= window_size or item.observation is None:
                break
            window.insert(0, item)
        older = history[: len(history) - len(window)]
        lines = [self._line(item, current.size) for item in older]
        if self.config.text_history and len(lines) > self.config.text_history:
            dropped = len(lines) - self.config.text_history
            lines = [f"({dropped} earlier steps omitted)"] + lines[dropped:]
        elif not self.config.text_history:
            lines = []

        messages: list[dict[str, Any]] = [{"role": "system", "content": self.fmt.system_prompt(current.size)}]
        user: list[dict[str, Any]] = [{"type": "text", "text": self.fmt.task_text(self._instruction, lines)}]
        for item in window:
            assert item.observation is not None
            image = self._prepared(item.observation.screenshot)
            user.append(_image_part(image))
            messages.append({"role": "user", "content": user})
            if item.action is None:
                said = _UNPARSED
            else:
                said = self.fmt.render(item.action, image.size, item.thought)
            messages.append({"role": "assistant", "content": said})
            user = []
        user.append(_image_part(current))
        messages.append({"role": "user", "content": user})
        return messages, self.fmt.tools(current.size), current

    def _line(self, item: HistoryItem, screen: ImageSize) -> str:
        if item.action is None:
            return f"Step {item.index + 1}: {_UNPARSED}"
        if item.observation is not None:
            screen = self._prepared(item.observation.screenshot).size
        return f"Step {item.index + 1}: {self.fmt.history_line(item.action, screen)}"

    # --- acting ----------------------------------------------------------------------------

    def act(self, observation: Observation, history: list[HistoryItem]) -> AgentStep:
        messages, tools, current = self.build_request(observation, history)
        result = self.client.complete(messages, tools=tools)
        return self._step(result, current)

    async def aact(self, observation: Observation, history: list[HistoryItem]) -> AgentStep:
        messages, tools, current = self.build_request(observation, history)
        result = await self.client.acomplete(messages, tools=tools)
        return self._step(result, current)

    def _step(self, result: ChatResult, current: PreparedImage) -> AgentStep:
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
        return AgentStep(
            action=parsed.action,
            raw=raw,
            thought=parsed.thought,
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
            },
        )

    def close(self) -> None:
        if self._owns_client:
            self.client.close()


def _image_part(image: PreparedImage) -> dict[str, Any]:
    return {"type": "image_url", "image_url": {"url": image.data_url}}
