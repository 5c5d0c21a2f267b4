"""The registry file under damage, a full disk and read-only storage: refused or served read-only, explained in one
`error:` line with a recovery hint, never written into, never a traceback."""

from __future__ import annotations

import hashlib
import json
import os
import resource
import shutil
import signal
import subprocess
from pathlib import Path

import duckdb
import pytest

import a2x_local.db as db
from a2x_local.db import HEADER_BYTES, connect
from a2x_local.errors import DatabaseDamagedError
from tests.support.paths import TOOLRET
from tests.support.processes import cli_command, python_command, tree_env
from tests.support.registries import make_registry, snapshot, toolret_services

ROOT = Path(__file__).resolve().parents[1]


def digest(path: Path) -> str:
    return hashlib.sha256(path.read_bytes()).hexdigest()


@pytest.fixture(scope="module")
def toolret_db(tmp_path_factory) -> Path:
    """The ToolRet registry: several blocks of data, so a cut can remove some and keep the catalogue."""
    return make_registry(tmp_path_factory.mktemp("full") / "toolret.duckdb", toolret_services())


def highest_block(path: Path, table: str | None = None) -> tuple[int, int]:
    """The highest block holding table data (of ``table`` only, when given: a small table's segments share a
    partly empty block, where a scribble may miss its data), and the block size."""
    con = duckdb.connect(str(path), read_only=True)
    try:
        size = con.execute("PRAGMA database_size").fetchone()[2]
        names = [table] if table else [name for (name,) in con.execute("SELECT table_name FROM duckdb_tables()")
                                       .fetchall()]
        highest = max(con.execute(f"SELECT coalesce(max(block_id), -1) FROM pragma_storage_info('{name}')"
                                  " WHERE persistent").fetchone()[0] for name in names)
    finally:
        con.close()
    return highest, size


def test_the_header_size_the_check_relies_on(tmp_path):
    con = duckdb.connect(str(tmp_path / "empty.duckdb"))
    con.close()
    assert (tmp_path / "empty.duckdb").stat().st_size == HEADER_BYTES


@pytest.fixture
def truncated(toolret_db, tmp_path) -> Path:
    copy = Path(shutil.copy(toolret_db, tmp_path / "truncated.duckdb"))
    highest, block_size = highest_block(copy)
    assert highest >= 2
    os.truncate(copy, HEADER_BYTES + highest * block_size)   # the last data block is gone
    return copy


@pytest.mark.parametrize("command", [["stats"], ["services", "list"], ["services", "show", "toolret_0"],
                                     ["search", "weather", "-m", "bm25"], ["tree", "list"], ["tree", "show"],
                                     ["ingest", str(TOOLRET / "services.json")], ["services", "remove", "x"]])
def test_a_truncated_registry_is_refused_with_a_recovery_hint(cli, truncated, command):
    before = digest(truncated)
    result = cli(*command, "--json", "--db", truncated, db=False)
    assert result.code == 1, result.err
    assert result.err.startswith("error:") and "damaged" in result.err and "truncated" in result.err
    assert "hint:" in result.err and "backup" in result.err and "Traceback" not in result.err
    assert result.json()["error"] == "DatabaseDamagedError"
    assert digest(truncated) == before


def test_a_corrupted_block_is_refused_before_a_write(cli, toolret_db, tmp_path):
    copy = Path(shutil.copy(toolret_db, tmp_path / "corrupt.duckdb"))
    highest, block_size = highest_block(copy, "services")
    with copy.open("r+b") as handle:          # scribble over a data block: its checksum no longer matches
        handle.seek(HEADER_BYTES + highest * block_size + 4096)
        handle.write(b"\xff" * 256)
    before = digest(copy)
    for command in (["ingest", str(TOOLRET / "services.json"), "--replace"], ["services", "remove", "toolret_0"]):
        result = cli(*command, "--db", copy, db=False)
        assert result.code == 1 and "damaged" in result.err and "checksum" in result.err, result.err
    assert digest(copy) == before


def test_connect_turns_a_failing_read_into_a_damaged_error(toolret_db, tmp_path):
    copy = Path(shutil.copy(toolret_db, tmp_path / "corrupt.duckdb"))
    highest, block_size = highest_block(copy, "services")
    with copy.open("r+b") as handle:
        handle.seek(HEADER_BYTES + highest * block_size + 4096)
        handle.write(b"\x00\x01" * 128)
    with pytest.raises(DatabaseDamagedError, match="damaged"), connect(copy) as con:
        db.verify_blocks(con)


@pytest.fixture
def unwritable(monkeypatch, registry_db):
    """The registry as the kernel shows a read-only file to an unprivileged user (root writes whatever the mode)."""
    real = duckdb.connect

    def connect_(database=":memory:", read_only=False, **kwargs):
        if Path(str(database)) == registry_db and not read_only:
            raise duckdb.IOException(f'IO Error: Cannot open file "{database}": Permission denied')
        return real(database, read_only=read_only, **kwargs)

    monkeypatch.setattr(duckdb, "connect", connect_)
    return registry_db


def test_a_read_only_registry_serves_reading_commands(cli, unwritable):
    assert cli("stats", "--json").json()["services"] == 10
    assert len(cli("services", "list", "--json").json()) == 10
    assert cli("services", "show", "weather", "--json").json()["name"] == "getWeatherForecast"
    assert cli("tree", "list", "--json").json() == []
    found = cli("search", "weather forecast", "-m", "bm25", "--json")
    assert found.code == 0, found.err
    assert found.json()["hits"][0]["service_id"] == "weather"



