"""The OpenAI-compatible agent against the local fake server (a test fake speaking the real API)."""

from __future__ import annotations

import asyncio
import io
import json
import logging
import time

import pytest
from PIL import Image

from realbench.actions import Click, KeyPress, Type
from realbench.agent import HistoryItem
from realbench.agents import make_agent
from realbench.agents.client import ChatClient, ChatEndpoint
from realbench.agents.fake_server import FAKE_MODEL, FakeModelServer, Reply, RequestRules
from realbench.agents.images import ImagePolicy, smart_resize
from realbench.agents.openai_agent import OpenAIAgent, OpenAIAgentConfig
from realbench.errors import ConfigError, ModelError, UnknownNameError
from realbench.observation import Observation, Screenshot

POLICY = ImagePolicy(max_pixels=400 * 28 * 28)
CLICK = '<tool_call>\n{"name": "mobile_use", "arguments": {"action": "click", "coordinate": [100, 200]}}\n</tool_call>'


def _obs(color: tuple[int, int, int] = (30, 60, 90), size: tuple[int, int] = (1080, 2400)) -> Observation:
    buf = io.BytesIO()
    Image.new("RGB", size, color).save(buf, format="PNG")
    return Observation(screenshot=Screenshot.from_bytes(buf.getvalue()))


def _agent(server: FakeModelServer, **overrides) -> OpenAIAgent:
    endpoint_args = {"base_url": server.base_url, "model": FAKE_MODEL, "backoff_s": 0.01, "timeout_s": 5.0}
    endpoint_args.update(overrides.pop("endpoint", {}))
    config = OpenAIAgentConfig(endpoint=ChatEndpoint(**endpoint_args), images=POLICY, **overrides)
    agent = OpenAIAgent(config)
    agent.start("在12306上查询明天北京到上海的车票")
    return agent


@pytest.fixture
def closing():
    agents: list[OpenAIAgent] = []
    yield agents.append
    for a in agents:
        a.close()


def test_smart_resize_rules():
    h, w = smart_resize(2400, 1080, max_pixels=POLICY.max_pixels)
    assert h % 28 == 0 and w % 28 == 0 and h * w <= POLICY.max_pixels
    assert abs((h / w) - (2400 / 1080)) < 0.1
    assert smart_resize(10, 10, min_pixels=56 * 56) == (56, 56)


def test_step_sends_resized_image_and_tool_schema(closing):
    rules = RequestRules(max_pixels=POLICY.max_pixels, min_images=1, max_images=1, require_tool="mobile_use")
    with FakeModelServer(["Thought: tap it\n" + CLICK], rules=rules) as server:
        agent = _agent(server)
        closing(agent)
        step = agent.act(_obs(), [])
    assert server.problems == []
    (req,) = server.requests
    w, h = req.images[0]
    assert w % 28 == 0 and h % 28 == 0 and w * h <= POLICY.max_pixels
    # pixel coordinates on the resized image convert back to the normalised grid
    assert step.action == Click(x=round(100 * 1000 / (w - 1)), y=round(200 * 1000 / (h - 1)))
    assert step.thought == "tap it"
    assert step.error is None and step.raw.endswith("</tool_call>")
    assert step.tokens_in > 0 and step.tokens_out > 0 and step.latency_s > 0
    assert step.extra["image_size"] == [w, h] and step.extra["attempts"] == 1
    assert "在12306上查询明天北京到上海的车票" in req.text()


def test_history_window_images_and_text_lines(closing):
    rules = RequestRules(max_images=3)
    with FakeModelServer([CLICK], rules=rules) as server:
        agent = _agent(server, image_window=3, format="qwen-mobile")
        closing(agent)
        obs = [_obs((i * 40, 0, 0)) for i in range(5)]
        history = [HistoryItem(i, Click(x=10 * i, y=10), f"thought {i}", obs[i]) for i in range(4)]
        history[1] = HistoryItem(1, None, None, obs[1])  # an earlier format error
        agent.act(obs[4], history)
    assert server.problems == []
    req = server.requests[0]
    assert len(req.images) == 3  # the last two steps' screenshots + the current one
    roles = [m["role"] for m in req.messages]
    assert roles == ["system", "user", "assistant", "user", "assistant", "user"]
    first_user = req.messages[1]["content"][0]["text"]
    assert "Step 1:" in first_user and "Step 2:" in first_user and "could not be parsed" in first_user
    assert "Step 3" not in first_user
    # windowed steps come back as the model's own turns, with its thought
    assert req.messages[2]["content"].startswith("thought 2") and "<tool_call>" in req.messages[2]["content"]


