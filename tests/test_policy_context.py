"""Row labels: the words beside a control that say what it does (a settings switch reads only 开,
its row says 消息推送; one 退票 per passenger, each block names its passenger)."""

from __future__ import annotations

from pathlib import Path

import numpy as np

from realbench.agents.policy import PolicyAgent, views_of
from realbench.agents.policy_features import Kind, Memory, actionable, build_step
from realbench.agents.policy_net import PolicyCard, PolicyShape, init_params, save_checkpoint
from realbench.hierarchy import Hierarchy
from realbench.observation import ImageFormat, Observation, Screenshot
from realbench.taskpack import load_pack

SHAPE = PolicyShape(buckets=256, dim=8, hidden=16, context=True)


def _node(text: str = "", rid: str = "", clickable: bool = False, children: str = "", y: int = 0) -> str:
    box = f"[0,{y}][1080,{y + 90}]"
    attrs = (
        f'text="{text}" resource-id="{"p:id/" + rid if rid else ""}" class="android.widget.TextView" '
        f'package="p" content-desc="" clickable="{str(clickable).lower()}" enabled="true" '
        f'focused="false" bounds="{box}"'
    )
    return f"<node {attrs}>{children}</node>" if children else f"<node {attrs} />"


def _screen(*rows: str) -> str:
    return f'<?xml version="1.0"?><hierarchy rotation="0">{_node(children="".join(rows))}</hierarchy>'


SETTINGS = _screen(
    _node(text="设置", y=0),
    _node(children=_node("消息推送", y=100) + _node("开", "setting_push", True, y=100), y=100),
    _node(children=_node("指纹登录", y=200) + _node("关", "setting_finger", True, y=200), y=200),
    # a row whose only other words are another control's: they label that control, not this one
    _node(children=_node("帮助", "help", True, y=300) + _node("关", "setting_x", True, y=300), y=300),
)


def _block(name: str, y: int) -> str:
    buttons = _node("退票", "refund_button", True, y=y + 50) + _node("改签", "change_button", True, y=y + 50)
    return _node(children=_node(f"{name} 成人票 二等座", y=y) + _node(children=buttons, y=y + 50), y=y)


ORDER = _screen(_node("订单详情", y=0), _block("李明", 100), _block("王芳", 300))


def _clicks(xml: str, context: bool = True) -> dict[tuple[str, str], list[str]]:
    out: dict[tuple[str, str], list[str]] = {}
    for v in views_of(Hierarchy(xml), context=context):
        if actionable(v):
            out.setdefault((v.resource_id, v.text), []).append(v.context)
    return out


def test_a_switch_reads_its_rows_label_and_never_another_controls_words() -> None:
    got = _clicks(SETTINGS)
    assert got[("setting_push", "开")] == ["消息推送"]
    assert got[("setting_finger", "关")] == ["指纹登录"]
    # the row holds only another control: the nearest ancestor with free words is the screen
    assert "帮助" not in got[("setting_x", "关")][0]
    assert got[("setting_x", "关")] == ["设置消息推送指纹登录"]
    # off unless the policy's shape asks for it: older checkpoints see what they were trained on
    assert all(c == [""] for c in _clicks(SETTINGS, context=False).values())


def test_repeated_controls_are_told_apart_by_their_blocks() -> None:
    views = [v for v in views_of(Hierarchy(ORDER), context=True) if v.resource_id == "refund_button"]
    assert [v.context for v in views] == ["李明成人票二等座", "王芳成人票二等座"]
    assert views[0].key != views[1].key  # the policy's memory of "clicked before" is per passenger
    plain = [v for v in views_of(Hierarchy(ORDER)) if v.resource_id == "refund_button"]
    assert plain[0].key == plain[1].key
    step = build_step("只退王芳的票", views, Memory(), SHAPE.buckets)
    mine, other = step.candidates[1], step.candidates[0]
    assert mine.f[18] > other.f[18] and mine.f[19] == other.f[19] == 1.0
    assert mine.a != other.a  # the passenger's words are in the control's text bag


def test_labels_farther_than_three_levels_up_are_not_read() -> None:
    deep = _node("开", "deep", True, y=100)
    for _ in range(3):
        deep = _node(children=deep + _node("", y=100), y=100)
    xml = _screen(_node("远处的标题", y=0), deep)
    assert _clicks(xml)[("deep", "开")] == [""]


def test_a_checkpoint_that_reads_rows_acts_on_them(tmp_path: Path) -> None:
    """The same weights score a settings screen differently with and without row labels: the
    agent reads the card's shape (a checkpoint trained with labels is run with labels)."""
    params = init_params(SHAPE, np.random.default_rng(5))
    plain_shape = SHAPE.model_copy(update={"context": False})
    save_checkpoint(tmp_path / "rows", params, PolicyCard(shape=SHAPE))
    save_checkpoint(tmp_path / "plain", params, PolicyCard(shape=plain_shape))
    import clones.registry  # noqa: F401  (the pack's state samplers)

    task = load_pack("taskpacks/train_ticketing").tasks[0]
    instance = task.instantiate(0, task.clone.setup.clock.date(), None)
    obs = Observation(screenshot=Screenshot(b"", 1080, 2400, ImageFormat.PNG), hierarchy=SETTINGS)
    probs = []
    for name in ("rows", "plain"):
        agent = PolicyAgent(tmp_path / name)
        agent.reset(instance)
        probs.append(agent.act(obs, []).extra["p"])
    assert probs[0] != probs[1]


def test_stopping_sees_how_well_the_last_click_matched_the_instruction() -> None:
    """Switching 消息推送 off leaves a screen that looks like any other settings screen: what tells
    the policy it is done is that the row it just switched is the one the instruction names."""
    instruction = "在设置里关闭消息推送"
    views = {v.resource_id: v for v in views_of(Hierarchy(SETTINGS), context=True)}
    screen = list(views.values())
    for clicked, want in (("setting_push", 1.0), ("setting_finger", 0.0)):
        memory = Memory()
        memory.record_click(views[clicked], instruction)
        stop = build_step(instruction, screen, memory, SHAPE.buckets, context=True).candidates[-1]
        assert stop.f[18] == want
        # a shape without row context keeps terminate's features as older checkpoints saw them
        plain = build_step(instruction, screen, memory, SHAPE.buckets).candidates[-1]
        assert plain.f[18] == plain.f[19] == 0.0
    memory.record(Kind.BACK)
    stop = build_step(instruction, screen, memory, SHAPE.buckets, context=True).candidates[-1]
    assert stop.f[18] == 0.0  # only the last action counts
