"""GRPOTrainer's rollout hook on live clone environments: whole episodes, each step prompted by
the shared prompt builder, the episode's return as GRPO's reward."""

from __future__ import annotations

from typing import Any

import pytest

from devices.rl.host import acquire_shared_host, release_shared_host
from devices.rl.trl_adapter import (
    CloneEpisodeRollout,
    Sample,
    clone_states,
    episode_return_reward,
    prompt_key,
)
from realbench.errors import ConfigError

PACK = "taskpacks/train_ticketing"
FMT = "qwen-mobile"
CLICK = '<tool_call>\n{"name": "mobile_use", "arguments": {"action": "click", "coordinate": [%d, %d]}}\n</tool_call>'
GIVE_UP = '<tool_call>\n{"name": "mobile_use", "arguments": {"action": "terminate", "status": "fail"}}\n</tool_call>'


@pytest.fixture(scope="module", autouse=True)
def one_browser_for_the_module():
    """Holds the process's shared environment host for the module, so its Chromium starts once
    (each start under heavy load is a chance to time out; a failed start is retried, waiting
    longer, by BrowserPool)."""
    host = acquire_shared_host()
    yield host
    release_shared_host(host)


class ScriptedSampler:
    """Stands in for the trainer's model: says the scripted texts and keeps every prompt it saw."""

    def __init__(self, texts: list[str]) -> None:
        self.texts = texts
        self.seen: list[tuple[list[dict[str, Any]], list[Any]]] = []

    def __call__(self, trainer: Any, prompt: list[dict[str, Any]], images: list[Any]) -> Sample:
        self.seen.append((prompt, images))
        text = self.texts[(len(self.seen) - 1) % len(self.texts)]
        n = len(self.seen)
        return Sample(ids=[n, n], completion=[100 + n], logprobs=[-0.5], text=text)


def _as_trainer_prompt(row: dict[str, Any]) -> list[dict[str, Any]]:
    """The row's prompt as GRPOTrainer hands it to the hook: images inlined in order."""
    images = iter(row["images"])
    return [
        {
            "role": m["role"],
            "content": [
                {"type": "image", "image": next(images)} if p["type"] == "image" else p for p in m["content"]
            ],
        }
        for m in row["prompt"]
    ]


@pytest.mark.browser
def test_each_rollout_is_a_whole_episode_prompted_like_run():
    states = clone_states(pack=PACK, seeds=range(2), fmt=FMT, short_side=224)
    assert len(states.rows) >= 1
    sampler = ScriptedSampler([CLICK % (10, 10), CLICK % (20, 20), GIVE_UP])
    rollout = CloneEpisodeRollout(states, pack=PACK, fmt=FMT, max_steps=5, short_side=224, sampler=sampler)
    try:
        row = states.rows[0]
        out = rollout([_as_trainer_prompt(row), _as_trainer_prompt(row)], trainer=None)
    finally:
        rollout.close()
    # two episodes of three steps each: click, click, give up (terminate ends the episode)
    assert [len(e.texts) for e in rollout.episodes] == [3, 3]
    assert all(e.format_errors == 0 for e in rollout.episodes)
    assert rollout.episodes[0].outcome is not None and not rollout.episodes[0].success
    # the first step's prompt is the dataset row's own (the trainer conditions the loss on it)
    first_prompt, first_images = sampler.seen[0]
    assert prompt_key(first_prompt, first_images) == row["key"]
    # later steps are the shared builder's prompts for that step: the history shows the clicks
    third_prompt, third_images = sampler.seen[2]
    history = third_prompt[1]["content"][0]["text"]
    assert "Step 1:" in history and "Step 2:" in history
    assert "Step 1:" not in first_prompt[1]["content"][0]["text"]
    assert len(third_images) >= 1
    # what GRPO gets: the first step's tokens per row, credited with the whole episode's return
    assert out["prompt_ids"] == [[1, 1], [4, 4]]
    assert out["completion_ids"] == [[101], [104]]
    assert out["logprobs"] == [[-0.5], [-0.5]]
    assert out["episode_steps"] == [3, 3]
    returns = [e.episode_return for e in rollout.episodes]
    assert out["episode_return"] == pytest.approx(returns)
    assert episode_return_reward([None, None], out["episode_return"]) == pytest.approx(returns)


