"""A VLM judge over an OpenAI-compatible endpoint.

Given the task (instruction, rubric, expected answer type), the action history and a few
screenshots (the last k, or k sampled evenly with the final screen always included), the model is
asked for one JSON object ``{"reason": "...", "success": true|false|null, "confidence": 0..1}``
(the reason first, so the verdict follows from it). Where the endpoint supports it the request
carries that shape as a JSON schema (``response_format``); an endpoint that refuses the schema gets
the same request without it, and the free-form reply is read as before. A reply that is not such
an object is asked for again (up to `max_attempts`); after that, or when the endpoint fails, the
verdict is an abstention (success=False, abstained=True), never a guess. ``"success": null`` is
the judge abstaining on purpose (e.g. the screenshots do not show enough).

Each touch is drawn on the screenshot it was made on and named by the element it hit (from the
hierarchy stored with that step). Verdicts are cached under the hash of the rendered request
(messages, model, sampling parameters, schema): editing a rubric or a prompt never reuses one.
"""

from __future__ import annotations

import hashlib
import json
import logging
from enum import StrEnum
from typing import Any

import numpy as np
from pydantic import BaseModel, ConfigDict, Field, ValidationError

from realbench.agents.client import ChatClient, ChatEndpoint, ChatResult
from realbench.agents.formats.base import first_json_object
from realbench.agents.images import ImagePolicy, prepare_image
from realbench.errors import ConfigError, ModelError
from realbench.judge.cache import JudgeCache
from realbench.judge.taps import draw_touch, tapped_element, touch_point
from realbench.observation import Screenshot
from realbench.outcome import Verdict, VerdictSource
from realbench.taskpack import AnswerType, Task
from realbench.templating import render
from realbench.trajectory import Trajectory, TrajectoryStep

log = logging.getLogger(__name__)

# Reason prefix of the abstention an unreachable or refusing endpoint yields: infrastructure
# trouble, never cached or stored as a verdict.
ENDPOINT_FAILED = "judge endpoint failed"


def is_endpoint_failure(verdict: Verdict) -> bool:
    return verdict.abstained and verdict.reason.startswith(ENDPOINT_FAILED)


SYSTEM_PROMPT = (
    "You are a strict evaluator of a mobile GUI agent. You are shown the user's task, the grading "
    "rubric, the agent's actions with its reasoning, its final answer if any, and screenshots of "
    "the phone (the last one is the final screen). Decide from the evidence only whether the agent "
    "completed the task as the rubric defines it. If the screenshots do not show enough to decide, "
    "say so with success null.\n\n"
    "Touches are drawn on the screenshot they were made on (a red ring; a line for a swipe) and "
    "the element each one hit is named in the action list.\n\n"
    "Reply with exactly one JSON object and nothing else, the reason first:\n"
    '{"reason": "<one or two sentences>", "success": true | false | null, "confidence": <0.0-1.0>}'
)
RETRY_PROMPT = (
    "Your reply could not be read. Reply with exactly one JSON object: "
    '{"reason": "...", "success": true | false | null, "confidence": 0.0-1.0}'
)
# The reply's shape for endpoints with structured output (vLLM's guided decoding, OpenAI's
# json_schema). "reason" comes first so the model writes its reasoning before the verdict.
VERDICT_SCHEMA: dict[str, Any] = {
    "type": "object",
    "properties": {
        "reason": {"type": "string"},
        "success": {"type": ["boolean", "null"]},
        "confidence": {"type": "number", "minimum": 0, "maximum": 1},
    },
    "required": ["reason", "success", "confidence"],
    "additionalProperties": False,
}
RESPONSE_FORMAT: dict[str, Any] = {
    "type": "json_schema",
    "json_schema": {"name": "verdict", "schema": VERDICT_SCHEMA, "strict": True},
}


class ImageSampling(StrEnum):
    LAST = "last"  # the last k screenshots
    UNIFORM = "uniform"  # k spread over the episode, the final screen always included


class JudgeReply(BaseModel):
    model_config = ConfigDict(extra="ignore")

    reason: str = Field(default="", max_length=4000)
    success: bool | None
    confidence: float | None = Field(default=None, ge=0.0, le=1.0)


