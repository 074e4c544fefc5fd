"""A TEST FAKE of an OpenAI-compatible chat server (what `vllm serve` exposes), for tests and demos.

It is not a model: it answers from a script. It speaks the real protocol (`POST
/v1/chat/completions`, `GET /v1/models`) on a free local port, checks every request the way a
strict server would (images present and decodable as base64 data URLs, within the configured
pixel budget and image count, tool schema present when expected) and records each request for
assertions. Replies carry usage tokens; errors can be injected (HTTP 500, slow replies that
trip client timeouts, bodies that are not JSON).

    with FakeModelServer(["<tool_call>...</tool_call>"]) as server:
        agent = OpenAIAgent(... base_url=server.base_url ...)
"""

from __future__ import annotations

import asyncio
import io
import json
import logging
import re
import socket
import threading
import time
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from typing import Any

from realbench.agents.images import decode_data_url
from realbench.errors import ServerError

log = logging.getLogger(__name__)

FAKE_MODEL = "fake-vlm"
# Qwen-VL spends one token per 28×28 patch; the fake uses the same rule for its usage numbers.
_PIXELS_PER_TOKEN = 28 * 28


@dataclass
class Reply:
    """One scripted answer. Use the constructors for injected faults."""

    text: str = ""
    tool_calls: list[dict[str, Any]] = field(default_factory=list)
    status: int = 200
    delay_s: float = 0.0
    malformed: bool = False
    # a thinking model's reasoning, split off as vLLM's reasoning parsers do
    reasoning: str | None = None

    @classmethod
    def error(cls, status: int = 500) -> Reply:
        return cls(status=status)

    @classmethod
    def slow(cls, delay_s: float, text: str = "") -> Reply:
        return cls(text=text, delay_s=delay_s)

    @classmethod
    def garbage_body(cls) -> Reply:
        return cls(malformed=True)


@dataclass
class RecordedRequest:
    body: dict[str, Any]
    images: list[tuple[int, int]]  # (width, height) of every image, in message order
    problems: list[str]
    authorization: str | None

    @property
    def messages(self) -> list[dict[str, Any]]:
        return list(self.body.get("messages", []))

    def text(self) -> str:
        """All text parts of all messages, joined (for assertions on prompt content)."""
        out: list[str] = []
        for m in self.messages:
            content = m.get("content")
            if isinstance(content, str):
                out.append(content)
            elif isinstance(content, list):
                out += [p.get("text", "") for p in content if isinstance(p, dict) and p.get("type") == "text"]
        return "\n".join(out)


Script = Sequence[str | Reply] | Callable[[RecordedRequest], str | Reply]


@dataclass
class RequestRules:
    """What the fake insists on; a request that breaks a rule gets HTTP 400 and is recorded."""

    max_pixels: int | None = None
    min_images: int = 0
    max_images: int | None = None
    require_tool: str | None = None
    model: str | None = FAKE_MODEL
    api_key: str | None = None
    # structured output: whether this server takes `response_format` at all (a server without
    # guided decoding answers 400), and whether a request must carry a JSON schema
    response_format: bool = True
    require_response_format: bool = False