def test_tools_in_api_field_and_structured_tool_calls(closing):
    reply = Reply(
        text="", tool_calls=[{"name": "mobile_use", "arguments": {"action": "type", "text": "上海"}}]
    )
    with FakeModelServer([reply], rules=RequestRules(require_tool="mobile_use")) as server:
        agent = _agent(server, format="qwen3-mobile-tools")
        closing(agent)
        step = agent.act(_obs(), [])
    assert server.problems == []
    assert server.requests[0].body["tools"][0]["function"]["name"] == "mobile_use"
    assert "<tools>" not in server.requests[0].messages[0]["content"]
    assert step.action == Type(text="上海")


def test_missing_tool_schema_is_refused_by_the_fake(closing):
    with FakeModelServer([CLICK], rules=RequestRules(require_tool="mobile_use")) as server:
        agent = _agent(server, format="json")
        closing(agent)
        with pytest.raises(ModelError, match="tool schema"):
            agent.act(_obs(), [])
    assert len(server.requests) == 1  # a 400 is not retried


def test_retries_after_server_errors_and_bad_bodies(closing):
    script = [Reply.error(500), Reply.garbage_body(), Reply.error(503), CLICK]
    with FakeModelServer(script) as server:
        agent = _agent(server)
        closing(agent)
        step = agent.act(_obs(), [])
    assert step.action is not None and step.extra["attempts"] == 4
    assert len(server.requests) == 4


def test_retries_exhausted_raise_model_error(closing):
    with FakeModelServer([Reply.error(500)] * 3) as server:
        agent = _agent(server, endpoint={"max_retries": 2})
        closing(agent)
        with pytest.raises(ModelError, match="after 3 attempt"):
            agent.act(_obs(), [])


def test_timeouts_are_retried_then_fail(closing):
    with FakeModelServer([Reply.slow(1.5, CLICK), CLICK]) as server:
        agent = _agent(server, endpoint={"timeout_s": 0.8, "max_retries": 1})
        closing(agent)
        step = agent.act(_obs(), [])
        assert step.action is not None and step.extra["attempts"] == 2
    with FakeModelServer([Reply.slow(1.5, CLICK)] * 2) as server:
        agent = _agent(server, endpoint={"timeout_s": 0.8, "max_retries": 1})
        closing(agent)
        with pytest.raises(ModelError, match="Timeout"):
            agent.act(_obs(), [])


def test_garbage_output_is_a_format_error_step(closing):
    with FakeModelServer(["Sure! I'd be happy to help you book a ticket."]) as server:
        agent = _agent(server)
        closing(agent)
        step = agent.act(_obs(), [])
    assert step.action is None and step.error and step.raw.startswith("Sure!")
    assert step.tokens_in > 0


def test_same_settings_hash_alike_for_base_and_trained(closing):
    with FakeModelServer([CLICK], rules=RequestRules(model=None)) as server:
        base = _agent(server, endpoint={"model": "base-ckpt"})
        trained = _agent(server, endpoint={"model": "trained-ckpt"})
        other = _agent(server, format="ui-tars")
        for a in (base, trained, other):
            closing(a)
        step = base.act(_obs(), [])
    assert base.name == "openai:base-ckpt" and trained.name == "openai:trained-ckpt"
    assert base.prompt_hash == trained.prompt_hash != other.prompt_hash
    assert step.extra["prompt_hash"] == base.prompt_hash and step.extra["model"] == "base-ckpt"


def test_async_act_runs_concurrently(closing):
    with FakeModelServer(lambda req: Reply.slow(0.5, CLICK)) as server:
        agent = _agent(server)
        closing(agent)

        async def many() -> list:
            return await asyncio.gather(*(agent.aact(_obs(), []) for _ in range(6)))

        t0 = time.monotonic()
        steps = asyncio.run(many())
        elapsed = time.monotonic() - t0
    assert all(s.action is not None for s in steps)
    assert elapsed < 6 * 0.5  # overlapped, not one after another


def test_api_key_never_logged_or_stored(monkeypatch, caplog, closing):
    secret = "sk-test-9f8e7d6c5b4a"
    monkeypatch.setenv("RB_TEST_KEY", secret)
    caplog.set_level(logging.DEBUG)
    with FakeModelServer([Reply.error(500), CLICK], rules=RequestRules(api_key=secret)) as server:
        agent = _agent(server, endpoint={"api_key_env": "RB_TEST_KEY"})
        closing(agent)
        step = agent.act(_obs(), [])
    assert server.problems == [] and server.requests[-1].authorization == f"Bearer {secret}"
    stored = json.dumps(
        {
            "raw": step.raw,
            "thought": step.thought,
            "extra": step.extra,
            "config": agent.config.model_dump(mode="json"),
            "settings": agent.settings(),
        }
    )
    assert secret not in stored and "RB_TEST_KEY" in stored
    assert secret not in caplog.text
    # a refused key: the error names the variable, never the key
    with FakeModelServer([CLICK], rules=RequestRules(api_key="another-key")) as server:
        agent = _agent(server, endpoint={"api_key_env": "RB_TEST_KEY"})
        closing(agent)
        with pytest.raises(ModelError) as info:
            agent.act(_obs(), [])
    assert secret not in str(info.value) and secret not in caplog.text


