"""examples/trl_grpo.py really trains: two GRPO steps of a tiny random Qwen2-VL on live clone
environments, on the CPU, through GRPOTrainer's rollout hook (about 15 s on two shared cores)."""

from __future__ import annotations

import importlib.util
import re
import sys
from pathlib import Path

import pytest

EXAMPLE = Path(__file__).resolve().parents[1] / "examples" / "trl_grpo.py"


@pytest.mark.slow
@pytest.mark.browser
def test_two_grpo_steps_on_the_clone(capsys):
    spec = importlib.util.spec_from_file_location("trl_grpo_example", EXAMPLE)
    assert spec is not None and spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    sys.modules["trl_grpo_example"] = module
    spec.loader.exec_module(module)
    assert module.main(["--steps", "2"]) == 0
    out = capsys.readouterr().out
    assert "step 1: loss" in out and "step 2: loss" in out
    # every rollout was an episode on a clone environment, of more than one step
    played = re.search(
        r"(\d+) episodes played on the clone \((\d+) steps.*, (\d+) step rows in the loss", out
    )
    assert played is not None, out
    episodes, steps, trained = (int(g) for g in played.groups())
    assert episodes == 4
    assert steps > episodes
    assert trained == steps  # every step of every episode entered GRPO's loss


def test_prompts_are_the_run_commands_prompts():
    """The dataset's prompt is `build_messages`' (what `realbench run` sends), images as placeholders."""
    from devices.rl.trl_adapter import trl_prompt
    from realbench.agents.formats import get_format
    from realbench.agents.images import ImageSize, PreparedImage
    from realbench.agents.prompt import build_messages

    image = PreparedImage(
        data_url="data:image/png;base64,AA==", size=ImageSize(56, 112), original=ImageSize(56, 112), data=b""
    )
    fmt = get_format("qwen-mobile")
    messages = build_messages(fmt, "买票", [], image, image_window=1)
    prompt, count = trl_prompt(messages)
    assert count == 1
    assert prompt[0]["content"][0]["text"] == fmt.system_prompt(image.size)
    assert prompt[1]["content"][0]["text"] == messages[1]["content"][0]["text"]
    assert prompt[1]["content"][1] == {"type": "image"}
