"""The verl agent loop adapter, run on a CPU against a scripted server manager (a test stand-in
for verl's GPU inference servers) and a live rollout service. Where verl is not installed the
adapter's AgentLoopBase/AgentLoopOutput are its labelled stand-ins."""

from __future__ import annotations

import asyncio
import sys
from dataclasses import dataclass
from pathlib import Path

import pytest

pytest.importorskip("transformers", reason="the train extra (pip install -e .[train]) provides the tokenizer")

from devices.rl.pool import EnvPool  # noqa: E402
from devices.rl.service import RolloutServer  # noqa: E402
from devices.rl.verl_adapter import CloneEpisodeRunner, EpisodeSettings, RealbenchAgentLoop  # noqa: E402
from realbench.errors import ConfigError  # noqa: E402
from tests.rl_support import write_pack  # noqa: E402

sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "examples"))

pytestmark = pytest.mark.browser

REPLIES = ["Thought: back first\nAction: press_back()", "Thought: done\nAction: finished(content='')"]


@dataclass
class ScriptedOutput:
    token_ids: list[int]
    log_probs: list[float]


class ScriptedServerManager:
    """STAND-IN for verl's server manager: answers each generate() with the next scripted reply."""

    def __init__(self, tokenizer, replies: list[str]) -> None:
        self.tokenizer = tokenizer
        self.replies = list(replies)
        self.calls: list[dict] = []

    async def generate(self, request_id, *, prompt_ids, sampling_params, image_data=None, **kwargs):
        self.calls.append(
            {"prompt_ids": list(prompt_ids), "images": len(image_data or []), "params": sampling_params}
        )
        ids = self.tokenizer.encode(self.replies[len(self.calls) - 1], add_special_tokens=False)
        return ScriptedOutput(token_ids=ids, log_probs=[-0.5] * len(ids))


@pytest.fixture(scope="module")
def service(tmp_path_factory):
    root = tmp_path_factory.mktemp("packs")
    pack = str(write_pack(root / "toy"))
    with EnvPool(backend="inline") as pool, RolloutServer(pool, pack_dirs=(root,)) as srv:
        yield srv, pack


@pytest.fixture(scope="module")
def processor():
    from tiny_vlm import build_tiny_qwen2_vl

    from realbench.agents.formats import get_format

    policy = get_format("ui-tars").image_policy()
    proc, _ = build_tiny_qwen2_vl(max_pixels=policy.max_pixels, min_pixels=policy.min_pixels)
    return proc


def test_episode_becomes_one_masked_sequence(service, processor):
    server, pack = service
    manager = ScriptedServerManager(processor.tokenizer, REPLIES)
    loop = RealbenchAgentLoop(
        server_manager=manager,
        processor=processor,
        realbench={"service_url": server.url, "format": "ui-tars", "max_turns": 4, "short_side": 224},
    )
    out = asyncio.run(
        loop.run({"temperature": 1.0}, extra_info={"pack": pack, "task_id": "buy-item", "seed": 3})
    )
    # two turns: press_back, then finished() ends the episode on the environment
    assert len(manager.calls) == 2 and out.extra_fields["steps"] == 2
    assert out.extra_fields["outcome"] in ("failure", "success")
    assert len(out.multi_modal_data["images"]) == 2 and manager.calls[1]["images"] == 2
    # the second prompt is the first sequence, grown by appending
    first = out.prompt_ids
    assert manager.calls[0]["prompt_ids"] == first
    assert manager.calls[1]["prompt_ids"][: len(first)] == first
    # model tokens have mask 1 and read back as the replies; the environment's turn has mask 0
    mask, ids = out.response_mask, out.response_ids
    assert len(mask) == len(ids) == len(out.response_logprobs)
    model_text = processor.tokenizer.decode([t for t, m in zip(ids, mask, strict=True) if m == 1])
    assert model_text == "".join(REPLIES)
    assert 0 in mask and mask[0] == 1 and mask[-1] == 1
    assert out.reward_score is not None


def test_progress_text_layout_is_one_step_per_sample(service, processor):
    server, _ = service
    settings = EpisodeSettings(service_url=server.url, format="qwen-mobile", max_turns=3)
    with pytest.raises(ConfigError, match="one token sequence"):
        CloneEpisodeRunner(settings, ScriptedServerManager(processor.tokenizer, []), processor)
