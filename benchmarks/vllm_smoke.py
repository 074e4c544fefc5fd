"""GPU smoke test for the model path: a tiny randomly initialised Qwen2-VL-class model, served by
vLLM, driven through realbench's real client (agent steps and judge calls).

The model is built locally from a transformers config (no download): a byte-level BPE tokenizer
trained on a few sentences, with Qwen2-VL's special tokens and chat template, Qwen2-VL's image
processor, and random weights. Its outputs are noise, so most agent steps are format errors; what
is measured is the plumbing (images through the server, history windows, usage accounting) and
the latency/throughput of the serving path.

    python benchmarks/vllm_smoke.py make-model OUT/tiny-qwen2-vl [--check]
    python benchmarks/vllm_smoke.py serve-and-drive OUT/tiny-qwen2-vl --port 8011
    python benchmarks/vllm_smoke.py drive --base-url http://127.0.0.1:8011/v1 --model tiny
"""

from __future__ import annotations

import argparse
import asyncio
import io
import json
import statistics
import sys
import time
from pathlib import Path

SPECIAL_TOKENS = [
    "<|endoftext|>",
    "<|im_start|>",
    "<|im_end|>",
    "<|object_ref_start|>",
    "<|object_ref_end|>",
    "<|box_start|>",
    "<|box_end|>",
    "<|quad_start|>",
    "<|quad_end|>",
    "<|vision_start|>",
    "<|vision_end|>",
    "<|vision_pad|>",
    "<|image_pad|>",
    "<|video_pad|>",
]
CHAT_TEMPLATE = (
    "{% set image_count = namespace(value=0) %}{% set video_count = namespace(value=0) %}"
    "{% for message in messages %}{% if loop.first and message['role'] != 'system' %}"
    "<|im_start|>system\nYou are a helpful assistant.<|im_end|>\n{% endif %}"
    "<|im_start|>{{ message['role'] }}\n{% if message['content'] is string %}"
    "{{ message['content'] }}<|im_end|>\n{% else %}{% for content in message['content'] %}"
    "{% if content['type'] == 'image' or 'image' in content or 'image_url' in content %}"
    "{% set image_count.value = image_count.value + 1 %}<|vision_start|><|image_pad|><|vision_end|>"
    "{% elif content['type'] == 'video' or 'video' in content %}<|vision_start|><|video_pad|><|vision_end|>"
    "{% elif 'text' in content %}{{ content['text'] }}{% endif %}{% endfor %}<|im_end|>\n{% endif %}"
    "{% endfor %}{% if add_generation_prompt %}<|im_start|>assistant\n{% endif %}"
)
SERVER_MAX_PIXELS = 512 * 28 * 28
CORPUS = [
    "Thought: tap the search button. Action: click(start_box='(540,1200)')",
    '<tool_call>{"name": "mobile_use", "arguments": {"action": "click", "coordinate": [540, 1200]}}</tool_call>',
    '```json {"type": "click", "x": 500, "y": 300} ``` {"success": true, "reason": "done", "confidence": 0.9}',
    "预订明天北京到上海的二等座 查询 车票 提交订单 转账 余额 收款人 0123456789",
    "You are a GUI agent. The user query: open settings. Task progress: none yet.",
]


def make_tokenizer(out: Path):  # type: ignore[no-untyped-def]
    from tokenizers import Tokenizer, decoders, models, pre_tokenizers, trainers

    tok = Tokenizer(models.BPE())
    tok.pre_tokenizer = pre_tokenizers.ByteLevel(add_prefix_space=False)
    tok.decoder = decoders.ByteLevel()
    trainer = trainers.BpeTrainer(
        vocab_size=600, special_tokens=SPECIAL_TOKENS, initial_alphabet=pre_tokenizers.ByteLevel.alphabet()
    )
    tok.train_from_iterator(CORPUS * 20, trainer)
    try:
        from transformers import Qwen2TokenizerFast as TokenizerClass
    except ImportError:  # transformers 5 folds the fast tokenizer into Qwen2Tokenizer
        from transformers import Qwen2Tokenizer as TokenizerClass  # type: ignore[assignment,no-redef]
    hf = TokenizerClass(
        tokenizer_object=tok,
        eos_token="<|im_end|>",
        pad_token="<|endoftext|>",
        unk_token=None,
        bos_token=None,
    )
    hf.chat_template = CHAT_TEMPLATE
    return hf


