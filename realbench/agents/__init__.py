"""Agents: an OpenAI-compatible VLM client with pluggable prompt formats, synthetic policies, and
`make_agent`, the factory the `run` command uses.

Spec values: ``golden`` (the task's plan), ``openai`` (a model behind an OpenAI-compatible
endpoint; needs base_url and model), ``synthetic:NAME`` (a labelled synthetic policy, see
`realbench.agents.synthetic`), ``replay:STORE[#RUN_ID]`` (the actions of a stored run's episodes,
see `realbench.replay_agent.StoredEpisodeAgent`), ``policy:DIR`` (an element-policy checkpoint
written by `realbench train`, see `realbench.agents.policy`).
"""

from __future__ import annotations

import atexit
import threading
from typing import TYPE_CHECKING, Any

from realbench.agent import Agent
from realbench.errors import ConfigError, UnknownNameError

if TYPE_CHECKING:
    from realbench.agents.client import ChatClient, ChatEndpoint
    from realbench.taskpack import TaskPack

AGENT_SPECS = ("golden", "openai", "synthetic:NAME", "replay:STORE", "policy:DIR")
DEFAULT_FORMAT = "qwen-mobile"

_clients: dict[str, ChatClient] = {}
_clients_lock = threading.Lock()


def shared_client(endpoint: ChatEndpoint) -> ChatClient:
    """One client (one connection pool, one event loop) per endpoint configuration per process,
    so every environment of a run shares it."""
    from realbench.agents.client import ChatClient

    key = endpoint.model_dump_json() + endpoint.base_url  # the dump masks userinfo
    with _clients_lock:
        client = _clients.get(key)
        if client is None:
            client = _clients[key] = ChatClient(endpoint)
        return client


@atexit.register
def close_shared_clients() -> None:
    with _clients_lock:
        clients = list(_clients.values())
        _clients.clear()
    for client in clients:
        client.close()


def make_agent(
    spec: str,
    *,
    pack: TaskPack | None = None,
    base_url: str | None = None,
    model: str | None = None,
    fmt: str | None = None,
    api_key_env: str | None = None,
    seed: int = 0,
    max_pixels: int | None = None,
    history_images: int | None = None,
    temperature: float | None = None,
    max_tokens: int | None = None,
) -> Agent:
    """Build the agent named by `spec` (see module docstring)."""
    if spec == "golden":
        from realbench.golden import GoldenAgent

        return GoldenAgent()
    if spec.startswith("synthetic:"):
        from realbench.agents.synthetic import SyntheticPolicy

        return SyntheticPolicy(spec.split(":", 1)[1], seed=seed)
    if spec.startswith("policy:"):
        from realbench.agents.policy import PolicyAgent

        return PolicyAgent(spec.split(":", 1)[1], seed=seed)
    if spec.startswith("replay:"):
        from realbench.replay_agent import StoredEpisodeAgent

        return StoredEpisodeAgent(spec.split(":", 1)[1])
    if spec == "openai":
        from realbench.agents.client import ChatEndpoint
        from realbench.agents.formats import get_format
        from realbench.agents.openai_agent import OpenAIAgent, OpenAIAgentConfig

        if not base_url or not model:
            raise ConfigError(
                "--agent openai needs --base-url and --model",
                hint="e.g. --base-url http://localhost:8000/v1 --model qwen-base (see docs/models.md)",
            )
        name = fmt or DEFAULT_FORMAT
        policy = get_format(name).image_policy()  # also fails fast on an unknown format name
        if max_pixels is not None:
            policy = policy.model_copy(
                update={"max_pixels": max_pixels, "min_pixels": min(policy.min_pixels, max_pixels)}
            )
        sampling: dict[str, Any] = {}
        if temperature is not None:
            sampling["temperature"] = temperature
        if max_tokens is not None:
            sampling["max_tokens"] = max_tokens
        endpoint = ChatEndpoint(
            base_url=base_url, model=model, api_key_env=api_key_env, seed=seed, **sampling
        )
        config = OpenAIAgentConfig(endpoint=endpoint, format=name, images=policy, image_window=history_images)
        return OpenAIAgent(config, client=shared_client(endpoint))
    raise UnknownNameError("agent", spec, list(AGENT_SPECS))


__all__ = ["AGENT_SPECS", "close_shared_clients", "make_agent", "shared_client"]
