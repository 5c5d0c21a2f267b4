"""The registry path (`--db`, `$A2X_DB`) is input like any other (issue 32, finding 9): a regular file or absent,
else a clear error before DuckDB or a lock file touches it, and nothing is written beside it (no `.write.lock`, no
folder, no file at a link's target). A named pipe hung `ingest` and `stats`; copies of `/dev/full` and `/dev/null`
were opened for writing."""

from __future__ import annotations

import os
import stat
import subprocess
from pathlib import Path

import pytest

from a2x_local.db import check_db_path
from a2x_local.errors import UserError
from tests.support.paths import SAMPLE
from tests.support.processes import cli_command, tree_env

DEVICES = {"full": (1, 7), "null": (1, 3)}


def run_cli(*args: object, env: dict[str, str] | None = None, timeout: float = 300) -> subprocess.CompletedProcess:
    try:
        return subprocess.run(cli_command(*map(str, args)), env=env or tree_env(), capture_output=True, text=True,
                              timeout=timeout)
    except subprocess.TimeoutExpired:
        pytest.fail(f"`a2x-local {' '.join(map(str, args))}` still ran after {timeout} s (blocked on the path?)")


def special(path: Path, kind: str) -> Path:
    """A named pipe, or a copy of a device node (root only; skipped elsewhere)."""
    if kind == "fifo":
        os.mkfifo(path)
        return path
    try:
        os.mknod(path, 0o666 | stat.S_IFCHR, os.makedev(*DEVICES[kind]))
    except PermissionError:
        pytest.skip("copying a device node needs root")
    return path


def beside(path: Path) -> list[str]:
    return sorted(p.name for p in path.parent.iterdir() if p != path)


@pytest.mark.parametrize("kind", ["fifo", "full", "null"])
@pytest.mark.parametrize("command", [("ingest", str(SAMPLE)), ("stats",)])
def test_a_special_file_as_db_is_refused_and_nothing_is_written(tmp_path: Path, kind: str, command: tuple):
    db = special(tmp_path / "registry.duckdb", kind)
    mode = db.lstat().st_mode
    done = run_cli(*command, "--db", db)
    assert done.returncode == 1, done.stderr
    assert "not a regular file" in done.stderr and str(db) in done.stderr and "hint:" in done.stderr, done.stderr
    assert "this is a bug" not in done.stderr
    assert beside(db) == [] and db.lstat().st_mode == mode


def test_a_named_pipe_in_a2x_db_is_refused(tmp_path: Path):
    db = special(tmp_path / "registry.duckdb", "fifo")
    done = run_cli("ingest", SAMPLE, env=tree_env(A2X_DB=str(db)))
    assert done.returncode == 1 and "named pipe" in done.stderr, done.stderr
    assert beside(db) == []


def test_a_link_to_nowhere_is_refused_and_its_target_not_created(tmp_path: Path):
    target = tmp_path / "elsewhere" / "made-by-us.duckdb"
    db = tmp_path / "registry.duckdb"
    os.symlink(target, db)
    done = run_cli("ingest", SAMPLE, "--db", db)
    assert done.returncode == 1 and "broken symbolic link" in done.stderr, done.stderr
    assert not target.exists() and not (tmp_path / "elsewhere").exists() and beside(db) == []


def test_a_folder_or_a_special_write_ahead_log_is_refused(tmp_path: Path):
    folder = tmp_path / "folder.duckdb"
    folder.mkdir()
    with pytest.raises(UserError, match="is a folder"):
        check_db_path(folder)
    os.mkfifo(tmp_path / "registry.duckdb.wal")
    with pytest.raises(UserError, match=r"registry\.duckdb\.wal.*named pipe"):
        check_db_path(tmp_path / "registry.duckdb")


def test_a_lock_file_that_is_a_link_is_never_written_through(tmp_path: Path):
    """The lock file is truncated and written with the holder's pid: through a link it would hit the link's target
    (as root, `ln -s /etc/passwd registry.duckdb.write.lock` emptied /etc/passwd)."""
    victim = tmp_path / "victim.txt"
    victim.write_text("precious")
    db = tmp_path / "registry.duckdb"
    os.symlink(victim, tmp_path / "registry.duckdb.write.lock")
    done = run_cli("ingest", SAMPLE, "--db", db)
    assert done.returncode == 1 and "write.lock" in done.stderr and "hint:" in done.stderr, done.stderr
    assert victim.read_text() == "precious"


def test_ordinary_paths_still_work(tmp_path: Path):
    db = tmp_path / "new" / "registry.duckdb"
    check_db_path(db)                                 # absent: will be created
    done = run_cli("ingest", SAMPLE, "--db", db)
    assert done.returncode == 0, done.stderr
    link = db.parent / "current.duckdb"
    os.symlink(db.name, link)                         # a link to the registry file beside it is fine
    done = run_cli("stats", "--db", link)
    assert done.returncode == 0, done.stderr


# --- links DuckDB would write through (the audit after issue 32) ---------------------------------------------------

