"""The verl agent loop, driven on a CPU the way verl's own `*_on_cpu` agent-loop tests drive one:
verl's installed classes and default config, the loop built from its registry entry by
`hydra.utils.instantiate` as verl's `AgentLoopWorker` builds it, a tiny Qwen2-VL tokenizer and
processor built on the spot (no download) and a live rollout service. The inference server is the
one SCRIPTED piece: a subclass of verl's `LLMServerClient` that answers with fixed UI-TARS replies
(verl's real servers are vLLM/SGLang engines on a GPU)."""

from __future__ import annotations

import asyncio
import sys
from importlib import metadata
from pathlib import Path

import pytest

pytest.importorskip("transformers", reason="the train extra (pip install -e .[train]) provides the tokenizer")
pytest.importorskip("verl", reason="the verl extra (pip install -e .[verl]) provides verl")

import hydra  # noqa: E402
from hydra.errors import InstantiationException  # noqa: E402
from omegaconf import OmegaConf  # noqa: E402
from packaging.requirements import Requirement  # noqa: E402
from pydantic import ValidationError  # noqa: E402
from verl.experimental.agent_loop.agent_loop import (  # noqa: E402
    AgentLoopBase,
    AgentLoopOutput,
    DictConfigWrap,
    ToolListWrap,
    _agent_loop_registry,
)
from verl.utils.dataset.rl_dataset import RLHFDataset  # noqa: E402

from devices.rl.pool import EnvPool  # noqa: E402
from devices.rl.service import RolloutServer  # noqa: E402
from devices.rl.verl_adapter import AGENT_NAME, RealbenchAgentLoop  # noqa: E402
from realbench.agents.formats import get_format  # noqa: E402
from realbench.errors import ConfigError  # noqa: E402
from tests.rl_support import write_pack  # noqa: E402

sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "examples"))

import verl_agent_loop as example  # noqa: E402

REPLIES = ["Thought: back first\nAction: press_back()", "Thought: done\nAction: finished(content='')"]
PROMPT_LENGTH, RESPONSE_LENGTH = 2048, 4096


def _verl_supports_installed_transformers() -> bool:
    for spec in metadata.requires("verl") or []:
        req = Requirement(spec)
        if req.name == "transformers" and req.marker is None:
            return req.specifier.contains(metadata.version("transformers"), prereleases=True)
    return True


needs_supported_transformers = pytest.mark.skipif(
    not _verl_supports_installed_transformers(),
    reason=(
        "the installed transformers is outside verl's declared range (verl 0.9.1: <5.11); from 5.11 on "
        "a processor refuses text whose image placeholders it cannot count, and verl's "
        "AgentLoopWorker._compute_multi_modal_inputs decodes with skip_special_tokens=True, which drops "
        "Qwen's <|image_pad|>; `pip install -e .[verl]` resolves a transformers verl supports"
    ),
)


@pytest.fixture(scope="module")
def processor():
    from tiny_vlm import build_tiny_qwen2_vl

    policy = get_format("ui-tars").image_policy()
    proc, model = build_tiny_qwen2_vl(max_pixels=policy.max_pixels, min_pixels=policy.min_pixels)
    proc.hf_model_type = model.config.model_type
    return proc


def _config(url: str = "http://127.0.0.1:9", **realbench):
    config = example.verl_config(prompt_length=PROMPT_LENGTH, response_length=RESPONSE_LENGTH)
    config.realbench = {
        "service_url": url,
        "format": "ui-tars",
        "max_turns": 4,
        "short_side": 224,
        **realbench,
    }
    return config


def _instantiate(config, server, processor, entry=None):
    """The loop as verl's AgentLoopWorker._run_agent_loop makes it: its registry entry, instantiated
    by hydra with the worker's arguments."""
    return hydra.utils.instantiate(
        config=entry if entry is not None else _agent_loop_registry[AGENT_NAME],
        trainer_config=DictConfigWrap(config=config),
        server_manager=server,
        tokenizer=processor.tokenizer,
        processor=processor,
        hf_model_type=processor.hf_model_type,
        dataset_cls=RLHFDataset,
        data_config=DictConfigWrap(config.data),
        tools=ToolListWrap([]),
    )