class VLMJudgeConfig(BaseModel):
    model_config = ConfigDict(extra="forbid", frozen=True)

    name: str = Field(min_length=1, pattern=r"^[A-Za-z0-9._:-]+$")
    endpoint: ChatEndpoint
    images: int = Field(default=3, ge=1, le=20)
    sampling: ImageSampling = ImageSampling.LAST
    image_policy: ImagePolicy = Field(default_factory=lambda: ImagePolicy(max_pixels=768 * 28 * 28))
    max_attempts: int = Field(default=3, ge=1, le=10)
    include_thoughts: bool = True
    structured_output: bool = Field(
        default=True, description="send the verdict's JSON schema (response_format)"
    )
    draw_touches: bool = True
    price_in_per_mtok: float = Field(default=0.0, ge=0)
    price_out_per_mtok: float = Field(default=0.0, ge=0)


def pick_images(count: int, k: int, sampling: ImageSampling) -> list[int]:
    """Indices of the screenshots shown to the judge (the final one is always among them)."""
    if count <= k:
        return list(range(count))
    if sampling is ImageSampling.LAST:
        return list(range(count - k, count))
    picked = np.unique(np.round(np.linspace(0, count - 1, k)).astype(int))
    return [int(i) for i in picked]


def _rubric(task: Task, traj: Trajectory) -> str:
    """The rubric with the episode's parameters filled in (as written when one has no value)."""
    try:
        return render(task.judge.rubric, traj.params)
    except ConfigError:
        return task.judge.rubric


def parse_reply(text: str) -> JudgeReply | None:
    """The judge's JSON object, or None when the reply is not one (never guessed)."""
    found = first_json_object(text or "")
    if found is None or not isinstance(found[0], dict) or "success" not in found[0]:
        return None
    try:
        return JudgeReply.model_validate(found[0])
    except ValidationError:
        return None


