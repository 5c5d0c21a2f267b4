"""A tiny random-weight Qwen2 chat model with a locally trained tokenizer, built in seconds, offline.

Its answers are nonsense; it exists so the real loading, batching and constraint code can run on any machine
without downloads: the engine tests, `scripts/bench_engine.py`, the demo when no real weights are installed, and
`a2x-local models make-tiny` for smoke-testing an install. Never use it to build a tree anyone searches.
Shapes follow STACK.md: vLLM's CPU attention needs head_dim >= 32, hence hidden 128 over 4 heads.
"""

from __future__ import annotations

import sysconfig
from collections.abc import Iterator
from pathlib import Path

CHATML_TEMPLATE = (
    "{% for message in messages %}"
    "{{ '<|im_start|>' + message['role'] + '\\n' + message['content'] + '<|im_end|>' + '\\n' }}"
    "{% endfor %}"
    "{% if add_generation_prompt %}{{ '<|im_start|>assistant\\n' }}{% endif %}"
)
SPECIAL_TOKENS = ["<|endoftext|>", "<|im_start|>", "<|im_end|>"]
VOCAB_SIZE = 4096
# The model's position table; vLLM caps max_model_len at this.
MAX_POSITIONS = 32768


def _training_text(max_chars: int = 1_500_000) -> Iterator[str]:
    """Python standard library sources, in a fixed order so every build trains the same tokenizer."""
    stdlib = Path(sysconfig.get_paths()["stdlib"])
    seen = 0
    for path in sorted(stdlib.glob("*.py")):
        text = path.read_text(encoding="utf-8", errors="replace")
        yield text
        seen += len(text)
        if seen >= max_chars:
            return


def build_tokenizer(target: Path):
    """Train a byte-level BPE (every byte stays reachable, so any regex can be spelled) and save it."""
    from tokenizers import Tokenizer, decoders, models, pre_tokenizers, trainers
    from transformers import PreTrainedTokenizerFast

    core = Tokenizer(models.BPE())
    core.pre_tokenizer = pre_tokenizers.ByteLevel(add_prefix_space=False)
    core.decoder = decoders.ByteLevel()
    trainer = trainers.BpeTrainer(vocab_size=VOCAB_SIZE, special_tokens=SPECIAL_TOKENS,
                                  initial_alphabet=pre_tokenizers.ByteLevel.alphabet(), show_progress=False)
    core.train_from_iterator(_training_text(), trainer=trainer)
    tokenizer = PreTrainedTokenizerFast(
        tokenizer_object=core, eos_token="<|im_end|>", pad_token="<|endoftext|>", padding_side="left",
        chat_template=CHATML_TEMPLATE, model_max_length=MAX_POSITIONS,
    )
    tokenizer.save_pretrained(target)
    return tokenizer


def build_tiny_model(target: Path, *, seed: int = 0) -> Path:
    """Write tokenizer, config and random weights (float32 safetensors, ~3.5 MB) into ``target``."""
    import torch
    from transformers import GenerationConfig, Qwen2Config, Qwen2ForCausalLM
    from transformers.utils import logging as transformers_logging

    transformers_logging.disable_progress_bar()  # its "Writing model shards" bar says nothing to a user

    target.mkdir(parents=True, exist_ok=True)
    tokenizer = build_tokenizer(target)
    eos_id = tokenizer.convert_tokens_to_ids("<|im_end|>")
    pad_id = tokenizer.convert_tokens_to_ids("<|endoftext|>")
    config = Qwen2Config(
        vocab_size=len(tokenizer), hidden_size=128, intermediate_size=256, num_hidden_layers=2,
        num_attention_heads=4, num_key_value_heads=2, tie_word_embeddings=True,
        max_position_embeddings=MAX_POSITIONS, bos_token_id=pad_id, eos_token_id=eos_id, pad_token_id=pad_id,
    )
    torch.manual_seed(seed)
    model = Qwen2ForCausalLM(config).to(torch.float32)
    model.generation_config = GenerationConfig(bos_token_id=pad_id, eos_token_id=eos_id, pad_token_id=pad_id)
    model.save_pretrained(target)
    return target