@pytest.fixture(scope="module")
def service(tmp_path_factory):
    root = tmp_path_factory.mktemp("packs")
    pack = str(write_pack(root / "toy"))
    with EnvPool(backend="inline") as pool, RolloutServer(pool, pack_dirs=(root,)) as srv:
        yield srv, pack


def test_the_loop_is_registered_with_verls_own_registry():
    assert issubclass(RealbenchAgentLoop, AgentLoopBase)
    assert _agent_loop_registry[AGENT_NAME] == {"_target_": "devices.rl.verl_adapter.RealbenchAgentLoop"}
    # the registry file verl loads names the same class
    (entry,) = OmegaConf.load(example.REGISTRY)
    assert entry.name == AGENT_NAME and entry._target_ == _agent_loop_registry[AGENT_NAME]["_target_"]


def test_settings_come_from_the_registry_entry_or_the_trainer_config(processor):
    async def build():
        config = _config(max_turns=3)
        from_config = _instantiate(config, None, processor)
        entry = OmegaConf.create(
            {
                "name": AGENT_NAME,
                "_target_": "devices.rl.verl_adapter.RealbenchAgentLoop",
                "realbench": {"service_url": "http://h:1", "max_turns": 2},
            }
        )
        from_entry = _instantiate(config, None, processor, entry)
        del config["realbench"]
        # hydra wraps what the constructor raises
        with pytest.raises(InstantiationException, match="no `realbench` settings") as missing:
            _instantiate(config, None, processor)
        with pytest.raises(InstantiationException, match="colour") as unknown:
            _instantiate(_config(colour="red"), None, processor)
        return from_config, from_entry, missing.value.__cause__, unknown.value.__cause__

    from_config, from_entry, missing, unknown = asyncio.run(build())
    assert isinstance(missing, ConfigError) and isinstance(unknown, ValidationError)
    assert from_config.settings.max_turns == 3 and from_config.settings.service_url == "http://127.0.0.1:9"
    assert from_entry.settings.max_turns == 2 and from_entry.settings.service_url == "http://h:1"
    # verl's Continuous Token builder for the model type the worker passes
    assert type(from_config.continuous_token_builder).__name__ == "QwenVLContinuousTokenBuilder"


def test_progress_text_layout_is_one_step_per_sample(processor):
    async def build():
        return _instantiate(_config(format="qwen-mobile", max_turns=3), None, processor)

    with pytest.raises(InstantiationException, match="one token sequence") as err:
        asyncio.run(build())
    assert isinstance(err.value.__cause__, ConfigError)