class VLMJudge:
    def __init__(
        self, config: VLMJudgeConfig, *, client: ChatClient | None = None, cache: JudgeCache | None = None
    ) -> None:
        self.config = config
        self.client = client or ChatClient(config.endpoint)
        self._owns_client = client is None
        self.cache = cache
        self._schema_refused = False
        self.prompt_hash = hashlib.sha256(
            json.dumps(
                {
                    "system": SYSTEM_PROMPT,
                    "retry": RETRY_PROMPT,
                    "images": config.images,
                    "sampling": config.sampling.value,
                    "policy": config.image_policy.model_dump(mode="json"),
                    "thoughts": config.include_thoughts,
                    "structured": config.structured_output,
                    "touches": config.draw_touches,
                    "generation": config.endpoint.generation_settings(),
                },
                sort_keys=True,
            ).encode()
        ).hexdigest()[:16]

    @property
    def name(self) -> str:
        return self.config.name

    def messages(self, task: Task, traj: Trajectory) -> list[dict[str, Any]]:
        lines = []
        for step in traj.steps:
            if step.action is None:
                what = f"(unparseable output: {step.error or 'no action'})"
            else:
                what = json.dumps(step.action, ensure_ascii=False)
                hit = tapped_element(step.hierarchy, step.action)
                if hit is not None:
                    what += f" — hit {hit}"
            thought = f" — reasoning: {step.thought}" if self.config.include_thoughts and step.thought else ""
            lines.append(f"{step.index + 1}. {what}{thought}")
        answer_kind = task.answer.type
        text = (
            f"Task: {traj.instruction}\n\nRubric: {_rubric(task, traj)}\n\n"
            + (
                f"The task expects an answer of type {answer_kind.value}.\n"
                if answer_kind is not AnswerType.NONE
                else ""
            )
            + f"Agent's final answer: {traj.answer if traj.answer is not None else '(none)'}\n"
            + f"The episode ended by: {traj.end_reason.value if traj.end_reason else 'unknown'}"
            + (
                " (the agent reached the irreversible step and was stopped before it)"
                if traj.end_reason and traj.end_reason.value == "boundary"
                else ""
            )
            + "\n\nActions (coordinates are 0-1000 on both axes):\n"
            + ("\n".join(lines) or "(no actions)")
        )
        # each screenshot with the step taken on it (None for the final screen)
        shots: list[tuple[TrajectoryStep | None, bytes]] = [
            (s, s.screenshot) for s in traj.steps if s.screenshot is not None
        ]
        if traj.final_screenshot is not None:
            shots.append((None, traj.final_screenshot))
        indices = pick_images(len(shots), self.config.images, self.config.sampling)
        content: list[dict[str, Any]] = [{"type": "text", "text": text}]
        for n, i in enumerate(indices):
            shot_step, png = shots[i]
            if shot_step is None:
                label = "final screen"
            else:
                label = f"screenshot before step {shot_step.index + 1}"
                if self.config.draw_touches and touch_point(shot_step.action) is not None:
                    png = draw_touch(png, shot_step.action)
                    label += f" (step {shot_step.index + 1}'s touch drawn in red)"
            content.append({"type": "text", "text": f"Image {n + 1}: {label}"})
            image = prepare_image(Screenshot.from_bytes(png), self.config.image_policy)
            content.append({"type": "image_url", "image_url": {"url": image.data_url}})
        return [{"role": "system", "content": SYSTEM_PROMPT}, {"role": "user", "content": content}]

    def _cost(self, tokens_in: int, tokens_out: int) -> float:
        c = self.config
        return (tokens_in * c.price_in_per_mtok + tokens_out * c.price_out_per_mtok) / 1e6

    def request(self, task: Task, traj: Trajectory) -> dict[str, Any]:
        """The request as rendered (what the cache key is the hash of)."""
        return {
            "model": self.config.endpoint.model,
            "messages": self.messages(task, traj),
            "params": self.config.endpoint.generation_settings(),
            "response_format": RESPONSE_FORMAT if self.config.structured_output else None,
            "retry": RETRY_PROMPT,
            "max_attempts": self.config.max_attempts,
        }

    def cache_key(self, task: Task, traj: Trajectory) -> str:
        return JudgeCache.request_key(self.name, self.request(task, traj))

    async def _ask(self, messages: list[dict[str, Any]]) -> ChatResult:
        """One call, with the schema where the endpoint takes it; a 400 for the schema falls back
        to free-form for the rest of this judge's life."""
        if self.config.structured_output and not self._schema_refused:
            try:
                return await self.client.acomplete(messages, response_format=RESPONSE_FORMAT)
            except ModelError as exc:
                if "(400)" not in exc.message:
                    raise
                log.warning(
                    "judge %s: the endpoint refused the JSON schema; reading free-form replies", self.name
                )
                self._schema_refused = True
        return await self.client.acomplete(messages)

    async def ajudge(self, task: Task, traj: Trajectory) -> Verdict:
        request = self.request(task, traj)
        key = JudgeCache.request_key(self.name, request)
        if self.cache is not None:
            cached = self.cache.get(self.name, key)
            if cached is not None:
                return cached
        messages = request["messages"]
        tokens_in = tokens_out = 0
        raw = ""
        verdict: Verdict | None = None
        for attempt in range(self.config.max_attempts):
            try:
                result: ChatResult = await self._ask(messages)
            except ModelError as exc:
                # transient infrastructure trouble: abstain, and do not cache it
                return self._abstain(f"{ENDPOINT_FAILED}: {exc.message}", raw, tokens_in, tokens_out)
            tokens_in += result.tokens_in
            tokens_out += result.tokens_out
            raw = result.text
            reply = parse_reply(raw)
            if reply is not None:
                verdict = self._from_reply(reply, raw, tokens_in, tokens_out)
                break
            log.info("judge %s: unreadable reply (attempt %d): %.120r", self.name, attempt + 1, raw)
            messages = messages + [
                {"role": "assistant", "content": raw},
                {"role": "user", "content": RETRY_PROMPT},
            ]
        if verdict is None:
            verdict = self._abstain(
                f"no readable verdict after {self.config.max_attempts} attempt(s)", raw, tokens_in, tokens_out
            )
        if self.cache is not None:
            self.cache.put(self.name, key, verdict)
        return verdict

    def judge(self, task: Task, traj: Trajectory) -> Verdict:
        """Blocking form of `ajudge` (runs on the client's event loop)."""
        import asyncio

        return asyncio.run(self.ajudge(task, traj))

    def _from_reply(self, reply: JudgeReply, raw: str, tokens_in: int, tokens_out: int) -> Verdict:
        abstained = reply.success is None
        return Verdict(
            success=bool(reply.success),
            abstained=abstained,
            reason=reply.reason or ("the judge could not decide" if abstained else ""),
            confidence=reply.confidence,
            source=VerdictSource.JUDGE,
            name=self.name,
            raw=raw,
            tokens=tokens_in + tokens_out,
            cost_usd=self._cost(tokens_in, tokens_out),
            progress=1.0 if reply.success else 0.0,
        )

    def _abstain(self, reason: str, raw: str, tokens_in: int, tokens_out: int) -> Verdict:
        return Verdict(
            success=False,
            abstained=True,
            reason=reason,
            source=VerdictSource.JUDGE,
            name=self.name,
            raw=raw or None,
            tokens=tokens_in + tokens_out,
            cost_usd=self._cost(tokens_in, tokens_out),
        )

    def close(self) -> None:
        if self._owns_client:
            self.client.close()