class FakeModelServer:
    """A scripted OpenAI-compatible server on 127.0.0.1:<free port>, run in a background thread."""

    def __init__(
        self,
        script: Script,
        *,
        rules: RequestRules | None = None,
        repeat_last: bool = False,
        port: int = 0,
    ) -> None:
        self.script = script
        self.rules = rules or RequestRules()
        self.repeat_last = repeat_last
        self.requests: list[RecordedRequest] = []
        self._index = 0
        self._lock = threading.Lock()
        self._server: Any = None
        self._thread: threading.Thread | None = None
        self._requested_port = port
        self.port = port

    # --- lifecycle -------------------------------------------------------------------------

    @property
    def base_url(self) -> str:
        return f"http://127.0.0.1:{self.port}/v1"

    def start(self) -> FakeModelServer:
        import uvicorn
        from starlette.applications import Starlette
        from starlette.routing import Route

        app = Starlette(
            routes=[
                Route("/v1/chat/completions", self._chat, methods=["POST"]),
                Route("/v1/models", self._models, methods=["GET"]),
                Route("/health", self._health, methods=["GET"]),
            ]
        )
        # IPPROTO_TCP so asyncio turns Nagle off (a 40 ms delayed-ACK wait on every reply otherwise)
        sock = socket.socket(socket.AF_INET, socket.SOCK_STREAM, socket.IPPROTO_TCP)
        sock.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
        sock.bind(("127.0.0.1", self._requested_port))
        self.port = sock.getsockname()[1]
        config = uvicorn.Config(
            app, log_level="warning", access_log=False, lifespan="off", timeout_graceful_shutdown=1
        )
        self._server = uvicorn.Server(config)
        self._thread = threading.Thread(
            target=self._server.run, kwargs={"sockets": [sock]}, name="fake-model-server", daemon=True
        )
        self._thread.start()
        deadline = time.monotonic() + 10
        while not self._server.started:
            if time.monotonic() > deadline or not self._thread.is_alive():
                raise ServerError(
                    "the fake model server did not start", hint="see the log for uvicorn errors"
                )
            time.sleep(0.01)
        return self

    def stop(self) -> None:
        if self._server is not None:
            self._server.should_exit = True
        if self._thread is not None:
            self._thread.join(timeout=10)
        self._server = self._thread = None

    def __enter__(self) -> FakeModelServer:
        return self.start()

    def __exit__(self, *exc: object) -> None:
        self.stop()

    @property
    def problems(self) -> list[str]:
        return [p for r in self.requests for p in r.problems]

    # --- handlers --------------------------------------------------------------------------

    async def _health(self, request: Any) -> Any:
        from starlette.responses import PlainTextResponse

        return PlainTextResponse("ok")

    async def _models(self, request: Any) -> Any:
        from starlette.responses import JSONResponse

        # like `vllm serve --api-key`, the model list needs the key too
        key = self.rules.api_key
        if key is not None and request.headers.get("authorization") != f"Bearer {key}":
            return JSONResponse({"error": {"message": "invalid API key", "code": 401}}, status_code=401)
        name = self.rules.model or FAKE_MODEL
        return JSONResponse(
            {"object": "list", "data": [{"id": name, "object": "model", "owned_by": "realbench-fake"}]}
        )

    async def _chat(self, request: Any) -> Any:
        from starlette.responses import JSONResponse, Response

        raw = await request.body()
        try:
            body = json.loads(raw)
        except json.JSONDecodeError:
            return JSONResponse({"error": {"message": "request body is not JSON"}}, status_code=400)
        recorded = self._check(body, request.headers.get("authorization"))
        with self._lock:
            self.requests.append(recorded)
        if recorded.problems:
            return JSONResponse(
                {"error": {"message": "; ".join(recorded.problems), "type": "BadRequestError"}},
                status_code=400,
            )
        reply = self._next(recorded)
        if reply.delay_s:
            await asyncio.sleep(reply.delay_s)
        if reply.malformed:
            return Response(b"{this is not json", media_type="application/json")
        if reply.status != 200:
            return JSONResponse(
                {"error": {"message": f"injected error {reply.status}"}}, status_code=reply.status
            )
        return JSONResponse(self._completion(body, recorded, reply))

    def _next(self, recorded: RecordedRequest) -> Reply:
        if callable(self.script):
            out = self.script(recorded)
        else:
            with self._lock:
                if self._index >= len(self.script):
                    if not self.repeat_last or not self.script:
                        return Reply.error(500)
                    out = self.script[-1]
                else:
                    out = self.script[self._index]
                    self._index += 1
        return out if isinstance(out, Reply) else Reply(text=out)

    def _check(self, body: dict[str, Any], authorization: str | None) -> RecordedRequest:
        from PIL import Image

        problems: list[str] = []
        images: list[tuple[int, int]] = []
        rules = self.rules
        if rules.api_key is not None and authorization != f"Bearer {rules.api_key}":
            problems.append("missing or wrong API key")
        if rules.model is not None and body.get("model") != rules.model:
            problems.append(f"unknown model {body.get('model')!r}")
        messages = body.get("messages")
        if not isinstance(messages, list) or not messages:
            problems.append("no messages")
            messages = []
        for i, m in enumerate(messages):
            if not isinstance(m, dict) or m.get("role") not in ("system", "user", "assistant", "tool"):
                problems.append(f"message {i} has no valid role")
                continue
            content = m.get("content")
            if not isinstance(content, list):
                continue
            for part in content:
                if not isinstance(part, dict) or part.get("type") != "image_url":
                    continue
                url = (part.get("image_url") or {}).get("url", "")
                try:
                    _, data = decode_data_url(url)
                    with Image.open(io.BytesIO(data)) as img:
                        img.load()
                        size = img.size
                except Exception as exc:
                    problems.append(
                        f"message {i}: image is not a decodable base64 data URL ({type(exc).__name__})"
                    )
                    continue
                images.append(size)
                if rules.max_pixels is not None and size[0] * size[1] > rules.max_pixels:
                    problems.append(f"image {size[0]}x{size[1]} exceeds max_pixels {rules.max_pixels}")
        if len(images) < rules.min_images:
            problems.append(f"{len(images)} image(s) in the request, at least {rules.min_images} expected")
        if rules.max_images is not None and len(images) > rules.max_images:
            problems.append(f"{len(images)} images in the request exceed the limit of {rules.max_images}")
        if rules.require_tool is not None and not _has_tool(body, rules.require_tool):
            problems.append(f"tool schema {rules.require_tool!r} missing from the request")
        problems.extend(_response_format_problems(body.get("response_format"), rules))
        return RecordedRequest(body=body, images=images, problems=problems, authorization=authorization)

    def _completion(self, body: dict[str, Any], recorded: RecordedRequest, reply: Reply) -> dict[str, Any]:
        text_tokens = len(recorded.text()) // 4 + 1
        image_tokens = sum(w * h // _PIXELS_PER_TOKEN for w, h in recorded.images)
        completion_tokens = max(1, len(reply.text) // 4)
        message: dict[str, Any] = {"role": "assistant", "content": reply.text}
        if reply.reasoning is not None:
            message["reasoning_content"] = reply.reasoning
        if reply.tool_calls:
            message["tool_calls"] = [
                {
                    "id": f"call_{i}",
                    "type": "function",
                    "function": {
                        "name": c["name"],
                        "arguments": json.dumps(c.get("arguments", {}), ensure_ascii=False),
                    },
                }
                for i, c in enumerate(reply.tool_calls)
            ]
            message["content"] = reply.text or None
        return {
            "id": f"chatcmpl-fake-{len(self.requests)}",
            "object": "chat.completion",
            "created": int(time.time()),
            "model": body.get("model", FAKE_MODEL),
            "choices": [
                {
                    "index": 0,
                    "message": message,
                    "finish_reason": "tool_calls" if reply.tool_calls else "stop",
                }
            ],
            "usage": {
                "prompt_tokens": text_tokens + image_tokens,
                "completion_tokens": completion_tokens,
                "total_tokens": text_tokens + image_tokens + completion_tokens,
            },
        }


def _response_format_problems(value: Any, rules: RequestRules) -> list[str]:
    """What is wrong with a request's `response_format`, as OpenAI's API and vLLM check it."""
    if value is None:
        return (
            ["response_format with a JSON schema missing from the request"]
            if rules.require_response_format
            else []
        )
    if not rules.response_format:
        return ["response_format is not supported by this server"]
    if not isinstance(value, dict) or value.get("type") not in ("json_schema", "json_object", "text"):
        return ["response_format.type must be json_schema, json_object or text"]
    if value["type"] != "json_schema":
        return ["response_format must carry a JSON schema"] if rules.require_response_format else []
    spec = value.get("json_schema")
    if not isinstance(spec, dict) or not isinstance(spec.get("name"), str) or not spec["name"]:
        return ["response_format.json_schema needs a name"]
    schema = spec.get("schema")
    if not isinstance(schema, dict) or schema.get("type") != "object":
        return ["response_format.json_schema.schema must be an object schema"]
    properties = schema.get("properties")
    if not isinstance(properties, dict) or not properties:
        return ["response_format.json_schema.schema has no properties"]
    missing = [k for k in schema.get("required", []) if k not in properties]
    if missing:
        return [f"response_format schema requires undefined properties {missing}"]
    if spec.get("strict") and schema.get("additionalProperties") is not False:
        return ["a strict response_format schema must set additionalProperties: false"]
    return []


def _has_tool(body: dict[str, Any], name: str) -> bool:
    for tool in body.get("tools") or []:
        if isinstance(tool, dict) and (tool.get("function") or {}).get("name") == name:
            return True
    # tools embedded in the system prompt, as Qwen's chat template lays them out
    for m in body.get("messages") or []:
        if isinstance(m, dict) and m.get("role") == "system" and isinstance(m.get("content"), str):
            for block in re.findall(r"<tools>(.*?)</tools>", m["content"], re.DOTALL):
                for line in block.strip().splitlines():
                    try:
                        schema = json.loads(line)
                    except json.JSONDecodeError:
                        continue
                    if not isinstance(schema, dict):
                        continue
                    # qwen-agent wraps each tool as {"type": "function", "function": {...}}
                    inner = schema.get("function") if schema.get("type") == "function" else schema
                    if isinstance(inner, dict) and inner.get("name") == name:
                        return True
    return False


def main(argv: list[str] | None = None) -> None:
    """Run the test fake in the foreground: ``python -m realbench.agents.fake_server --port 8000``.

    It answers every request with the same scripted reply. Used by tests that exercise process
    management (a stand-in for `vllm serve`) and for wiring checks without a GPU.
    """
    import argparse
    import signal as _signal

    parser = argparse.ArgumentParser(
        description="realbench's fake OpenAI-compatible server (a TEST FAKE, not a model)"
    )
    parser.add_argument("--port", type=int, default=0)
    parser.add_argument("--model", default=FAKE_MODEL)
    parser.add_argument("--reply", default='{"type": "wait", "seconds": 1}')
    parser.add_argument(
        "--api-key-env", default=None, help="environment variable holding the key clients must send"
    )
    args = parser.parse_args(argv)
    import os

    api_key = os.environ.get(args.api_key_env) if args.api_key_env else None
    # The handler only flips a flag: Event.set() in a handler can deadlock on the lock that an
    # interrupted Event.wait() holds (a server that then ignores every SIGTERM).
    signalled: list[int] = []
    _signal.signal(_signal.SIGTERM, lambda signo, _frame: signalled.append(signo))
    with FakeModelServer(
        [args.reply], rules=RequestRules(model=args.model, api_key=api_key), repeat_last=True, port=args.port
    ) as server:
        print(f"fake model server (test fake) at {server.base_url}", flush=True)
        try:
            while not signalled:
                time.sleep(0.2)
        except KeyboardInterrupt:
            pass


if __name__ == "__main__":
    main()