def _image_tokens(processor, images) -> list[int]:
    """Image placeholder tokens per image, as the processor expands them."""
    grid = processor.image_processor(images=images)["image_grid_thw"]
    merge = processor.image_processor.merge_size**2
    return [int(g.prod()) // merge for g in grid]


@pytest.mark.browser
def test_episode_reaches_verl_as_one_masked_sequence(service, processor):
    srv, pack = service
    tok = processor.tokenizer
    config = _config(srv.url)
    server = example.scripted_server(config, tok, REPLIES)

    async def episode():
        loop = _instantiate(config, server, processor)
        return await loop.run(
            {"temperature": 1.0, "logprobs": True},
            extra_info={"pack": pack, "task_id": "buy-item", "seed": 3},
            raw_prompt=[],
        )

    out = asyncio.run(episode())
    assert type(out) is AgentLoopOutput
    # two turns: press_back, then finished() ends the episode on the environment
    assert len(server.calls) == 2 and out.extra_fields["steps"] == 2
    assert out.extra_fields["stopped_by"] == "environment" and out.num_turns == 4
    first, second = server.calls
    assert first["request_id"] == second["request_id"]  # one sticky session per episode
    assert first["prompt_ids"] == out.prompt_ids
    assert len(first["images"]) == 1 and len(second["images"]) == 2
    assert out.multi_modal_data["images"] == second["images"]

    ids, mask = out.response_ids, out.response_mask
    assert len(ids) == len(mask) == len(out.response_logprobs)
    reply_ids = [tok.encode(r, add_special_tokens=False) + [tok.eos_token_id] for r in REPLIES]
    # the second prompt is the whole sequence before the last reply: one growing token sequence
    assert second["prompt_ids"] == out.prompt_ids + ids[: len(ids) - len(reply_ids[1])]
    # mask 1 exactly on the tokens the server returned, each reply ended by the stop token
    assert [t for t, m in zip(ids, mask, strict=True) if m == 1] == reply_ids[0] + reply_ids[1]
    assert ids[: len(reply_ids[0])] == reply_ids[0] and ids[-len(reply_ids[1]) :] == reply_ids[1]
    assert out.response_logprobs == [-0.25 if m else 0.0 for m in mask]
    # the environment's turn (mask 0) holds the second screenshot's image tokens, expanded
    env_turn = [t for t, m in zip(ids, mask, strict=True) if m == 0]
    pad = tok.convert_tokens_to_ids("<|image_pad|>")
    per_image = _image_tokens(processor, out.multi_modal_data["images"])
    assert out.prompt_ids.count(pad) == per_image[0] and env_turn.count(pad) == per_image[1]
    assert tok.decode(env_turn, skip_special_tokens=False).startswith("\n<|im_start|>user\n<|vision_start|>")
    # the reward is the episode's return, step by step
    assert out.reward_score == pytest.approx(sum(out.extra_fields["turn_scores"]))
    assert len(out.extra_fields["turn_scores"]) == 2
    assert out.extra_fields["outcome"] in ("failure", "success")


@pytest.mark.browser
@needs_supported_transformers
def test_verl_worker_batch_carries_masks_images_and_reward(service, processor):
    """verl's AgentLoopWorker.generate_sequences end to end: the padded DataProto its trainer gets."""
    srv, pack = service
    config = _config(srv.url)
    server = example.scripted_server(config, processor.tokenizer, REPLIES)
    worker = example.agent_loop_worker(config, server, processor, processor.hf_model_type)
    rows = [{"pack": pack, "task_id": "buy-item", "seed": 3}]
    out = asyncio.run(worker.generate_sequences(example.batch(rows)))

    batch = out.batch
    assert batch["prompts"].shape == (1, PROMPT_LENGTH) and batch["responses"].shape == (1, RESPONSE_LENGTH)
    assert batch["input_ids"].shape == (1, PROMPT_LENGTH + RESPONSE_LENGTH)
    tok = processor.tokenizer
    prompt = server.calls[0]["prompt_ids"]
    last_reply = tok.encode(REPLIES[-1], add_special_tokens=False) + [tok.eos_token_id]
    response = server.calls[-1]["prompt_ids"][len(prompt) :] + last_reply
    # prompts left-padded, responses right-padded; the attention mask marks exactly the real tokens
    assert batch["prompts"][0, -len(prompt) :].tolist() == prompt
    assert batch["responses"][0, : len(response)].tolist() == response
    attention = batch["attention_mask"][0]
    assert int(attention[:PROMPT_LENGTH].sum()) == len(prompt)
    assert int(attention[PROMPT_LENGTH:].sum()) == len(response)
    real = len(response)
    mask = batch["response_mask"][0]
    assert int(mask[real:].sum()) == 0 and int(mask[real - len(last_reply) : real].sum()) == len(last_reply)
    n_model = sum(len(tok.encode(r, add_special_tokens=False)) + 1 for r in REPLIES)
    assert int(mask.sum()) == n_model
    # the reward sits on the last real response token
    rm = batch["rm_scores"][0]
    assert int((rm != 0).sum()) <= 1 and float(rm.sum()) == pytest.approx(float(rm[real - 1]))
    assert float(rm.sum()) == pytest.approx(sum(out.non_tensor_batch["turn_scores"][0]))
    # the images verl re-processes for the actor: one grid per screenshot
    mm = out.non_tensor_batch["multi_modal_inputs"][0]
    assert mm["image_grid_thw"].shape == (2, 3) and mm["pixel_values"].shape[0] == int(
        mm["image_grid_thw"].prod(-1).sum()
    )
    assert out.non_tensor_batch["__num_turns__"][0] == 4 and out.non_tensor_batch["steps"][0] == 2


@pytest.mark.browser
@pytest.mark.slow
@needs_supported_transformers
def test_example_runs_against_installed_verl(capsys):
    assert example.main(["--pack", "taskpacks/train_ticketing", "--seed", "0"]) == 0
    printed = capsys.readouterr().out
    assert "generate calls" in printed and "image_grid_thw" in printed
