"""The element policy without a browser: what it may see, its checkpoint, numpy against torch, the
browser-free episode, and the `train` command's untrained base."""

from __future__ import annotations

from pathlib import Path

import numpy as np
import pytest

from realbench.actions import Click, KeyPress, Terminate, Type
from realbench.agents import make_agent
from realbench.agents.policy import PolicyAgent
from realbench.agents.policy_features import Kind, Memory, build_step, spans
from realbench.agents.policy_net import (
    PolicyCard,
    PolicyShape,
    init_params,
    load_checkpoint,
    logits,
    probabilities,
    save_checkpoint,
)
from realbench.errors import ConfigError
from realbench.observation import ImageFormat, Observation, Screenshot
from realbench.taskpack import load_pack

SHAPE = PolicyShape(buckets=256, dim=8, hidden=16)

XML = """<?xml version="1.0" encoding="UTF-8"?>
<hierarchy rotation="0">
  <node index="0" text="" resource-id="" class="android.widget.FrameLayout" package="p" content-desc=""
        clickable="false" enabled="true" focused="false" bounds="[0,0][1080,2400]">
    <node index="0" text="商品列表" resource-id="p:id/list" class="android.widget.TextView" package="p"
          content-desc="" clickable="true" enabled="true" focused="false" bounds="[0,100][1080,200]" />
    <node index="1" text="设置" resource-id="p:id/settings" class="android.widget.TextView" package="p"
          content-desc="" clickable="true" enabled="true" focused="false" bounds="[0,300][540,400]" />
    <node index="2" text="请输入数量" resource-id="p:id/qty" class="android.widget.EditText" package="p"
          content-desc="" clickable="true" enabled="true" focused="true" bounds="[0,500][1080,600]" />
    <node index="3" text="说明文字" resource-id="" class="android.widget.TextView" package="p"
          content-desc="" clickable="false" enabled="true" focused="false" bounds="[0,700][1080,800]" />
  </node>
</hierarchy>"""


def observation() -> Observation:
    return Observation(screenshot=Screenshot(b"", 1080, 2400, ImageFormat.PNG), hierarchy=XML)


@pytest.fixture()
def checkpoint(tmp_path: Path) -> Path:
    params = init_params(SHAPE, np.random.default_rng(3))
    save_checkpoint(tmp_path / "ck", params, PolicyCard(shape=SHAPE, command="realbench train --pack toy"))
    return tmp_path / "ck"


@pytest.fixture(scope="module")
def toy_task():
    import clones.registry  # noqa: F401

    return load_pack("taskpacks/toy").tasks[0]


def test_spans_take_values_from_the_instruction() -> None:
    got = spans("给张伟转账1036元，账号6222600110022334455，附言写“生活费”。")
    assert "生活费" in got
    assert "1036" in got
    assert "6222600110022334455" in got
    assert all(s in "给张伟转账1036元，账号6222600110022334455，附言写“生活费”。" for s in got)


def test_candidates_cover_the_action_space() -> None:
    from realbench.agents.policy import views_of
    from realbench.hierarchy import Hierarchy

    views = views_of(Hierarchy(XML))
    step = build_step("购买商品05，数量3", views, Memory(), SHAPE.buckets)
    kinds = [c.kind for c in step.candidates]
    # three clickable nodes (the text field included), typed spans for the focused field, back, terminate
    assert kinds.count(Kind.CLICK) == 3
    assert Kind.TYPE in kinds
    assert kinds[-2:] == [Kind.BACK, Kind.TERMINATE]
    assert {c.text for c in step.candidates if c.kind is Kind.TYPE} >= {"3"}


def test_the_policy_sees_only_the_instruction_of_its_task(checkpoint: Path, toy_task) -> None:
    """Two instances that differ in everything but the instruction (task id, plan, verifier,
    parameters) get the same actions; a different instruction gets different scores."""
    instance = toy_task.instantiate(0, toy_task.clone.setup.clock.date(), None)
    other_task = toy_task.model_copy(
        update={"id": "something-else", "golden": list(reversed(toy_task.golden)), "difficulty": 4}
    )
    other = instance.model_copy(update={"task": other_task, "params": {"item": "07"}, "seed": 99})
    agents = [PolicyAgent(checkpoint), PolicyAgent(checkpoint)]
    agents[0].reset(instance)
    agents[1].reset(other)
    for _ in range(4):
        steps = [a.act(observation(), []) for a in agents]
        assert steps[0].action == steps[1].action
        assert steps[0].extra["p"] == steps[1].extra["p"]
    # what the agent keeps of its task: the instruction text and the step budget, nothing else
    kept = {k: v for k, v in vars(agents[0]).items() if not k.startswith("__")}
    assert not any(type(v).__name__ in ("TaskInstance", "Task") for v in kept.values())
    p_a = PolicyAgent(checkpoint)
    p_a.reset(instance)
    from realbench.agents.policy import views_of
    from realbench.hierarchy import Hierarchy

    views = views_of(Hierarchy(XML))
    a = logits(p_a.params, build_step(instance.instruction, views, Memory(), SHAPE.buckets))
    b = logits(p_a.params, build_step("打开设置", views, Memory(), SHAPE.buckets))
    assert not np.allclose(a[:3], b[:3])


