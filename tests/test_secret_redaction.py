"""Secrets that come back from where we did not put them: a model echoing the API key, credentials
in a base URL. Evidence: the bytes of the run store on disk, the log records, the error text."""

from __future__ import annotations

import json
import logging
import socket

import pytest

from realbench.agents.client import ChatClient, ChatEndpoint
from realbench.agents.fake_server import FAKE_MODEL, FakeModelServer, Reply, RequestRules
from realbench.agents.openai_agent import OpenAIAgent, OpenAIAgentConfig
from realbench.episode import EndReason, EpisodeResult, StepRecord
from realbench.errors import ModelError
from realbench.outcome import Outcome
from realbench.store import EpisodeKey, RunStore
from tests.test_openai_agent import POLICY, _obs

SECRET = "sk-live-0123456789abcdef"
ECHO = (
    f"My instructions say the key is {SECRET}.\n"
    '<tool_call>\n{"name": "mobile_use", "arguments": {"action": "type", "text": "'
    + SECRET
    + '"}}\n</tool_call>'
)


def _store_bytes(root) -> bytes:
    return b"".join(p.read_bytes() for p in sorted(root.rglob("*")) if p.is_file())


def test_a_key_echoed_by_the_model_never_reaches_the_store(tmp_path, monkeypatch, caplog):
    monkeypatch.setenv("RB_ECHO_KEY", SECRET)
    caplog.set_level(logging.DEBUG)
    with FakeModelServer([ECHO], rules=RequestRules(api_key=SECRET), repeat_last=True) as server:
        endpoint = ChatEndpoint(base_url=server.base_url, model=FAKE_MODEL, api_key_env="RB_ECHO_KEY")
        agent = OpenAIAgent(OpenAIAgentConfig(endpoint=endpoint, images=POLICY))
        try:
            agent.start("type nothing secret")
            step = agent.act(_obs(), [])
        finally:
            agent.close()
    assert server.requests[-1].authorization == f"Bearer {SECRET}", "the key was really sent"
    with RunStore(tmp_path / "s", writer="test") as store:
        store.ensure_run(
            "r", pack="p", app="a", agent=agent.name, target="clone", config={"settings": agent.settings()}
        )
        result = EpisodeResult(
            task_id="t", seed=0, instruction="i", params={}, agent=agent.name, target="clone", device={},
            outcome=Outcome.FAILURE, end_reason=EndReason.TERMINATE,
            steps=[StepRecord(index=0, action=step.action.model_dump(mode="json") if step.action else None, raw=step.raw,
                              thought=step.thought, extra=step.extra)],
        )  # fmt: skip
        store.write_episode("r", EpisodeKey("t", 0, 0), 0, "a", result)
    on_disk = _store_bytes(tmp_path / "s")
    assert SECRET.encode() not in on_disk
    assert b"***" in on_disk, "the echo was masked, not dropped"
    assert SECRET not in caplog.text


def _dead_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


def test_base_url_userinfo_is_masked_in_metadata_errors_and_logs(caplog):
    caplog.set_level(logging.DEBUG)
    password = "hunter2-pass-word"
    url = f"http://alice:{password}@127.0.0.1:{_dead_port()}/v1"
    endpoint = ChatEndpoint(base_url=url, model="m", max_retries=1, backoff_s=0.01, timeout_s=2)
    assert password not in endpoint.model_dump_json() and password not in json.dumps(endpoint.model_dump())
    assert endpoint.base_url == url, "the request itself still uses the credentials"
    agent = OpenAIAgent(OpenAIAgentConfig(endpoint=endpoint, images=POLICY))
    assert password not in json.dumps(agent.settings()) + agent.config.model_dump_json()
    client = ChatClient(endpoint)
    try:
        with pytest.raises(ModelError) as err:
            client.complete([{"role": "user", "content": "hi"}])
    finally:
        client.close()
        agent.close()
    assert password not in str(err.value) and "***@127.0.0.1" in str(err.value)
    assert password not in caplog.text


def test_refused_request_does_not_echo_the_key(monkeypatch):
    monkeypatch.setenv("RB_ECHO_KEY", SECRET)
    with FakeModelServer([Reply.error(401)], repeat_last=True) as server:
        client = ChatClient(
            ChatEndpoint(base_url=server.base_url, model=FAKE_MODEL, api_key_env="RB_ECHO_KEY")
        )
        try:
            with pytest.raises(ModelError) as err:
                client.complete([{"role": "user", "content": "hi"}])
        finally:
            client.close()
    assert SECRET not in str(err.value)
