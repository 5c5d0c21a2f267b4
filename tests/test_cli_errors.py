"""`run` is the last line of defence: whatever goes wrong, the user sees one `error:` line and a `hint:`, a JSON error
under --json and a meaningful exit code, never a traceback; service text reaches the terminal escaped."""

from __future__ import annotations

import errno
import json
import os
import signal
import subprocess
import time
from pathlib import Path

import pytest

from a2x_local.db import connect
from a2x_local.locks import RegistryLock
from a2x_local.registry import Registry
from tests.support.processes import cli_command, tree_env
from tests.support.registries import SERVICES

ROOT = Path(__file__).resolve().parents[1]


def boom(exc: BaseException):
    def raiser(*_args, **_kwargs):
        raise exc

    return raiser


@pytest.mark.parametrize("exc,code,words", [
    (TypeError("a bug"), 3, ("unexpected TypeError: a bug", "A2X_DEBUG")),
    (MemoryError(), 1, ("out of memory",)),
    (RecursionError("maximum recursion depth exceeded"), 1, ("nested too deeply",)),
    (OSError(errno.ENOSPC, "No space left on device", "/data/x"), 1, ("no space left", "/data/x")),
    (PermissionError(errno.EACCES, "Permission denied", "/data/y"), 1, ("/data/y: Permission denied",)),
])
def test_an_unexpected_exception_is_one_error_line(cli, registry_db, monkeypatch, exc, code, words):
    monkeypatch.setattr(Registry, "stats", boom(exc))
    result = cli("stats", "--json")
    assert result.code == code
    assert result.err.startswith("error:") and "hint:" in result.err and "Traceback" not in result.err
    for word in words:
        assert word in result.err
    assert result.json()["message"]


def test_a2x_debug_shows_the_traceback_of_a_bug(cli, registry_db, monkeypatch):
    monkeypatch.setattr(Registry, "stats", boom(TypeError("a bug")))
    monkeypatch.setenv("A2X_DEBUG", "1")
    result = cli("stats")
    assert result.code == 3 and "Traceback" in result.err and "error: unexpected TypeError" in result.err


def test_ctrl_c_inside_a_command_says_interrupted(cli, registry_db, monkeypatch):
    monkeypatch.setattr(Registry, "stats", boom(KeyboardInterrupt()))
    result = cli("stats", "--json")
    assert result.code == 130
    assert result.err.startswith("error: interrupted") and "--resume" in result.err
    assert result.json()["error"] == "Interrupted"


def _default_sigint() -> None:
    signal.signal(signal.SIGINT, signal.SIG_DFL)
    signal.pthread_sigmask(signal.SIG_UNBLOCK, {signal.SIGINT})


def test_sigint_to_a_running_command_exits_130_with_a_message(registry_db, home, tmp_path):
    # The command waits for the registry write lock, which this process holds: once the child holds the lock file
    # open (seen in /proc), it is inside the run, polling for the lock, and the signal lands there.
    (home / "config.toml").parent.mkdir(parents=True, exist_ok=True)
    (home / "config.toml").write_text("[registry]\nlock_timeout_s = 120\n", encoding="utf-8")
    services = tmp_path / "services.json"
    services.write_text(json.dumps([{"id": "x", "name": "X", "description": "Does x."}]), encoding="utf-8")
    lock_file = str(RegistryLock.path_for(registry_db))
    with RegistryLock(registry_db, "test"):
        child = subprocess.Popen(cli_command("ingest", str(services), "--db", str(registry_db), "--json"),
                                 stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True, cwd=ROOT,
                                 env=tree_env(A2X_HOME=str(home)),
                                 # A child inherits an ignored SIGINT (and Python then leaves it so): a shell
                                 # without job control starts background commands (`scripts/test &`, CI runners)
                                 # that way.
                                 preexec_fn=_default_sigint)
        try:
            deadline = time.monotonic() + 60
            while not _holds_open(child.pid, lock_file) and child.poll() is None and time.monotonic() < deadline:
                time.sleep(0.05)
            assert _holds_open(child.pid, lock_file), "the command never waited for the registry lock"
            child.send_signal(signal.SIGINT)
            out, err = child.communicate(timeout=60)
        finally:
            if child.poll() is None:
                child.kill()
    assert child.returncode == 130, err
    assert err.startswith("error: interrupted") and "Traceback" not in err
    assert json.loads(out)["error"] == "Interrupted"


def _holds_open(pid: int, path: str) -> bool:
    try:
        return any(os.readlink(f"/proc/{pid}/fd/{fd}") == path for fd in os.listdir(f"/proc/{pid}/fd"))
    except OSError:
        return False


def test_a_disk_that_fills_while_an_index_is_written_is_explained(cli, registry_db, monkeypatch):
    from a2x_local.search.retrieval.bm25 import Bm25Index

    monkeypatch.setattr(Bm25Index, "save", boom(OSError(errno.ENOSPC, "No space left on device", "/idx/x.npz")))
    result = cli("index", "--only", "bm25", "--json")
    assert result.code == 1 and "no space left" in result.err and result.json()["error"] == "DiskFullError"


def insert_raw(db_path: Path, service_id: str, name: str, description: str) -> None:
    """Text written by an older a2x-local (before ingest refused control characters)."""
    with connect(db_path) as con:
        con.execute("INSERT INTO services VALUES (?, 'generic', ?, ?, '{}', NULL, 'h', now(), now())",
                    [service_id, name, description])


def test_control_characters_already_stored_reach_the_screen_escaped(cli, registry_db):
    insert_raw(registry_db, "evil\x1b[2J", "bell\x07name", "clears \x1b[2J the \x9b screen")
    for command in (["services", "list"], ["services", "show", "evil\x1b[2J"], ["search", "clears screen",
                                                                               "-m", "bm25"]):
        result = cli(*command)
        assert result.code == 0, result.err
        assert "\x1b" not in result.out and "\x07" not in result.out and "\x9b" not in result.out
        assert "\\x1b" in result.out


def test_a_sync_shows_the_ids_it_removes_escaped(cli, registry_db, tmp_path):
    insert_raw(registry_db, "evil\x1b[2J", "bell\x07name", "clears the screen")
    export = tmp_path / "export.json"
    export.write_text(json.dumps([s.to_dict() for s in SERVICES]), encoding="utf-8")
    result = cli("ingest", export, "--sync", "--dry-run")
    assert result.code == 0, result.err
    assert "\x1b" not in result.out and "evil\\x1b[2J" in result.out


def test_brackets_in_service_text_are_text_not_markup(cli, registry_db):
    insert_raw(registry_db, "m[/x]", "[/bold]name", "[red]not red[/red] [/oops]")
    listed = cli("services", "list")
    assert listed.code == 0 and listed.err == ""           # rich used to fail on the unmatched closing tags
    shown = cli("services", "show", "m[/x]")
    assert shown.code == 0, shown.err
    assert "m[/x]" in shown.out and "[/bold]name" in shown.out and "[red]not red[/red] [/oops]" in shown.out


def test_compose_keeps_control_characters_and_line_breaks_off_the_screen(cli, registry_db):
    insert_raw(registry_db, "evil\x1b[2J", "bell\x07name", "clears \x1b[2J the \x9b screen")
    result = cli("compose", "clears the screen\x1b[2J\nthen\tsend it", "-m", "bm25")
    assert result.code == 0, result.err
    assert not any(char in result.out for char in "\x1b\x07\x9b\t")
    assert "\\x1b[2J\\nthen\\tsend it" in result.out          # the request's line stays one line in the tree
    assert "bell\\x07name" in result.out                      # and so do the services chosen for it