def test_actions_are_in_realbench_action_space(checkpoint: Path, toy_task) -> None:
    agent = PolicyAgent(checkpoint, sample=True, seed=5)
    agent.reset(toy_task.instantiate(0, toy_task.clone.setup.clock.date(), None))
    seen: set[type] = set()
    for _ in range(40):
        step = agent.act(observation(), [])
        assert step.action is not None
        seen.add(type(step.action))
        if isinstance(step.action, Click):
            # the centre of one of the clickable nodes, normalised to 0-1000
            assert (step.action.x, step.action.y) in {(500, 63), (250, 146), (500, 229)}
        if isinstance(step.action, Type):
            assert step.action.text in agent._instruction
    assert Click in seen
    assert seen <= {Click, Type, Terminate, KeyPress}


def test_checkpoint_round_trip(checkpoint: Path, tmp_path: Path) -> None:
    params, card = load_checkpoint(checkpoint)
    again = save_checkpoint(tmp_path / "again", params, card)
    params2, card2 = load_checkpoint(tmp_path / "again")
    assert card2.weights_sha256 == card.weights_sha256 == again.weights_sha256
    for name in params:
        np.testing.assert_array_equal(params[name], params2[name])
    agent = make_agent(f"policy:{checkpoint}")
    assert agent.name == f"policy:element@{card.weights_sha256[:12]}"
    # a weights file that no longer matches its card is refused
    params2["w2"] = params2["w2"] + 1
    np.savez_compressed(tmp_path / "again" / "policy.npz", **params2)
    with pytest.raises(ConfigError, match="does not match"):
        load_checkpoint(tmp_path / "again")
    with pytest.raises(ConfigError, match="not a policy checkpoint"):
        load_checkpoint(tmp_path / "missing")


def test_numpy_and_torch_forward_agree(toy_task) -> None:
    torch = pytest.importorskip("torch")
    from devices.rl.policy_train import Roller, TorchPolicy, TrainConfig
    from realbench.taskpack import load_pack as load

    params = init_params(SHAPE, np.random.default_rng(0))
    cfg = TrainConfig(pack="toy", shape=SHAPE)
    roller = Roller(load("taskpacks/toy"), cfg)
    rollouts = [roller.play(params, toy_task, s, np.random.default_rng(s)) for s in range(4)]
    steps = [s for r in rollouts for s in r.steps]
    from realbench.agents.policy import views_of
    from realbench.hierarchy import Hierarchy

    steps.append(build_step("购买商品05，数量3", views_of(Hierarchy(XML)), Memory(), SHAPE.buckets))
    assert len(steps) >= 5
    model = TorchPolicy(params)
    with torch.no_grad():
        logp, mask = model.log_probs(steps)
    for i, step in enumerate(steps):
        z = logits(params, step)
        expected = z - np.log(np.exp(z - z.max()).sum()) - z.max()
        got = logp[i][mask[i]].numpy()
        np.testing.assert_allclose(got, expected, rtol=1e-4, atol=1e-5)
    back = model.numpy_params()
    for name in params:
        np.testing.assert_array_equal(back[name], params[name])
    # at a sampling temperature both scale the logits alike; the greedy choice does not move
    with torch.no_grad():
        cold, _ = model.log_probs(steps, 0.5)
    for i, step in enumerate(steps):
        p = probabilities(params, step, 0.5)
        np.testing.assert_allclose(cold[i][mask[i]].exp().numpy(), p, rtol=1e-4, atol=1e-6)
        assert int(np.argmax(p)) == int(np.argmax(probabilities(params, step)))
        assert p.max() >= probabilities(params, step).max() - 1e-7
    # one temperature per step (curriculum groups may sample at their own): each row at its own
    temps = [0.5 if i % 2 else 1.3 for i in range(len(steps))]
    with torch.no_grad():
        mixed, _ = model.log_probs(steps, temps)
    for i, step in enumerate(steps):
        p = probabilities(params, step, temps[i])
        np.testing.assert_allclose(mixed[i][mask[i]].exp().numpy(), p, rtol=1e-4, atol=1e-6)


def test_train_command_spells_out_non_default_options() -> None:
    pytest.importorskip("torch")
    from devices.rl.policy_train import TrainConfig, train_command

    plain = train_command(TrainConfig(pack="toy", tasks=["buy-item"]), Path("out"))
    assert "--temperature" not in plain and "--eval-seeds" not in plain  # older cards' commands stay exact
    cfg = TrainConfig(
        pack="toy", tasks=["buy-item"], temperature=0.5, entropy=0.02, epochs=2, eval_seeds=[0, 1, 2]
    )
    command = train_command(cfg, Path("out"))
    for part in ("--temperature 0.5", "--entropy 0.02", "--epochs 2", "--eval-seeds 0,1,2"):
        assert part in command
    assert "--prefix-temperature" not in plain and "--entropy-all" not in plain
    assert "--row-context" not in plain


