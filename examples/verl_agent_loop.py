"""realbench clone episodes as a verl agent loop.

On a GPU machine with verl installed, point verl at the loop and at a running rollout service:

    realbench rollout-service --port 8770 &
    python -m verl.trainer.main_ppo ... \\
        actor_rollout_ref.rollout.mode=async \\
        actor_rollout_ref.rollout.agent.agent_loop_config_path=examples/verl_agent_loop.yaml \\
        data.train_files=DATA.parquet  # rows: agent_name=realbench_clone, extra_info={pack, task_id, seed}
        +realbench.service_url=http://127.0.0.1:8770 +realbench.format=ui-tars +realbench.max_turns=8

On a CPU (this script): one episode through the same loop, with a SCRIPTED server manager standing
in for verl's inference servers (it answers with fixed UI-TARS actions) and a tiny random
Qwen2-VL's processor for tokenization, to show the sequence and masks verl would train on.

    python examples/verl_agent_loop.py [--pack taskpacks/train_ticketing] [--task ID] [--seed 0]
"""

from __future__ import annotations

import argparse
import asyncio
import sys
from dataclasses import dataclass
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))
sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

SCRIPT = [
    "Thought: look at the list first\nAction: scroll(point='<point>200 400</point>', direction='down')",
    "Thought: go back\nAction: press_back()",
    "Thought: nothing more to do\nAction: finished(content='')",
]


@dataclass
class ScriptedOutput:
    token_ids: list[int]
    log_probs: list[float]


class ScriptedServerManager:
    """STAND-IN for verl's server manager: replies with the next line of SCRIPT."""

    def __init__(self, tokenizer) -> None:  # type: ignore[no-untyped-def]
        self.tokenizer = tokenizer
        self.calls = 0

    async def generate(self, request_id, *, prompt_ids, sampling_params, image_data=None, **kwargs):  # type: ignore[no-untyped-def]
        text = SCRIPT[min(self.calls, len(SCRIPT) - 1)]
        self.calls += 1
        ids = self.tokenizer.encode(text, add_special_tokens=False)
        return ScriptedOutput(token_ids=ids, log_probs=[0.0] * len(ids))


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--pack", default="taskpacks/train_ticketing")
    parser.add_argument("--task", default=None)
    parser.add_argument("--seed", type=int, default=0)
    args = parser.parse_args(argv)

    from tiny_vlm import build_tiny_qwen2_vl

    from devices.rl.pool import EnvPool
    from devices.rl.service import RolloutServer
    from devices.rl.verl_adapter import VERL_AVAILABLE, RealbenchAgentLoop
    from realbench.agents.formats import get_format

    policy = get_format("ui-tars").image_policy()
    processor, _ = build_tiny_qwen2_vl(max_pixels=policy.max_pixels, min_pixels=policy.min_pixels)
    with EnvPool(backend="inline") as pool, RolloutServer(pool) as server:
        manager = ScriptedServerManager(processor.tokenizer)
        loop = RealbenchAgentLoop(
            server_manager=manager,
            processor=processor,
            realbench={
                "service_url": server.url,
                "format": "ui-tars",
                "max_turns": len(SCRIPT),
                "short_side": 224,
            },
        )
        out = asyncio.run(
            loop.run(
                {"temperature": 1.0}, extra_info={"pack": args.pack, "task_id": args.task, "seed": args.seed}
            )
        )
    print(f"verl installed: {VERL_AVAILABLE} (otherwise AgentLoopBase/AgentLoopOutput are stand-ins)")
    print(
        f"{out.extra_fields['steps']} turns, outcome {out.extra_fields['outcome']}, reward {out.reward_score}; "
        f"prompt {len(out.prompt_ids)} tokens, response {len(out.response_ids)} tokens "
        f"({sum(out.response_mask)} written by the model, {len(out.response_mask) - sum(out.response_mask)} "
        f"by the environment), {len(out.multi_modal_data['images'])} screenshots"
    )
    return 0


if __name__ == "__main__":
    sys.exit(main())