def test_missing_key_variable_is_a_clear_error():
    with pytest.raises(ModelError, match="RB_UNSET_KEY"):
        ChatClient(ChatEndpoint(base_url="http://127.0.0.1:9/v1", model="m", api_key_env="RB_UNSET_KEY"))


def test_make_agent_specs(closing):
    with pytest.raises(ConfigError, match="--base-url"):
        make_agent("openai")
    with pytest.raises(UnknownNameError):
        make_agent("llava")
    with pytest.raises(UnknownNameError):
        make_agent("openai", base_url="http://127.0.0.1:9/v1", model="m", fmt="nope")
    assert make_agent("golden").name == "golden"
    assert make_agent("synthetic:trained").name == "synthetic:trained"
    with FakeModelServer(['```json\n{"type": "key", "key": "back"}\n```']) as server:
        a = make_agent("openai", base_url=server.base_url, model=FAKE_MODEL, fmt="json")
        b = make_agent("openai", base_url=server.base_url, model=FAKE_MODEL, fmt="json")
        assert isinstance(a, OpenAIAgent) and a.client is b.client  # one pool per endpoint
        a.start("go back")
        assert a.act(_obs(), []).action == KeyPress(key="back")


def test_ui_tars_turns_layout_and_type_newline_submits(closing):
    outputs = [
        "Thought: type the city\nAction: type(content='上海\\n')",
        "Thought: open it\nAction: click(point='<point>100 200</point>')",
    ]
    with FakeModelServer(outputs) as server:
        agent = _agent(server, format="ui-tars", image_window=2)
        closing(agent)
        obs = [_obs((i * 40, 0, 0)) for i in range(4)]
        first = agent.act(obs[0], [])
        history = [HistoryItem(0, first.action, first.thought, obs[0])]
        enter = agent.act(obs[1], history)
        history.append(HistoryItem(1, enter.action, enter.thought, obs[1]))
        third = agent.act(obs[2], history)
    assert first.action == Type(text="上海")
    # the trailing "\n" was the Enter: taken without asking the model again
    assert enter.action == KeyPress(key="enter") and enter.extra["followup"] is True
    assert len(server.requests) == 2 and third.action is not None
    msgs = server.requests[1].messages
    assert msgs[0] == {"role": "system", "content": "You are a helpful assistant."}
    assert msgs[1]["content"][0]["text"].startswith("You are a GUI agent.")
    assert "## User Instruction\n在12306上查询明天北京到上海的车票" in msgs[1]["content"][0]["text"]
    # the earlier step is the model's own words, once (the follow-up Enter is not a turn of its own)
    said = [m["content"] for m in msgs if m["role"] == "assistant"]
    assert said == ["Thought: type the city\nAction: type(content='上海\\n')"]
    assert "press_enter" not in json.dumps(msgs)


def test_qwen25_prompt_is_the_cookbook_layout(closing):
    with FakeModelServer([CLICK, CLICK]) as server:
        agent = _agent(server, format="qwen-mobile")
        closing(agent)
        assert agent.image_window == 1  # the cookbook sends the current screenshot only
        first = agent.act(_obs(), [])
        agent.act(_obs((1, 2, 3)), [HistoryItem(0, first.action, None, _obs())])
    text = server.requests[1].messages[1]["content"][0]["text"]
    assert text.startswith("The user query: 在12306上查询明天北京到上海的车票\n")
    assert (
        'Task progress (You have done the following operation on the current device): Step 1: {"name": "mobile_use", "arguments": {"action": "click"'
        in text
    )
    assert len(server.requests[1].images) == 1


def test_reasoning_content_is_kept_as_the_thought(closing):
    with FakeModelServer([Reply(text=CLICK, reasoning="the search box is at the top")]) as server:
        agent = _agent(server)
        closing(agent)
        step = agent.act(_obs(), [])
    assert step.thought == "the search box is at the top" and step.action is not None


def test_sampling_parameters_are_sent_explicitly(closing):
    with FakeModelServer([CLICK, CLICK]) as server:
        agent = _agent(server, endpoint={"temperature": 0.3, "max_tokens": 77})
        closing(agent)
        agent.act(_obs(), [])
        tuned = _agent(server, endpoint={"top_k": 20, "repetition_penalty": 1.05})
        closing(tuned)
        tuned.act(_obs(), [])
    body = server.requests[0].body
    assert (body["temperature"], body["top_p"], body["max_tokens"]) == (0.3, 1.0, 77)
    assert "top_k" not in body  # vLLM-only parameters stay out unless set (hosted APIs refuse them)
    assert (server.requests[1].body["top_k"], server.requests[1].body["repetition_penalty"]) == (20, 1.05)
