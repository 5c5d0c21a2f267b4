"""`[paths]` is checked when the settings load (fifth round of probes, F05): `db` and `models_dir` are texts that can
name a path. Before, `db = 5`, `db = ["x"]`, `models_dir = 7` or a NUL in either ended every command, `stats` too,
with "unexpected TypeError: expected str, bytes or os.PathLike object" or "unexpected ValueError: embedded null
byte" (exit 3, "this is a bug"): pathlib met them first. Now the error names the file, the table and the key."""

from __future__ import annotations

from pathlib import Path

import pytest

from a2x_local.errors import UserError
from a2x_local.settings import load_settings

BAD_PATHS = [
    ('db = 5\n', "[paths] db: must be text", "not the number 5"),
    ('db = ["x"]\n', "[paths] db: must be text", "not an array"),
    ('db = true\n', "[paths] db: must be text", "not the boolean true"),
    ('db = { file = "x" }\n', "[paths] db: must be text", "not a table"),
    ('db = "reg/a\\u0000b.duckdb"\n', "[paths] db: holds a NUL character", "at character 6"),
    ('db = ""\n', "[paths] db: is empty", "the registry database file"),
    ('models_dir = 7\n', "[paths] models_dir: must be text", "not the number 7"),
    ('models_dir = "a\\u0000b"\n', "[paths] models_dir: holds a NUL character", "at character 2"),
]


def refused(**environ: str) -> UserError:
    with pytest.raises(UserError) as caught:
        load_settings(environ=environ)
    return caught.value


@pytest.mark.parametrize(("text", "key", "said"), BAD_PATHS)
def test_a_paths_value_that_cannot_name_a_path_is_refused_naming_file_table_and_key(tmp_path: Path, text: str,
                                                                                   key: str, said: str):
    config = tmp_path / "bad.toml"
    config.write_text("[paths]\n" + text, encoding="utf-8")
    error = refused(A2X_HOME=str(tmp_path / "home"), A2X_CONFIG=str(config))
    assert error.code == "ConfigError"
    assert error.message.startswith(f"{config}: {key}"), error.message
    assert said in error.message, error.message
    assert '= "' in (error.hint or ""), error.hint          # the hint shows the value written as a path in quotes


def test_the_file_named_is_the_one_that_set_the_value(tmp_path: Path):
    home = tmp_path / "home"
    home.mkdir()
    (home / "config.toml").write_text("[paths]\ndb = 5\n", encoding="utf-8")
    assert refused(A2X_HOME=str(home)).message.startswith(f"{home.resolve() / 'config.toml'}: [paths] db: ")
    later = tmp_path / "later.toml"
    later.write_text('[paths]\nmodels_dir = "weights"\n', encoding="utf-8")     # sets another key: db is still home's
    assert refused(A2X_HOME=str(home), A2X_CONFIG=str(later)).message.startswith(f"{home.resolve()}/config.toml: ")
    later.write_text('[paths]\ndb = "fixed.duckdb"\n', encoding="utf-8")         # a later file mends it
    assert load_settings(environ={"A2X_HOME": str(home), "A2X_CONFIG": str(later)}).db_path.name == "fixed.duckdb"


def test_paths_given_a_single_value_must_be_a_table(tmp_path: Path):
    """Before: `paths = 5` was "unexpected AttributeError: 'int' object has no attribute 'get'"."""
    config = tmp_path / "bad.toml"
    config.write_text("paths = 5\n", encoding="utf-8")
    error = refused(A2X_HOME=str(tmp_path / "home"), A2X_CONFIG=str(config))
    assert error.message.startswith(f"{config}: paths is given a single value"), error.message
    assert "paths must be a table" in error.message and "write [paths] on a line of its own" in (error.hint or "")


@pytest.mark.parametrize("name", ["A2X_HOME", "A2X_CONFIG", "A2X_DB", "A2X_MODELS_DIR"])
def test_a_nul_in_a_path_variable_is_refused_naming_it(tmp_path: Path, name: str):
    """A process's environment cannot hold a NUL (execve refuses it), but a mapping given to load_settings can."""
    environ = {"A2X_HOME": str(tmp_path), name: "a\0b"}
    assert refused(**environ).message.startswith(f"${name} holds a NUL character")


def test_a_nul_in_db_given_to_load_settings_names_db(tmp_path: Path):
    with pytest.raises(UserError, match=r"^--db 'a\\x00b' holds a NUL character"):
        load_settings(db="a\0b", environ={"A2X_HOME": str(tmp_path)})


@pytest.mark.parametrize(("text", "key", "said"), [BAD_PATHS[0], BAD_PATHS[4], BAD_PATHS[7]])
def test_every_command_fails_with_the_error_not_a_bug_report(cli, home, tmp_path, monkeypatch, text, key, said):
    config = tmp_path / "bad.toml"
    config.write_text("[paths]\n" + text, encoding="utf-8")
    monkeypatch.setenv("A2X_CONFIG", str(config))
    result = cli("stats", db=False)
    assert result.code == 1, result
    assert result.err.startswith(f"error: {config}: {key}") and said in result.err, result.err
    assert "unexpected" not in result.err and "bug" not in result.err
