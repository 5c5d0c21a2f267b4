"""The server keeps serving its snapshot when the database file under it is damaged or replaced by another program's
database: /healthz says "degraded" and why, the log says it once, and the server recovers when the file is good
again (issue 21, finding 3: before, every request, /healthz included, answered 500)."""

from __future__ import annotations

import logging
import os
import shutil
from pathlib import Path

import duckdb
import pytest
from fastapi.testclient import TestClient

from a2x_local.db import connect
from a2x_local.errors import UserError
from a2x_local.serve.http_api import create_app
from tests.serve.helpers import make_server, registry_with_trees

LOOPBACK = "http://127.0.0.1"


def foreign_database(path: Path) -> Path:
    con = duckdb.connect(str(path))
    con.execute("CREATE TABLE measurements (taken TIMESTAMP, value DOUBLE)")
    con.execute("INSERT INTO measurements VALUES (now(), 1.5)")
    con.close()
    return path


def flipped_copy(good: Path, out: Path) -> Path:
    """A copy of ``good`` with one run of bytes flipped where DuckDB opens the file but fails to read the services
    (a block checksum fails): the damage a disk error leaves."""
    data = good.read_bytes()
    for offset in range(3 * 4096, len(data), 4096):
        damaged = bytearray(data)
        for at in range(offset, min(offset + 64, len(damaged))):
            damaged[at] ^= 0x55
        out.write_bytes(bytes(damaged))
        try:
            con = duckdb.connect(str(out), read_only=True)
        except duckdb.Error:
            continue
        try:
            con.execute("SELECT count(*), sum(hash(id || name || description)) FROM services").fetchall()
        except duckdb.Error:
            return out
        finally:
            con.close()
    raise AssertionError("no flip made the services unreadable")


def swap_in(source: Path, db_path: Path) -> None:
    """Replace the registry file (a new inode and modification time, as a restore or a copy would)."""
    staged = db_path.with_name(db_path.name + ".staged")
    shutil.copyfile(source, staged)
    os.replace(staged, db_path)


@pytest.fixture
def served(db_path, tmp_path):
    registry_with_trees(db_path)
    good = shutil.copyfile(db_path, tmp_path / "good.duckdb")
    server = make_server(db_path)
    with TestClient(create_app(server.discovery, mcp=server.mcp), base_url=LOOPBACK,
                    raise_server_exceptions=False) as client:
        yield client, good
    server.close()


def serving_everything(client: TestClient) -> None:
    found = client.post("/v1/search", json={"query": "the h1 thing", "k": 3})
    assert found.status_code == 200 and found.json()["hits"], found.text
    assert client.get("/v1/tree").status_code == 200
    assert client.get("/v1/services/h1").json()["id"] == "h1"


@pytest.mark.parametrize("replacement", ["foreign", "damaged"])
def test_a_bad_file_leaves_the_snapshot_serving_and_health_degraded(served, db_path, tmp_path, caplog,
                                                                    replacement):
    client, good = served
    serving_everything(client)
    assert client.get("/healthz").json()["status"] == "ok"
    bad = (foreign_database(tmp_path / "other.duckdb") if replacement == "foreign" else
           flipped_copy(good, tmp_path / "flipped.duckdb"))
    swap_in(bad, db_path)
    with caplog.at_level(logging.WARNING, logger="a2x_local.serve"):
        for _ in range(3):
            health = client.get("/healthz")
            assert health.status_code == 200, health.text
            serving_everything(client)
    body = health.json()
    assert body["status"] == "degraded" and body["services"] == 19
    why = body["problems"]["registry"]
    assert ("not an a2x-local registry" in why) if replacement == "foreign" else ("damaged" in why), why
    said = [r for r in caplog.records if "serving the previous snapshot" in r.getMessage()]
    assert len(said) == 1, [r.getMessage() for r in caplog.records]

    swap_in(good, db_path)
    recovered = client.get("/healthz").json()
    assert recovered["status"] == "ok" and "registry" not in recovered["problems"]
    serving_everything(client)


def test_a_method_first_built_on_a_bad_file_is_unavailable_not_a_crash(served, db_path, tmp_path):
    client, _ = served
    swap_in(foreign_database(tmp_path / "other.duckdb"), db_path)
    answer = client.post("/v1/search", json={"query": "hotel booking", "method": "dense"})
    assert answer.status_code == 503, answer.text
    assert "InternalError" not in answer.text and answer.json()["hint"]


def test_commands_refuse_another_programs_database_without_writing_into_it(tmp_path):
    path = foreign_database(tmp_path / "other.duckdb")
    before = path.read_bytes()
    for mode in ("read", "write"):
        with pytest.raises(UserError, match=r"a DuckDB database of another program .*measurements") as caught, \
                connect(path, mode=mode):
            pass
        assert caught.value.code == "ForeignDatabase"
    assert path.read_bytes() == before
