"""Settings precedence: default.toml < $A2X_HOME/config.toml < $A2X_CONFIG < environment < flags."""

from __future__ import annotations

from pathlib import Path

import pytest

from a2x_local.errors import UserError
from a2x_local.settings import deep_merge, load_settings


def test_defaults_and_home(tmp_path: Path) -> None:
    settings = load_settings(environ={"A2X_HOME": str(tmp_path)})
    assert settings.home == tmp_path.resolve()
    assert settings.db_path == tmp_path.resolve() / "registry.duckdb"
    assert settings.section("registry")["max_description_chars"] > 0
    assert settings.section("no-such-section") == {}


def test_user_files_environment_and_flags_override_in_order(tmp_path: Path, monkeypatch) -> None:
    monkeypatch.chdir(tmp_path)
    (tmp_path / "config.toml").write_text("[registry]\nmax_description_chars = 10\nmax_name_chars = 5\n")
    extra = tmp_path / "extra.toml"
    extra.write_text("[registry]\nmax_name_chars = 7\n")
    env = {"A2X_HOME": str(tmp_path), "A2X_CONFIG": str(extra), "A2X_DB": "env.duckdb",
           "A2X_MODELS_DIR": str(tmp_path / "weights")}
    settings = load_settings(environ=env)
    assert settings.section("registry")["max_description_chars"] == 10
    assert settings.section("registry")["max_name_chars"] == 7
    assert settings.db_path == (tmp_path / "env.duckdb").resolve()
    assert settings.models_dir == (tmp_path / "weights").resolve()
    flagged = load_settings(db="flag.duckdb", environ=env).with_overrides("registry", max_name_chars=9, other=None)
    assert flagged.db_path == (tmp_path / "flag.duckdb").resolve()
    assert flagged.section("registry") | {"max_description_chars": 10, "max_name_chars": 9, "lock_timeout_s": 30} \
        == flagged.section("registry")


def test_broken_config_file_is_a_clear_error(tmp_path: Path) -> None:
    (tmp_path / "config.toml").write_text("[registry\n")
    with pytest.raises(UserError, match=r"config\.toml: not valid TOML"):
        load_settings(environ={"A2X_HOME": str(tmp_path)})


def test_deep_merge_keeps_unrelated_keys() -> None:
    assert deep_merge({"a": {"x": 1, "y": 2}, "b": 1}, {"a": {"y": 3}}) == {"a": {"x": 1, "y": 3}, "b": 1}


def _section_configs() -> list[type]:
    """Every typed configuration table in the package (importing every light module first)."""
    import importlib
    import pkgutil

    import a2x_local
    from a2x_local.settings import SectionConfig

    for module in pkgutil.walk_packages(a2x_local.__path__, "a2x_local."):
        if not module.name.endswith(("_engine", "guidance_processor")):
            importlib.import_module(module.name)
    found, stack = [], list(SectionConfig.__subclasses__())
    while stack:
        cls = stack.pop()
        found.append(cls)
        stack.extend(cls.__subclasses__())
    return found


@pytest.mark.parametrize("name", ["example.toml", "smoke-tiny.toml"])
def test_the_shipped_example_configs_are_valid_for_every_table(name: str, tmp_path: Path) -> None:
    from a2x_local.llm import load_aliases
    from tests.support.paths import ROOT

    settings = load_settings(environ={"A2X_HOME": str(tmp_path), "A2X_CONFIG": str(ROOT / "configs" / name)})
    tables = _section_configs()
    assert len(tables) >= 7
    for table in tables:
        table.from_settings(settings)           # raises UserError naming the table on an unknown key or bad value
    assert load_aliases(settings)
