"""The engine registry: `[engine] name` and `--engine` pick a registered kind; the built-in ones are the stage's own
(declared, not registered on import); a test engine is reachable by name only while it is registered, and `--help`
never offers it."""

from __future__ import annotations

import re
from pathlib import Path

import pytest

from a2x_local.cli import run
from a2x_local.errors import UserError
from a2x_local.llm import ENGINE_NAMES, EngineOptions, make_engine, register_engine, unregister_engine
from a2x_local.llm.engines import engine_kind, engine_names
from a2x_local.settings import load_settings
from a2x_local.testing import ScriptedEngine, registered_engine


def test_the_built_in_engines_are_known_and_only_vllm_and_transformers_load_a_local_folder():
    assert ENGINE_NAMES == ("vllm", "transformers", "openai") == engine_names()
    assert [engine_kind(name).local_model for name in ENGINE_NAMES] == [True, True, False]


def test_importing_the_engine_registry_registers_nothing():
    """No `register_engine` call runs on import: the module's top level only declares."""
    import ast

    import a2x_local.llm.engines as engines

    tree = ast.parse(Path(engines.__file__).read_text(encoding="utf-8"))
    calls = [ast.unparse(node) for node in tree.body if isinstance(node, ast.Expr) and isinstance(node.value, ast.Call)]
    assert calls == []


def test_a_registered_engine_is_chosen_by_flag_or_by_the_engine_table(home: Path):
    home.mkdir(parents=True)
    settings = load_settings()
    with registered_engine("scripted", lambda config: ScriptedEngine(lambda request: "ok")) as asked:
        assert "scripted" in engine_names()
        by_flag = make_engine(settings, EngineOptions.of(engine="scripted", model="no-such-folder", max_model_len=512))
        (home / "config.toml").write_text('[engine]\nname = "scripted"\n', encoding="utf-8")
        by_table = make_engine(load_settings())
    assert isinstance(by_flag, ScriptedEngine) and isinstance(by_table, ScriptedEngine)
    # The settings reach the factory; no model folder was needed (it is not a local-model engine).
    assert [config.name for config in asked] == ["scripted", "scripted"] and asked[0].max_model_len == 512
    assert Path(asked[0].model).name == "no-such-folder"
    assert "scripted" not in engine_names()


def test_an_unknown_engine_is_a_user_error_naming_the_known_ones(home: Path):
    home.mkdir(parents=True)
    with pytest.raises(UserError, match="unknown engine 'scripted'") as caught:
        EngineOptions.of(engine="scripted")
    assert "vllm, transformers, openai" in caught.value.hint
    (home / "config.toml").write_text('[engine]\nname = "llamafile"\n', encoding="utf-8")
    with pytest.raises(UserError, match="unknown engine 'llamafile'"):
        make_engine(load_settings())


def test_names_are_registered_once_and_the_built_in_ones_stay():
    with (registered_engine("twice", lambda config: ScriptedEngine(lambda request: "")),
          pytest.raises(ValueError, match="already registered")):
        register_engine("twice", lambda ref, config: ScriptedEngine(lambda request: ""))
    with pytest.raises(ValueError, match="already registered"):
        register_engine("vllm", lambda ref, config: ScriptedEngine(lambda request: ""))
    with pytest.raises(ValueError, match="built-in"):
        unregister_engine("openai")
    assert engine_names() == ENGINE_NAMES


def test_help_offers_only_the_built_in_engines(capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch):
    monkeypatch.setenv("COLUMNS", "300")      # one line per option: nothing is split across lines
    with registered_engine("scripted", lambda config: ScriptedEngine(lambda request: "")):
        for command in (["--help"], ["build", "--help"], ["search", "--help"], ["serve", "--help"]):
            assert run(command) == 0
            shown = capsys.readouterr().out
            assert "scripted" not in shown, command
    assert re.search(r"--engine +vllm\|transformers\|openai ", shown), shown
