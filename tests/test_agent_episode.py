"""The OpenAI-compatible agent running real episodes through the fake model server: on the scripted
target (fast) and on a headless clone (browser tier), end to end through the run store."""

from __future__ import annotations

from datetime import date

import pytest

from realbench.agent import AgentStep, HistoryItem
from realbench.agents.client import ChatEndpoint
from realbench.agents.fake_server import FAKE_MODEL, FakeModelServer, RecordedRequest, RequestRules
from realbench.agents.formats import get_format
from realbench.agents.images import ImageSize
from realbench.agents.openai_agent import OpenAIAgent, OpenAIAgentConfig
from realbench.episode import run_episode
from realbench.golden import GoldenAgent
from realbench.observation import Observation
from realbench.outcome import EndReason, Outcome
from realbench.store import EpisodeKey, RunStore
from realbench.taskpack import TaskPack, parse_pack
from realbench.trajectory import Trajectory
from tests.scripted import PACK as SCRIPTED_PACK
from tests.scripted import ScriptedTarget


class PlanFollowingModel:
    """A scripted stand-in for a model, used as the fake server's reply function: it answers each
    request with the golden plan's next action for the screen the agent is looking at, written in
    the format's own syntax and in pixels of the image the request actually carried."""

    def __init__(self, fmt: str) -> None:
        self.fmt = get_format(fmt)
        self.golden = GoldenAgent()
        self.screen: Observation | None = None

    def __call__(self, request: RecordedRequest) -> str:
        assert self.screen is not None
        width, height = request.images[-1]
        action = self.golden.next_action(self.screen)
        return self.fmt.render(action, ImageSize(width, height), thought="following the plan")


class Watching:
    """Lets the scripted model see the observation the agent was given (the agent itself is untouched)."""

    def __init__(self, agent: OpenAIAgent, model: PlanFollowingModel) -> None:
        self.agent, self.model = agent, model

    @property
    def name(self) -> str:
        return self.agent.name

    def reset(self, instance) -> None:
        self.agent.reset(instance)
        self.model.golden.reset(instance)

    def act(self, observation: Observation, history: list[HistoryItem]) -> AgentStep:
        self.model.screen = observation
        return self.agent.act(observation, history)


def _agent(server: FakeModelServer, fmt: str, key_env: str | None = None) -> OpenAIAgent:
    endpoint = ChatEndpoint(base_url=server.base_url, model=FAKE_MODEL, backoff_s=0.01, api_key_env=key_env)
    return OpenAIAgent(OpenAIAgentConfig(endpoint=endpoint, format=fmt))


@pytest.mark.parametrize("fmt", ["qwen-mobile", "ui-tars", "json"])
def test_episode_on_scripted_target_reaches_the_boundary(fmt, tmp_path, monkeypatch):
    secret = "sk-episode-secret-77"
    monkeypatch.setenv("RB_EP_KEY", secret)
    pack = parse_pack(SCRIPTED_PACK)
    instance = pack.task("submit").instantiate(0, date(2026, 3, 2))
    model = PlanFollowingModel(fmt)
    with FakeModelServer(model, rules=RequestRules(min_images=1, api_key=secret)) as server:
        agent = _agent(server, fmt, "RB_EP_KEY")
        result = run_episode(instance, ScriptedTarget(), Watching(agent, model))
        agent.close()
    assert server.problems == []
    assert result.outcome is Outcome.SUCCESS and result.end_reason is EndReason.BOUNDARY
    assert [s.thought for s in result.steps] == ["following the plan"] * 3
    assert all(s.tokens_in > 0 and s.extra["prompt_hash"] == agent.prompt_hash for s in result.steps)
    store = RunStore(tmp_path / "run")
    store.ensure_run("r", pack="scripted", app="scripted", agent=agent.name, target="clone", config={})
    eid = store.write_episode("r", EpisodeKey("submit", 0, 0), 0, "scripted", result)
    traj = Trajectory.from_store(store, eid)
    assert (
        len(traj.steps) == 3
        and traj.steps[0].screenshot
        and traj.content_hash() == Trajectory.from_result(result).content_hash()
    )
    store.close()
    for path in (tmp_path / "run").rglob("*"):
        if path.is_file():
            assert secret.encode() not in path.read_bytes(), path


def test_garbage_model_ends_the_episode_as_format_error():
    pack = parse_pack(SCRIPTED_PACK)
    instance = pack.task("submit").instantiate(0, date(2026, 3, 2))
    with FakeModelServer(["I cannot see the screen."], repeat_last=True) as server:
        agent = _agent(server, "qwen-mobile")
        result = run_episode(instance, ScriptedTarget(), agent, max_format_errors=3)
        agent.close()
    assert result.outcome is Outcome.FORMAT_ERROR and result.format_errors == 3
    assert all(s.action is None and s.error for s in result.steps)
    # the history shown to the model says the earlier outputs were unusable
    assert "could not be parsed" in server.requests[-1].text()


def _toy_pack() -> TaskPack:
    from clones.toy import TOY

    return parse_pack(
        {
            "app": "toy",
            "clone": TOY,
            "real_app": {"package": "com.example.toyshop", "name": "玩具店"},
            "tasks": [
                {
                    "id": "buy-item",
                    "instruction": "购买商品{item}",
                    "params": {"item": {"type": "choice", "values": [2, 3]}},
                    "difficulty": 1,
                    "max_steps": 8,
                    "clone": {
                        "setup": {
                            "seed": 11,
                            "patch": {
                                "world": {
                                    "items": [
                                        {"id": i, "name": f"商品{i:02d}", "price": 10 + i, "stock": 5}
                                        for i in range(12)
                                    ]
                                }
                            },
                        },
                        "verifier": {"name": "bought"},
                    },
                    "judge": {"rubric": "an order for the item exists"},
                    "golden": [
                        {"tap": {"text": "商品列表"}},
                        {"tap": {"text_contains": "商品0{item}"}},
                        {"tap": {"text": "购买"}},
                        {"terminate": "success"},
                    ],
                }
            ],
        }
    )


@pytest.fixture(scope="module")
def clone_env(clone_server, browser_pool):
    return clone_server, browser_pool


@pytest.mark.browser
@pytest.mark.parametrize("fmt", ["qwen-mobile", "ui-tars"])
def test_episode_on_a_headless_clone(fmt, clone_env):
    from devices.clone_target import CloneTarget

    clone_server, pool = clone_env
    pack = _toy_pack()
    instance = pack.tasks[0].instantiate(0, date(2026, 3, 2))
    model = PlanFollowingModel(fmt)
    with FakeModelServer(model) as server:
        target = CloneTarget(pack, clone_server.url, browser=pool, scale=1.0)
        agent = _agent(server, fmt)
        try:
            result = run_episode(instance, target, Watching(agent, model))
        finally:
            target.teardown()
            agent.close()
    assert server.problems == []
    assert result.outcome is Outcome.SUCCESS, (result.error, [s.action for s in result.steps])
    sizes = {tuple(s.extra["image_size"]) for s in result.steps}
    (w, h) = sizes.pop()
    assert w % 28 == 0 and h % 28 == 0 and (w, h) != (result.steps[0].width, result.steps[0].height)