@pytest.mark.browser
def test_a_prompt_from_elsewhere_is_refused():
    states = clone_states(pack=PACK, seeds=[0], fmt=FMT, short_side=224)
    rollout = CloneEpisodeRollout(
        states, pack=PACK, fmt=FMT, max_steps=1, short_side=224, sampler=ScriptedSampler([GIVE_UP])
    )
    try:
        stranger = _as_trainer_prompt(states.rows[0])
        stranger[1]["content"][0] = {"type": "text", "text": "another task"}
        with pytest.raises(ConfigError, match="not one of these clone states"):
            rollout([stranger], trainer=None)
    finally:
        rollout.close()


class TokenizingSampler(ScriptedSampler):
    """Says scripted texts, tokenized by the trainer's own processor as the default sampler would
    (so the trainer can score the rows), and keeps each step's prompt ids."""

    def __call__(self, trainer: Any, prompt: list[dict[str, Any]], images: list[Any]) -> Sample:
        self.seen.append((prompt, images))
        text = self.texts[(len(self.seen) - 1) % len(self.texts)]
        processor = trainer.processing_class
        chat = processor.apply_chat_template(prompt, add_generation_prompt=True, tokenize=False)
        ids = [int(t) for t in processor(text=[chat], images=images, return_tensors="pt")["input_ids"][0]]
        completion = processor.tokenizer.encode(text) + [processor.tokenizer.eos_token_id]
        return Sample(ids=ids, completion=completion, logprobs=[-0.5] * len(completion), text=text)


@pytest.mark.browser
def test_every_step_of_an_episode_enters_the_loss(tmp_path):
    pytest.importorskip("trl")
    import sys
    from pathlib import Path

    from trl import GRPOConfig

    from devices.rl.trl_trainer import EpisodeGRPOTrainer
    from realbench.agents.formats import get_format

    sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "examples"))
    from tiny_vlm import build_tiny_qwen2_vl

    policy = get_format(FMT).image_policy()
    states = clone_states(pack=PACK, seeds=[0], fmt=FMT, short_side=224)
    processor, model = build_tiny_qwen2_vl(max_pixels=policy.max_pixels, min_pixels=policy.min_pixels)
    # episode 1: click, click, give up (3 steps); episode 2: unparseable text, give up (2 steps)
    sampler = TokenizingSampler([CLICK % (10, 10), CLICK % (20, 20), GIVE_UP, "no action here", GIVE_UP])
    rollout = CloneEpisodeRollout(states, pack=PACK, fmt=FMT, max_steps=5, short_side=224, sampler=sampler)
    config = GRPOConfig(
        output_dir=str(tmp_path),
        per_device_train_batch_size=2,
        num_generations=2,
        max_completion_length=64,
        beta=0.0,
        report_to=[],
        use_cpu=True,
        bf16=False,
        save_strategy="no",
    )
    try:
        trainer = EpisodeGRPOTrainer(
            model=model,
            processing_class=processor,
            reward_funcs=[episode_return_reward],
            rollout_func=rollout,
            args=config,
            train_dataset=states.dataset(),
        )
        row = states.dataset()[0]
        out = trainer._generate_and_score_completions([row, row])
    finally:
        rollout.close()
    assert [len(e.texts) for e in rollout.episodes] == [3, 2]
    # one loss row per played step, each the step's own prompt and completion, in order
    assert out["completion_ids"].shape[0] == 5 == len(sampler.seen)
    for index, (prompt_ids, mask) in enumerate(zip(out["prompt_ids"], out["prompt_mask"], strict=True)):
        expected = trainer.processing_class(
            text=[
                processor.apply_chat_template(
                    sampler.seen[index][0], add_generation_prompt=True, tokenize=False
                )
            ],
            images=sampler.seen[index][1],
            return_tensors="pt",
        )["input_ids"][0]
        assert prompt_ids[mask.bool()].tolist() == expected.tolist()
    # the later steps' prompts carry their own history (not the dataset row's prompt)
    assert "Step 1:" in sampler.seen[2][0][1]["content"][0]["text"]
    assert out["num_images"] == [len(images) for _, images in sampler.seen]
    # every step carries its episode's advantage; the two episodes of the group are compared
    returns = [e.episode_return for e in rollout.episodes]
    assert returns[0] != returns[1]
    advantages = out["advantages"].tolist()
    assert advantages[0] == advantages[1] == advantages[2]
    assert advantages[3] == advantages[4]
    assert (advantages[0] > advantages[3]) == (returns[0] > returns[1])
    assert advantages[0] + advantages[3] == pytest.approx(0.0, abs=1e-4)