def test_a_train_command_parses_back_to_its_configuration(monkeypatch: pytest.MonkeyPatch) -> None:
    """A card's command is what reproduces it: every non-default option must reach the same
    TrainConfig through the CLI (an option the command spells and the CLI drops would train another
    policy)."""
    pytest.importorskip("torch")
    import devices.rl.policy_train as policy_train
    from tests.policy_support import config_of_command

    cfg = policy_train.TrainConfig(
        pack="toy",
        tasks=["buy-item"],
        heldout=["buy-item"],
        updates=7,
        group=3,
        batch_tasks=2,
        seed=4,
        lr=0.01,
        max_steps=6,
        eval_every=3,
        epochs=2,
        entropy=0.02,
        temperature=0.5,
        eval_seeds=[0, 1, 2],
        prefix_starts=0.75,
        prefix_temperature=1.0,
        entropy_all=True,
        drift_randomise=["relabel"],
        shape=PolicyShape(context=True),
    )
    assert config_of_command(policy_train.train_command(cfg, Path("out/x")), monkeypatch) == cfg


def test_browser_free_episode_runs_the_plan_and_gets_the_verdict(toy_task) -> None:
    """The golden plan's taps, chosen by node, succeed on the browser-free path; stopping early fails."""
    from clones.base import get_clone
    from clones.dom_plan import initial_state, instantiate
    from devices.rl.policy_env import FreeEpisode

    clone = get_clone("toy_shop")
    instance = instantiate(toy_task, 0)
    state = initial_state(clone, instance)
    item = instance.params["item"]

    def ref(episode: FreeEpisode, *, text: str = "", rid: str = "") -> int:
        views = episode.views()
        return next(v.ref for v in views if (text and v.text == text) or (rid and v.resource_id == rid))

    ep = FreeEpisode(clone, instance, state)
    ep.act(Kind.CLICK, ref(ep, text="商品列表"))
    ep.act(Kind.CLICK, ref(ep, text=f"商品{item}"))
    ep.act(Kind.CLICK, ref(ep, rid="buy"))
    result = ep.result()
    assert ep.done and result.boundary
    assert result.verdict.success and result.reward == 1.0
    assert [c["kind"] for c in result.choices] == ["click"] * 3
    early = FreeEpisode(clone, instance, state)
    early.act(Kind.CLICK, ref(early, text="商品列表"))
    early.act(Kind.TERMINATE)
    assert early.done and not early.result().verdict.success
    # the shared start state was not touched by either episode
    assert initial_state(clone, instance) == state


def test_group_advantages() -> None:
    pytest.importorskip("torch")
    from devices.rl.policy_train import group_advantages

    np.testing.assert_array_equal(group_advantages(np.array([0.3, 0.3, 0.3])), np.zeros(3))
    adv = group_advantages(np.array([1.0, 0.0, 0.0, 0.0]))
    assert adv[0] > 0 > adv[1] and abs(adv.sum()) < 1e-6


def test_train_with_zero_updates_writes_the_untrained_base(tmp_path: Path) -> None:
    pytest.importorskip("torch")
    from typer.testing import CliRunner

    from realbench.cli import app

    out = tmp_path / "base"
    res = CliRunner().invoke(
        app, ["train", "--pack", "toy", "--updates", "0", "--seed", "4", "--out", str(out), "--no-progress"]
    )
    assert res.exit_code == 0, res.output
    params, card = load_checkpoint(out)
    assert card.updates == 0 and card.seed == 4 and card.tasks == ["buy-item"]
    assert (
        card.command.startswith("realbench train --pack toy --tasks buy-item") and "--seed 4" in card.command
    )
    assert (out / "curve.json").is_file() and (out / "curve.png").is_file()
    np.testing.assert_array_equal(params["w1"], init_params(PolicyShape(), np.random.default_rng(4))["w1"])
    agent = make_agent(f"policy:{out}")
    assert agent.name.startswith("policy:element@")


def test_a_drifted_browser_free_episode_shows_the_overlay_first(toy_task) -> None:
    """Under drift the launch ad covers the screen: only its controls are candidates until dismissed."""
    from clones.base import get_clone
    from clones.dom_plan import initial_state, instantiate
    from clones.drift import drift_profile
    from devices.rl.policy_env import FreeEpisode

    clone = get_clone("toy_shop")
    instance = instantiate(toy_task, 0)
    drift = drift_profile("ads", seed=1, clone=clone)
    ep = FreeEpisode(clone, instance, initial_state(clone, instance), drift)
    ids = {v.resource_id for v in ep.views()}
    assert "rb_ad_skip" in ids and "go_list" not in ids
    skip = next(v.ref for v in ep.views() if v.resource_id == "rb_ad_skip")
    ep.act(Kind.CLICK, skip)
    assert "go_list" in {v.resource_id for v in ep.views()}
