"""`[serve] default_method` and `preload` must name methods this process can make, checked when a server starts
(fifth round of probes, F06). Before, `default_method = "nosuch"` was accepted: `serve` listened, `/healthz` said
ok, and every request that named no method was answered UnknownMethod, blaming the client ("choose one of ...")
and naming neither the file nor the key. The methods are known only once the composition root has registered
them (plug-ins' too), so the check runs at the server's start, not when the table is read."""

from __future__ import annotations

import dataclasses
import subprocess
from pathlib import Path

import pytest

from a2x_local.components import register_components
from a2x_local.config_check import check_config
from a2x_local.errors import UserError
from a2x_local.search import method_names, method_spec, register_method
from a2x_local.search.methods import unregister_method
from a2x_local.serve.server import build_server
from a2x_local.settings import load_settings
from tests.serve.helpers import serve_config, write_test_config
from tests.support.processes import cli_command, tree_env
from tests.support.registries import make_registry


def start(tmp_path: Path, **serve: object) -> tuple[Path, UserError | None]:
    """Build a server over a small registry with ``serve`` written into its configuration file; the error, if any."""
    register_components()
    db = make_registry(tmp_path / "registry.duckdb")
    config = write_test_config(tmp_path / "home", **serve)
    settings = load_settings(db=db, environ={"A2X_HOME": str(tmp_path / "home"), "A2X_CONFIG": str(config)})
    check_config(settings)                 # the table is well formed: only the server knows the methods
    try:
        server = build_server(settings, serve_config(**serve))
    except UserError as exc:
        return config, exc
    server.close()
    return config, None


@pytest.mark.parametrize(("serve", "named"), [
    ({"default_method": "nosuch"}, "[serve] default_method: unknown search method 'nosuch'"),
    ({"default_method": "Hybrid"}, "[serve] default_method: unknown search method 'Hybrid'"),
    ({"preload": ["nosuch", "bm25"]}, "[serve] preload[0] 'nosuch': unknown search method"),
    ({"preload": ["bm25", "x", "y"]}, "[serve] preload[1] 'x', preload[2] 'y': unknown search methods"),
])
def test_an_unknown_method_is_refused_at_start_naming_file_table_and_key(tmp_path: Path, serve, named):
    config, error = start(tmp_path, **serve)
    assert error is not None, "the server started"
    assert error.code == "ConfigError" and error.exit_code == 1
    assert f"{config}: {named}" in error.message, error.message
    assert "the methods this installation has: " + ", ".join(method_names()) in (error.hint or ""), error.hint


def test_both_keys_are_reported_at_once(tmp_path: Path):
    config, error = start(tmp_path, default_method="nosuch", preload=["nosuch"])
    assert error is not None
    assert error.message.count(str(config)) == 2 and "default_method" in error.message and "preload[0]" in error.message


def test_a_method_registered_before_the_start_is_known(tmp_path: Path):
    """A plug-in's method (registered by the composition root, after the table was read) is accepted."""
    register_method(dataclasses.replace(method_spec("bm25"), name="plugged"), replace=True)
    try:
        _, error = start(tmp_path, default_method="plugged", preload=["plugged", "bm25"])
        assert error is None, error
    finally:
        unregister_method("plugged")
    _, error = start(tmp_path / "after", default_method="plugged")
    assert error is not None and "'plugged'" in error.message and "plugged" not in (error.hint or "")


@pytest.mark.parametrize("stdio", [False, True])
def test_serve_exits_1_before_it_listens(tmp_path: Path, stdio: bool):
    """The command itself: the error, exit 1, never a port opened (before: it listened, and the test timed out)."""
    db = make_registry(tmp_path / "registry.duckdb")
    config = tmp_path / "bad.toml"
    config.write_text('[serve]\ndefault_method = "nosuch"\n', encoding="utf-8")
    done = subprocess.run(cli_command("serve", *(["--stdio"] if stdio else ["--port", "0"]), "--db", str(db)),
                          capture_output=True, text=True, stdin=subprocess.DEVNULL, timeout=60,
                          env=tree_env(A2X_CONFIG=str(config), A2X_HOME=str(tmp_path / "home")))
    assert done.returncode == 1, done.stderr
    assert done.stderr.startswith(f"error: invalid configuration: {config}: [serve] default_method: unknown search "
                                  "method 'nosuch'"), done.stderr
    assert "\nhint: the methods this installation has: " in done.stderr and "Uvicorn running" not in done.stderr