@pytest.mark.parametrize("points_to", ["victim", "database"])
def test_a_write_ahead_log_that_is_a_link_is_refused_and_its_target_untouched(tmp_path: Path, points_to: str):
    """DuckDB overwrote the target of a `.wal` link (any regular file passed the check, which followed links); a link
    to the database beside it would have had the log written over the registry."""
    db = tmp_path / "registry.duckdb"
    assert run_cli("ingest", SAMPLE, "--db", db).returncode == 0
    victim = tmp_path / "victim.txt"
    victim.write_text("precious")
    wal = tmp_path / "registry.duckdb.wal"
    wal.unlink(missing_ok=True)
    os.symlink(victim.name if points_to == "victim" else db.name, wal)
    kept = {path.name: path.read_bytes() for path in (victim, db)}
    names = sorted(p.name for p in tmp_path.iterdir())
    for command in (("ingest", SAMPLE), ("stats",)):
        done = run_cli(*command, "--db", db)
        assert done.returncode == 1, done.stderr
        assert f"{wal}: the registry's write-ahead log is a symbolic link" in done.stderr, done.stderr
        assert "hint: remove the link" in done.stderr and "this is a bug" not in done.stderr
    assert {path.name: path.read_bytes() for path in (victim, db)} == kept
    assert sorted(p.name for p in tmp_path.iterdir()) == names


def test_a_write_ahead_log_link_beside_a_new_database_is_refused(tmp_path: Path):
    victim = tmp_path / "victim.txt"
    victim.write_text("precious")
    os.symlink(victim, tmp_path / "registry.duckdb.wal")
    with pytest.raises(UserError, match=r"registry\.duckdb\.wal: the registry's write-ahead log is a symbolic link"):
        check_db_path(tmp_path / "registry.duckdb")
    assert run_cli("ingest", SAMPLE, "--db", tmp_path / "registry.duckdb").returncode == 1
    assert victim.read_text() == "precious" and not (tmp_path / "registry.duckdb").exists()


def test_a_database_link_out_of_its_folder_is_refused_naming_both(tmp_path: Path):
    """DuckDB follows the link and keeps its log beside the target: a link out of the folder had a command write
    the registry, and a log and lock files, in a folder nobody named (here: another registry's)."""
    elsewhere = tmp_path / "elsewhere"
    target = elsewhere / "theirs.duckdb"
    assert run_cli("ingest", SAMPLE, "--db", target).returncode == 0
    names, data = sorted(p.name for p in elsewhere.iterdir()), target.read_bytes()
    (tmp_path / "here").mkdir()
    link = tmp_path / "here" / "registry.duckdb"
    os.symlink(target, link)
    for command in (("ingest", SAMPLE), ("stats",)):
        done = run_cli(*command, "--db", link)
        assert done.returncode == 1, done.stderr
        assert f"{link}: is a symbolic link to {target}, outside the folder that holds it" in done.stderr, done.stderr
        assert f"hint: point --db (or $A2X_DB) at {target} itself" in done.stderr
    assert sorted(p.name for p in elsewhere.iterdir()) == names and target.read_bytes() == data
    assert beside(link) == []


# --- issue 32, fourth round: loops and paths that name a folder ------------------------------------------------------

def in_process(capsys: pytest.CaptureFixture[str], *args: object) -> tuple[int, str]:
    """`a2x-local ARGS` run in this process (no Python start): its exit code and stderr."""
    from a2x_local.cli import run

    capsys.readouterr()
    code = run([str(arg) for arg in args])
    return code, capsys.readouterr().err


@pytest.mark.parametrize("shape", ["itself", "each other"])
def test_a_database_link_that_loops_is_refused_naming_the_loop(tmp_path: Path, home: Path, capsys, shape: str):
    """Before: `ln -s self.duckdb self.duckdb` (or two links to each other) as --db was "unexpected RuntimeError:
    Symlink loop ... this is a bug" in ingest, stats, services list and index (pathlib's resolve() raises)."""
    db = tmp_path / "self.duckdb"
    if shape == "itself":
        os.symlink(db.name, db)
        chain = "self.duckdb -> self.duckdb"
    else:
        os.symlink("other.duckdb", db)
        os.symlink(db.name, tmp_path / "other.duckdb")
        chain = "self.duckdb -> other.duckdb -> self.duckdb"
    names = sorted(p.name for p in tmp_path.iterdir())
    for command in (("ingest", SAMPLE), ("stats",), ("services", "list"), ("index",)):
        code, err = in_process(capsys, *command, "--db", db)
        assert code == 1, (command, err)
        assert f"{db}: is a symbolic link loop ({chain})" in err and "hint:" in err, (command, err)
        assert "this is a bug" not in err and "RuntimeError" not in err
    assert sorted(p.name for p in tmp_path.iterdir()) == names


@pytest.mark.parametrize("given", ["new.duckdb/", "new.duckdb/.", "sub/.."])
def test_a_database_path_that_names_a_folder_creates_nothing(tmp_path: Path, home: Path, capsys,
                                                             monkeypatch: pytest.MonkeyPatch, given: str):
    """Before: `--db new.duckdb/` created a regular file new.duckdb (pathlib drops the trailing slash)."""
    monkeypatch.chdir(tmp_path)
    (tmp_path / "sub").mkdir()
    code, err = in_process(capsys, "ingest", SAMPLE, "--db", given)
    assert code == 1 and f"--db {given!r} names a folder" in err and "hint: name the file itself" in err, err
    monkeypatch.setenv("A2X_DB", given)
    code, err = in_process(capsys, "stats")
    assert code == 1 and f"$A2X_DB {given!r} names a folder" in err, err
    assert not (tmp_path / "new.duckdb").exists() and list((tmp_path / "sub").iterdir()) == []
