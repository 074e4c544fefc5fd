"""A tiny randomly initialised Qwen2-VL, built on the spot (no download), for examples and tests
that exercise a training loop end to end on a CPU. Its outputs are noise: it shows that the
plumbing runs, never that anything is learned.

    processor, model = build_tiny_qwen2_vl(max_pixels=...)
"""

from __future__ import annotations

from typing import Any

SPECIAL_TOKENS = [
    "<|endoftext|>",
    "<|im_start|>",
    "<|im_end|>",
    "<|vision_start|>",
    "<|vision_end|>",
    "<|vision_pad|>",
    "<|image_pad|>",
    "<|video_pad|>",
]
# Qwen2-VL's chat template, reduced to text and images.
CHAT_TEMPLATE = (
    "{% for message in messages %}{% if loop.first and message['role'] != 'system' %}"
    "<|im_start|>system\nYou are a helpful assistant.<|im_end|>\n{% endif %}"
    "<|im_start|>{{ message['role'] }}\n{% if message['content'] is string %}"
    "{{ message['content'] }}<|im_end|>\n{% else %}{% for content in message['content'] %}"
    "{% if content['type'] == 'image' or 'image' in content or 'image_url' in content %}"
    "<|vision_start|><|image_pad|><|vision_end|>"
    "{% elif 'text' in content %}{{ content['text'] }}{% endif %}{% endfor %}<|im_end|>\n{% endif %}"
    "{% endfor %}{% if add_generation_prompt %}<|im_start|>assistant\n{% endif %}"
)
CORPUS = [
    "Thought: tap the search button.\nAction: click(point='<point>540 1200</point>')",
    "Action: type(content='北京\\n') press_back() press_home() finished(content='')",
    '<tool_call>\n{"name": "mobile_use", "arguments": {"action": "click", "coordinate": [540, 1200]}}\n</tool_call>',
    '{"action": "swipe", "coordinate": [400, 900], "coordinate2": [400, 100]} {"action": "terminate", "status": "success"}',
    "The user query: 购买商品 预订 车票 Task progress (You have done the following operation on the current device):",
    "0123456789 商品列表 提交订单 查询",
]


def _processor_class() -> Any:
    from transformers import Qwen2VLProcessor

    class ImageOnlyQwen2VLProcessor(Qwen2VLProcessor):  # type: ignore[misc]
        """Qwen2-VL's processor without a video processor (which needs torchvision; the CPU
        torch build has no matching torchvision wheel on PyPI)."""

        def check_argument_for_proper_class(self, argument_name: str, argument: Any) -> Any:
            if argument_name == "video_processor" and argument is None:
                return None
            return super().check_argument_for_proper_class(argument_name, argument)

    return ImageOnlyQwen2VLProcessor


def build_tiny_qwen2_vl(*, max_pixels: int, min_pixels: int = 4 * 28 * 28, seed: int = 0) -> tuple[Any, Any]:
    """(processor, model): a byte-level BPE tokenizer trained on a few lines, Qwen2-VL's image
    processor with the given pixel limits, and a 2-layer model with random weights (float32)."""
    import torch
    from tokenizers import Tokenizer, decoders, models, pre_tokenizers, trainers
    from transformers import (
        Qwen2Tokenizer,
        Qwen2VLConfig,
        Qwen2VLForConditionalGeneration,
        Qwen2VLImageProcessor,
    )

    tok = Tokenizer(models.BPE())
    tok.pre_tokenizer = pre_tokenizers.ByteLevel(add_prefix_space=False)
    tok.decoder = decoders.ByteLevel()
    trainer = trainers.BpeTrainer(
        vocab_size=500, special_tokens=SPECIAL_TOKENS, initial_alphabet=pre_tokenizers.ByteLevel.alphabet()
    )
    tok.train_from_iterator(CORPUS * 20, trainer)
    tokenizer = Qwen2Tokenizer(
        tokenizer_object=tok,
        eos_token="<|im_end|>",
        pad_token="<|endoftext|>",
        unk_token=None,
        bos_token=None,
    )
    tokenizer.chat_template = CHAT_TEMPLATE
    ids = {t: tokenizer.convert_tokens_to_ids(t) for t in SPECIAL_TOKENS}
    text = {
        "vocab_size": ((len(tokenizer) + 63) // 64) * 64,
        "hidden_size": 64,
        "intermediate_size": 128,
        "num_hidden_layers": 2,
        "num_attention_heads": 2,
        "num_key_value_heads": 1,
        "max_position_embeddings": 8192,
        "rope_theta": 1_000_000.0,
        "rope_scaling": {"type": "mrope", "mrope_section": [4, 6, 6]},
        "tie_word_embeddings": True,
        "bos_token_id": ids["<|endoftext|>"],
        "eos_token_id": ids["<|im_end|>"],
        "pad_token_id": ids["<|endoftext|>"],
    }
    vision = {
        "depth": 1,
        "embed_dim": 32,
        "hidden_size": 64,
        "num_heads": 1,
        "mlp_ratio": 2,
        "patch_size": 14,
        "spatial_merge_size": 2,
        "temporal_patch_size": 2,
        "in_channels": 3,
    }
    config = Qwen2VLConfig(
        text_config=text,
        vision_config=vision,
        image_token_id=ids["<|image_pad|>"],
        video_token_id=ids["<|video_pad|>"],
        vision_start_token_id=ids["<|vision_start|>"],
        vision_end_token_id=ids["<|vision_end|>"],
    )
    torch.manual_seed(seed)
    model = Qwen2VLForConditionalGeneration(config)
    model.generation_config.eos_token_id = ids["<|im_end|>"]
    model.generation_config.pad_token_id = ids["<|endoftext|>"]
    image_processor = Qwen2VLImageProcessor(min_pixels=min_pixels, max_pixels=max_pixels)
    processor = _processor_class()(
        image_processor=image_processor,
        tokenizer=tokenizer,
        video_processor=None,
        chat_template=CHAT_TEMPLATE,
    )
    return processor, model
