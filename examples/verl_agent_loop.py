"""realbench clone episodes as a verl agent loop, run through verl's own classes.

On a GPU machine, point verl at the loop's registry file and at a running rollout service:

    realbench rollout-service --port 8770 &
    python -m verl.trainer.main_ppo ... \\
        actor_rollout_ref.rollout.mode=async \\
        actor_rollout_ref.rollout.agent.agent_loop_config_path=examples/verl_agent_loop.yaml \\
        data.train_files=DATA.parquet \\
        +realbench.service_url=http://127.0.0.1:8770 +realbench.format=ui-tars +realbench.max_turns=8
    # DATA rows: agent_name=realbench_clone, extra_info={pack, task_id, seed}

On a CPU (this script): one batch through verl's `AgentLoopWorker.generate_sequences` with verl's
default trainer config, the registry file above, a tiny Qwen2-VL processor built on the spot (no
download) and a rollout service in this process. Only the inference server is not real: a
SCRIPTED subclass of verl's `LLMServerClient` answers with fixed UI-TARS actions (verl's servers
are vLLM/SGLang engines). It prints the padded batch verl's trainer would receive.

    python examples/verl_agent_loop.py [--pack taskpacks/train_ticketing] [--task ID] [--seed 0]
"""

from __future__ import annotations

import argparse
import asyncio
import sys
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parent))
sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

REGISTRY = Path(__file__).resolve().with_suffix(".yaml")
SCRIPT = [
    "Thought: look at the list first\nAction: scroll(point='<point>200 400</point>', direction='down')",
    "Thought: go back\nAction: press_back()",
    "Thought: nothing more to do\nAction: finished(content='')",
]


def scripted_server(config: Any, tokenizer: Any, replies: list[str]) -> Any:
    """A SCRIPTED inference server behind verl's own client interface (`LLMServerClient`): each
    generate() returns the next reply, tokenized by the real tokenizer and ended with the stop
    token a chat model emits, as verl's `TokenOutput`. It records what verl sent it."""
    from verl.workers.rollout.llm_server import LLMServerClient
    from verl.workers.rollout.replica import TokenOutput

    class ScriptedLLMServer(LLMServerClient):  # type: ignore[misc]
        """SCRIPTED stand-in for verl's vLLM/SGLang servers (no model runs)."""

        def __init__(self) -> None:
            super().__init__(config, load_balancer_handle=None)
            self.calls: list[dict[str, Any]] = []

        async def generate(  # type: ignore[override]
            self,
            request_id: str,
            *,
            prompt_ids: list[int],
            sampling_params: dict[str, Any],
            image_data: list[Any] | None = None,
            video_data: list[Any] | None = None,
            audio_data: list[Any] | None = None,
            mm_processor_kwargs: dict[str, Any] | None = None,
            **kwargs: Any,
        ) -> Any:
            self.calls.append(
                {
                    "request_id": request_id,
                    "prompt_ids": list(prompt_ids),
                    "images": list(image_data or []),
                    "sampling_params": dict(sampling_params),
                }
            )
            text = replies[min(len(self.calls), len(replies)) - 1]
            ids = tokenizer.encode(text, add_special_tokens=False) + [tokenizer.eos_token_id]
            logprobs = [-0.25] * len(ids) if sampling_params.get("logprobs") else None
            return TokenOutput(token_ids=ids, log_probs=logprobs)

    return ScriptedLLMServer()


def verl_config(*, prompt_length: int, response_length: int) -> Any:
    """verl's own default PPO trainer config, with the rollout lengths and this registry file."""
    import verl
    from omegaconf import OmegaConf

    config = OmegaConf.load(Path(verl.__file__).parent / "trainer/config/_generated_ppo_trainer.yaml")
    rollout = config.actor_rollout_ref.rollout
    rollout.name = "vllm"
    rollout.prompt_length = prompt_length
    rollout.response_length = response_length
    rollout.agent.agent_loop_config_path = str(REGISTRY)
    return config