def make_model(out: Path, check: bool = False) -> None:
    import torch
    from transformers import (
        Qwen2VLConfig,
        Qwen2VLForConditionalGeneration,
        Qwen2VLImageProcessor,
        Qwen2VLProcessor,
    )

    out.mkdir(parents=True, exist_ok=True)
    tokenizer = make_tokenizer(out)
    ids = {t: tokenizer.convert_tokens_to_ids(t) for t in SPECIAL_TOKENS}
    vocab = ((len(tokenizer) + 63) // 64) * 64
    text = {
        "vocab_size": vocab,
        "hidden_size": 128,
        "intermediate_size": 256,
        "num_hidden_layers": 2,
        "num_attention_heads": 2,  # head_dim 64: a size every attention backend supports
        "num_key_value_heads": 1,
        "max_position_embeddings": 8192,
        "rope_theta": 1_000_000.0,
        "rope_scaling": {"type": "mrope", "mrope_section": [8, 12, 12]},
        "tie_word_embeddings": True,
        "bos_token_id": ids["<|endoftext|>"],
        "eos_token_id": ids["<|im_end|>"],
    }
    vision = {
        "depth": 2,
        "embed_dim": 64,
        "hidden_size": 128,
        "num_heads": 1,
        "mlp_ratio": 2,
        "patch_size": 14,
        "spatial_merge_size": 2,
        "temporal_patch_size": 2,
        "in_channels": 3,
    }
    tokens = {
        "image_token_id": ids["<|image_pad|>"],
        "video_token_id": ids["<|video_pad|>"],
        "vision_start_token_id": ids["<|vision_start|>"],
        "vision_end_token_id": ids["<|vision_end|>"],
    }
    try:  # transformers ≥ 4.53 nests the language model's settings
        config = Qwen2VLConfig(text_config=text, vision_config=vision, **tokens, torch_dtype="bfloat16")
    except TypeError:
        config = Qwen2VLConfig(**text, vision_config=vision, **tokens, torch_dtype="bfloat16")
    # older releases read the language settings from the top level; keep both in the saved file
    for key, value in text.items():
        if not hasattr(config, key):
            setattr(config, key, value)
    torch.manual_seed(0)
    model = Qwen2VLForConditionalGeneration(config).to(torch.bfloat16)
    model.generation_config.eos_token_id = ids["<|im_end|>"]
    model.generation_config.pad_token_id = ids["<|endoftext|>"]
    model.save_pretrained(out)
    image_processor = Qwen2VLImageProcessor(min_pixels=56 * 56, max_pixels=512 * 28 * 28)
    extra: dict = {}
    try:  # transformers ≥ 4.52 wants a video processor beside the image processor
        from transformers import Qwen2VLVideoProcessor

        extra["video_processor"] = Qwen2VLVideoProcessor()
    except ImportError:
        pass
    processor = Qwen2VLProcessor(
        image_processor=image_processor, tokenizer=tokenizer, chat_template=CHAT_TEMPLATE, **extra
    )
    processor.save_pretrained(out)
    tokenizer.save_pretrained(out)
    n_params = sum(p.numel() for p in model.parameters())
    print(f"tiny Qwen2-VL written to {out}: {n_params / 1e6:.2f}M parameters, vocab {vocab}", flush=True)
    if check:
        _check_with_transformers(out)


def _check_with_transformers(out: Path) -> None:
    """One generation through transformers on the GPU (when present): the files load and run."""
    import torch
    from PIL import Image
    from transformers import AutoProcessor, Qwen2VLForConditionalGeneration

    device = "cuda" if torch.cuda.is_available() else "cpu"
    processor = AutoProcessor.from_pretrained(out)
    model = Qwen2VLForConditionalGeneration.from_pretrained(out, torch_dtype=torch.bfloat16).to(device)
    messages = [{"role": "user", "content": [{"type": "image"}, {"type": "text", "text": "Tap search."}]}]
    prompt = processor.apply_chat_template(messages, add_generation_prompt=True)
    image = Image.new("RGB", (540, 1200), (40, 90, 160))
    inputs = processor(text=[prompt], images=[image], return_tensors="pt").to(device)
    t0 = time.perf_counter()
    with torch.no_grad():
        generated = model.generate(**inputs, max_new_tokens=16, do_sample=False)
    dt = time.perf_counter() - t0
    new = generated[0, inputs["input_ids"].shape[1] :]
    print(
        f"transformers check on {device}: prompt {inputs['input_ids'].shape[1]} tokens "
        f"(image grid {inputs['image_grid_thw'].tolist()}), {len(new)} new tokens in {dt:.2f}s",
        flush=True,
    )


def _screens(n: int) -> list:
    from PIL import Image

    from realbench.observation import Observation, Screenshot

    out = []
    for i in range(n):
        buf = io.BytesIO()
        Image.new("RGB", (1080, 2400), (20 * i % 255, 120, 200)).save(buf, format="PNG")
        out.append(Observation(screenshot=Screenshot.from_bytes(buf.getvalue())))
    return out


def _pct(values: list[float], q: float) -> float:
    ordered = sorted(values)
    return ordered[min(len(ordered) - 1, int(q * len(ordered)))]


def drive(base_url: str, model: str, steps: int, concurrency: int, judge_calls: int, fmt: str) -> dict:
    from realbench.actions import Click
    from realbench.agent import HistoryItem
    from realbench.agents.client import ChatEndpoint
    from realbench.agents.images import ImagePolicy
    from realbench.agents.openai_agent import OpenAIAgent, OpenAIAgentConfig
    from realbench.judge.vlm import VLMJudge, VLMJudgeConfig
    from realbench.taskpack import parse_pack
    from realbench.trajectory import Trajectory, TrajectoryStep

    endpoint = ChatEndpoint(base_url=base_url, model=model, max_tokens=48, timeout_s=120, max_retries=1)
    screens = _screens(4)
    agents = [
        # the server's pixel limit (serve_and_drive): the server must never resize again
        OpenAIAgent(
            OpenAIAgentConfig(
                endpoint=endpoint,
                format=fmt,
                image_window=3,
                images=ImagePolicy(max_pixels=SERVER_MAX_PIXELS),
            )
        )
        for _ in range(concurrency)
    ]
    for a in agents:
        a.start("打开设置并开启消息通知")

    async def episode(agent: OpenAIAgent) -> list:
        history: list[HistoryItem] = []
        out = []
        for i in range(steps):
            step = await agent.aact(screens[i % len(screens)], history)
            out.append(step)
            history.append(
                HistoryItem(i, step.action or Click(x=500, y=500), step.thought, screens[i % len(screens)])
            )
        return out

    async def all_episodes() -> list:
        return await asyncio.gather(*(episode(a) for a in agents))

    t0 = time.perf_counter()
    results = asyncio.run(all_episodes())
    wall = time.perf_counter() - t0
    flat = [s for r in results for s in r]
    lat = [s.latency_s for s in flat]
    tokens_in = sum(s.tokens_in for s in flat)
    tokens_out = sum(s.tokens_out for s in flat)
    agent_report = {
        "agent steps": len(flat),
        "concurrency": concurrency,
        "format_errors": sum(s.action is None for s in flat),
        "latency_p50_s": round(statistics.median(lat), 3),
        "latency_p95_s": round(_pct(lat, 0.95), 3),
        "steps_per_s": round(len(flat) / wall, 2),
        "prompt_tokens": tokens_in,
        "completion_tokens": tokens_out,
        "prompt_tokens_per_step": round(tokens_in / len(flat), 1),
        "completion_tokens_per_s": round(tokens_out / wall, 1),
        "prompt_hash": flat[0].extra["prompt_hash"],
    }
    for a in agents:
        a.close()

    pack = parse_pack(
        {
            "app": "smoke",
            "clone": "smoke",
            "real_app": {"package": "com.example.smoke", "name": "smoke"},
            "tasks": [
                {
                    "id": "notify",
                    "instruction": "打开消息通知",
                    "difficulty": 1,
                    "clone": {"verifier": {"name": "v"}},
                    "judge": {"rubric": "Notifications are on in the final screen."},
                    "golden": [{"terminate": "success"}],
                }
            ],
        }
    )
    judge = VLMJudge(VLMJudgeConfig(name="smoke-judge", endpoint=endpoint, images=3, max_attempts=2))
    trajs = [
        Trajectory(
            task_id="notify",
            instruction=f"打开消息通知 #{k}",
            steps=[
                TrajectoryStep(
                    index=i,
                    action={"type": "click", "x": 100 * i, "y": 500},
                    screenshot=screens[i].screenshot.data,
                )
                for i in range(3)
            ],
            final_screenshot=screens[3].screenshot.data,
        )
        for k in range(judge_calls)
    ]

    async def judge_all() -> list:
        return await asyncio.gather(*(judge.ajudge(pack.tasks[0], t) for t in trajs))

    t0 = time.perf_counter()
    verdicts = asyncio.run(judge_all())
    judge_wall = time.perf_counter() - t0
    judge.close()
    judge_report = {
        "judge calls": len(verdicts),
        "abstained": sum(v.abstained for v in verdicts),
        "wall_s": round(judge_wall, 2),
        "tokens": sum(v.tokens or 0 for v in verdicts),
    }
    report = {"agent": agent_report, "judge": judge_report}
    print(f"agent steps: {json.dumps(agent_report)}", flush=True)
    print(f"judge calls: {json.dumps(judge_report)}", flush=True)
    return report


def serve_and_drive(model_dir: Path, port: int, args: argparse.Namespace) -> int:
    from realbench.agents.serve import ServeConfig, start_server, stop_server, wait_for_endpoint

    cfg = ServeConfig(
        model=str(model_dir),
        served_name="tiny",
        port=port,
        max_model_len=8192,
        max_num_seqs=32,
        gpu_memory_utilization=args.gpu_mem,
        max_images=3,
        max_pixels=SERVER_MAX_PIXELS,
        extra_args=["--enforce-eager"],  # skip CUDA-graph capture: the model is tiny, start-up dominates
    )
    log_path = model_dir.parent / "vllm.log"
    t0 = time.perf_counter()
    process = start_server(cfg, log_path=log_path)
    try:
        models = wait_for_endpoint(
            cfg.base_url, timeout_s=args.ready_timeout, process=process, log_path=log_path
        )
        print(f"vLLM ready in {time.perf_counter() - t0:.1f}s serving {models}", flush=True)
        report = drive(cfg.base_url, "tiny", args.steps, args.concurrency, args.judge_calls, args.format)
        (model_dir.parent / "vllm_smoke.json").write_text(json.dumps(report, indent=1))
    finally:
        stop_server(process)
    return 0


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    sub = parser.add_subparsers(dest="cmd", required=True)
    p = sub.add_parser("make-model")
    p.add_argument("out", type=Path)
    p.add_argument("--check", action="store_true", help="also run one generation with transformers")
    for name in ("drive", "serve-and-drive"):
        q = sub.add_parser(name)
        if name == "drive":
            q.add_argument("--base-url", required=True)
            q.add_argument("--model", required=True)
        else:
            q.add_argument("model_dir", type=Path)
            q.add_argument("--port", type=int, default=8011)
            q.add_argument("--gpu-mem", type=float, default=0.3)
            q.add_argument("--ready-timeout", type=float, default=600)
        q.add_argument("--steps", type=int, default=6)
        q.add_argument("--concurrency", type=int, default=8)
        q.add_argument("--judge-calls", type=int, default=8)
        q.add_argument("--format", default="qwen-mobile")
    args = parser.parse_args(argv)
    if args.cmd == "make-model":
        make_model(args.out, check=args.check)
        return 0
    if args.cmd == "drive":
        drive(args.base_url, args.model, args.steps, args.concurrency, args.judge_calls, args.format)
        return 0
    return serve_and_drive(args.model_dir, args.port, args)


if __name__ == "__main__":
    sys.exit(main())
