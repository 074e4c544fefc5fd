"""One client for OpenAI-compatible chat endpoints (vLLM, or any server speaking the API).

Built on `openai.AsyncOpenAI` so many environments share one connection pool against one server.
The async client lives on a private event loop in a daemon thread; synchronous callers (the
episode loop runs episodes in threads) and async callers on any other loop both submit their
requests to it. Retries with exponential backoff are ours (the SDK's own are switched off) so
every attempt is counted and logged.

The API key is read from an environment variable whose *name* is configured; the key itself is
never logged, stored or put in an error message, and a reply that echoes it back has it masked
before anyone reads the reply. Credentials in the base URL's userinfo (``http://user:pass@host``)
are masked likewise wherever the URL is shown or serialised (`safe_url`).
"""

from __future__ import annotations

import asyncio
import concurrent.futures
import logging
import os
import threading
import time
from collections.abc import Coroutine
from dataclasses import dataclass, field
from typing import Any, TypeVar
from urllib.parse import urlsplit, urlunsplit

import numpy as np
from pydantic import BaseModel, ConfigDict, Field, field_serializer

from realbench.errors import ModelError
from realbench.loop_thread import start_loop_thread

log = logging.getLogger(__name__)
T = TypeVar("T")

DEFAULT_KEY_ENVS = ("REALBENCH_API_KEY", "OPENAI_API_KEY")
# vLLM accepts any key unless started with --api-key; the SDK refuses an empty one.
NO_KEY = "EMPTY"


class ChatEndpoint(BaseModel):
    """Where and how to call a model. Holds the *name* of the key's environment variable only."""

    model_config = ConfigDict(extra="forbid", frozen=True)

    base_url: str = Field(min_length=1)
    model: str = Field(min_length=1)
    api_key_env: str | None = None
    timeout_s: float = Field(default=60.0, gt=0)
    max_retries: int = Field(default=3, ge=0, le=20)
    backoff_s: float = Field(default=1.0, ge=0)
    backoff_max_s: float = Field(default=30.0, ge=0)
    # temperature, top_p and max_tokens are always sent, so a checkpoint's own
    # generation_config.json (which vLLM applies to whatever a request leaves out) cannot make two
    # checkpoints sample differently; `serve-model` also starts vLLM with `--generation-config
    # vllm`. top_k and repetition_penalty are vLLM's own (hosted OpenAI refuses them): sent when set.
    temperature: float = Field(default=0.0, ge=0)
    top_p: float | None = Field(default=1.0, gt=0, le=1)
    top_k: int | None = Field(default=None, ge=-1, description="-1: off (vLLM's convention)")
    repetition_penalty: float | None = Field(default=None, gt=0)
    max_tokens: int = Field(default=512, ge=1)
    seed: int | None = None
    extra_body: dict[str, Any] = Field(default_factory=dict)

    @field_serializer("base_url")
    def _serialise_base_url(self, value: str) -> str:
        return safe_url(value)

    @property
    def display_url(self) -> str:
        return safe_url(self.base_url)

    def generation_settings(self) -> dict[str, Any]:
        """What shapes the model's output besides the prompt (recorded with every step)."""
        return {
            "temperature": self.temperature,
            "top_p": self.top_p,
            "top_k": self.top_k,
            "repetition_penalty": self.repetition_penalty,
            "max_tokens": self.max_tokens,
            "seed": self.seed,
            "extra_body": self.extra_body,
        }

    def resolve_key(self) -> str:
        names = (self.api_key_env,) if self.api_key_env else DEFAULT_KEY_ENVS
        for name in names:
            value = os.environ.get(name)
            if value:
                return value
        if self.api_key_env:
            raise ModelError(
                f"environment variable {self.api_key_env} (the API key) is not set",
                hint=f"export {self.api_key_env}=... or pass another --api-key-env",
            )
        return NO_KEY