def agent_loop_worker(config: Any, server: Any, processor: Any, hf_model_type: str) -> Any:
    """verl's `AgentLoopWorker`, set up as its __init__ does but with the processor given instead
    of loaded from a checkpoint path (`HFModelConfig`), and the registry file loaded the same way."""
    from omegaconf import OmegaConf
    from verl.experimental.agent_loop.agent_loop import AgentLoopWorker, _agent_loop_registry
    from verl.utils.config import omega_conf_to_dataclass
    from verl.utils.dataset.rl_dataset import get_dataset_class

    worker = object.__new__(AgentLoopWorker)
    worker.config = config
    worker.llm_client = server
    worker.teacher_client = None
    worker.reward_loop_worker_handles = None
    worker.rollout_config = omega_conf_to_dataclass(config.actor_rollout_ref.rollout)
    worker.dataset_cls = get_dataset_class(config.data)
    worker.tokenizer = processor.tokenizer
    worker.processor = processor
    worker.hf_model_type = hf_model_type
    worker.mm_processor_kwargs = config.data.get("mm_processor_kwargs", {})
    worker.distillation_enabled = False
    worker.tools = []
    for entry in OmegaConf.load(worker.rollout_config.agent.agent_loop_config_path):
        _agent_loop_registry[entry.name] = entry
    return worker


def batch(rows: list[dict[str, Any]]) -> Any:
    """A DataProto of dataset rows as verl's RLHFDataset gives them to the worker."""
    import numpy as np
    from verl.protocol import DataProto

    def column(values: list[Any]) -> Any:
        out = np.empty(len(values), dtype=object)
        out[:] = values
        return out

    return DataProto.from_dict(
        non_tensors={
            "agent_name": column(["realbench_clone"] * len(rows)),
            "raw_prompt": column([[{"role": "user", "content": "realbench clone task"}] for _ in rows]),
            "index": column(list(range(len(rows)))),
            "extra_info": column(list(rows)),
        },
        meta_info={"global_steps": 0, "validate": False},
    )


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--pack", default="taskpacks/train_ticketing")
    parser.add_argument("--task", default=None)
    parser.add_argument("--seed", type=int, default=0)
    args = parser.parse_args(argv)

    from tiny_vlm import build_tiny_qwen2_vl

    from devices.rl.pool import EnvPool
    from devices.rl.service import RolloutServer
    from realbench.agents.formats import get_format

    policy = get_format("ui-tars").image_policy()
    processor, model = build_tiny_qwen2_vl(max_pixels=policy.max_pixels, min_pixels=policy.min_pixels)
    config = verl_config(prompt_length=2048, response_length=4096)
    server = scripted_server(config, processor.tokenizer, SCRIPT)
    with EnvPool(backend="inline") as pool, RolloutServer(pool) as service:
        # the `+realbench.*` overrides of a verl command line
        config.realbench = {
            "service_url": service.url,
            "format": "ui-tars",
            "max_turns": len(SCRIPT),
            "short_side": 224,
        }
        worker = agent_loop_worker(config, server, processor, model.config.model_type)
        rows = [{"pack": args.pack, "task_id": args.task, "seed": args.seed}]
        out = asyncio.run(worker.generate_sequences(batch(rows)))
    mask = out.batch["response_mask"][0]
    attention = out.batch["attention_mask"][0]
    mm = out.non_tensor_batch["multi_modal_inputs"][0]
    print(
        f"{out.non_tensor_batch['steps'][0]} turns ({len(server.calls)} generate calls), "
        f"outcome {out.non_tensor_batch['outcome'][0]}, "
        f"reward {float(out.batch['rm_scores'][0].sum()):.3f}; "
        f"input_ids {tuple(out.batch['input_ids'].shape)}, {int(attention.sum())} real tokens, "
        f"{int(mask.sum())} written by the model; image_grid_thw {mm['image_grid_thw'].tolist()}"
    )
    return 0


if __name__ == "__main__":
    sys.exit(main())
