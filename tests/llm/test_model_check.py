"""`check_model`: what is missing, in words a user can act on, and the memory estimate (no weights loaded)."""

from __future__ import annotations

import json
from pathlib import Path

from a2x_local.llm.model_check import GIB, RUNTIME_OVERHEAD_GIB, ModelCheck, check_model, estimate_memory
from a2x_local.llm.models import ModelAlias
from tests.support.fake_model import FAKE_PARAMETERS


def test_complete_folder_is_ready_and_parameters_come_from_the_headers(fake_model_dir: Path) -> None:
    result = check_model(fake_model_dir, max_model_len=1024)
    assert result.ok, result.problems
    assert result.parameters == FAKE_PARAMETERS and result.stored_dtype == "F32"
    assert result.weight_files == 2 and result.weight_bytes == FAKE_PARAMETERS * 4
    assert result.architecture == "Qwen2ForCausalLM" and result.has_chat_template
    assert result.memory is not None and result.memory.dtype == "float32"


def test_missing_folder_names_the_path_and_the_source() -> None:
    entry = ModelAlias(path="Nope", source="Org/Nope-7B")
    result = check_model(Path("/nonexistent/Nope"), entry=entry)
    assert not result.ok
    assert "/nonexistent/Nope does not exist" in result.problems[0] and "Org/Nope-7B" in result.problems[0]


def test_missing_shard_is_named(fake_model_dir: Path) -> None:
    (fake_model_dir / "model-00002-of-00002.safetensors").unlink()
    result = check_model(fake_model_dir)
    assert any("1 of 2 weight shards are missing" in p and "model-00002-of-00002.safetensors" in p
               for p in result.problems)


def test_truncated_shard_is_reported_as_a_partial_copy(fake_model_dir: Path) -> None:
    shard = fake_model_dir / "model-00001-of-00002.safetensors"
    shard.write_bytes(shard.read_bytes()[:-100])
    result = check_model(fake_model_dir)
    assert any(str(shard) in p and "partial copy" in p for p in result.problems)


def test_missing_config_tokenizer_and_weights_are_each_explained(fake_model_dir: Path) -> None:
    (fake_model_dir / "config.json").unlink()
    (fake_model_dir / "tokenizer.json").unlink()
    (fake_model_dir / "model.safetensors.index.json").unlink()
    for shard in fake_model_dir.glob("*.safetensors"):
        shard.unlink()
    problems = " | ".join(check_model(fake_model_dir).problems)
    assert "config.json is missing" in problems
    assert "has no tokenizer" in problems
    assert "has no weights (*.safetensors)" in problems


def test_missing_chat_template_is_a_problem(fake_model_dir: Path) -> None:
    (fake_model_dir / "chat_template.jinja").unlink()
    config_file = fake_model_dir / "tokenizer_config.json"
    config = json.loads(config_file.read_text())
    config.pop("chat_template", None)
    config_file.write_text(json.dumps(config))
    result = check_model(fake_model_dir)
    assert any("no chat template" in p for p in result.problems)


def test_unknown_model_type_is_reported(fake_model_dir: Path) -> None:
    config_file = fake_model_dir / "config.json"
    config_file.write_text(json.dumps(json.loads(config_file.read_text()) | {"model_type": "no-such-arch"}))
    assert any("transformers cannot load it" in p for p in check_model(fake_model_dir).problems)


def test_gguf_file_points_to_the_openai_engine(tmp_path: Path) -> None:
    gguf = tmp_path / "model.Q4_K_M.gguf"
    gguf.write_bytes(b"GGUF")
    [problem] = check_model(gguf).problems
    assert "GGUF" in problem and "--engine openai" in problem


def test_memory_estimate_follows_weights_kv_cache_and_overhead() -> None:
    # A Qwen2.5-7B-like config: 7.62 B parameters in bfloat16, 28 layers, 4 KV heads of 128 dims.
    check = ModelCheck("x", Path("."), parameters=7_620_000_000, stored_dtype="BF16")
    config = {"num_hidden_layers": 28, "num_attention_heads": 28, "num_key_value_heads": 4, "hidden_size": 3584}
    memory = estimate_memory(config, check, max_model_len=32768, tensor_parallel_size=2)
    kv_per_token = 2 * 28 * 4 * 128 * 2
    assert memory.kv_cache_kib_per_token == kv_per_token / 1024
    assert memory.weights_gib == round(7_620_000_000 * 2 / GIB, 2)
    expected = (7_620_000_000 * 2 + kv_per_token * 32768) / GIB + 2 * RUNTIME_OVERHEAD_GIB
    assert abs(memory.total_gib - expected) < 0.1
    assert memory.per_gpu_gib < memory.total_gib
    # Serving in float32 doubles the weights.
    assert estimate_memory(config, check, dtype="float32").weights_gib == round(7_620_000_000 * 4 / GIB, 2)


def test_quantized_checkpoints_count_stored_bytes() -> None:
    check = ModelCheck("x", Path("."), parameters=5_000_000_000, stored_dtype="I32", weight_bytes=19 * GIB,
                       quantized=True)
    config = {"num_hidden_layers": 64, "num_attention_heads": 40, "num_key_value_heads": 8, "hidden_size": 5120}
    assert estimate_memory(config, check).weights_gib == 19.0