@dataclass
class ChatResult:
    text: str
    tool_calls: list[dict[str, Any]] = field(default_factory=list)
    tokens_in: int = 0
    tokens_out: int = 0
    latency_s: float = 0.0
    attempts: int = 1
    finish_reason: str | None = None
    # A thinking model's reasoning, when the server splits it off (vLLM's reasoning parsers).
    reasoning: str | None = None


def redact(text: str, secret: str | None) -> str:
    if secret and secret != NO_KEY and len(secret) >= 4:
        return text.replace(secret, "***")
    return text


def safe_url(url: str) -> str:
    """`url` with any userinfo (user:password@) masked, for logs, errors and run metadata."""
    try:
        parts = urlsplit(url)
        if "@" not in parts.netloc:
            return url
        host = parts.netloc.rsplit("@", 1)[1]
        return urlunsplit(parts._replace(netloc=f"***@{host}"))
    except ValueError:
        return "(unparseable URL)"


def url_secrets(url: str) -> list[str]:
    """The credentials in a URL's userinfo (to mask wherever they might reappear)."""
    try:
        parts = urlsplit(url)
    except ValueError:
        return []
    return [v for v in (parts.password, parts.username) if v and len(v) >= 4]


class _LoopThread:
    """A private asyncio loop in a daemon thread."""

    def __init__(self) -> None:
        self.loop, self._thread = start_loop_thread("realbench-model-client")

    def submit(self, coro: Coroutine[Any, Any, T]) -> concurrent.futures.Future[T]:
        return asyncio.run_coroutine_threadsafe(coro, self.loop)

    def stop(self) -> None:
        if self.loop.is_running():
            self.loop.call_soon_threadsafe(self.loop.stop)
            self._thread.join(timeout=5)
        if not self.loop.is_running():
            self.loop.close()


