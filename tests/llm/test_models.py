"""Aliases, `--model ALIAS|PATH` resolution, settings precedence and the engine factory's fast failures."""

from __future__ import annotations

from pathlib import Path

import pytest

from a2x_local.errors import UserError
from a2x_local.llm import EngineOptions, engine_settings, make_engine
from a2x_local.llm.models import load_aliases, resolve_model
from a2x_local.settings import Settings, load_settings

REQUIRED = ("qwen2.5-32b", "qwen2.5-7b", "qwen2.5-1.5b", "deepseek-r1-distill-qwen-7b")


@pytest.fixture
def settings(tmp_path: Path) -> Settings:
    base = load_settings(environ={"A2X_HOME": str(tmp_path / "home")})
    return Settings(base.home, base.db_path, tmp_path / "models", base.config)


def test_shipped_aliases_carry_path_and_recommended_settings(settings: Settings) -> None:
    aliases = load_aliases(settings)
    for name in REQUIRED:
        entry = aliases[name]
        assert entry.path and entry.source and entry.dtype
        assert entry.max_model_len and entry.tensor_parallel_size and entry.gpu_memory_gb


def test_alias_resolves_under_the_models_dir(settings: Settings) -> None:
    ref = resolve_model(settings, "qwen2.5-7b")
    assert ref.alias == "qwen2.5-7b" and ref.path == settings.models_dir / "Qwen2.5-7B-Instruct"
    assert ref.settings["max_model_len"] == 32768


def test_paths_resolve_absolute_relative_to_cwd_or_to_models_dir(settings: Settings, tmp_path: Path,
                                                                  monkeypatch: pytest.MonkeyPatch) -> None:
    inside = settings.models_dir / "MyModel"
    inside.mkdir(parents=True)
    assert resolve_model(settings, str(inside)).path == inside
    assert resolve_model(settings, "MyModel").path == inside
    monkeypatch.chdir(tmp_path)
    (tmp_path / "local").mkdir()
    assert resolve_model(settings, "local").path == tmp_path / "local"
    assert resolve_model(settings, "MyModel").alias is None


def test_unknown_model_lists_aliases_and_tried_paths(settings: Settings) -> None:
    with pytest.raises(UserError) as caught:
        resolve_model(settings, "qwen9-1t")
    assert "unknown model 'qwen9-1t'" in caught.value.message
    assert str(settings.models_dir / "qwen9-1t") in caught.value.message
    assert "qwen2.5-7b" in caught.value.hint


def test_user_config_adds_and_adjusts_aliases(settings: Settings) -> None:
    config = dict(settings.config, models={"mine": {"path": "/abs/Mine", "max_model_len": 4096},
                                           "qwen2.5-7b": {"max_model_len": 16384}})
    custom = Settings(settings.home, settings.db_path, settings.models_dir, config)
    assert resolve_model(custom, "mine").path == Path("/abs/Mine")
    assert resolve_model(custom, "qwen2.5-7b").settings["max_model_len"] == 16384


def test_invalid_alias_names_the_file_and_alias(settings: Settings) -> None:
    config = dict(settings.config, models={"broken": {"max_model_len": 4096, "colour": "red"}})
    with pytest.raises(UserError) as caught:
        load_aliases(Settings(settings.home, settings.db_path, settings.models_dir, config))
    assert caught.value.message.startswith('the configuration: [models."broken"] ')
    assert "path" in caught.value.message and "colour" in caught.value.message


def test_precedence_engine_table_then_alias_then_flags(settings: Settings) -> None:
    _, config = engine_settings(settings, EngineOptions(model="qwen3-8b"), must_exist=False)
    assert config.name == "vllm" and config.max_model_len == 32768 and config.dtype == "auto"
    _, awq = engine_settings(settings, EngineOptions(model="qwen2.5-32b-awq"), must_exist=False)
    assert awq.dtype == "float16" and awq.quantization == "awq"  # the alias's own settings win over [engine]
    assert config.chat_template_kwargs == {"enable_thinking": False}
    assert config.enable_prefix_caching is True  # from [engine]
    options = EngineOptions(model="qwen3-8b", engine="openai", max_model_len=4096, base_url="http://127.0.0.1:9/v1")
    _, config = engine_settings(settings, options, must_exist=False, batch_size=4)
    assert config.name == "openai" and config.max_model_len == 4096
    assert config.openai.base_url == "http://127.0.0.1:9/v1" and config.transformers.batch_size == 4


def test_invalid_flag_value_is_a_user_error(settings: Settings) -> None:
    with pytest.raises(UserError, match="max_model_len"):
        EngineOptions.of(model="qwen2.5-7b", max_model_len=1)
    with pytest.raises(UserError, match="structured-output backend 'regexy'"):
        EngineOptions.of(model="qwen2.5-7b", structured_backend="regexy")
    with pytest.raises(UserError, match="max_model_len"):   # a bad value from a config file, not a flag
        engine_settings(settings, EngineOptions(model="qwen2.5-7b"), max_model_len=1)


def test_make_engine_fails_fast_on_a_missing_model(settings: Settings) -> None:
    with pytest.raises(UserError) as caught:
        make_engine(settings, EngineOptions(model="qwen2.5-7b", engine="vllm"))
    assert "is not usable" in caught.value.message and "does not exist" in caught.value.message
    assert "models check qwen2.5-7b" in caught.value.hint


def test_make_engine_openai_needs_a_url_and_contacts_nothing_when_built(settings: Settings) -> None:
    with pytest.raises(UserError, match="needs the server's URL"):
        make_engine(settings, EngineOptions(model="qwen2.5-7b", engine="openai"))
    engine = make_engine(settings, EngineOptions(model="qwen2.5-7b", engine="openai", base_url="http://127.0.0.1:9"))
    assert engine.name == "openai" and engine.describe()["base_url"] == "http://127.0.0.1:9/v1"


def test_engine_options_reject_unknown_names(settings: Settings) -> None:
    with pytest.raises(UserError, match="unknown engine"):
        EngineOptions.of(model="qwen2.5-7b", engine="llamafile")
    with pytest.raises(UserError, match="structured-output backend"):
        EngineOptions.of(model="qwen2.5-7b", structured_backend="nope")
    # A --base-url alone means the openai engine.
    assert make_engine(settings, EngineOptions.of(model="x", base_url="http://127.0.0.1:9/v1")).name == "openai"


def test_vllm_start_failures_become_user_errors_that_say_what_to_try() -> None:
    from a2x_local.llm.config import EngineConfig
    from a2x_local.llm.vllm_engine import VllmEngine

    engine = VllmEngine.__new__(VllmEngine)
    engine.model_path, engine.model_label = Path("/m/Qwen2.5-32B-Instruct"), "qwen2.5-32b"
    engine.config = EngineConfig.defaults(max_model_len=32768)
    oom = engine._start_error(ValueError("To serve at least one request ... larger than the available KV cache "
                                         "memory (3.2 GiB). Try increasing gpu_memory_utilization"))
    assert "ran out of memory" in oom.message and "/m/Qwen2.5-32B-Instruct" in oom.message
    assert "--max-model-len" in oom.hint and "--tensor-parallel-size" in oom.hint
    other = engine._start_error(RuntimeError("Qwen9ForCausalLM is not supported"))
    assert "could not load qwen2.5-32b" in other.message and "not supported" in other.message
    assert "models check /m/Qwen2.5-32B-Instruct" in other.hint
