"""A small, complete model folder made of real file formats (config, tokenizer, safetensors), for the llm tests that
need no model to run."""

from __future__ import annotations

import json
from pathlib import Path

from a2x_local.llm.tiny_model import CHATML_TEMPLATE, SPECIAL_TOKENS

# Shapes of the fake checkpoint: parameters = 64*32 + 32*32 + 32 = 3,104 (read back from the headers).
FAKE_SHAPES = {"model.embed_tokens.weight": (64, 32), "model.layers.0.mlp.up_proj.weight": (32, 32),
               "model.norm.weight": (32,)}
FAKE_PARAMETERS = 64 * 32 + 32 * 32 + 32


def write_fake_model(target: Path, *, shards: int = 1) -> Path:
    """config.json, a trained byte-level BPE tokenizer with a chat template, and float32 safetensors shards."""
    import torch
    from safetensors.torch import save_file
    from tokenizers import Tokenizer, decoders, models, pre_tokenizers, trainers
    from transformers import PreTrainedTokenizerFast

    target.mkdir(parents=True, exist_ok=True)
    config = {"architectures": ["Qwen2ForCausalLM"], "model_type": "qwen2", "vocab_size": 64, "hidden_size": 32,
              "intermediate_size": 32, "num_hidden_layers": 2, "num_attention_heads": 4,
              "num_key_value_heads": 2, "max_position_embeddings": 2048, "torch_dtype": "float32"}
    (target / "config.json").write_text(json.dumps(config))
    core = Tokenizer(models.BPE())
    core.pre_tokenizer = pre_tokenizers.ByteLevel(add_prefix_space=False)
    core.decoder = decoders.ByteLevel()
    core.train_from_iterator(["a small corpus for a small tokenizer"] * 10, trainer=trainers.BpeTrainer(
        vocab_size=300, special_tokens=SPECIAL_TOKENS, initial_alphabet=pre_tokenizers.ByteLevel.alphabet(),
        show_progress=False))
    PreTrainedTokenizerFast(tokenizer_object=core, eos_token="<|im_end|>", pad_token="<|endoftext|>",
                            chat_template=CHATML_TEMPLATE).save_pretrained(target)
    names = list(FAKE_SHAPES)
    if shards == 1:
        save_file({n: torch.zeros(FAKE_SHAPES[n]) for n in names}, str(target / "model.safetensors"))
        return target
    weight_map = {}
    for k in range(shards):
        shard = f"model-{k + 1:05d}-of-{shards:05d}.safetensors"
        part = names[k::shards]
        save_file({n: torch.zeros(FAKE_SHAPES[n]) for n in part}, str(target / shard))
        weight_map.update({n: shard for n in part})
    (target / "model.safetensors.index.json").write_text(json.dumps({"metadata": {}, "weight_map": weight_map}))
    return target