class ChatClient:
    """Retrying chat-completions client usable from threads and from any event loop."""

    def __init__(self, endpoint: ChatEndpoint, *, rng_seed: int = 0) -> None:
        self.endpoint = endpoint
        self._key = endpoint.resolve_key()
        self._secrets = [self._key, *url_secrets(endpoint.base_url)]
        self._rng = np.random.default_rng(rng_seed)
        self._rng_lock = threading.Lock()
        self._runner: _LoopThread | None = None
        self._client: Any = None
        self._lock = threading.Lock()

    def _ensure(self) -> _LoopThread:
        with self._lock:
            if self._runner is None:
                from openai import AsyncOpenAI

                self._runner = _LoopThread()
                self._client = AsyncOpenAI(
                    base_url=self.endpoint.base_url,
                    api_key=self._key,
                    timeout=self.endpoint.timeout_s,
                    max_retries=0,
                )
            return self._runner

    def _redact(self, text: str) -> str:
        for secret in self._secrets:
            text = redact(text, secret)
        return text

    def _jitter(self) -> float:
        with self._rng_lock:
            return float(self._rng.uniform(0.5, 1.0))

    def complete(
        self,
        messages: list[dict[str, Any]],
        *,
        tools: list[dict[str, Any]] | None = None,
        response_format: dict[str, Any] | None = None,
    ) -> ChatResult:
        """Blocking call (safe from many threads at once)."""
        runner = self._ensure()
        return runner.submit(self._complete(messages, tools, response_format)).result()

    async def acomplete(
        self,
        messages: list[dict[str, Any]],
        *,
        tools: list[dict[str, Any]] | None = None,
        response_format: dict[str, Any] | None = None,
    ) -> ChatResult:
        """Awaitable from any event loop; the request itself runs on the client's loop."""
        runner = self._ensure()
        return await asyncio.wrap_future(runner.submit(self._complete(messages, tools, response_format)))

    async def _complete(
        self,
        messages: list[dict[str, Any]],
        tools: list[dict[str, Any]] | None,
        response_format: dict[str, Any] | None = None,
    ) -> ChatResult:
        import openai

        ep = self.endpoint
        kwargs: dict[str, Any] = {
            "model": ep.model,
            "messages": messages,
            "temperature": ep.temperature,
            "max_tokens": ep.max_tokens,
        }
        if ep.top_p is not None:
            kwargs["top_p"] = ep.top_p
        if ep.seed is not None:
            kwargs["seed"] = ep.seed
        if tools:
            kwargs["tools"] = tools
        if response_format is not None:
            kwargs["response_format"] = response_format
        # vLLM's sampling parameters outside the OpenAI schema travel in the body's extra fields
        vllm_only = {"top_k": ep.top_k, "repetition_penalty": ep.repetition_penalty}
        extra = {**{k: v for k, v in vllm_only.items() if v is not None}, **ep.extra_body}
        if extra:
            kwargs["extra_body"] = extra
        retryable = (
            openai.APITimeoutError,
            openai.APIConnectionError,
            openai.RateLimitError,
            openai.InternalServerError,
            openai.APIResponseValidationError,
        )
        last: str = ""
        attempts = 0
        started = time.monotonic()
        for attempt in range(ep.max_retries + 1):
            attempts = attempt + 1
            try:
                response = await self._client.chat.completions.create(**kwargs)
                result = _result_of(response)
            except retryable as exc:
                last = f"{type(exc).__name__}: {self._redact(str(exc))}"
            except openai.APIStatusError as exc:
                # 4xx other than 429: the request itself is wrong; retrying cannot help
                raise ModelError(
                    f"model endpoint {ep.display_url} refused the request ({exc.status_code}): "
                    f"{self._redact(str(exc))[:500]}",
                    hint="check the model name, the image limits the server was started with and the API key",
                ) from None
            except (
                ValueError,
                TypeError,
                AttributeError,
            ) as exc:  # a body the SDK cannot read as a completion
                last = f"malformed response: {self._redact(str(exc))[:200]}"
            else:
                # a model may echo the key (e.g. a prompt-injected page asking for it): mask it
                # before the reply reaches the agent, the judge or the store
                result.text = self._redact(result.text)
                for call in result.tool_calls:
                    call["arguments"] = self._redact(str(call.get("arguments", "")))
                result.attempts = attempts
                result.latency_s = time.monotonic() - started
                return result
            if attempt < ep.max_retries:
                delay = min(ep.backoff_max_s, ep.backoff_s * (2**attempt)) * self._jitter()
                log.warning(
                    "model call to %s failed (%s); retry %d in %.2fs",
                    ep.display_url,
                    last,
                    attempt + 1,
                    delay,
                )
                await asyncio.sleep(delay)
        raise ModelError(
            f"model endpoint {ep.display_url} failed after {attempts} attempt(s): {last}",
            hint="check that the server is up (`realbench serve-model --check URL`) and not overloaded",
        )

    def close(self) -> None:
        with self._lock:
            runner, client = self._runner, self._client
            self._runner = self._client = None
        if runner is None:
            return
        try:
            runner.submit(client.close()).result(timeout=5)
        except Exception:  # closing is best effort; the loop goes away regardless
            log.debug("closing the model client failed", exc_info=True)
        runner.stop()

    def __enter__(self) -> ChatClient:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()


def _result_of(response: Any) -> ChatResult:
    if isinstance(response, str) or not getattr(response, "choices", None):
        raise ValueError("no choices in the response")
    choice = response.choices[0]
    message = choice.message
    calls: list[dict[str, Any]] = []
    for call in message.tool_calls or []:
        fn = getattr(call, "function", None)
        if fn is not None:
            calls.append({"name": fn.name, "arguments": fn.arguments})
    usage = getattr(response, "usage", None)
    return ChatResult(
        text=message.content or "",
        tool_calls=calls,
        tokens_in=int(getattr(usage, "prompt_tokens", 0) or 0),
        tokens_out=int(getattr(usage, "completion_tokens", 0) or 0),
        finish_reason=choice.finish_reason,
        reasoning=_reasoning_of(message),
    )


def _reasoning_of(message: Any) -> str | None:
    value = getattr(message, "reasoning_content", None)
    if value is None:
        extra = getattr(message, "model_extra", None) or {}
        value = extra.get("reasoning_content") or extra.get("reasoning")
    return value if isinstance(value, str) and value.strip() else None