def test_a_read_only_registry_serves_compose(cli, unwritable):
    planned = cli("compose", "weather forecast for Paris", "-m", "bm25", "--decomposer", "rule", "--json")
    assert planned.code == 0, planned.err
    assert planned.json()["services"] == ["weather"]

def test_a_read_only_registry_refuses_writes_clearly(cli, unwritable, tmp_path):
    before = snapshot(unwritable)
    new = tmp_path / "new.json"
    new.write_text(json.dumps([{"id": "n", "name": "n", "description": "d"}]), encoding="utf-8")
    for command in (["ingest", new], ["services", "remove", "weather"]):
        result = cli(*command, "--json")
        assert result.code == 1 and "cannot be written" in result.err and "Permission denied" in result.err
        assert result.json()["error"] == "ReadOnlyDatabaseError"
    assert snapshot(unwritable) == before


def test_a_read_only_folder_still_answers_searches_that_need_an_index(cli, registry_db, monkeypatch):
    from a2x_local.search.retrieval import index

    real_mkdir = Path.mkdir

    def mkdir(self, *args, **kwargs):
        if index.index_root(registry_db) in (self, *self.parents):
            raise PermissionError(13, "Permission denied", str(self))
        return real_mkdir(self, *args, **kwargs)

    monkeypatch.setattr(Path, "mkdir", mkdir)
    found = cli("search", "weather forecast", "-m", "bm25", "--json")
    assert found.code == 0, found.err
    assert found.json()["hits"][0]["service_id"] == "weather"
    assert not index.index_root(registry_db).exists()


def run_limited(args: list[str], limit: int, home: Path) -> subprocess.CompletedProcess:
    """The CLI in a child whose files may not grow past ``limit`` bytes: how a full disk looks to a writer."""

    def limit_files() -> None:
        signal.signal(signal.SIGXFSZ, signal.SIG_IGN)
        resource.setrlimit(resource.RLIMIT_FSIZE, (limit, limit))

    return subprocess.run(cli_command(*args), capture_output=True, text=True, env=tree_env(A2X_HOME=str(home)),
                          cwd=ROOT, preexec_fn=limit_files, timeout=300)


def test_ingest_on_a_full_disk_fails_cleanly_and_writes_nothing(registry_db, home):
    before = snapshot(registry_db)
    result = run_limited(["ingest", str(TOOLRET / "services.json"), "--db", str(registry_db), "--json"],
                         200_000, home)
    assert result.returncode == 1, result.stderr
    assert result.stderr.startswith("error:") and "no space left" in result.stderr
    assert "Traceback" not in result.stderr
    assert json.loads(result.stdout)["error"] == "DiskFullError"
    assert snapshot(registry_db) == before


def test_a_commit_that_cannot_write_its_log_is_explained(tmp_path):
    """DuckDB's own write failing (its write-ahead log here) is the same explained error, and rolls back."""
    path = make_registry(tmp_path / "r.duckdb", [])
    code = (
        "import resource, signal, sys\n"
        "from a2x_local.db import connect, transaction\n"
        "from a2x_local.errors import DiskFullError\n"
        "signal.signal(signal.SIGXFSZ, signal.SIG_IGN)\n"
        "resource.setrlimit(resource.RLIMIT_FSIZE, (600_000, 600_000))\n"
        "try:\n"
        f"    with connect({str(path)!r}) as con, transaction(con):\n"
        "        con.execute(\"INSERT INTO events VALUES (1, now(), 'k', ?, NULL)\", ['x' * 2_000_000])\n"
        "except DiskFullError as exc:\n"
        "    print(exc.message); sys.exit(7)\n"
    )
    result = subprocess.run(python_command(code), capture_output=True, text=True, cwd=ROOT, env=tree_env(),
                            timeout=120)
    assert result.returncode == 7, result.stderr
    assert "no space left" in result.stdout and "rolled back" in result.stdout
    with connect(path) as con:
        assert con.execute("SELECT count(*) FROM events").fetchone()[0] == 0


def _unprivileged() -> list[str] | None:
    """A command prefix under which file modes apply: none needed for a normal user; root drops its override."""
    if os.geteuid() != 0:
        return []
    setpriv = shutil.which("setpriv")
    return [setpriv, "--bounding-set=-dac_override,-dac_read_search"] if setpriv else None


@pytest.mark.skipif(_unprivileged() is None, reason="root without setpriv writes whatever the file mode")
def test_a_really_read_only_registry_in_a_read_only_folder(registry_db, home, tmp_path):
    folder = registry_db.parent
    new = tmp_path / "elsewhere" / "new.json"
    new.parent.mkdir()
    new.write_text(json.dumps([{"id": "n", "name": "n", "description": "d"}]), encoding="utf-8")
    before = digest(registry_db)
    registry_db.chmod(0o444)
    folder.chmod(0o555)
    try:
        def run(*args: str) -> subprocess.CompletedProcess:
            return subprocess.run([*_unprivileged(), *cli_command(*args, "--db", str(registry_db))],
                                  capture_output=True, text=True, cwd=ROOT, timeout=300,
                                  env=tree_env(A2X_HOME=str(home)))

        stats = run("stats", "--json")
        assert stats.returncode == 0 and json.loads(stats.stdout)["services"] == 10, stats.stderr
        found = run("search", "weather forecast", "-m", "bm25", "--json")
        assert found.returncode == 0, found.stderr
        assert json.loads(found.stdout)["hits"][0]["service_id"] == "weather"
        refused = run("ingest", str(new))
        assert refused.returncode == 1 and "cannot be written" in refused.stderr, refused.stderr
    finally:
        folder.chmod(0o755)
        registry_db.chmod(0o644)
    assert digest(registry_db) == before
